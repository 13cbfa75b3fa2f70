package harness

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/computesim"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/store"
)

// The template Compute holds for a pool, after apply → cluster.applied →
// store → plan → apply → gce → simulator, carries the node config built
// from the applied node settings, the boot image and the node service
// account, and is named by the hash of what was sent.
func TestPoolTemplateCarriesNodeConfig(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	c := exampleSpec(t)
	must(t, h.Apply(ctx, c))
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	must(t, err)
	pool := st.Pools["a3u"]
	if pool == nil || !pool.Ready {
		t.Fatalf("pool a3u = %+v, want ready", pool)
	}
	resp, err := http.Get(h.srv.URL + "/compute/v1/projects/" + Project + "/global/instanceTemplates/" + pool.Template)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("template %s: HTTP %d", pool.Template, resp.StatusCode)
	}
	var got instancetemplate.Template
	must(t, json.NewDecoder(resp.Body).Decode(&got))
	cfg, ok := got.Properties.Metadata.Get(nodeconfig.AttrConfig)
	if !ok {
		t.Fatalf("template %s has no %s metadata", pool.Template, nodeconfig.AttrConfig)
	}
	nc, err := nodeconfig.Decode(cfg)
	must(t, err)
	node := NodeSettings(c)
	sp, _ := c.Pool("a3u")
	want := node.Config(c.ID, c.Project, "a3u", sp.MachineSpec.AcceleratorCount)
	if d := cmp.Diff(want, nc); d != "" {
		t.Errorf("node config (-want +got):\n%s", d)
	}
	if script, _ := got.Properties.Metadata.Get(nodeconfig.AttrStartupScript); script != nodeconfig.StartupScript("") {
		t.Errorf("startup-script = %q", script)
	}
	if img := got.Properties.Disks[0].InitializeParams.SourceImage; img != computesim.SlurmGPUImage {
		t.Errorf("boot image %q, want %q", img, computesim.SlurmGPUImage)
	}
	if sa := got.Properties.ServiceAccounts; len(sa) != 1 || sa[0].Email != node.ServiceAccount {
		t.Errorf("service accounts %+v", sa)
	}
	// The name is the hash of the body flexslurm builds, and stays so.
	body, err := instancetemplate.Build(c, *sp, st.Cluster.Node)
	must(t, err)
	if body.Name != pool.Template {
		t.Errorf("built %s, pool records %s", body.Name, pool.Template)
	}
}
