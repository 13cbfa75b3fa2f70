package plan

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// jobRequestSplit leaves job 7's request (one MIG, two VMs) with
// flexvm-a3u-2 running from it and flexvm-a3u-1 released before its VM was
// seen running: Deleting, its deletion by deleteInstances in flight (the
// request SUCCEEDED and its end was seen, so RequestOpen is false), its
// VM's deletion not yet seen to finish. It returns the request's MIG.
func jobRequestSplit(t *testing.T, st *model.State) string {
	t.Helper()
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2")))
	one, two := st.Nodes["flexvm-a3u-1"], st.Nodes["flexvm-a3u-2"]
	if one.MIG == "" || one.MIG != two.MIG {
		t.Fatalf("job 7's nodes are in MIGs %q and %q, want one MIG", one.MIG, two.MIG)
	}
	running(st, "flexvm-a3u-2", t0.Add(7*24*time.Hour))
	st.Nodes["flexvm-a3u-2"].RunningAt = t0
	one.Phase, one.LastEnd, one.RequestOpen = model.PhaseDeleting, model.EndReleased, false
	return one.MIG
}

// TestNextGenerationNeverDeletesTheMIGASiblingRunsFrom: a node released
// before its VM ran, whose request's MIG another node of the same job
// request still runs from, is given its next generation by a job.pending
// naming it. Its next generation re-issues the deletion of its old VM
// (supersede), which must be deleteInstances on that MIG: deleting the MIG
// would delete the running sibling's VM under its job. A job.pending
// naming its nodes is decided from a narrow scope (JobNarrow: only the
// named nodes are loaded), which does not see the sibling.
func TestNextGenerationNeverDeletesTheMIGASiblingRunsFrom(t *testing.T) {
	ev := jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-1")
	check := func(t *testing.T, name string, got []Action, mig string) {
		t.Helper()
		for _, a := range got {
			if d, ok := a.(DeleteMIG); ok && d.MIG == mig {
				t.Errorf("%s: DeleteMIG %s (VMs %v) while flexvm-a3u-2 runs from it: %s", name, d.MIG, d.VMs, d.Reason)
			}
		}
	}
	t.Run("whole pool", func(t *testing.T) {
		full, c := applied(t)
		mig := jobRequestSplit(t, full)
		got, err := Job(full, c, ev, t0.Add(time.Minute), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, "Job", got, mig)
	})
	t.Run("narrow scope", func(t *testing.T) {
		full, c := applied(t)
		mig := jobRequestSplit(t, full)
		got, err := JobNarrow(narrowOf(full, ev), c, ev, t0.Add(time.Minute), Policy{})
		if errors.Is(err, ErrWiderScope) {
			return // decided from the whole pool (above)
		}
		if err != nil {
			t.Fatalf("JobNarrow: %v", err)
		}
		check(t, "JobNarrow", got, mig)
	})
}

// computeRequestIDs returns the Compute request ids of actions, by action.
func computeRequestIDs(actions []Action) map[string]string {
	out := map[string]string{}
	for _, a := range actions {
		switch a := a.(type) {
		case CreateResizeRequest:
			out["CreateResizeRequest "+a.Name] = a.RequestID
		case CancelResizeRequest:
			out["CancelResizeRequest "+a.Name] = a.RequestID
		case DeleteMIG:
			out["DeleteMIG "+a.MIG] = a.RequestID
		case DeleteVMs:
			out["DeleteVMs "+strings.Join(a.VMs, ",")] = a.RequestID
		}
	}
	return out
}

// TestRequestMIGCallsOfANewIncarnationHaveNewRequestIDs: a cluster torn
// down and created again under the same id names its nodes, generations,
// jobs' requests and so their MIGs as before. Compute remembers a request
// id for at least 60 minutes and answers a call that reuses one with the
// first call's operation, doing nothing
// (https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/delete,
// requestId). The MIG's insert and the resize request's creation carry the
// incarnation (model.Cluster.Incarnation), and so do the cancellation, the
// deleteInstances and the MIG's deletion: otherwise, within that hour,
// the new incarnation's release of a VM is answered with the old
// incarnation's operation and the VM keeps running (and billing), its
// queued request is not cancelled, and its MIG is left behind.
func TestRequestMIGCallsOfANewIncarnationHaveNewRequestIDs(t *testing.T) {
	decide := func(t *testing.T, created time.Time) map[string]string {
		t.Helper()
		st, c := applied(t)
		st.Cluster.CreatedAt = created
		ids := map[string]string{}
		step := func(acts []Action) {
			for k, v := range computeRequestIDs(acts) {
				ids[k] = v
			}
			Apply(st, acts)
		}
		// Job 7's request queued, then the job cancelled: its request is
		// cancelled, and the next pass, which lists it cancelled, deletes
		// its MIG.
		step(mustJob(t, st, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2")))
		acts, err := Job(st, c, jobEv(event.TypeJobCancelled, "7", 0), t0.Add(time.Minute), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		step(acts)
		n := st.Nodes["flexvm-a3u-1"]
		rr := ObservedResizeRequest{Name: n.ResizeRequest, MIG: n.MIG, State: "CANCELLED", Created: t0}
		step(Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGsListed: true, ListedAt: t0.Add(5 * time.Minute),
			MIGs:           []ObservedMIG{{Name: n.MIG, Request: n.ResizeRequest, RequestsListed: true, Age: 4 * time.Minute}},
			ResizeRequests: []ObservedResizeRequest{rr}}}}, t0.Add(5*time.Minute), Policy{}))
		return ids
	}
	first := decide(t, t0)
	second := decide(t, t0.Add(30*time.Minute))
	if len(first) < 3 {
		t.Fatalf("the first incarnation made %d Compute calls (%v), want a creation, a cancellation and a deletion", len(first), first)
	}
	for call, id := range second {
		if first[call] == id {
			t.Errorf("%s: the same request id %s in both incarnations", call, id)
		}
	}
}
