package harness

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/computesim"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// repairHarness applies the example cluster (static node flexvm-a3u-0
// running) and counts the VMs the simulator put into REPAIRING.
func repairHarness(t *testing.T, o Options) (*Harness, context.Context, *atomic.Int32) {
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
	}{
		{name: "400 invalid", status: 400, reason: "invalid"},
		{name: "operation UNSUPPORTED_OPERATION", status: 400, code: "UNSUPPORTED_OPERATION"},
		{name: "400 resourceNotReady", status: 400, reason: "resourceNotReady"},
		{name: "VM gone", status: 404, reason: "notFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ctx, repairs := repairHarness(t, Options{})
			h.Sim.InjectError(computesim.Match{Method: "POST", Path: `/instances/[^/]+/reportHostAsFaulty$`}, tc.status, tc.reason, tc.code, 1)
			must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
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
// event, which asks again with the same request id; a later redelivery and
// the reconciler repair nothing twice.
func TestHostRepairTransientErrorIsRetried(t *testing.T) {
	h, ctx, repairs := repairHarness(t, Options{})
	h.Sim.InjectError(computesim.Match{Method: "POST", Path: `/reportHostAsFaulty$`}, 503, "backendError", "", 1)
	if err := h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)); err == nil {
		t.Fatal("a transient failure of the host repair was acknowledged")
	}
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairHost || repairs.Load() != 0 {
		t.Fatalf("after the failed call: repair %q, %d repairs", n.Repair, repairs.Load())
	}
	must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
	must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, true)))
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
// draining waits; the agent's snapshot showing it drained lets the
// reconciler repair it.
func TestFailAwaitingDrainIsRepairedFromTheSnapshot(t *testing.T) {
	h, ctx, repairs := repairHarness(t, Options{})
	must(t, h.Deliver(ctx, config.TopicHealthFailure, "fail-1", failEvent("flexvm-a3u-0", 1, false)))
	settle(t, h, ctx)
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairAwaitDrain || repairs.Load() != 0 {
		t.Fatalf("no snapshot yet: repair %q, %d repairs", n.Repair, repairs.Load())
	}
	snap := event.SlurmSnapshot{Header: event.Header{Version: 1, Type: event.TypeSlurmSnapshot, Cluster: "flexvm"}, TakenAt: h.Clock.Now(),
		Nodes: []event.SnapshotNode{{Name: "flexvm-a3u-0", State: "idle", Flags: []string{"CLOUD", "DRAIN"}, Reason: "flexslurm: health check failed"}}}
	_, err := h.Publish(ctx, config.TopicSlurmSnapshot, snap)
	must(t, err)
	must(t, h.Tick(ctx))
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairHost || repairs.Load() != 1 {
		t.Fatalf("drained: repair %q, %d repairs", n.Repair, repairs.Load())
	}
}
