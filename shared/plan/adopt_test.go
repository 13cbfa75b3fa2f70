package plan

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// timedOutState: job 7 pending on flexvm-a3u-1, whose request queued past
// the queue timeout was cancelled (queueTimedOut: released, request open);
// the static node flexvm-a3u-0 runs.
func timedOutState(t *testing.T) (*model.State, ObservedResizeRequest) {
	t.Helper()
	st, _ := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")))
	running(st, "flexvm-a3u-0", t0.Add(week))
	n := st.Nodes["flexvm-a3u-1"]
	rr := ObservedResizeRequest{Name: n.ResizeRequest, MIG: n.MIG, State: "ACCEPTED", Created: t0, VMs: []string{n.VMName}}
	acts := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
		VMs:            []VM{{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}},
		ResizeRequests: []ObservedResizeRequest{rr}}}}, t0.Add(7*time.Hour), Policy{})
	if !cancels(acts, rr.Name) {
		t.Fatalf("setup: the queue timeout did not cancel %s: %v", rr.Name, kinds(acts))
	}
	Apply(st, acts)
	if n := st.Nodes["flexvm-a3u-1"]; n.Phase != model.PhaseReleased || n.LastEnd != model.EndTimeout {
		t.Fatalf("setup: flexvm-a3u-1 %s/%s, want released/timeout", n.Phase, n.LastEnd)
	}
	return st, rr
}

func TestCapacityArrivedAsItsQueueTimeoutCancelRanServesTheJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(st *model.State)
		vm      string // the listed VM's status; "" for none listed
		adopt   bool
	}{
		{"the VM came and job 7 still waits: kept for it", nil, "RUNNING", true},
		{"the VM is still booting: kept", nil, "STAGING", true},
		{"no VM: the request was cancelled in time; requested again", nil, "", false},
		{"the VM is going away: not taken back", nil, "STOPPING", false},
		{"job 7 ended: no job can use it", func(st *model.State) { st.Jobs["7"].State = model.JobCancelled }, "RUNNING", false},
		{"job 7 now placed on another node: not kept for it", func(st *model.State) { st.Jobs["7"].Nodes = []string{"flexvm-a3u-2"} }, "RUNNING", false},
		{"a static node's: kept", func(st *model.State) { st.Nodes["flexvm-a3u-1"].Kind = model.NodeStatic }, "RUNNING", true},
		{"job 7 ended, and Slurm started job 9 on the node since: kept for the job it runs", func(st *model.State) {
			st.Jobs["7"].State = model.JobCancelled
			st.Nodes["flexvm-a3u-1"].StartedJob, st.Nodes["flexvm-a3u-1"].StartedAt = "9", t0.Add(7*time.Hour+2*time.Minute)
		}, "RUNNING", true},
		{"job 7 ended, and the job Slurm started there has ended too: not kept", func(st *model.State) {
			st.Jobs["7"].State = model.JobCancelled
			st.Nodes["flexvm-a3u-1"].StartedJob, st.Nodes["flexvm-a3u-1"].StartedAt = "9", t0.Add(7*time.Hour+2*time.Minute)
			st.Jobs["9"] = &model.Job{ID: "9", Pool: "a3u", State: model.JobFinished, Nodes: []string{"flexvm-a3u-1"}}
		}, "RUNNING", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, rr := timedOutState(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			// Compute confirmed the cancelled request is no longer queued
			// (it had succeeded): the open request is recorded ended.
			Apply(st, RequestsEnded(st, []string{rr.Name}, t0.Add(7*time.Hour+time.Second), Policy{}))
			vms := []VM{{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}}
			if tc.vm != "" {
				vms = append(vms, VM{Name: "flexvm-a3u-1-g1", Status: tc.vm, Created: t0.Add(7 * time.Hour), TerminationTime: t0.Add(week), MIG: rr.MIG})
			}
			rr.State = "SUCCEEDED"
			if tc.vm == "" {
				rr.State = "CANCELLED"
			}
			obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: vms, ResizeRequests: []ObservedResizeRequest{rr}}}}
			acts := Reconcile(st, obs, t0.Add(7*time.Hour+5*time.Minute), Policy{})
			created, deleted := false, releases(acts, "flexvm-a3u-1", "flexvm-a3u-1-g1")
			for _, a := range acts {
				switch a := a.(type) {
				case CreateResizeRequest:
					created = true
				case DeleteMIG:
					if a.MIG == rr.MIG {
						deleted = true
					}
				}
			}
			Apply(st, acts)
			n := st.Nodes["flexvm-a3u-1"]
			if tc.adopt {
				if created || deleted || n.Generation != 1 || !n.Phase.Serving() {
					t.Fatalf("want generation 1 kept: created %v, deleted %v, node %s g%d: %v", created, deleted, n.Phase, n.Generation, kinds(acts))
				}
				return
			}
			if n.Generation == 1 && n.Phase.Serving() {
				t.Fatalf("generation 1 taken back: %v", kinds(acts))
			}
		})
	}
}

// TestCapacityArrivedAsAnEndedJobsCancelRanServesTheNextJob: job 7's
// request for flexvm-a3u-1 is cancelled as job 7 ends, and Compute had
// fulfilled it (its cancellation answered SUCCEEDED, which does not end
// the request for flexslurm: RequestsEnded is not called). Slurm gives the
// node to job 8, whose job.pending comes before the listing: the node is
// not requested again, and the next pass keeps the VM that came for job 8
// when job 8 can still use it.
func TestCapacityArrivedAsAnEndedJobsCancelRanServesTheNextJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		job8    bool                  // job 8 reported pending on flexvm-a3u-1
		prepare func(st *model.State) // before the pass
		vm      string                // the listed VM's status; "" for none listed
		adopt   bool
	}{
		{"job 8 pending on the node: the VM serves it", true, nil, "RUNNING", true},
		{"the VM still booting: kept for job 8", true, nil, "STAGING", true},
		{"no job for the node: the VM goes with its MIG", false, nil, "RUNNING", false},
		{"job 8 cancelled too: the VM goes", true, func(st *model.State) { st.Jobs["8"].State = model.JobCancelled }, "RUNNING", false},
		{"a newer snapshot shows job 8 allocated another node: the VM goes", true, func(st *model.State) {
			st.Slurm = &model.SlurmView{TakenAt: t0.Add(7*time.Hour + 4*time.Minute), Nodes: map[string]model.SlurmNode{},
				Jobs: []model.SlurmJob{{ID: "8", State: "PENDING", Partition: "a3u", Nodes: []string{"flexvm-a3u-2"}, NodeCount: 1}}}
		}, "RUNNING", false},
		{"a newer snapshot shows job 8 allocated the node: kept", true, func(st *model.State) {
			st.Slurm = &model.SlurmView{TakenAt: t0.Add(7*time.Hour + 4*time.Minute), Nodes: map[string]model.SlurmNode{},
				Jobs: []model.SlurmJob{{ID: "8", State: "CONFIGURING", Partition: "a3u", Nodes: []string{"flexvm-a3u-1"}, NodeCount: 1}}}
		}, "RUNNING", true},
		{"the request was cancelled in time: job 8 is requested anew", true, nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, c := applied(t)
			running(st, "flexvm-a3u-0", t0.Add(week))
			Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")))
			n := *st.Nodes["flexvm-a3u-1"]
			ended, err := Job(st, c, jobEv(event.TypeJobCancelled, "7", 0), t0.Add(7*time.Hour), Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]string{"PutJob:7/cancelled", "CancelResizeRequest:" + n.ResizeRequest, "PutNode:flexvm-a3u-1/released"}, kinds(ended)); d != "" {
				t.Fatalf("job 7's end (-want +got):\n%s", d)
			}
			Apply(st, ended)
			if n := st.Nodes["flexvm-a3u-1"]; n.LastEnd != model.EndCancelled || !n.RequestOpen {
				t.Fatalf("flexvm-a3u-1 after job 7's end: last end %s, request open %v; want cancelled, open", n.LastEnd, n.RequestOpen)
			}
			if tc.job8 {
				pending, err := Job(st, c, jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-1"), t0.Add(7*time.Hour+time.Minute), Policy{})
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range pending {
					if cr, ok := a.(CreateResizeRequest); ok {
						t.Fatalf("job 8's report requested %s before the listing showed the cancelled request's outcome", cr.Name)
					}
				}
				Apply(st, pending)
			}
			if tc.prepare != nil {
				tc.prepare(st)
			}
			rr := ObservedResizeRequest{Name: n.ResizeRequest, MIG: n.MIG, State: "SUCCEEDED", Created: t0, VMs: []string{n.VMName}}
			vms := []VM{{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}}
			if tc.vm != "" {
				vms = append(vms, VM{Name: n.VMName, Status: tc.vm, Created: t0.Add(7 * time.Hour), TerminationTime: t0.Add(week), MIG: n.MIG})
			} else {
				rr.State = "CANCELLED"
			}
			obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGsListed: true, ListedAt: t0.Add(7*time.Hour + 5*time.Minute), VMs: vms,
				MIGs:           []ObservedMIG{{Name: n.MIG, Request: n.ResizeRequest, RequestsListed: true, Age: 7 * time.Hour}},
				ResizeRequests: []ObservedResizeRequest{rr}}}}
			acts := Reconcile(st, obs, t0.Add(7*time.Hour+5*time.Minute), Policy{})
			created, deleted := false, releases(acts, "flexvm-a3u-1", n.VMName)
			for _, a := range acts {
				if _, ok := a.(CreateResizeRequest); ok {
					created = true
				}
			}
			Apply(st, acts)
			got := st.Nodes["flexvm-a3u-1"]
			if tc.adopt {
				if created || deleted || got.Generation != 1 || !got.Phase.Serving() || got.JobID != "8" {
					t.Fatalf("want generation 1 kept for job 8: created %v, deleted %v, node %s g%d for job %q: %v", created, deleted, got.Phase, got.Generation, got.JobID, kinds(acts))
				}
				return
			}
			if got.Generation == 1 && got.Phase.Serving() {
				t.Fatalf("generation 1 taken back: %v", kinds(acts))
			}
			if tc.vm != "" && !deleted {
				t.Fatalf("the VM no job can use is not released: %v", kinds(acts))
			}
			if tc.vm == "" && tc.job8 && !created {
				t.Fatalf("job 8 not requested once the request is seen cancelled: %v", kinds(acts))
			}
		})
	}
}

// TestCapacityArrivedAsItsQueueTimeoutCancelRanWithTheBreakerOpen: the
// queue timeout cancels a request while the pool's breaker is open, so no
// new request is made; Compute had fulfilled it. The VM that came serves
// the job: the breaker stops new requests, not capacity that came.
func TestCapacityArrivedAsItsQueueTimeoutCancelRanWithTheBreakerOpen(t *testing.T) {
	st, _ := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")))
	running(st, "flexvm-a3u-0", t0.Add(week))
	st.Pools["a3u"].BootstrapFailures, st.Pools["a3u"].BreakerOpenedAt = 3, t0.Add(7*time.Hour-time.Minute)
	n := *st.Nodes["flexvm-a3u-1"]
	rr := ObservedResizeRequest{Name: n.ResizeRequest, MIG: n.MIG, State: "ACCEPTED", Created: t0, VMs: []string{n.VMName}}
	vm0 := VM{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
	acts := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
		VMs: []VM{vm0}, ResizeRequests: []ObservedResizeRequest{rr}}}}, t0.Add(7*time.Hour), Policy{})
	if !cancels(acts, rr.Name) {
		t.Fatalf("the queue timeout did not cancel %s: %v", rr.Name, kinds(acts))
	}
	for _, a := range acts {
		if cr, ok := a.(CreateResizeRequest); ok {
			t.Fatalf("a request made while the breaker is open: %s", cr.Name)
		}
	}
	Apply(st, acts)
	rr.State = "SUCCEEDED"
	vm1 := VM{Name: n.VMName, Status: "RUNNING", Created: t0.Add(7 * time.Hour), TerminationTime: t0.Add(week), MIG: n.MIG}
	acts = Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
		VMs: []VM{vm0, vm1}, ResizeRequests: []ObservedResizeRequest{rr}}}}, t0.Add(7*time.Hour+5*time.Minute), Policy{})
	if releases(acts, "flexvm-a3u-1", n.VMName) {
		t.Fatalf("the VM that came is deleted: %v", kinds(acts))
	}
	Apply(st, acts)
	if got := st.Nodes["flexvm-a3u-1"]; got.Generation != 1 || !got.Phase.Serving() || got.JobID != "7" {
		t.Fatalf("flexvm-a3u-1 %s g%d for job %q, want generation 1 serving job 7: %v", got.Phase, got.Generation, got.JobID, kinds(acts))
	}
}

// TestCapacityArrivedForARequeuedJobsRequestServesTheNodeItKeeps: job 7's
// one request names flexvm-a3u-1 and flexvm-a3u-2; Slurm requeues the job
// and places it on flexvm-a3u-0 (the static node, up) and flexvm-a3u-2.
// The request, cancelled whole for the node the job left, had been
// fulfilled: the VM of the node the job keeps serves it, and only the VM
// of the node it left is deleted (by name: the request's MIG serves
// flexvm-a3u-2). No second request is made for flexvm-a3u-2.
func TestCapacityArrivedForARequeuedJobsRequestServesTheNodeItKeeps(t *testing.T) {
	st, c := applied(t)
	running(st, "flexvm-a3u-0", t0.Add(week))
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2")))
	n1, n2 := *st.Nodes["flexvm-a3u-1"], *st.Nodes["flexvm-a3u-2"]
	placed := jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-0", "flexvm-a3u-2")
	placed.Requeued = true
	acts, err := Job(st, c, placed, t0.Add(time.Hour), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if !cancels(acts, n1.ResizeRequest) || releases(acts, "flexvm-a3u-2", n2.VMName) {
		t.Fatalf("placed elsewhere: want the request cancelled, nothing deleted: %v", kinds(acts))
	}
	for _, a := range acts {
		if cr, ok := a.(CreateResizeRequest); ok && slices.Contains(cr.VMs, "flexvm-a3u-2-g2") {
			t.Fatalf("flexvm-a3u-2 requested again before the listing: %s", cr.Name)
		}
	}
	Apply(st, acts)
	listSharedArrival(t, st, n1, n2, "the node job 7 keeps", "the node job 7 left")
}

// TestCapacityArrivedAsAResumeFailureCancelRanServesTheJob: job 7's one
// request names flexvm-a3u-1 and flexvm-a3u-2. Slurm gives up resuming
// flexvm-a3u-1 (ResumeTimeout) and requeues the job; the release cancels
// the request for every node it names but deletes nothing, since Compute
// may have fulfilled it. Slurm places job 7 on flexvm-a3u-0 and
// flexvm-a3u-2: the VM that came for flexvm-a3u-2 serves it, the one that
// came for flexvm-a3u-1 is deleted by name, and nothing is requested again.
func TestCapacityArrivedAsAResumeFailureCancelRanServesTheJob(t *testing.T) {
	st, c := applied(t)
	running(st, "flexvm-a3u-0", t0.Add(week))
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2")))
	n1, n2 := *st.Nodes["flexvm-a3u-1"], *st.Nodes["flexvm-a3u-2"]
	acts, err := NodePower(st, nodeEv(event.TypeResumeFailed, "flexvm-a3u-1"), t0.Add(time.Hour), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if !cancels(acts, n1.ResizeRequest) || releases(acts, "flexvm-a3u-1", n1.VMName) || releases(acts, "flexvm-a3u-2", n2.VMName) {
		t.Fatalf("resume failure: want the request cancelled and nothing deleted: %v", kinds(acts))
	}
	Apply(st, acts)
	for _, name := range []string{"flexvm-a3u-1", "flexvm-a3u-2"} {
		if n := st.Nodes[name]; n.Phase != model.PhaseReleased || n.LastEnd != model.EndCancelled || !n.RequestOpen {
			t.Fatalf("%s after the resume failure: %s/%s, request open %v; want released/cancelled, open", name, n.Phase, n.LastEnd, n.RequestOpen)
		}
	}
	placed := jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-0", "flexvm-a3u-2")
	placed.Requeued = true
	acts, err = Job(st, c, placed, t0.Add(time.Hour+2*time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if cr, ok := a.(CreateResizeRequest); ok {
			t.Fatalf("job 7's new allocation requested %s before the listing showed the cancelled request's outcome", cr.Name)
		}
	}
	Apply(st, acts)
	listSharedArrival(t, st, n1, n2, "the node job 7 was placed on", "the node Slurm gave up on, which no job uses")
}

// listSharedArrival runs the pass that lists job 7's request n1.ResizeRequest
// (naming n1 and n2) SUCCEEDED with both VMs running, job 7 now placed on
// flexvm-a3u-0 and n2: n2's VM is kept for job 7 and n1's deleted by name,
// the request's MIG kept, and nothing requested again.
func listSharedArrival(t *testing.T, st *model.State, n1, n2 model.Node, kept, left string) {
	t.Helper()
	rr := ObservedResizeRequest{Name: n1.ResizeRequest, MIG: n1.MIG, State: "SUCCEEDED", Created: t0, VMs: []string{n1.VMName, n2.VMName}}
	vms := []VM{{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)},
		{Name: n1.VMName, Status: "RUNNING", Created: t0.Add(time.Hour), TerminationTime: t0.Add(week), MIG: n1.MIG},
		{Name: n2.VMName, Status: "RUNNING", Created: t0.Add(time.Hour), TerminationTime: t0.Add(week), MIG: n1.MIG}}
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGsListed: true, ListedAt: t0.Add(time.Hour + 5*time.Minute), VMs: vms,
		MIGs:           []ObservedMIG{{Name: n1.MIG, Request: n1.ResizeRequest, RequestsListed: true, Age: time.Hour}},
		ResizeRequests: []ObservedResizeRequest{rr}}}}
	acts := Reconcile(st, obs, t0.Add(time.Hour+5*time.Minute), Policy{})
	if releases(acts, n2.Name, n2.VMName) {
		t.Fatalf("the VM of %s is deleted: %v", kept, kinds(acts))
	}
	if !releases(acts, n1.Name, n1.VMName) {
		t.Fatalf("the VM of %s is kept: %v", left, kinds(acts))
	}
	for _, a := range acts {
		if d, ok := a.(DeleteMIG); ok && d.MIG == n1.MIG {
			t.Fatalf("the request's MIG is deleted while %s serves from it", n2.Name)
		}
		if cr, ok := a.(CreateResizeRequest); ok {
			t.Fatalf("requested again: %s", cr.Name)
		}
	}
	Apply(st, acts)
	if got := st.Nodes[n2.Name]; got.Generation != 1 || !got.Phase.Serving() || got.JobID != "7" {
		t.Fatalf("%s %s g%d for job %q, want generation 1 serving job 7: %v", n2.Name, got.Phase, got.Generation, got.JobID, kinds(acts))
	}
}

// TestCapacityListedInThePassThatSeesTheResumeFailure: the ResumeFailProgram
// report is late, and the pass that finds the resume failure in Slurm's
// snapshot also lists the node's request fulfilled and its VM running. That
// pass cancels but does not delete the request's MIG: Slurm may give the
// node to the requeued job again before the next pass, which then keeps the
// VM for it; when a newer snapshot shows the job placed on another node,
// the next pass deletes it.
func TestCapacityListedInThePassThatSeesTheResumeFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		again bool // Slurm gives job 7 the node again before the next pass; else another node
	}{
		{"job 7 placed on the node again: the VM serves it", true},
		{"job 7 placed on another node: the VM goes", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, c := applied(t)
			running(st, "flexvm-a3u-0", t0.Add(week))
			Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")))
			st.Nodes["flexvm-a3u-1"].MIGSeen = true // an earlier pass listed the request's MIG
			n := *st.Nodes["flexvm-a3u-1"]
			st.Slurm = &model.SlurmView{TakenAt: t0.Add(34 * time.Minute), Nodes: map[string]model.SlurmNode{
				"flexvm-a3u-0": slurmNode("flexvm-a3u-0", "", "idle", "CLOUD"),
				"flexvm-a3u-1": slurmNode("flexvm-a3u-1", "ResumeTimeout reached", "down", "CLOUD", "POWERED_DOWN", "NOT_RESPONDING"),
			}, Jobs: []model.SlurmJob{{ID: "7", State: "PENDING", Reason: "BeginTime"}}}
			listing := func(at time.Time) Observed {
				return Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGsListed: true, ListedAt: at,
					VMs: []VM{{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)},
						{Name: n.VMName, Status: "RUNNING", Created: t0.Add(32 * time.Minute), TerminationTime: t0.Add(week), MIG: n.MIG}},
					MIGs:           []ObservedMIG{{Name: n.MIG, Request: n.ResizeRequest, RequestsListed: true, Age: 35 * time.Minute}},
					ResizeRequests: []ObservedResizeRequest{{Name: n.ResizeRequest, MIG: n.MIG, State: "SUCCEEDED", Created: t0, VMs: []string{n.VMName}}}}},
					JobRecordsFor: st.Slurm.TakenAt}
			}
			acts := Reconcile(st, listing(t0.Add(35*time.Minute)), t0.Add(35*time.Minute), Policy{})
			if releases(acts, "flexvm-a3u-1", n.VMName) {
				t.Fatalf("the pass that sees the resume failure deletes the VM that came: %v", kinds(acts))
			}
			for _, a := range acts {
				if d, ok := a.(DeleteMIG); ok && d.MIG == n.MIG {
					t.Fatalf("the pass that sees the resume failure deletes the request's MIG, with the VM that came: %v", kinds(acts))
				}
			}
			Apply(st, acts)
			if got := st.Nodes["flexvm-a3u-1"]; got.Phase != model.PhaseReleased || got.LastEnd != model.EndCancelled {
				t.Fatalf("flexvm-a3u-1 %s/%s after the resume failure, want released/cancelled: %v", got.Phase, got.LastEnd, kinds(acts))
			}
			if tc.again {
				placed := jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")
				placed.Requeued = true
				a, err := Job(st, c, placed, t0.Add(36*time.Minute), Policy{})
				if err != nil {
					t.Fatal(err)
				}
				Apply(st, a)
			} else {
				st.Slurm = &model.SlurmView{TakenAt: t0.Add(39 * time.Minute), Nodes: map[string]model.SlurmNode{
					"flexvm-a3u-0": slurmNode("flexvm-a3u-0", "", "idle", "CLOUD"),
					"flexvm-a3u-1": slurmNode("flexvm-a3u-1", "", "idle", "CLOUD", "POWERED_DOWN"),
				}, Jobs: []model.SlurmJob{{ID: "7", State: "PENDING", Partition: "a3u", Nodes: []string{"flexvm-a3u-2"}, NodeCount: 1}}}
			}
			acts = Reconcile(st, listing(t0.Add(40*time.Minute)), t0.Add(40*time.Minute), Policy{})
			deleted := releases(acts, "flexvm-a3u-1", n.VMName)
			Apply(st, acts)
			got := st.Nodes["flexvm-a3u-1"]
			if tc.again {
				if deleted || got.Generation != 1 || !got.Phase.Serving() || got.JobID != "7" {
					t.Fatalf("want generation 1 kept for job 7: deleted %v, node %s g%d for job %q: %v", deleted, got.Phase, got.Generation, got.JobID, kinds(acts))
				}
				return
			}
			if !deleted || got.Phase.Serving() {
				t.Fatalf("the VM no job can use is kept: node %s: %v", got.Phase, kinds(acts))
			}
		})
	}
}

// TestCapacityArrivedButNotYetListedIsWaitedFor: the queue timeout
// cancelled job 7's request, which Compute had fulfilled; the pass after
// lists the request SUCCEEDED but not its VM (a list can omit a VM for a
// while). The VM may run: the request is not taken as ended and its MIG is
// not deleted, so job 7 is not requested again; the next listing that shows
// the VM keeps it for job 7. A VM missing from MissThreshold listings is
// gone: the request ends and its MIG is deleted.
func TestCapacityArrivedButNotYetListedIsWaitedFor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listed bool // the second pass lists the VM
	}{
		{"listed in the next pass: kept for job 7", true},
		{"never listed: gone after MissThreshold passes", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, rr := timedOutState(t)
			rr.State = "SUCCEEDED"
			vm0 := VM{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
			vm1 := VM{Name: "flexvm-a3u-1-g1", Status: "RUNNING", Created: t0.Add(7 * time.Hour), TerminationTime: t0.Add(week), MIG: rr.MIG}
			listing := func(at time.Time, vms ...VM) Observed {
				return Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGsListed: true, ListedAt: at, VMs: vms,
					MIGs:           []ObservedMIG{{Name: rr.MIG, Request: rr.Name, RequestsListed: true, Age: 7 * time.Hour}},
					ResizeRequests: []ObservedResizeRequest{rr}}}}
			}
			pass := func(at time.Time, vms ...VM) []Action {
				t.Helper()
				acts := Reconcile(st, listing(at, vms...), at, Policy{})
				Apply(st, acts)
				return acts
			}
			at := t0.Add(7*time.Hour + 5*time.Minute)
			acts := pass(at, vm0)
			for _, a := range acts {
				switch a := a.(type) {
				case DeleteMIG:
					if a.MIG == rr.MIG {
						t.Fatalf("the MIG of a request that SUCCEEDED is deleted while its VM is not listed: %v", kinds(acts))
					}
				case CreateResizeRequest:
					t.Fatalf("job 7 requested again while the VM that came may run: %s", a.Name)
				}
			}
			if n := st.Nodes["flexvm-a3u-1"]; !n.RequestOpen {
				t.Fatalf("flexvm-a3u-1's request taken as ended while its VM is not listed: %+v", *n)
			}
			if tc.listed {
				acts = pass(at.Add(5*time.Minute), vm0, vm1)
				if releases(acts, "flexvm-a3u-1", vm1.Name) {
					t.Fatalf("the VM that came is deleted: %v", kinds(acts))
				}
				if got := st.Nodes["flexvm-a3u-1"]; got.Generation != 1 || !got.Phase.Serving() || got.JobID != "7" {
					t.Fatalf("flexvm-a3u-1 %s g%d for job %q, want generation 1 serving job 7: %v", got.Phase, got.Generation, got.JobID, kinds(acts))
				}
				return
			}
			deleted := false
			for i := 1; i < DefaultPolicy().MissThreshold && !deleted; i++ {
				for _, a := range pass(at.Add(time.Duration(i)*5*time.Minute), vm0) {
					if d, ok := a.(DeleteMIG); ok && d.MIG == rr.MIG {
						deleted = true
					}
				}
			}
			if !deleted {
				t.Fatalf("the MIG of a request whose VM was never listed is kept after %d passes", DefaultPolicy().MissThreshold)
			}
			if n := st.Nodes["flexvm-a3u-1"]; n.RequestOpen {
				t.Fatalf("flexvm-a3u-1's request still open after its VM was missing from %d listings", DefaultPolicy().MissThreshold)
			}
		})
	}
}
