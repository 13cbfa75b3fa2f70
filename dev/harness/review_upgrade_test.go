package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/store"
)

// TestUpgradeReleaseNeverShrinksThePoolMIGWithAQueuedRequest: just after an
// upgrade from one MIG per pool, before a reconcile pass has cancelled the
// requests still queued in the pool's MIG, Slurm powers down a node whose
// VM runs from that MIG. Its release must not be a deleteInstances on the
// pool's MIG while a request there is ACCEPTED (the open point flexslurm
// never bets on: docs/compute-contract.md, RefuseTargetSizeWhileAccepted);
// with the simulator on the strict side, such a call is refused and the VM
// goes on running.
func TestUpgradeReleaseNeverShrinksThePoolMIGWithAQueuedRequest(t *testing.T) {
	h, ctx := newHarness(t, Options{Sim: computesim.Options{Readings: computesim.StrictReadings()}})
	legacyMIG := naming.MIG("flexvm", "a3u")
	scope := store.Scope{Cluster: "flexvm", AllPools: true}
	// The earlier layout: the static node's and job 7's VMs run from the
	// pool's MIG, and job 8's request waits there, ACCEPTED.
	p := poolMIGLayout(t, h, ctx, []legacyRequest{{"rr-flexvm-a3u-0-g1", "flexvm-a3u-0-g1"}, {"rr-flexvm-a3u-j7-g1", "flexvm-a3u-1-g1"}},
		legacyRequest{"rr-flexvm-a3u-j8-g1", "flexvm-a3u-2-g1"})
	now := h.Clock.Now()
	must(t, h.Store.Update(ctx, scope, func(st *model.State) error {
		for i, rr := range []string{"rr-flexvm-a3u-0-g1", "rr-flexvm-a3u-j7-g1"} {
			name := []string{"flexvm-a3u-0", "flexvm-a3u-1"}[i]
			kind := []model.NodeKind{model.NodeStatic, model.NodeDynamic}[i]
			st.Nodes[name] = &model.Node{Name: name, Pool: "a3u", Index: i, Kind: kind, Generation: 1, Phase: model.PhaseRunning,
				VMName: name + "-g1", VMID: "1", ResizeRequest: rr, RequestedAt: now.Add(-time.Hour), RunningAt: now.Add(-20 * time.Minute),
				TerminationTime: now.Add(p.RunDuration - 20*time.Minute), Registered: true}
		}
		st.Nodes["flexvm-a3u-2"] = &model.Node{Name: "flexvm-a3u-2", Pool: "a3u", Index: 2, Kind: model.NodeDynamic, Generation: 1,
			Phase: model.PhaseRequested, VMName: "flexvm-a3u-2-g1", ResizeRequest: "rr-flexvm-a3u-j8-g1", JobID: "8", RequestedAt: now}
		st.Jobs["8"] = &model.Job{ID: "8", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 1,
			Nodes: []string{"flexvm-a3u-2"}, Generation: 1, ResizeRequest: "rr-flexvm-a3u-j8-g1", Stage: model.JobStageProvisioned,
			SubmittedAt: now, UpdatedAt: now}
		return nil
	}))
	// Job 7 has ended; Slurm powers its idle node down.
	_, err := h.Publish(ctx, config.TopicJobs, &event.Node{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeNodeSuspend, Cluster: "flexvm"},
		Nodes: []string{"flexvm-a3u-1"}, Reason: "idle"})
	must(t, err)
	for _, c := range h.Sim.Calls() {
		if strings.HasSuffix(c.Path, "/instanceGroupManagers/"+legacyMIG+"/deleteInstances") {
			t.Errorf("deleteInstances on the pool's MIG %s at %s (status %d) while job 8's request waits ACCEPTED there", legacyMIG, c.Time.Format(time.TimeOnly), c.Status)
		}
	}
	must(t, h.Advance(ctx, 10*time.Minute))
	must(t, h.Tick(ctx))
	must(t, h.Tick(ctx))
	for _, vm := range h.Sim.Instances() {
		if vm.Name == "flexvm-a3u-1-g1" && vm.Status == "RUNNING" {
			t.Errorf("the released VM %s still runs after two reconcile passes", vm.Name)
		}
	}
}
