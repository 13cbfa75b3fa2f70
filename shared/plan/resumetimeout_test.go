package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// After a resume failure, job 7 (requeued by Slurm) waits for Slurm's next
// allocation: no capacity is bought on flexslurm's guess, and it is served
// as soon as that allocation is known, from whichever source is newer.
func TestResumeFailureJobWaitsForSlurmsNextAllocation(t *testing.T) {
	// The job's comment (waiting for capacity) no longer holds: cleared.
	cleared := []string{"PutJob:7/pending", "Slurm:job_comment:7"}
	c, _ := example(t)
	vm0 := VM{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
	obs := func(st *model.State) Observed {
		o := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{vm0}}}}
		if st.Slurm != nil {
			o.JobRecordsFor = st.Slurm.TakenAt
		}
		return o
	}
	prepare := func(t *testing.T) *model.State {
		st, _ := applied(t)
		running(st, "flexvm-a3u-0", t0.Add(week))
		Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")))
		ev := nodeEv(event.TypeResumeFailed, "flexvm-a3u-1")
		ev.ReportedAt = t0.Add(time.Hour)
		acts, err := NodePower(st, ev, t0.Add(time.Hour), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		Apply(st, acts)
		// Its deletion completed and its cancelled request was seen to end.
		st.Nodes["flexvm-a3u-1"].Phase = model.PhaseReleased
		st.Nodes["flexvm-a3u-1"].RequestOpen = false
		return st
	}
	for _, tc := range []struct {
		name  string
		slurm *model.SlurmView // relative to the resume failure at t0+1h
		ev    *event.Job       // a job report after the failure
		want  []string
	}{
		{
			name: "no newer allocation known: nothing bought",
			want: cleared,
		},
		{
			name:  "a snapshot older than the failure still shows the old allocation: nothing bought",
			slurm: &model.SlurmView{TakenAt: t0.Add(59 * time.Minute), Jobs: []model.SlurmJob{{ID: "7", State: "CONFIGURING", Nodes: []string{"flexvm-a3u-1"}}}},
			want:  cleared,
		},
		{
			name:  "a newer snapshot shows the job pending, not placed yet: nothing bought",
			slurm: &model.SlurmView{TakenAt: t0.Add(61 * time.Minute), Jobs: []model.SlurmJob{{ID: "7", State: "PENDING", Reason: "BeginTime"}}},
			want:  cleared,
		},
		{
			name: "a newer snapshot shows Slurm placed it on flexvm-a3u-2: capacity for that node",
			slurm: &model.SlurmView{TakenAt: t0.Add(64 * time.Minute),
				Nodes: map[string]model.SlurmNode{"flexvm-a3u-2": slurmNode("flexvm-a3u-2", "", "allocated", "CLOUD", "NOT_RESPONDING", "POWERING_UP")},
				Jobs:  []model.SlurmJob{{ID: "7", State: "CONFIGURING", Nodes: []string{"flexvm-a3u-2"}, NodeCount: 1}}},
			// Observed first (Slurm powers up a node with no VM asked for),
			// then requested for the job.
			want: []string{"PutNode:flexvm-a3u-2/released", "PutNode:flexvm-a3u-2/requested", "PutJob:7/pending", "CreateResizeRequest:rr-flexvm-a3u-j7-g2=flexvm-a3u-2-g1", "Slurm:job_comment:7"},
		},
		{
			name: "its job.pending report names the new allocation",
			ev: func() *event.Job {
				e := jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-2")
				e.Requeued = true
				return e
			}(),
			want: []string{"PutNode:flexvm-a3u-2/requested", "PutJob:7/pending", "CreateResizeRequest:rr-flexvm-a3u-j7-g2=flexvm-a3u-2-g1", "Slurm:job_comment:7"},
		},
		{
			name: "a job.pending report without nodes does not make flexslurm guess them",
			ev:   jobEv(event.TypeJobPending, "7", 1),
			want: cleared,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := prepare(t)
			if j := st.Jobs["7"]; !j.AwaitingSlurm || len(j.Nodes) != 0 || j.State != model.JobPending {
				t.Fatalf("after the resume failure, job 7 = %+v; want pending, awaiting Slurm, no nodes", *j)
			}
			now := t0.Add(65 * time.Minute)
			var got []Action
			if tc.ev != nil {
				var err error
				if got, err = Job(st, c, tc.ev, now, Policy{}); err != nil {
					t.Fatal(err)
				}
			} else {
				st.Slurm = tc.slurm
				got = Reconcile(st, obs(st), now, Policy{})
			}
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
}

// The ResumeFailProgram report was lost: a snapshot newer than the node's
// request shows it down~ while flexslurm waits for its capacity.
func TestReconcileResumeFailureSeenInTheSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken time.Duration
		want  []string
	}{
		{"newer than the request: the capacity is released and the node resumed", 30 * time.Minute,
			[]string{"CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released", "Slurm:resume:flexvm-a3u-1", "PutJob:7/pending", "Slurm:job_comment:7"}},
		{"older than the request (the node's previous timeout): nothing", -time.Minute, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			running(st, "flexvm-a3u-0", t0.Add(week))
			Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")))
			st.Slurm = &model.SlurmView{TakenAt: t0.Add(tc.taken), Nodes: map[string]model.SlurmNode{
				"flexvm-a3u-0": slurmNode("flexvm-a3u-0", "", "idle", "CLOUD"),
				"flexvm-a3u-1": slurmNode("flexvm-a3u-1", "ResumeTimeout reached", "down", "CLOUD", "POWERED_DOWN", "NOT_RESPONDING"),
			}, Jobs: []model.SlurmJob{{ID: "7", State: "PENDING", Reason: "BeginTime"}}}
			vm0 := VM{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
			o := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{vm0},
				ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-j7-g1", State: "ACCEPTED", Created: t0}}}}, JobRecordsFor: st.Slurm.TakenAt}
			got := kinds(Reconcile(st, o, t0.Add(31*time.Minute), Policy{}))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
}
