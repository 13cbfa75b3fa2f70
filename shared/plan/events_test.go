package plan

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// eventsOf runs a decision's actions through Events against the state it
// read, applies them, and returns "TYPE node vm" strings.
func eventsOf(t *testing.T, st *model.State, acts []Action, now time.Time) ([]ClusterEvent, []string) {
	t.Helper()
	before := st.Clone()
	evs := Events(st, acts, now)
	if d := cmp.Diff(before, st); d != "" {
		t.Fatalf("Events changed the state it read (-before +after):\n%s", d)
	}
	Apply(st, acts)
	var out []string
	for _, e := range evs {
		if !e.Time.Equal(now) || e.Message == "" || strings.Contains(e.Message, "\n") {
			t.Errorf("event %+v: want time %v and a one-line message", e, now)
		}
		if !slices.Contains(EventTypes, e.Type) {
			t.Errorf("event type %q is not in EventTypes", e.Type)
		}
		out = append(out, strings.TrimSpace(e.Type+" "+e.Node+" "+e.VM))
	}
	return evs, out
}

func TestEventsOfAStaticNodesLife(t *testing.T) {
	c, eff := example(t)
	st := model.NewState()
	_, got := eventsOf(t, st, ClusterApplied(st, c, testNode, built(t, c, testNode), eff, t0, Policy{}), t0)
	if d := cmp.Diff([]string{"VM_REQUESTED flexvm-a3u-0 flexvm-a3u-0-g1"}, got); d != "" {
		t.Fatalf("cluster applied (-want +got):\n%s", d)
	}
	st.Pools["a3u"].Ready = true
	running(st, "flexvm-a3u-0", t0.Add(week))
	st.Nodes["flexvm-a3u-0"].Phase = model.PhaseRequested
	vm := VM{Name: "flexvm-a3u-0-g1", ID: "42", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{vm}}}}
	evs, got := eventsOf(t, st, Reconcile(st, obs, t0.Add(time.Minute), Policy{}), t0.Add(time.Minute))
	if !slices.Contains(got, "VM_RUNNING flexvm-a3u-0 flexvm-a3u-0-g1") {
		t.Fatalf("VM seen running: events %q", got)
	}
	for _, e := range evs {
		if e.Type == EventVMRunning && e.Wait != time.Minute {
			t.Errorf("VM_RUNNING waited %s for capacity, want 1m (requested at t0, running at t0+1m)", e.Wait)
		}
	}
	// Compute Engine ends it at its run duration: it ends, and the node's
	// next VM is asked for.
	acts, err := Expiry(st, audit(event.AuditDeferredDelete, "flexvm-a3u-0-g1"), t0.Add(week), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	evs, got = eventsOf(t, st, acts, t0.Add(week))
	if d := cmp.Diff([]string{"VM_EXPIRED flexvm-a3u-0 flexvm-a3u-0-g1", "VM_RECREATED flexvm-a3u-0 flexvm-a3u-0-g2"}, got); d != "" {
		t.Fatalf("expiry (-want +got):\n%s", d)
	}
	if evs[0].Generation != 1 || evs[1].Generation != 2 || evs[0].Pool != "a3u" {
		t.Errorf("expiry events: %+v", evs)
	}
}

func TestEventsOfAStockout(t *testing.T) {
	st, _ := applied(t)
	acts, err := ProvisioningFailed(st, "a3u", "rr-flexvm-a3u-0-g1", ClassCapacity, "ZONE_RESOURCE_POOL_EXHAUSTED", t0, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	evs, got := eventsOf(t, st, acts, t0)
	for _, want := range []string{"CAPACITY_FAILED flexvm-a3u-0 flexvm-a3u-0-g1", "POOL_BACKOFF", "STOCKOUT"} {
		if !slices.Contains(got, want) {
			t.Errorf("a refused request: no %q in %q", want, got)
		}
	}
	for _, e := range evs {
		if e.Type == EventStockout && !strings.Contains(e.Message, "ZONE_RESOURCE_POOL_EXHAUSTED") {
			t.Errorf("stockout message %q does not name the code", e.Message)
		}
	}
}

func TestEventsOfAHealthFailure(t *testing.T) {
	st, _ := applied(t)
	running(st, "flexvm-a3u-0", t0.Add(week))
	acts, err := Repair(st, health("flexvm-a3u-0", 1, "", ""), t0, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	evs, got := eventsOf(t, st, acts, t0)
	for _, want := range []string{"HEALTH_CHECK_FAILED flexvm-a3u-0 flexvm-a3u-0-g1", "NODE_DRAINED flexvm-a3u-0 flexvm-a3u-0-g1"} {
		if !slices.Contains(got, want) {
			t.Errorf("a FAIL: no %q in %q", want, got)
		}
	}
	for _, e := range evs {
		if e.Type == EventHealthCheckFailed && !strings.Contains(e.Message, "ECC") {
			t.Errorf("health event message %q does not carry the check's reason", e.Message)
		}
	}
	// Reported again: nothing new happened, no new event.
	acts, err = Repair(st, health("flexvm-a3u-0", 1, "", ""), t0.Add(time.Second), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if _, got := eventsOf(t, st, acts, t0.Add(time.Second)); slices.Contains(got, "HEALTH_CHECK_FAILED flexvm-a3u-0 flexvm-a3u-0-g1") {
		t.Errorf("a repeated report is a new failure: %q", got)
	}
}

// TestHealthEventNamesTheCheck: the hook a report names reaches the
// node's record (RepairCheck) and HEALTH_CHECK_FAILED's message and Check;
// a report without one (an earlier hook, reportFaultyNodes) says "health
// check"; the record forgets it once the repair is cleared.
func TestHealthEventNamesTheCheck(t *testing.T) {
	for _, tc := range []struct{ hook, says string }{
		{event.HealthHookProlog, "prolog health check failed on flexvm-a3u-0-g1: "},
		{event.HealthHookEpilog, "epilog health check failed on flexvm-a3u-0-g1: "},
		{event.HealthHookHealthCheck, "HealthCheckProgram health check failed on flexvm-a3u-0-g1: "},
		{"", "health check failed on flexvm-a3u-0-g1: "},
	} {
		st, _ := applied(t)
		running(st, "flexvm-a3u-0", t0.Add(week))
		h := health("flexvm-a3u-0", 1, "", "")
		h.Hook = tc.hook
		acts, err := Repair(st, h, t0, Policy{})
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := eventsOf(t, st, acts, t0)
		var got *ClusterEvent
		for i := range evs {
			if evs[i].Type == EventHealthCheckFailed {
				got = &evs[i]
			}
		}
		if got == nil || !strings.HasPrefix(got.Message, tc.says) || !strings.Contains(got.Message, "ECC") || got.Check != tc.hook {
			t.Errorf("hook %q: event %+v, want a message starting %q with the reason, check %q", tc.hook, got, tc.says, tc.hook)
		}
		n := st.Nodes["flexvm-a3u-0"]
		if n.RepairCheck != tc.hook {
			t.Errorf("hook %q: record's repair_check %q", tc.hook, n.RepairCheck)
		}
		n.ClearRepair()
		if n.RepairCheck != "" {
			t.Errorf("ClearRepair kept repair_check %q", n.RepairCheck)
		}
	}
}

func TestEventsOfTheBreaker(t *testing.T) {
	before := model.NewState()
	before.Pools["a3u"] = &model.Pool{ID: "a3u"}
	opened := model.Pool{ID: "a3u", BreakerOpenedAt: t0, BootstrapFailures: 3}
	_, got := eventsOf(t, before, []Action{PutPool{Pool: opened, Reason: "x"}}, t0)
	if d := cmp.Diff([]string{"BREAKER_OPENED"}, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	_, got = eventsOf(t, before, []Action{PutPool{Pool: model.Pool{ID: "a3u"}, Reason: "x"}}, t0)
	if d := cmp.Diff([]string{"BREAKER_CLOSED"}, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestEventsOfARefusedJob(t *testing.T) {
	before := model.NewState()
	j := model.Job{ID: "7", Pool: "a3u", State: model.JobPending, Unfit: "asks for 9 nodes, the pool has at most 4"}
	evs, _ := eventsOf(t, before, []Action{PutJob{Job: j, Reason: "x"}}, t0)
	if len(evs) != 1 || evs[0].Type != EventJobRefused || evs[0].Job != "7" || !strings.Contains(evs[0].Message, "9 nodes") {
		t.Fatalf("refused job: %+v", evs)
	}
	// Stored again with the same refusal: no new event.
	if evs, _ := eventsOf(t, before, []Action{PutJob{Job: j, Reason: "y"}}, t0); len(evs) != 0 {
		t.Fatalf("same refusal again: %+v", evs)
	}
}

// TestEventTypesDocumented: every type is listed once, and docs/events.md
// names each.
func TestEventTypesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ty := range EventTypes {
		if seen[ty] {
			t.Errorf("%s listed twice", ty)
		}
		seen[ty] = true
		if !strings.Contains(string(doc), "`"+ty+"`") {
			t.Errorf("docs/events.md does not name event type %s", ty)
		}
	}
}

// TestEventsOfAJobsLife: a pending job's node is requested for it (the
// event names the job), and its cancellation withdraws the capacity.
func TestEventsOfAJobsLife(t *testing.T) {
	st, c := applied(t)
	evs, got := eventsOf(t, st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)), t0)
	if d := cmp.Diff([]string{"VM_REQUESTED flexvm-a3u-1 flexvm-a3u-1-g1"}, got); d != "" {
		t.Fatalf("job pending (-want +got):\n%s", d)
	}
	if evs[0].Job != "7" {
		t.Errorf("VM_REQUESTED for job 7 names job %q", evs[0].Job)
	}
	acts, err := Job(st, c, jobEv(event.TypeJobCancelled, "7", 0), t0.Add(time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	evs, got = eventsOf(t, st, acts, t0.Add(time.Minute))
	if d := cmp.Diff([]string{"VM_RELEASED flexvm-a3u-1 flexvm-a3u-1-g1"}, got); d != "" {
		t.Fatalf("job cancelled (-want +got):\n%s", d)
	}
	if !strings.Contains(evs[0].Message, "no longer asked for") || evs[0].Job != "7" {
		t.Errorf("withdrawn capacity: %+v", evs[0])
	}
}

// TestEventsOfASuccessor: a make-before-break successor's request says
// whose place it takes.
func TestEventsOfASuccessor(t *testing.T) {
	before := model.NewState()
	succ := model.Node{Name: "flexvm-a3u-1", Pool: "a3u", Generation: 1, Phase: model.PhaseRequested, VMName: "flexvm-a3u-1-g1",
		ResizeRequest: "rr-flexvm-a3u-1-g1", Predecessor: "flexvm-a3u-0"}
	evs, _ := eventsOf(t, before, []Action{PutNode{Node: succ, Reason: "x"}}, t0)
	if len(evs) != 1 || evs[0].Type != EventVMRequested || !strings.Contains(evs[0].Message, "take flexvm-a3u-0's place") {
		t.Fatalf("successor requested: %+v", evs)
	}
}
