package spec

import (
	"errors"
	"os"
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
