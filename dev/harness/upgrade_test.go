package harness

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/store"
)

// TestUpgradeFromOneMIGPerPool: a cluster running the layout of one MIG per
// pool — the static node's VM running from the pool's MIG, a job's request
// queued in it — upgrades without losing a VM or the static node: the
// queued request is cancelled and made again in a MIG of its own, the
// running VM serves until it ends, and the pool's MIG is deleted once
// nothing of that layout is left in it.
func TestUpgradeFromOneMIGPerPool(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	legacyMIG := naming.MIG("flexvm", "a3u")
	scope := store.Scope{Cluster: "flexvm", AllPools: true}
	p := poolMIGLayout(t, h, ctx, []legacyRequest{{"rr-flexvm-a3u-0-g1", "flexvm-a3u-0-g1"}}, legacyRequest{"rr-flexvm-a3u-j8-g1", "flexvm-a3u-2-g1"})
	now := h.Clock.Now()
	must(t, h.Store.Update(ctx, scope, func(st *model.State) error {
		st.Nodes["flexvm-a3u-0"] = &model.Node{Name: "flexvm-a3u-0", Pool: "a3u", Index: 0, Kind: model.NodeStatic, Generation: 1,
			Phase: model.PhaseRequested, VMName: "flexvm-a3u-0-g1", ResizeRequest: "rr-flexvm-a3u-0-g1", RequestedAt: now.Add(-30 * time.Minute)}
		st.Nodes["flexvm-a3u-2"] = &model.Node{Name: "flexvm-a3u-2", Pool: "a3u", Index: 2, Kind: model.NodeDynamic, Generation: 1,
			Phase: model.PhaseRequested, VMName: "flexvm-a3u-2-g1", ResizeRequest: "rr-flexvm-a3u-j8-g1", JobID: "8", RequestedAt: now}
		st.Jobs["8"] = &model.Job{ID: "8", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 1,
			Nodes: []string{"flexvm-a3u-2"}, Generation: 1, ResizeRequest: "rr-flexvm-a3u-j8-g1", Stage: model.JobStageProvisioned,
			SubmittedAt: now, UpdatedAt: now}
		return nil
	}))
	rrState := func(name string) string {
		state := ""
		for _, rr := range h.Sim.ResizeRequestHistory() {
			if rr.Name == name {
				state = rr.State
			}
		}
		return state
	}
	hasMIG := func(name string) bool {
		return slices.ContainsFunc(h.Sim.MIGs(), func(m computesim.MIG) bool { return m.Name == name })
	}

	// The first pass: the static node's VM runs (from the pool's MIG); job
	// 8's queued request in the pool's MIG is cancelled.
	must(t, h.Tick(ctx))
	if n := node(t, h, "flexvm-a3u-0"); n.Phase != model.PhaseRunning || n.Generation != 1 || n.MIG != "" {
		t.Fatalf("static node %s gen %d in MIG %q, want running gen 1 from the pool's MIG", n.Phase, n.Generation, n.MIG)
	}
	if s := rrState("rr-flexvm-a3u-j8-g1"); s != "CANCELLED" {
		t.Fatalf("job 8's request in the pool's MIG is %s, want CANCELLED", s)
	}
	// Passes later: job 8 is requested again, in a MIG of its own; the
	// pool's MIG stays while the static node's VM serves from it.
	for range 3 {
		must(t, h.Advance(ctx, 5*time.Minute))
		must(t, h.Tick(ctx))
	}
	n2 := node(t, h, "flexvm-a3u-2")
	if n2.Phase != model.PhaseRequested || n2.MIG == "" || n2.Generation != 2 || !hasMIG(n2.MIG) {
		t.Fatalf("job 8's node %s gen %d in MIG %q, want requested again (gen 2) in a MIG of its own", n2.Phase, n2.Generation, n2.MIG)
	}
	if !hasMIG(legacyMIG) {
		t.Fatalf("the pool's MIG was deleted while the static node's VM serves from it")
	}
	h.Sim.ClearShortage("queued")
	settle(t, h, ctx)
	if n2 := node(t, h, "flexvm-a3u-2"); n2.Phase != model.PhaseRunning {
		t.Fatalf("job 8's node %s, want running", n2.Phase)
	}
	// The static node's VM ends at its run duration: the static role is
	// served from a MIG of its own, and the pool's MIG, empty, is deleted.
	for range int(p.RunDuration/time.Hour) + 2 {
		must(t, h.Advance(ctx, time.Hour))
		must(t, h.DeliverAudit(ctx))
		must(t, h.Tick(ctx))
	}
	settle(t, h, ctx)
	// The static role lives on, in a MIG of its own (make-before-break may
	// have moved it to a successor node before the end).
	st, err := h.Store.Read(ctx, scope)
	must(t, err)
	var static []string
	for _, n := range st.PoolNodes("a3u") {
		if n.Kind == model.NodeStatic && n.Phase == model.PhaseRunning && n.MIG != "" && hasMIG(n.MIG) {
			static = append(static, n.VMName)
		}
	}
	if len(static) != 1 {
		t.Fatalf("static nodes running from a MIG of their own: %v, want one", static)
	}
	if hasMIG(legacyMIG) {
		t.Errorf("the pool's MIG %s is left after the last VM of its layout ended", legacyMIG)
	}
	for _, vm := range h.Sim.Instances() {
		if vm.Name == "flexvm-a3u-0-g1" || vm.Name == "flexvm-a3u-2-g1" {
			t.Errorf("VM %s of the earlier layout is still there (%s)", vm.Name, vm.Status)
		}
	}
	if got := h.VMs(); len(got) != 2 {
		t.Errorf("VMs %v, want the static node's and job 8's", got)
	}
}

// legacyRequest is a resize request of the layout before one MIG per
// request, for one VM.
type legacyRequest struct{ name, vm string }

// poolMIGLayout applies the example spec and leaves Compute as the layout of
// one MIG per pool would: the static node's request made by this version
// undone, the pool's MIG (with the description flexslurm gave it) holding
// the running requests, whose VMs run once capacity came, and then the
// queued one, ACCEPTED under a shortage named "queued". It returns the
// pool's record; the node and job records are the caller's to write.
func poolMIGLayout(t *testing.T, h *Harness, ctx context.Context, running []legacyRequest, queued legacyRequest) model.Pool {
	t.Helper()
	must(t, h.Apply(ctx, exampleSpec(t)))
	const zone = "us-central1-a"
	legacyMIG := naming.MIG("flexvm", "a3u")
	st, err := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true})
	must(t, err)
	p := *st.Pools["a3u"]
	must(t, h.gce.DeleteMIG(ctx, zone, st.Nodes["flexvm-a3u-0"].MIG, ""))
	must(t, h.gce.EnsureMIG(ctx, gce.MIGSpec{Zone: zone, Name: legacyMIG, Template: p.Template, BaseInstanceName: "flexvm-a3u",
		Description: "flexslurm node pool a3u of cluster flexvm"}, ""))
	for _, rr := range running {
		must(t, h.gce.CreateResizeRequest(ctx, zone, legacyMIG, gce.ResizeRequestSpec{Name: rr.name,
			Instances: []string{rr.vm}, RunDuration: p.RunDuration}, ""))
	}
	must(t, h.Advance(ctx, 30*time.Minute)) // their capacity comes
	h.Sim.SetShortage(computesim.Shortage{Name: "queued"})
	must(t, h.gce.CreateResizeRequest(ctx, zone, legacyMIG, gce.ResizeRequestSpec{Name: queued.name,
		Instances: []string{queued.vm}, RunDuration: p.RunDuration}, ""))
	return p
}
