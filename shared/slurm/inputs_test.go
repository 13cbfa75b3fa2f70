package slurm

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/spec"
)

// TestAttackSlurmConfInjection tries to add a line or a parameter to the
// generated slurm.conf or gres.conf through every string Generate writes
// there: refused by spec.Parse at the field's JSON path, and refused by
// Generate itself for a Cluster built without Parse.
func TestAttackSlurmConfInjection(t *testing.T) {
	const evil = "a3u\nNodeName=evil State=IDLE"

	// At validation: the spec never parses. The ids are JSON text, so
	// `\n` is a newline once decoded.
	for _, tc := range []struct{ from, to, path string }{
		{`{ "id": "a3u", "node_pool_ids"`, `{ "id": "a3u\nNodeName=evil State=IDLE", "node_pool_ids"`, "orchestrator_spec.slurm_spec.partitions[0].id"},
		{`{ "id": "a3u", "node_pool_ids"`, `{ "id": "a3u Default=YES", "node_pool_ids"`, "orchestrator_spec.slurm_spec.partitions[0].id"},
		{`"id": "a3u",` + "\n      \"machine_spec\"", `"id": "a3u\nNodeName=evil",` + "\n      \"machine_spec\"", "node_pools[1].id"},
	} {
		src := examplesJSON(t)
		bad := strings.Replace(src, tc.from, tc.to, 1) // tc.to holds JSON escapes: \n is a newline in the id
		if bad == src {
			t.Fatalf("replacement %q matched nothing", tc.from)
		}
		_, err := spec.Parse([]byte(bad))
		var ve *spec.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s = %q: Parse = %v, want a validation error", tc.path, tc.to, err)
		}
		if !strings.Contains(err.Error(), tc.path+": ") {
			t.Errorf("%s: the error does not name the field: %v", tc.path, err)
		}
	}

	// In the generator: a Cluster that did not come from Parse.
	good := GenOptions{HookDir: "/opt/flexslurm/hooks"}
	base := loadSpec(t, "../../examples/cluster_config.json")
	g, err := Generate(base, good)
	if err != nil {
		t.Fatal(err)
	}
	wantNodeLines := countPrefix(g.SlurmConf, "NodeName=")
	if wantNodeLines != 1 {
		t.Fatalf("the example's slurm.conf has %d NodeName lines, want 1:\n%s", wantNodeLines, g.SlurmConf)
	}
	for _, tc := range []struct {
		name   string
		mutate func(c *spec.Cluster, o *GenOptions)
		want   string
	}{
		{"newline in a partition id", func(c *spec.Cluster, o *GenOptions) { c.Slurm.Partitions[0].ID = evil }, "partitions[].id"},
		{"blank in a partition id", func(c *spec.Cluster, o *GenOptions) { c.Slurm.Partitions[0].ID = "a3u AllowAccounts=ALL" }, "partitions[].id"},
		{"newline in the default partition", func(c *spec.Cluster, o *GenOptions) { c.Slurm.DefaultPartitionID = evil }, "default_partition_id"},
		{"newline in a pool id", func(c *spec.Cluster, o *GenOptions) {
			c.NodePools[1].ID = evil
			c.Slurm.Partitions[0].NodePoolIDs = []string{evil}
		}, "node_pools[].id"},
		{"comma in a pool id adds a feature", func(c *spec.Cluster, o *GenOptions) {
			c.NodePools[1].ID = "a3u,evil"
			c.Slurm.Partitions[0].NodePoolIDs = []string{"a3u,evil"}
		}, "node_pools[].id"},
		{"newline in the cluster id", func(c *spec.Cluster, o *GenOptions) { c.ID = "flexvm\nNodeName=evil" }, "cluster id"},
		{"newline in the hook directory", func(c *spec.Cluster, o *GenOptions) { o.HookDir = "/h\nNodeName=evil" }, "hook directory"},
		{"comment in the node hook directory", func(c *spec.Cluster, o *GenOptions) { o.NodeHookDir = "/h #" }, "node hook directory"},
		{"newline in a node's attributes", func(c *spec.Cluster, o *GenOptions) {
			o.NodeAttrs = func(GenNode) string { return "NodeAddr=127.0.0.1\nNodeName=evil" }
		}, "control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadSpec(t, "../../examples/cluster_config.json")
			o := good
			tc.mutate(c, &o)
			g, err := Generate(c, o)
			if err == nil {
				t.Fatalf("Generate accepted it; %d NodeName lines:\n%s", countPrefix(g.SlurmConf, "NodeName="), g.SlurmConf)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Generate = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func examplesJSON(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func countPrefix(conf []byte, prefix string) int {
	n := 0
	for _, l := range strings.Split(string(conf), "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}
