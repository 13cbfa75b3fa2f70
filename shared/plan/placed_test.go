package plan

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// placedState: job 7 pending on flexvm-a3u-1 and flexvm-a3u-2, requested
// together; flexvm-a3u-2's VM runs (the healthy one the job keeps),
// flexvm-a3u-1 still waits on the queued request.
func placedState(t *testing.T) *model.State {
	t.Helper()
	st, _ := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2")))
	running(st, "flexvm-a3u-0", t0.Add(week))
	running(st, "flexvm-a3u-2", t0.Add(week))
	return st
}

func cancels(actions []Action, rr string) bool {
	for _, a := range actions {
		if c, ok := a.(CancelResizeRequest); ok && c.Name == rr {
			return true
		}
	}
	return false
}

func TestJobPlacedElsewhereReleasesTheNodeItLeft(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(st *model.State)
		ev      *event.Job
		cancel  bool // flexvm-a3u-1's queued request cancelled
	}{
		{"job.pending naming other nodes: the node left is released", nil,
			jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-0", "flexvm-a3u-2"), true},
		{"job.started naming other nodes: the node left is released", nil,
			jobEv(event.TypeJobStarted, "7", 2, "flexvm-a3u-0", "flexvm-a3u-2"), true},
		{"job.pending naming the same nodes: nothing released", nil,
			jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2"), false},
		{"a static node's replacement made for the job stays queued",
			func(st *model.State) { st.Nodes["flexvm-a3u-1"].Kind = model.NodeStatic },
			jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-0", "flexvm-a3u-2"), false},
		{"another job's pending report leaves job 7's capacity alone", nil,
			jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-0"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := placedState(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			rr := st.Nodes["flexvm-a3u-1"].ResizeRequest
			acts := mustJob(t, st, tc.ev)
			if got := cancels(acts, rr); got != tc.cancel {
				t.Fatalf("cancels %s = %v, want %v: %v", rr, got, tc.cancel, kinds(acts))
			}
			if releases(acts, "flexvm-a3u-2", "flexvm-a3u-2-g1") {
				t.Errorf("the job's healthy VM on flexvm-a3u-2 was released: %v", kinds(acts))
			}
			Apply(st, acts)
			n := st.Nodes["flexvm-a3u-1"]
			// Its generation ends; its request's MIG is left to the next
			// pass, which deletes a VM the request made meanwhile that no
			// job can use (adopt.go).
			if tc.cancel && (n.Phase != model.PhaseReleased || n.LastEnd != model.EndCancelled || !n.RequestOpen) {
				t.Errorf("flexvm-a3u-1: phase %s, last end %s, request_open %v; want released, cancelled, open until its cancelled request is seen to end", n.Phase, n.LastEnd, n.RequestOpen)
			}
			if !tc.cancel && n.Phase != model.PhaseRequested {
				t.Errorf("flexvm-a3u-1: phase %s, want requested", n.Phase)
			}
		})
	}
}

func TestReconcileReleasesCapacityOfAJobSlurmPlacedElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name   string
		taken  time.Duration // snapshot, relative to the job record's last change
		nodes  []string      // job 7's nodes in the snapshot
		state  slurmstate.JobState
		cancel bool
	}{
		{"newer snapshot: pending on other nodes", time.Minute, []string{"flexvm-a3u-0", "flexvm-a3u-2"}, "PENDING", true},
		{"newer snapshot: running on other nodes", time.Minute, []string{"flexvm-a3u-0", "flexvm-a3u-2"}, "RUNNING", true},
		{"older snapshot: says nothing of the job's placement now", -time.Minute, []string{"flexvm-a3u-0", "flexvm-a3u-2"}, "PENDING", false},
		{"newer snapshot: pending, not placed yet", time.Minute, nil, "PENDING", false},
		{"newer snapshot: on the same nodes", time.Minute, []string{"flexvm-a3u-1", "flexvm-a3u-2"}, "CONFIGURING", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := placedState(t)
			rr := st.Nodes["flexvm-a3u-1"].ResizeRequest
			v := slurmView(st.Jobs["7"].UpdatedAt.Add(tc.taken), map[string]string{"flexvm-a3u-0": "idle+CLOUD", "flexvm-a3u-2": "idle+CLOUD"})
			v.Jobs = []model.SlurmJob{{ID: "7", State: tc.state, Partition: "a3u", Nodes: tc.nodes, NodeCount: 2}}
			st.Slurm = v
			obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{
				{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)},
				{Name: "flexvm-a3u-2-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)},
			}, ResizeRequests: []ObservedResizeRequest{{Name: rr, MIG: st.Nodes["flexvm-a3u-1"].MIG, State: "ACCEPTED", Created: t0}}}}}
			acts := Reconcile(st, obs, st.Jobs["7"].UpdatedAt.Add(2*time.Minute), Policy{})
			if got := cancels(acts, rr); got != tc.cancel {
				t.Fatalf("cancels %s = %v, want %v: %v", rr, got, tc.cancel, kinds(acts))
			}
			if releases(acts, "flexvm-a3u-2", "flexvm-a3u-2-g1") {
				t.Errorf("the job's healthy VM on flexvm-a3u-2 was released: %v", kinds(acts))
			}
		})
	}
}

func TestJobNarrowWidensForAJobPlacedElsewhere(t *testing.T) {
	st := placedState(t)
	c, _ := example(t)
	_, err := JobNarrow(st, c, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-0", "flexvm-a3u-2"), t0, Policy{})
	if !errors.Is(err, ErrWiderScope) {
		t.Fatalf("JobNarrow: err %v, want ErrWiderScope (flexvm-a3u-1's capacity is in no narrow scope)", err)
	}
	acts, err := JobNarrow(st, c, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2"), t0, Policy{})
	if err != nil || slices.ContainsFunc(acts, func(a Action) bool { _, ok := a.(CancelResizeRequest); return ok }) {
		t.Fatalf("JobNarrow on the same nodes: %v, %v", err, kinds(acts))
	}
}
