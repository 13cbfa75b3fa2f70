package spec

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse checks that Parse never panics, that every failure is a
// non-empty *ValidationError, and that every accepted spec survives a round
// trip through EffectiveJSON.
func FuzzParse(f *testing.F) {
	for _, path := range []string{examplePath, "testdata/bad/seed_placeholders.json", "testdata/good/string_values.json"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(minimalFlexSpec))
	// The injection attacks (TestAttackSpecInjection), one seed each.
	example, err := os.ReadFile(examplePath)
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range [][2]string{
		{`"id": "a3u", "node_pool_ids"`, `"id": "a3u\nNodeName=evil", "node_pool_ids"`},
		{`"id": "a3u", "node_pool_ids"`, `"id": "a3u AllowGroups=ALL", "node_pool_ids"`},
		{`"id": "a3u",` + "\n      \"machine_spec\"", `"id": "a3u,evil",` + "\n      \"machine_spec\""},
		{`"zone": "us-central1-a",` + "\n      \"enable_public_ips\": \"true\",\n      \"boot_disk\": { \"boot_disk_type\": \"hyperdisk", `"zone": "us-central1-a/../../x",` + "\n      \"enable_public_ips\": \"true\",\n      \"boot_disk\": { \"boot_disk_type\": \"hyperdisk"},
		{`"zone": "us-central1-a"`, `"zone": "us-central1-abc"`},
		{`"projects/flexslurm-demo/locations/us-central1-a/instances/home"`, `"-oexec,suid:/x"`},
		{`projects/flexslurm-demo/locations/us-central1/`, `projects/flexslurm-demo%2F..%2Fx/locations/us-central1/`},
		{`"display_name": "flexvm"`, `"display_name": "flexvm\u0000"`},
	} {
		seed := strings.Replace(string(example), r[0], r[1], 1)
		if seed == string(example) {
			f.Fatalf("seed replacement %q matched nothing in %s", r[0], examplePath)
		}
		f.Add([]byte(seed))
	}
	f.Add([]byte(`{"node_pools":[{"flex_start_max_duration":"1e9s","scaling_spec":{"min_node_count":"-0"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Parse error %T %v is not a non-empty *ValidationError", err, err)
			}
			if c != nil {
				t.Fatalf("Parse returned both a cluster and an error")
			}
			return
		}
		out, err := c.EffectiveJSON()
		if err != nil {
			t.Fatalf("EffectiveJSON: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(EffectiveJSON()) failed: %v\n%s", err, out)
		}
		if diff := cmp.Diff(c, again); diff != "" {
			t.Fatalf("round trip differs (-first +second):\n%s", diff)
		}
	})
}
