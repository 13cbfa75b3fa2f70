package harness

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/store"
)

// repairHarness applies the example cluster (static node flexvm-a3u-0
// running), makes its pool and VM reservation-bound (reservationBound) and
// counts the VMs the simulator put into REPAIRING.
func repairHarness(t *testing.T, o Options) (*Harness, context.Context, *atomic.Int32) {
	t.Helper()
	h, ctx, repairs := flexHarness(t, o)
	reservationBound(t, h, ctx, "flexvm-a3u-0-g1", true)
	return h, ctx, repairs
}

// flexHarness is repairHarness with the example's Flex-Start pool as it is.
func flexHarness(t *testing.T, o Options) (*Harness, context.Context, *atomic.Int32) {
	t.Helper()
	var repairs atomic.Int32
	o.Sim.OnInstanceRepairing = func(computesim.Instance) { repairs.Add(1) }
	h, ctx := newHarness(t, o)
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	if n := node(t, h, "flexvm-a3u-0"); n.Phase != model.PhaseRunning {
		t.Fatalf("static node: %s", n.Phase)
	}
	return h, ctx, &repairs
}

// reservationBound turns the example's Flex-Start pool a3u (a3-ultragpu-8g)
// into a reservation-bound one, whose hosts Compute Engine repairs: the
// pool record's provisioning model, and the VM's scheduling in the
// simulator. flexslurm manages only Flex-Start pools, so no spec yields
// such a pool.
func reservationBound(t *testing.T, h *Harness, ctx context.Context, vm string, automaticRestart bool) {
	t.Helper()
	must(t, h.Store.Update(ctx, store.Scope{Cluster: "flexvm", Pools: []string{"a3u"}}, func(st *model.State) error {
		st.Pools["a3u"].ProvisioningModel = "RESERVATION"
		return nil
	}))
	must(t, h.Sim.SetReservationBound("", "us-central1-a", vm, automaticRestart))
}

// TestFlexStartFailIsReplacedWithoutHostRepair: the example's Flex-Start
// pool as applied: a FAIL deletes and replaces the VM and never calls
// reportHostAsFaulty, which Compute refuses for Flex-Start VMs.
func TestFlexStartFailIsReplacedWithoutHostRepair(t *testing.T) {
	h, ctx, repairs := flexHarness(t, Options{})
	must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
	confirmDrain(t, h, ctx, "flexvm-a3u-0")
	n := node(t, h, "flexvm-a3u-0")
	if n.Generation != 2 || n.Phase != model.PhaseRequested || n.LastEnd != model.EndHealth || n.Repair != model.RepairNone {
		t.Fatalf("after the FAIL: gen %d %s last end %q repair %q", n.Generation, n.Phase, n.LastEnd, n.Repair)
	}
	settle(t, h, ctx)
	if d := cmp.Diff([]string{"flexvm-a3u-0-g2"}, h.VMs()); d != "" || repairs.Load() != 0 {
		t.Errorf("VMs %v (diff %s), %d host repairs", h.VMs(), d, repairs.Load())
	}
}

// TestHostRepairLeavesTheVMStoppedAndTheReconcilerStartsIt: a
// reservation-bound VM without automaticRestart; the Repair function
// starts the 11-minute host repair and returns; the VM stays stopped after
// it; the reconciler starts it, then resumes the node: same generation,
// nothing deleted.
func TestHostRepairLeavesTheVMStoppedAndTheReconcilerStartsIt(t *testing.T) {
	h, ctx, repairs := flexHarness(t, Options{Sim: computesim.Options{RepairDelay: 11 * time.Minute}})
	reservationBound(t, h, ctx, "flexvm-a3u-0-g1", false)
	must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
	confirmDrain(t, h, ctx, "flexvm-a3u-0")
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairHost || repairs.Load() != 1 {
		t.Fatalf("after the FAIL: repair %q, %d host repairs", n.Repair, repairs.Load())
	}
	must(t, h.Advance(ctx, 5*time.Minute))
	must(t, h.Tick(ctx))
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairHost || n.Generation != 1 {
		t.Fatalf("while repairing: repair %q gen %d", n.Repair, n.Generation)
	}
	must(t, h.Advance(ctx, 7*time.Minute))
	status := func() string {
		for _, in := range h.Sim.Instances() {
			if in.Name == "flexvm-a3u-0-g1" {
				return in.Status
			}
		}
		return ""
	}
	if s := status(); s != "TERMINATED" {
		t.Fatalf("after the repair: VM %s, want TERMINATED (automaticRestart off)", s)
	}
	must(t, h.Tick(ctx)) // starts it
	if s := status(); s != "RUNNING" {
		t.Fatalf("after the reconciler: VM %s, want RUNNING", s)
	}
	must(t, h.Advance(ctx, time.Minute))
	must(t, h.Tick(ctx)) // sees it running: the repair ends
	n := node(t, h, "flexvm-a3u-0")
	if n.Repair != model.RepairNone || n.HostRepaired != 1 || n.Generation != 1 || n.Phase != model.PhaseRunning {
		t.Fatalf("after the start: repair %q host repaired %d gen %d %s", n.Repair, n.HostRepaired, n.Generation, n.Phase)
	}
	if d := cmp.Diff([]string{"flexvm-a3u-0-g1"}, h.VMs()); d != "" {
		t.Errorf("VMs (-want +got):\n%s", d)
	}
}

// drainedSnapshot is the agent's snapshot taken at at, showing nodes
// drained by flexslurm's health drain (IDLE+CLOUD+DRAIN), and jobs.
func drainedSnapshot(at time.Time, nodes []string, jobs ...event.SnapshotJob) event.SlurmSnapshot {
	snap := event.SlurmSnapshot{Header: event.Header{Version: 1, Type: event.TypeSlurmSnapshot, Cluster: "flexvm"}, TakenAt: at, Jobs: jobs}
	for _, n := range nodes {
		snap.Nodes = append(snap.Nodes, event.SnapshotNode{Name: n, Node: slurmstate.Node{State: slurmstate.NodeIdle,
			Flags: slurmstate.NewNodeFlags(slurmstate.FlagCloud, slurmstate.FlagDrain), Reason: "flexslurm: health check failed"}})
	}
	return snap
}

// confirmDrain is the agent's next snapshot, a second later, showing node
// drained (and jobs): Slurm's confirmation a repair waits for.
func confirmDrain(t *testing.T, h *Harness, ctx context.Context, node string, jobs ...event.SnapshotJob) {
	t.Helper()
	must(t, h.Advance(ctx, time.Second))
	_, err := h.Publish(ctx, config.TopicSlurmSnapshot, drainedSnapshot(h.Clock.Now(), []string{node}, jobs...))
	must(t, err)
}

func failEvent(node string, gen int64, drained bool) []byte {
	data, _ := json.Marshal(event.Health{Header: event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: "flexvm"},
		Node: node, Generation: gen, Verdict: event.VerdictFail, Drained: drained, Reasons: []string{"GPU 2: Xid 79, fallen off the bus"}})
	return data
}

// TestHostRepairRefusedIsReplaced: Compute refuses the host repair (an
// invalid request, an unsupported operation, a VM not ready): the node,
// drained, has its VM deleted and replaced at once, and the event is
// acknowledged.
func TestHostRepairRefusedIsReplaced(t *testing.T) {
	for _, tc := range []struct {
		name         string
		status       int
		reason, code string
		// late: the refusal comes in the operation, which the function
		// does not wait for; the reconciler's second ask (same request
		// id, past the request grace) is answered with that failed
		// operation.
		late bool
	}{
		{name: "400 invalid", status: 400, reason: "invalid"},
		{name: "operation UNSUPPORTED_OPERATION", status: 400, code: "UNSUPPORTED_OPERATION", late: true},
		{name: "400 resourceNotReady", status: 400, reason: "resourceNotReady"},
		{name: "VM gone", status: 404, reason: "notFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ctx, repairs := repairHarness(t, Options{})
			h.Sim.InjectError(computesim.Match{Method: "POST", Path: `/instances/[^/]+/reportHostAsFaulty$`}, tc.status, tc.reason, tc.code, 1)
			must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
			confirmDrain(t, h, ctx, "flexvm-a3u-0")
			if tc.late {
				if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairHost || n.Generation != 1 {
					t.Fatalf("refused in the operation, before the reconciler: repair %q gen %d", n.Repair, n.Generation)
				}
				must(t, h.Advance(ctx, 3*time.Minute))
				must(t, h.Tick(ctx))
			}
			n := node(t, h, "flexvm-a3u-0")
			if n.Generation != 2 || n.Phase != model.PhaseRequested || n.LastEnd != model.EndHealth || n.Repair != model.RepairNone {
				t.Fatalf("after the refusal: gen %d %s last end %q repair %q", n.Generation, n.Phase, n.LastEnd, n.Repair)
			}
			settle(t, h, ctx)
			if d := cmp.Diff([]string{"flexvm-a3u-0-g2"}, h.VMs()); d != "" {
				t.Errorf("VMs (-want +got):\n%s", d)
			}
			// The redelivered event repairs nothing and deletes nothing more.
			must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
			settle(t, h, ctx)
			if d := cmp.Diff([]string{"flexvm-a3u-0-g2"}, h.VMs()); d != "" || repairs.Load() != 0 {
				t.Errorf("after redelivery: VMs %v, %d repairs", h.VMs(), repairs.Load())
			}
		})
	}
}

// TestHostRepairTransientErrorIsRetried: a 503 on the call redelivers the
// snapshot whose confirmation of the drain asked for it, which asks again
// with the same request id; later redeliveries, of the snapshot or of the
// FAIL, and the reconciler repair nothing twice.
func TestHostRepairTransientErrorIsRetried(t *testing.T) {
	h, ctx, repairs := repairHarness(t, Options{})
	h.Sim.InjectError(computesim.Match{Method: "POST", Path: `/reportHostAsFaulty$`}, 503, "backendError", "", 1)
	must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
	must(t, h.Advance(ctx, time.Second))
	snap, err := json.Marshal(drainedSnapshot(h.Clock.Now(), []string{"flexvm-a3u-0"}))
	must(t, err)
	if err := h.Deliver(ctx, config.TopicSlurmSnapshot, "snap-1", snap); err == nil {
		t.Fatal("a transient failure of the host repair was acknowledged")
	}
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairHost || repairs.Load() != 0 {
		t.Fatalf("after the failed call: repair %q, %d repairs", n.Repair, repairs.Load())
	}
	must(t, h.Deliver(ctx, config.TopicSlurmSnapshot, "snap-1", snap))
	must(t, h.Deliver(ctx, config.TopicSlurmSnapshot, "snap-1", snap))
	if repairs.Load() != 1 {
		t.Fatalf("%d repairs, want 1", repairs.Load())
	}
	settle(t, h, ctx)
	must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
	settle(t, h, ctx)
	n := node(t, h, "flexvm-a3u-0")
	if repairs.Load() != 1 || n.Generation != 1 || n.HostRepaired != 1 || n.Repair != model.RepairNone {
		t.Fatalf("after settling: %d repairs, gen %d host repaired %d repair %q", repairs.Load(), n.Generation, n.HostRepaired, n.Repair)
	}
	if d := cmp.Diff([]string{"flexvm-a3u-0-g1"}, h.VMs()); d != "" {
		t.Errorf("VMs (-want +got):\n%s", d)
	}
}

// TestHostRepairTimeoutFallsBack: a VM REPAIRING for longer than the
// repair timeout is deleted and replaced by the reconciler.
func TestHostRepairTimeoutFallsBack(t *testing.T) {
	h, ctx, repairs := repairHarness(t, Options{Sim: computesim.Options{RepairDelay: 3 * time.Hour}})
	must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
	confirmDrain(t, h, ctx, "flexvm-a3u-0")
	must(t, h.Advance(ctx, 10*time.Minute))
	must(t, h.Tick(ctx))
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairHost || n.Generation != 1 {
		t.Fatalf("within the timeout: repair %q gen %d", n.Repair, n.Generation)
	}
	must(t, h.Advance(ctx, 11*time.Minute))
	must(t, h.Tick(ctx))
	if n := node(t, h, "flexvm-a3u-0"); n.Generation != 2 || n.LastEnd != model.EndHealth {
		t.Fatalf("past the timeout: gen %d last end %q", n.Generation, n.LastEnd)
	}
	settle(t, h, ctx)
	if d := cmp.Diff([]string{"flexvm-a3u-0-g2"}, h.VMs()); d != "" || repairs.Load() != 1 {
		t.Errorf("VMs %v (diff %s), %d repairs", h.VMs(), d, repairs.Load())
	}
}

// TestFailAwaitingDrainIsRepairedFromTheSnapshot: a FAIL on a node still
// draining waits; the agent's snapshot showing it drained continues the
// repair in the snapshot's own event, before any reconcile pass.
func TestFailAwaitingDrainIsRepairedFromTheSnapshot(t *testing.T) {
	h, ctx, repairs := repairHarness(t, Options{Sim: computesim.Options{RepairDelay: 11 * time.Minute}})
	must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, false)))
	settle(t, h, ctx)
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairAwaitDrain || repairs.Load() != 0 {
		t.Fatalf("no snapshot yet: repair %q, %d repairs", n.Repair, repairs.Load())
	}
	_, err := h.Publish(ctx, config.TopicSlurmSnapshot, drainedSnapshot(h.Clock.Now(), []string{"flexvm-a3u-0"}))
	must(t, err)
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairHost || repairs.Load() != 1 {
		t.Fatalf("drained: repair %q, %d repairs", n.Repair, repairs.Load())
	}
}

// TestSnapshotLoadsPoolsOnlyForRepairs: a snapshot is stored with the
// cluster's records alone unless it shows drained a node whose repair
// awaits the drain (or whose step a snapshot took, for its redelivery):
// then that node's pool and its repair's job are loaded with it. A node an
// operator drained loads nothing more.
func TestSnapshotLoadsPoolsOnlyForRepairs(t *testing.T) {
	ss := &scopeStore{Store: store.NewMemory(nil)}
	h, ctx := newHarness(t, Options{Store: ss})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	deliver := func(id string, snap event.SlurmSnapshot) []store.Scope {
		t.Helper()
		data, err := json.Marshal(snap)
		must(t, err)
		ss.take()
		must(t, h.Deliver(ctx, config.TopicSlurmSnapshot, id, data))
		return ss.take()
	}
	plain := func(id string) store.Scope {
		return store.Scope{Cluster: "flexvm", Slurm: true, EventID: id, EventKind: "flex.reconcile"}
	}
	must(t, h.Advance(ctx, time.Second))
	if d := cmp.Diff([]store.Scope{plain("s-1")}, deliver("s-1", drainedSnapshot(h.Clock.Now(), nil))); d != "" {
		t.Errorf("a snapshot with no node drained (-want +got):\n%s", d)
	}
	must(t, h.Advance(ctx, time.Second))
	if d := cmp.Diff([]store.Scope{plain("s-2")}, deliver("s-2", drainedSnapshot(h.Clock.Now(), []string{"flexvm-a3u-0"}))); d != "" {
		t.Errorf("a node drained by someone else, no repair (-want +got):\n%s", d)
	}
	must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
	must(t, h.Advance(ctx, time.Second))
	snap := drainedSnapshot(h.Clock.Now(), []string{"flexvm-a3u-0"})
	withPool := store.Scope{Cluster: "flexvm", Slurm: true, Pools: []string{"a3u"}, EventID: "s-3", EventKind: "flex.reconcile"}
	if d := cmp.Diff([]store.Scope{withPool}, deliver("s-3", snap)); d != "" {
		t.Errorf("the snapshot confirming a repair's drain (-want +got):\n%s", d)
	}
	if n := node(t, h, "flexvm-a3u-0"); n.Generation != 2 || n.LastEnd != model.EndHealth {
		t.Fatalf("after the confirming snapshot: gen %d last end %q", n.Generation, n.LastEnd)
	}
	// Its redelivery loads the same pool, to replay its actions.
	data, err := json.Marshal(snap)
	must(t, err)
	ss.take()
	must(t, h.Deliver(ctx, config.TopicSlurmSnapshot, "s-3", data))
	if d := cmp.Diff([]store.Scope{withPool}, ss.take()); d != "" {
		t.Errorf("the redelivered snapshot (-want +got):\n%s", d)
	}
}
