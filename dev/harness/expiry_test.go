package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// staticRunning counts static nodes whose VM runs and that are not retiring.
func staticRunning(t *testing.T, h *Harness) int {
	t.Helper()
	st, err := h.Store.Read(context.Background(), store.Scope{Cluster: "flexvm", AllPools: true})
	must(t, err)
	n := 0
	for _, node := range st.Nodes {
		if node.Kind == model.NodeStatic && node.Phase == model.PhaseRunning {
			n++
		}
	}
	return n
}

// TestMakeBeforeBreak: a lead time before the static node's end its
// successor is requested; when it runs the old node is drained; at the end
// the old VM goes and is not recreated. The static pool never counts fewer
// running static nodes than min_node_count.
func TestMakeBeforeBreak(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	start := h.Clock.Now()
	end0 := node(t, h, "flexvm-a3u-0").TerminationTime
	for h.Clock.Now().Before(start.Add(week + time.Hour)) {
		must(t, h.Advance(ctx, 5*time.Minute))
		must(t, h.Tick(ctx))
		if got := staticRunning(t, h); got < 1 {
			t.Fatalf("at %s: %d static nodes running, want ≥ 1 (min_node_count)", h.Clock.Now().Sub(start), got)
		}
	}
	if vms := h.VMs(); len(vms) != 1 || vms[0] != "flexvm-a3u-1-g1" {
		t.Fatalf("VMs after the hand-over: %v, want the successor only", vms)
	}
	var drained, reserved bool
	for _, m := range h.Publisher.Take(config.TopicSlurmCommands) {
		c, err := event.DecodeSlurmCommand(m.Data)
		must(t, err)
		drained = drained || (c.Command == event.SlurmDrain && c.Nodes[0] == "flexvm-a3u-0" && strings.Contains(c.Reason, "replaced by flexvm-a3u-1"))
		reserved = reserved || (c.Command == event.SlurmReservationCreate && c.Reservation == "flexslurm-eol-flexvm-a3u-0" && c.StartTime.Equal(end0))
	}
	if !drained {
		t.Error("the old static node was not drained when its successor ran")
	}
	if !reserved {
		t.Error("no end-of-life reservation was placed for the static node")
	}
	if p := pool(t, h); p.OverlapSeconds <= 0 || p.OverlapSeconds > int64((2*time.Hour)/time.Second) {
		t.Errorf("overlap %d s, want within the lead time (bounded)", p.OverlapSeconds)
	}
}

// TestRecreateAfterTermination is the baseline make-before-break improves on:
// with it turned off, the pool has no running static node during the wait.
func TestRecreateAfterTermination(t *testing.T) {
	h, ctx := newHarness(t, Options{Policy: plan.Policy{RecreateAfterTermination: true}})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	end := node(t, h, "flexvm-a3u-0").TerminationTime
	must(t, h.Advance(ctx, end.Sub(h.Clock.Now())-time.Minute))
	must(t, h.Tick(ctx))
	if got := staticRunning(t, h); got != 1 {
		t.Fatalf("%d static nodes running before the expiry, want 1 (no successor without make-before-break)", got)
	}
	must(t, h.Advance(ctx, 2*time.Minute))
	if got := staticRunning(t, h); got != 0 {
		t.Fatalf("%d static nodes running right after the expiry, want 0 (capacity still queued)", got)
	}
	settle(t, h, ctx)
	if vms := h.VMs(); len(vms) != 1 || vms[0] != "flexvm-a3u-0-g2" {
		t.Fatalf("VMs: %v", vms)
	}
}

// A pool whose flex_start_max_duration is below Compute's 600 s floor: the
// request asks for 600 s, and flexslurm ends the node at the configured time.
func TestShortMaxRunDuration(t *testing.T) {
	h, ctx := newHarness(t, Options{Sim: computesim.Options{CapacityDelay: func(string, string) time.Duration { return time.Minute }},
		Policy: plan.Policy{RecreateAfterTermination: true}})
	c := exampleSpec(t)
	short := *c
	short.NodePools = append([]spec.NodePool(nil), c.NodePools...)
	for i := range short.NodePools {
		if short.NodePools[i].IsFlexStart() {
			short.NodePools[i].FlexStartMaxDuration = 120 * time.Second
		}
	}
	must(t, h.Apply(ctx, &short))
	must(t, h.Advance(ctx, 90*time.Second))
	must(t, h.Tick(ctx))
	var rr computesim.ResizeRequest
	for _, r := range h.Sim.ResizeRequestHistory() {
		rr = r
	}
	if rr.RunDuration != 600*time.Second {
		t.Fatalf("requested run duration %s, want 600s (Compute's floor)", rr.RunDuration)
	}
	n := node(t, h, "flexvm-a3u-0")
	if want := n.RunningAt.Add(-30 * time.Second).Add(120 * time.Second); n.Phase != model.PhaseRunning || n.TerminationTime.After(want.Add(time.Minute)) {
		t.Fatalf("node: %s until %v, want the configured 120 s end", n.Phase, n.TerminationTime)
	}
	must(t, h.Advance(ctx, 2*time.Minute))
	must(t, h.Tick(ctx))
	if n := node(t, h, "flexvm-a3u-0"); n.Generation != 2 || n.LastEnd != model.EndExpired {
		t.Fatalf("after 120 s: gen %d last end %q, want gen 2 after an expiry", n.Generation, n.LastEnd)
	}
	must(t, h.Advance(ctx, time.Second))
	for _, vm := range h.VMs() {
		if vm == "flexvm-a3u-0-g1" {
			t.Fatal("the first VM outlived the configured max run duration")
		}
	}
}

// A job whose time limit outlives every node of the pool is reported, not
// provisioned for.
func TestJobLongerThanMaxRunDurationIsReported(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	must(t, h.Apply(ctx, exampleSpec(t)))
	ev := jobPending("9", 1)
	ev.TimeLimitSeconds = int64((8 * 24 * time.Hour) / time.Second)
	_, err := h.Publish(ctx, config.TopicJobs, ev)
	must(t, err)
	st, err := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", Jobs: []string{"9"}})
	must(t, err)
	if j := st.Jobs["9"]; j == nil || !strings.Contains(j.Reason, "fits no node") {
		t.Fatalf("job 9: %+v", j)
	}
	if got := resizeRequestsCreated(h); got != 1 {
		t.Errorf("%d resize requests, want only the static node's", got)
	}
}
