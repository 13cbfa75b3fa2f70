package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/model"
)

// hookDrained is a snapshot taken at at showing the node drained by
// flexslurm's node-side hook for a failed health check of VM vm (words:
// its state as scontrol prints it).
func hookDrained(at time.Time, node, vm, words string) *model.SlurmView {
	v := slurmView(at, map[string]string{})
	v.Nodes[node] = slurmNode(node, "flexslurm: health check failed on "+vm+": GPU 2: Xid 79", splitState(words)...)
	return v
}

func splitState(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '+' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// TestUnreportedHealthDrainIsRepaired: a node flexslurm's hook drained for
// a failed check of its current VM, whose report never arrives, is marked
// awaiting the report on the first pass that sees the drain, left as it
// is within the grace, and repaired past it as the report would have had
// it: a static Flex-Start node's VM deleted and its next generation
// requested.
func TestUnreportedHealthDrainIsRepaired(t *testing.T) {
	st, _ := applied(t)
	running(st, "flexvm-a3u-0", t0.Add(farEnd))
	pol := Policy{}
	seen := t0.Add(5 * time.Minute)
	st.Slurm = hookDrained(seen.Add(-30*time.Second), "flexvm-a3u-0", "flexvm-a3u-0-g1", "IDLE+CLOUD+DRAIN")
	got := Reconcile(st, listed(st), seen, pol)
	if d := cmp.Diff([]string{"PutNode:flexvm-a3u-0/running/await_report"}, rkinds(about(got, "flexvm-a3u-0"))); d != "" {
		t.Fatalf("first pass that sees the drain (-want +got):\n%s", d)
	}
	Apply(st, got)
	if n := st.Nodes["flexvm-a3u-0"]; !n.RepairSince.Equal(seen) {
		t.Fatalf("awaiting the report since %v, want %v", n.RepairSince, seen)
	}
	within := seen.Add(pol.withDefaults().UnreportedDrainGrace - time.Minute)
	st.Slurm = hookDrained(within.Add(-30*time.Second), "flexvm-a3u-0", "flexvm-a3u-0-g1", "IDLE+CLOUD+DRAIN")
	if got := External(about(Reconcile(st, listed(st), within, pol), "flexvm-a3u-0")); len(got) != 0 {
		t.Fatalf("within the grace: %v", rkinds(got))
	}
	past := seen.Add(pol.withDefaults().UnreportedDrainGrace)
	st.Slurm = hookDrained(past.Add(-30*time.Second), "flexvm-a3u-0", "flexvm-a3u-0-g1", "IDLE+CLOUD+DRAIN")
	got = Reconcile(st, listed(st), past, pol)
	want := []string{"Alert:a3u", "Metric:" + MetricUnreportedDrain, "DeleteVMs:flexvm-a3u-0-g1", "Slurm:reservation_delete:flexvm-a3u-0",
		"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"}
	if d := cmp.Diff(want, rkinds(about(got, "flexvm-a3u-0"))); d != "" {
		t.Fatalf("past the grace (-want +got):\n%s", d)
	}
	Apply(st, got)
	if n := st.Nodes["flexvm-a3u-0"]; n.Generation != 2 || n.LastEnd != model.EndHealth || n.Repair != model.RepairNone {
		t.Fatalf("after the repair: generation %d, last end %q, repair %q", n.Generation, n.LastEnd, n.Repair)
	}
}

// TestUnreportedHealthDrainWaitsForTheJob: a node still draining (its job
// ends there) past the grace starts its repair awaiting the drain, within
// the pool's budget, as the report would have.
func TestUnreportedHealthDrainWaitsForTheJob(t *testing.T) {
	st, _ := applied(t)
	running(st, "flexvm-a3u-0", t0.Add(farEnd))
	n := st.Nodes["flexvm-a3u-0"]
	n.Repair, n.RepairSince, n.UpdatedAt = model.RepairAwaitReport, t0, t0
	now := t0.Add(time.Hour)
	st.Slurm = hookDrained(now.Add(-time.Minute), "flexvm-a3u-0", "flexvm-a3u-0-g1", "ALLOCATED+CLOUD+DRAIN")
	got := Reconcile(st, listed(st), now, Policy{})
	want := []string{"Alert:a3u", "Metric:" + MetricUnreportedDrain, "PutNode:flexvm-a3u-0/running/await_drain"}
	if d := cmp.Diff(want, rkinds(about(got, "flexvm-a3u-0"))); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

// TestUnreportedHealthDrainLeftAlone: what is not flexslurm's health drain
// of the node's current VM is never taken for one, and a wait ends when a
// newer snapshot shows the drain lifted.
func TestUnreportedHealthDrainLeftAlone(t *testing.T) {
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name   string
		reason string
		words  string
		taken  time.Time
		prep   func(n *model.Node)
		want   []string
	}{
		{name: "an earlier VM's drain is lifted, not repaired", reason: "flexslurm: health check failed on flexvm-a3u-0-g1: Xid 79",
			words: "IDLE+CLOUD+DRAIN", taken: now.Add(-time.Minute),
			prep: func(n *model.Node) { n.Generation, n.VMName = 2, "flexvm-a3u-0-g2" },
			want: []string{"Slurm:resume:flexvm-a3u-0"}},
		{name: "an administrator's drain", reason: "admin: DIMM replacement", words: "IDLE+CLOUD+DRAIN", taken: now.Add(-time.Minute)},
		{name: "flexslurm's end-of-life drain", reason: "flexslurm: end of life at 2026-12-07T00:00:00Z, replaced by flexvm-a3u-1 (flexvm-a3u-0-g1)",
			words: "IDLE+CLOUD+DRAIN", taken: now.Add(-time.Minute)},
		{name: "a diagnosis drain", reason: "flexslurm: health check inconclusive 2 times within 24h: drained for diagnosis (flexvm-a3u-0-g1)",
			words: "IDLE+CLOUD+DRAIN", taken: now.Add(-time.Minute)},
		{name: "a snapshot older than the current VM's request", reason: "flexslurm: health check failed on flexvm-a3u-0-g1: Xid 79",
			words: "IDLE+CLOUD+DRAIN", taken: t0.Add(-time.Minute)},
		{name: "a node whose drain is already a repair's", reason: "flexslurm: health check failed on flexvm-a3u-0-g1: Xid 79",
			words: "ALLOCATED+CLOUD+DRAIN", taken: now.Add(-time.Minute),
			prep: func(n *model.Node) { n.Repair, n.RepairSince = model.RepairAwaitDrain, now.Add(-2*time.Minute) }},
		{name: "the wait ends once a newer snapshot shows the drain lifted", reason: "flexslurm: health check failed on flexvm-a3u-0-g1: Xid 79",
			words: "IDLE+CLOUD", taken: now.Add(-time.Minute),
			prep: func(n *model.Node) { n.Repair, n.RepairSince = model.RepairAwaitReport, now.Add(-20*time.Minute) },
			want: []string{"PutNode:flexvm-a3u-0/running"}},
		{name: "a snapshot older than the wait says nothing", reason: "",
			words: "IDLE+CLOUD", taken: now.Add(-21 * time.Minute),
			prep: func(n *model.Node) { n.Repair, n.RepairSince = model.RepairAwaitReport, now.Add(-20*time.Minute) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			running(st, "flexvm-a3u-0", t0.Add(farEnd))
			n := st.Nodes["flexvm-a3u-0"]
			if tc.prep != nil {
				tc.prep(n)
			}
			st.Slurm = slurmView(tc.taken, map[string]string{})
			st.Slurm.Nodes["flexvm-a3u-0"] = slurmNode("flexvm-a3u-0", tc.reason, splitState(tc.words)...)
			got := Reconcile(st, listed(st), now, Policy{})
			if d := cmp.Diff(tc.want, rkinds(about(got, "flexvm-a3u-0"))); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestReportAfterTheWaitStartsTheRepair: the report, when it comes while
// the reconciler awaits it, starts the repair at once, with the job it
// names.
func TestReportAfterTheWaitStartsTheRepair(t *testing.T) {
	st, _ := applied(t)
	dynRunning(t, st, model.JobPending)
	n := st.Nodes["flexvm-a3u-1"]
	n.Repair, n.RepairSince, n.RepairJob = model.RepairAwaitReport, t0, "7"
	got, err := Repair(st, fail("flexvm-a3u-1", 1, "9", "pending", true), t0.Add(time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	node := lastNode(t, got, "flexvm-a3u-1")
	if node.Repair != model.RepairAwaitDrain || node.RepairJob != "9" || !node.RepairSince.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the report: repair %q since %v for job %q", node.Repair, node.RepairSince, node.RepairJob)
	}
}

// TestUnreportedHealthDrainOfARetiringNode: a static node whose successor
// is on its way (make-before-break) and whose hook drained it is repaired
// as the report would have had it: its VM deleted, not replaced.
func TestUnreportedHealthDrainOfARetiringNode(t *testing.T) {
	st, _ := applied(t)
	running(st, "flexvm-a3u-0", t0.Add(farEnd))
	n := st.Nodes["flexvm-a3u-0"]
	n.Successor = "flexvm-a3u-1"
	n.Repair, n.RepairSince, n.UpdatedAt = model.RepairAwaitReport, t0, t0
	st.Nodes["flexvm-a3u-1"] = &model.Node{Name: "flexvm-a3u-1", Pool: "a3u", Index: 1, Kind: model.NodeStatic, Generation: 1,
		Phase: model.PhaseRequested, VMName: "flexvm-a3u-1-g1", ResizeRequest: "rr-flexvm-a3u-1-g1", RequestedAt: t0, Predecessor: "flexvm-a3u-0"}
	now := t0.Add(time.Hour)
	st.Slurm = hookDrained(now.Add(-time.Minute), "flexvm-a3u-0", "flexvm-a3u-0-g1", "IDLE+CLOUD+DRAIN")
	got := rkinds(about(Reconcile(st, listed(st), now, Policy{}), "flexvm-a3u-0"))
	want := []string{"Alert:a3u", "Metric:" + MetricUnreportedDrain, "DeleteVMs:flexvm-a3u-0-g1", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/deleting"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

// TestDrainOfAGoneVMIsLifted: a node whose VM is gone (generation ended,
// released) that Slurm shows drained with flexslurm's reason for that VM
// is resumed in Slurm, so that Slurm allocates it again; other drains, a
// snapshot older than the generation's end and a node with a VM are left.
func TestDrainOfAGoneVMIsLifted(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	for _, tc := range []struct {
		name   string
		reason string
		taken  time.Time
		phase  model.Phase
		want   []string
	}{
		{"the hook's drain of the VM that expired", "flexslurm: health check failed on flexvm-a3u-1-g1: Xid 79", now.Add(-time.Minute), model.PhaseReleased,
			[]string{"Slurm:resume:flexvm-a3u-1"}},
		{"flexslurm's end-of-life drain", "flexslurm: end of life at 2026-11-30T13:00:00Z, replaced by flexvm-a3u-2 (flexvm-a3u-1-g1)", now.Add(-time.Minute), model.PhaseReleased,
			[]string{"Slurm:resume:flexvm-a3u-1"}},
		{"an administrator's drain", "admin: DIMM", now.Add(-time.Minute), model.PhaseReleased, nil},
		{"a snapshot from before the generation ended", "flexslurm: health check failed on flexvm-a3u-1-g1: Xid 79", t0.Add(-time.Minute), model.PhaseReleased, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			st.Nodes["flexvm-a3u-1"] = &model.Node{Name: "flexvm-a3u-1", Pool: "a3u", Index: 1, Kind: model.NodeDynamic, Generation: 1,
				Phase: tc.phase, VMName: "flexvm-a3u-1-g1", RequestedAt: t0.Add(-time.Hour), UpdatedAt: t0, LastEnd: model.EndExpired}
			st.Slurm = slurmView(tc.taken, map[string]string{})
			st.Slurm.Nodes["flexvm-a3u-1"] = slurmNode("flexvm-a3u-1", tc.reason, "IDLE", "CLOUD", "DRAIN", "POWERED_DOWN")
			got := kinds(about(Reconcile(st, listed(st), now, Policy{}), "flexvm-a3u-1"))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
