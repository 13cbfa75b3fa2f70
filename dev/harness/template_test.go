package harness

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
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
	// Compute holds the body the pool record keeps, as it was built.
	if got.Body() != pool.TemplateBody || pool.TemplateBody != body.Body() {
		t.Errorf("Compute's template body:\n%s\npool record's:\n%s\nbuilt:\n%s", got.Body(), pool.TemplateBody, body.Body())
	}
}

// New node settings are a new template for every pool, which the next
// resize request's MIG is made from, so the next VMs boot the new image;
// a MIG already made keeps its template (its VMs keep theirs until they
// end). An image Compute does not have is refused by Compute and the pool
// is not ready.
func TestNewNodeSettingsRetemplateThePool(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	c := exampleSpec(t)
	must(t, h.Apply(ctx, c))
	read := func() *model.Pool {
		st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
		must(t, err)
		return st.Pools["a3u"]
	}
	old := read().Template
	var before []computesim.MIG
	before = append(before, h.Sim.MIGs()...)
	if len(before) != 1 || before[0].Template != old {
		t.Fatalf("MIGs before the new settings %+v, want the static node's on %s", before, old)
	}
	node := NodeSettings(c)
	node.Image = "projects/schedmd-slurm-public/global/images/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570-v20260101"
	h.Sim.AddImage("schedmd-slurm-public", "slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570-v20260101", "slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570")
	must(t, h.ApplyWith(ctx, c, node))
	p := read()
	if p.Template == old || !p.Ready {
		t.Fatalf("pool after new settings: template %s (was %s), ready %t", p.Template, old, p.Ready)
	}
	for _, m := range h.Sim.MIGs() {
		if m.Name == before[0].Name && m.Template != old {
			t.Errorf("MIG %s moved to %s: a MIG keeps the template its VMs were made from", m.Name, m.Template)
		}
	}
	_, err := h.Publish(ctx, config.TopicJobs, jobPending("7", 1))
	must(t, err)
	var mig computesim.MIG
	for _, m := range h.Sim.MIGs() {
		if m.Name != before[0].Name {
			mig = m
		}
	}
	if mig.Template != p.Template {
		t.Errorf("job 7's MIG %s uses %q, want the new template %s", mig.Name, mig.Template, p.Template)
	}

	// An image Compute does not hold: the template is refused (flexslurm
	// apply checks images before it publishes, so only a bypassed apply
	// gets here), and the MIG keeps the template it has.
	node.Image = "projects/schedmd-slurm-public/global/images/no-such-image"
	_ = h.ApplyWith(ctx, c, node)
	p = read()
	if p.Template == mig.Template {
		t.Fatalf("template name %s unchanged by a new image", p.Template)
	}
	if _, ok := templateOf(t, h, p.Template); ok {
		t.Errorf("template %s with a missing image exists", p.Template)
	}
	for _, m := range h.Sim.MIGs() {
		if m.Name == mig.Name && m.Template != mig.Template {
			t.Errorf("MIG %s moved to %s, whose template was refused", m.Name, m.Template)
		}
	}
}

func templateOf(t *testing.T, h *Harness, name string) (instancetemplate.Template, bool) {
	t.Helper()
	var got instancetemplate.Template
	resp, err := http.Get(h.srv.URL + "/compute/v1/projects/" + Project + "/global/instanceTemplates/" + name)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return got, false
	}
	must(t, json.NewDecoder(resp.Body).Decode(&got))
	return got, true
}

// A cluster.applied without usable node settings is malformed: it is
// acknowledged and changes nothing.
func TestClusterAppliedWithoutUsableNodeSettings(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	c := exampleSpec(t)
	eff, err := c.EffectiveJSON()
	must(t, err)
	family := NodeSettings(c)
	family.Image = computesim.SlurmGPUFamily
	withImage := *c
	withImage.NodePools = append([]spec.NodePool(nil), c.NodePools...)
	for i := range withImage.NodePools {
		withImage.NodePools[i].NodeImage = "projects/mine/global/images/family/gpu"
	}
	effImage, err := withImage.EffectiveJSON()
	must(t, err)
	good := NodeSettings(c)
	for name, ev := range map[string]event.Cluster{
		"no node settings":      {Spec: eff},
		"an image family":       {Spec: eff, Node: &family},
		"node_image unresolved": {Spec: effImage, Node: &good},
	} {
		ev.Header = event.Header{Version: event.SchemaVersion, Type: event.TypeClusterApply, Cluster: c.ID}
		data, err := json.Marshal(ev)
		must(t, err)
		if err := h.Deliver(ctx, config.TopicClusterSpec, h.NewID(), data); err != nil {
			t.Errorf("%s: returned %v, want nil (acknowledged)", name, err)
		}
	}
	if migs := h.Sim.MIGs(); len(migs) != 0 {
		t.Errorf("MIGs %+v created from malformed events", migs)
	}
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	must(t, err)
	if st.Cluster != nil {
		t.Errorf("cluster recorded from malformed events: %+v", st.Cluster)
	}
}
