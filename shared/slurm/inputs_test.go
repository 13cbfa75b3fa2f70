package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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

// recordingScontrol writes a scontrol that records each call's arguments,
// one per line, a blank line ending the call, prints a node or a job for
// show, and succeeds; calls returns what it recorded.
func recordingScontrol(t *testing.T) (*Runner, func() [][]string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	script := `#!/bin/sh
for a in "$@"; do printf '%s\n' "$a" >> ` + log + `; done
echo >> ` + log + `
[ "$3" = show ] && [ "$4" = node ] && echo "NodeName=$5 Arch=x86_64 State=IDLE+CLOUD Reason=(null)"
exit 0
`
	if err := os.WriteFile(filepath.Join(dir, "scontrol"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &Runner{BinDir: dir}, func() [][]string {
		b, _ := os.ReadFile(log)
		var calls [][]string
		for _, c := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
			if c != "" {
				calls = append(calls, strings.Split(strings.TrimSuffix(c, "\n"), "\n"))
			}
		}
		return calls
	}
}

// TestAttackScontrolArgumentInjection: words that came from a payload or
// from Slurm (a job id, a node list, a reason) can neither become an
// option of scontrol nor add an argument or a line.
func TestAttackScontrolArgumentInjection(t *testing.T) {
	ctx := context.Background()
	t.Run("a word that looks like an option stays a word", func(t *testing.T) {
		r, calls := recordingScontrol(t)
		if _, err := r.Scontrol(ctx, "requeue", "-V"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ShowJob(ctx, "--help"); err == nil {
			t.Log("(the fake prints no job)")
		}
		want := [][]string{{"--", "requeue", "-V"}, {"-o", "--", "show", "job", "--help"}}
		if diff := cmp.Diff(want, calls()); diff != "" {
			t.Errorf("argv (-want +got):\n%s", diff)
		}
	})
	t.Run("a reason with blanks and '=' is one argument", func(t *testing.T) {
		r, calls := recordingScontrol(t)
		reason := "reason=flexslurm: GPU 3 state=resume nodename=flexvm-a3u-2 -V"
		if err := r.UpdateNodes(ctx, []string{"flexvm-a3u-1"}, "state=drain", reason); err != nil {
			t.Fatal(err)
		}
		want := [][]string{{"--", "update", "nodename=flexvm-a3u-1", "state=drain", reason}}
		if diff := cmp.Diff(want, calls()); diff != "" {
			t.Errorf("argv (-want +got):\n%s", diff)
		}
	})
	for _, bad := range []string{
		"reason=flexslurm: x\nNodeName=evil State=IDLE",
		"reason=flexslurm: x\rNodeName=evil",
		"reason=flexslurm: x\u2028NodeName=evil",
		"comment=flexslurm: x\x00",
	} {
		t.Run("refused "+strconv.Quote(bad), func(t *testing.T) {
			r, calls := recordingScontrol(t)
			err := r.UpdateNodes(ctx, []string{"flexvm-a3u-1"}, "state=drain", bad)
			if err == nil || !strings.Contains(err.Error(), "control character") {
				t.Errorf("UpdateNodes = %v, want a refusal naming the control character", err)
			}
			if c := calls(); len(c) != 0 {
				t.Errorf("scontrol ran: %q", c)
			}
		})
	}
	t.Run("an option after the words is refused", func(t *testing.T) {
		r, calls := recordingScontrol(t)
		if _, err := r.Scontrol(ctx, "show", "job", "-o", "1"); err == nil {
			t.Error("accepted")
		}
		if c := calls(); len(c) != 0 {
			t.Errorf("scontrol ran: %q", c)
		}
	})
}

// TestScontrolEndsOptionsWithTheRealBinary checks, with the real scontrol
// when it is installed, what ScontrolArgv relies on: "--" ends scontrol's
// options, and without it a word starting with "-" is an option. No
// controller is needed: both answers come before scontrol contacts one.
func TestScontrolEndsOptionsWithTheRealBinary(t *testing.T) {
	if _, err := os.Stat(filepath.Join(DefaultBinDir, "scontrol")); err != nil {
		t.Skip("scontrol is not installed (apt-get install slurm-client)")
	}
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=x\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\nMessageTimeout=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Env: []string{"SLURM_CONF=" + conf}, Timeout: 10 * time.Second}
	ctx := context.Background()
	// Through Scontrol: "--" first, so -V is a job id, not --version.
	_, err := r.Scontrol(ctx, "requeue", "-V")
	var ce *CommandError
	if !errors.As(err, &ce) || !strings.Contains(ce.Stderr, "Invalid job id specified for job -V") {
		t.Errorf("scontrol -- requeue -V: %v, want scontrol to read -V as a job id", err)
	}
	// Without "--" (Run, by hand), the same word is an option.
	out, err := r.Run(ctx, "scontrol", "requeue", "-V")
	if err != nil || !strings.Contains(string(out), "slurm") {
		t.Errorf("scontrol requeue -V without --: %q, %v; want the version (an option)", out, err)
	}
}

// TestAttackJobFieldForgesARecord: a user's job name with a newline and
// "JobId=…" makes `scontrol show job -o` print a second record of the job;
// ShowJob refuses the output rather than read either.
func TestAttackJobFieldForgesARecord(t *testing.T) {
	dir := t.TempDir()
	script := `#!/bin/sh
echo "JobId=42 JobName=x"
echo "JobId=42 JobState=PENDING Reason=None Comment=flexslurm: mine Partition=a3u NumNodes=1 SubmitTime=2026-12-01T00:00:00 UserId=u(1) JobState=RUNNING"
`
	if err := os.WriteFile(filepath.Join(dir, "scontrol"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Runner{BinDir: dir}
	j, err := r.ShowJob(context.Background(), "42")
	if !errors.Is(err, ErrParse) {
		t.Fatalf("ShowJob = %+v, %v; want ErrParse", j, err)
	}
}
