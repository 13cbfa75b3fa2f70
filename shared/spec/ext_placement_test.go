package spec

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// withPlacement returns the example spec with the a3u pool's "flexslurm"
// object set to ext.
func withPlacement(t *testing.T, ext string) []byte {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var e any
	if err := json.Unmarshal([]byte(ext), &e); err != nil {
		t.Fatal(err)
	}
	for _, p := range doc["node_pools"].([]any) {
		if p.(map[string]any)["id"] == "a3u" {
			p.(map[string]any)["flexslurm"] = e
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCompactPlacementRead(t *testing.T) {
	for _, tc := range []struct {
		ext, want string
	}{
		{`{"compact_placement": {}}`, ""},
		{`{"compact_placement": {"max_topology_distance": "BLOCK"}}`, TopologyBlock},
		{`{"compact_placement": {"max_topology_distance": "CLUSTER"}}`, TopologyCluster},
	} {
		c, err := Parse(withPlacement(t, tc.ext))
		if err != nil {
			t.Fatalf("%s: %v", tc.ext, err)
		}
		p, _ := c.Pool("a3u")
		if p.Ext.CompactPlacement == nil || p.Ext.CompactPlacement.MaxTopologyDistance != tc.want {
			t.Errorf("%s: CompactPlacement = %+v, want distance %q", tc.ext, p.Ext.CompactPlacement, tc.want)
		}
		eff, err := c.EffectiveJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(eff), `"compact_placement"`) {
			t.Errorf("%s: effective spec lost compact_placement:\n%s", tc.ext, eff)
		}
		checkRoundTrip(t, c, eff)
	}
	c, err := Parse(withPlacement(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.Pool("a3u")
	if p.Ext.CompactPlacement != nil {
		t.Errorf("no compact_placement key: CompactPlacement = %+v, want nil", p.Ext.CompactPlacement)
	}
	if eff, _ := c.EffectiveJSON(); strings.Contains(string(eff), `"flexslurm"`) {
		t.Errorf("a pool without extensions gained a flexslurm object:\n%s", eff)
	}
}

// TestCompactPlacementLimits: a distance whose documented size the pool's
// max_node_count exceeds is refused at the distance's path; within it, or
// with no distance, the pool is accepted.
func TestCompactPlacementLimits(t *testing.T) {
	for _, tc := range []struct {
		max      int
		distance string
		wantErr  string
	}{
		{256, "BLOCK", ""},
		{257, "BLOCK", "BLOCK places at most 256 A3 Ultra VMs together, but scaling_spec.max_node_count is 257"},
		{1000, "", ""},
		{1000, "CLUSTER", ""},
		{2, "SUBBLOCK", "do not support max_topology_distance SUBBLOCK"},
	} {
		ext := `{"compact_placement": {}}`
		if tc.distance != "" {
			ext = `{"compact_placement": {"max_topology_distance": "` + tc.distance + `"}}`
		}
		data := strings.Replace(string(withPlacement(t, ext)), `"max_node_count":3`, `"max_node_count":`+itoa(tc.max), 1)
		_, err := Parse([]byte(data))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("max %d %s: %v", tc.max, tc.distance, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("max %d %s: error %v, want %q", tc.max, tc.distance, err, tc.wantErr)
		case tc.wantErr != "" && !strings.Contains(err.Error(), "node_pools[1].flexslurm.compact_placement.max_topology_distance: "):
			t.Errorf("max %d %s: error %v does not name the path", tc.max, tc.distance, err)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
