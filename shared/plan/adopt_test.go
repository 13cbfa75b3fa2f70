package plan

import (
	"testing"
	"time"

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
