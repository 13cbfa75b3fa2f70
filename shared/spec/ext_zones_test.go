package spec

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// withPoolExtension returns the example spec with the FLEX_START pool's
// "flexslurm" object set to ext.
func withPoolExtension(t *testing.T, ext map[string]any) []byte {
	t.Helper()
	raw, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range doc["node_pools"].([]any) {
		pm := p.(map[string]any)
		if pm["provisioning_model"] == "FLEX_START" {
			pm["flexslurm"] = ext
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func flexPool(t *testing.T, c *Cluster) NodePool {
	t.Helper()
	for _, p := range c.NodePools {
		if p.IsFlexStart() {
			return p
		}
	}
	t.Fatal("no FLEX_START pool")
	return NodePool{}
}

// TestZonesExtension: a valid "zones" list is kept in order and makes the
// pool multi-zone; without the key the pool is single-zone and Ext stays
// its zero value (a spec without the extension means what it always did).
func TestZonesExtension(t *testing.T) {
	c, err := Parse(withPoolExtension(t, map[string]any{"zones": []string{"us-central1-b", "us-central1-a", "us-central1-c"}}))
	if err != nil {
		t.Fatal(err)
	}
	p := flexPool(t, c)
	if want := []string{"us-central1-b", "us-central1-a", "us-central1-c"}; !slices.Equal(p.Ext.Zones, want) {
		t.Errorf("Ext.Zones = %q, want %q", p.Ext.Zones, want)
	}
	if !p.MultiZone() {
		t.Error("MultiZone() = false for a pool with three zones")
	}

	c, err = Parse(withPoolExtension(t, map[string]any{}))
	if err != nil {
		t.Fatal(err)
	}
	if p := flexPool(t, c); p.MultiZone() || p.Ext.Zones != nil {
		t.Errorf("empty extension: MultiZone() = %v, Ext.Zones = %q; want a single-zone pool", p.MultiZone(), p.Ext.Zones)
	}
}
