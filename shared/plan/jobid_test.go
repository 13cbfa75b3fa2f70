package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// reported is jobEv made at at (the hook's reported_at).
func reported(typ, id string, at time.Time, nodes ...string) *event.Job {
	ev := jobEv(typ, id, len(nodes), nodes...)
	if typ == event.TypeJobPending && len(nodes) == 0 {
		ev.NodeCount = 1
	}
	ev.ReportedAt = at
	return ev
}

// decide runs Job at now and applies what it decided.
func decide(t *testing.T, st *model.State, ev *event.Job, now time.Time) []string {
	t.Helper()
	c, _ := example(t)
	acts, err := Job(st, c, ev, now, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, acts)
	return kinds(acts)
}

// TestJobIDReusedIsANewJob: a pending report for an id whose job has
// ended, made after that end, is a new job, provisioned under the next
// generation of the id's names; late reports of the job that ended change
// nothing of it.
func TestJobIDReusedIsANewJob(t *testing.T) {
	st, _ := applied(t)
	decide(t, st, reported(event.TypeJobPending, "7", t0, "flexvm-a3u-1"), t0)
	decide(t, st, reported(event.TypeJobStarted, "7", t0.Add(10*time.Minute), "flexvm-a3u-1"), t0.Add(10*time.Minute))
	end := t0.Add(time.Hour)
	decide(t, st, reported(event.TypeJobFinished, "7", end, "flexvm-a3u-1"), end.Add(time.Second))
	if j := st.Jobs["7"]; j.State != model.JobFinished || !j.ReportedAt.Equal(end) {
		t.Fatalf("first job: %s reported %v", j.State, j.ReportedAt)
	}

	// A late pending report of the first job: made before its end.
	if got := decide(t, st, reported(event.TypeJobPending, "7", t0.Add(time.Minute), "flexvm-a3u-1"), end.Add(time.Minute)); got != nil {
		t.Fatalf("late pending report of the job that ended: %v", got)
	}
	// Without the report's time, it cannot be told from a new job.
	if got := decide(t, st, reported(event.TypeJobPending, "7", time.Time{}, "flexvm-a3u-2"), end.Add(time.Minute)); got != nil {
		t.Fatalf("pending report without its time: %v", got)
	}

	again := end.Add(time.Hour)
	got := decide(t, st, reported(event.TypeJobPending, "7", again, "flexvm-a3u-2"), again.Add(time.Second))
	want := []string{"PutNode:flexvm-a3u-2/requested", "PutJob:7/pending", "CreateResizeRequest:rr-flexvm-a3u-j7-g2=flexvm-a3u-2-g1", "Slurm:job_comment:7"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("new job with the id (-want +got):\n%s", d)
	}
	j := st.Jobs["7"]
	if j.Incarnation != 1 || !j.PreviousEnd.Equal(end) || j.Generation != 2 || j.Requeues != 0 || !j.ReportedAt.Equal(again) {
		t.Fatalf("new job's record: incarnation %d previous end %v generation %d requeues %d reported %v",
			j.Incarnation, j.PreviousEnd, j.Generation, j.Requeues, j.ReportedAt)
	}
	// The first job's reports, however late, are the first job's.
	for _, ev := range []*event.Job{
		reported(event.TypeJobFinished, "7", end, "flexvm-a3u-1"),
		reported(event.TypeJobCancelled, "7", end.Add(-time.Minute), "flexvm-a3u-1"),
		reported(event.TypeJobStarted, "7", t0.Add(10*time.Minute), "flexvm-a3u-1"),
		reported(event.TypeJobPending, "7", t0, "flexvm-a3u-1"),
	} {
		if got := decide(t, st, ev, again.Add(time.Minute)); got != nil {
			t.Errorf("late %s of the first job: %v", ev.Type, got)
		}
	}
	if j := st.Jobs["7"]; j.State != model.JobPending || j.Nodes[0] != "flexvm-a3u-2" {
		t.Fatalf("new job after late reports: %s on %v", j.State, j.Nodes)
	}
	// Its own reports count.
	decide(t, st, reported(event.TypeJobFinished, "7", again.Add(time.Hour), "flexvm-a3u-2"), again.Add(time.Hour))
	if j := st.Jobs["7"]; j.State != model.JobFinished {
		t.Fatalf("new job's own end: %s", j.State)
	}
}

// TestLateEndDoesNotEndTheJobPendingSince: an end report made before the
// pending report a pending record holds (the job waits again since: an
// earlier job with the id, or an earlier run) never ends it.
func TestLateEndDoesNotEndTheJobPendingSince(t *testing.T) {
	st, _ := applied(t)
	decide(t, st, reported(event.TypeJobPending, "8", t0, "flexvm-a3u-1"), t0)
	decide(t, st, reported(event.TypeJobStarted, "8", t0.Add(time.Minute), "flexvm-a3u-1"), t0.Add(time.Minute))
	// The first job 8 ends at +1h, its report delayed; a new job 8 is
	// reported pending at +2h, while the record still says running.
	decide(t, st, reported(event.TypeJobPending, "8", t0.Add(2*time.Hour), "flexvm-a3u-2"), t0.Add(2*time.Hour))
	if got := decide(t, st, reported(event.TypeJobFinished, "8", t0.Add(time.Hour), "flexvm-a3u-1"), t0.Add(2*time.Hour+time.Minute)); got != nil {
		t.Fatalf("late end of the first job 8: %v", got)
	}
	// A job.started made before the pending report still counts (with
	// power saving, PrologSlurmctld runs before ResumeProgram).
	decide(t, st, reported(event.TypeJobStarted, "8", t0.Add(2*time.Hour-time.Second), "flexvm-a3u-2"), t0.Add(2*time.Hour+2*time.Minute))
	if j := st.Jobs["8"]; j.State != model.JobRunning {
		t.Fatalf("the new job's start: %s", j.State)
	}
}

func TestStaleJobReport(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, tc := range []struct {
		name string
		rec  model.Job
		typ  string
		when time.Time
		want bool
	}{
		{"no report time: never stale", model.Job{State: model.JobFinished, ReportedAt: at(10)}, event.TypeJobPending, time.Time{}, false},
		{"before an end", model.Job{State: model.JobFinished, ReportedAt: at(10)}, event.TypeJobPending, at(9), true},
		{"after an end", model.Job{State: model.JobFinished, ReportedAt: at(10)}, event.TypeJobPending, at(11), false},
		{"at an end", model.Job{State: model.JobCancelled, ReportedAt: at(10)}, event.TypeJobPending, at(10), false},
		{"an end before the pending report held", model.Job{State: model.JobPending, ReportedAt: at(10)}, event.TypeJobFinished, at(9), true},
		{"an end after it", model.Job{State: model.JobPending, ReportedAt: at(10)}, event.TypeJobCancelled, at(11), false},
		{"a start before the pending report held counts", model.Job{State: model.JobPending, ReportedAt: at(10)}, event.TypeJobStarted, at(9), false},
		{"the previous job's start", model.Job{State: model.JobPending, ReportedAt: at(10), PreviousEnd: at(5)}, event.TypeJobStarted, at(4), true},
		{"at the previous job's end", model.Job{State: model.JobPending, ReportedAt: at(10), PreviousEnd: at(5)}, event.TypeJobFinished, at(5), true},
		{"a running record takes any end", model.Job{State: model.JobRunning, ReportedAt: at(10)}, event.TypeJobFinished, at(9), false},
		{"a record from before: its last change, ended", model.Job{State: model.JobFinished, UpdatedAt: at(10)}, event.TypeJobPending, at(9), true},
		{"a record from before: pending takes anything", model.Job{State: model.JobPending, UpdatedAt: at(10)}, event.TypeJobFinished, at(9), false},
	} {
		rec := tc.rec
		ev := &event.Job{Header: event.Header{Type: tc.typ}, ReportedAt: tc.when}
		if got := staleJobReport(&rec, ev); got != tc.want {
			t.Errorf("%s: stale %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestJobIDReusedAfterARecordFromBefore: a record stored before records
// held Slurm's time (the upgrade path) ends at its last change: a pending
// report made after it is a new job, one made before is late.
func TestJobIDReusedAfterARecordFromBefore(t *testing.T) {
	st, _ := applied(t)
	st.Jobs["7"] = &model.Job{ID: "7", Partition: "a3u", Pool: "a3u", State: model.JobFinished, Generation: 3, UpdatedAt: t0}
	if got := decide(t, st, reported(event.TypeJobPending, "7", t0.Add(-time.Minute), "flexvm-a3u-1"), t0.Add(time.Minute)); got != nil {
		t.Fatalf("late pending report: %v", got)
	}
	decide(t, st, reported(event.TypeJobPending, "7", t0.Add(time.Minute), "flexvm-a3u-1"), t0.Add(time.Minute))
	j := st.Jobs["7"]
	if j.State != model.JobPending || j.Incarnation != 1 || !j.PreviousEnd.Equal(t0) || j.Generation != 4 || j.ResizeRequest != "rr-flexvm-a3u-j7-g4" {
		t.Fatalf("new job: %s incarnation %d previous end %v generation %d request %s", j.State, j.Incarnation, j.PreviousEnd, j.Generation, j.ResizeRequest)
	}
}

// TestIdleNodeOfAnEarlierJobIsNotKeptForANewOne: a node provisioned for
// the earlier job with an id is not kept idle for the new job with it.
func TestIdleNodeOfAnEarlierJobIsNotKeptForANewOne(t *testing.T) {
	st, _ := applied(t)
	dynRunning(t, st, model.JobFinished)
	n := st.Nodes["flexvm-a3u-1"]
	n.RequestedAt = t0
	j := &model.Job{ID: "7", Pool: "a3u", State: model.JobPending, SubmittedAt: t0.Add(time.Hour), Incarnation: 1}
	if provisionedFor(n, j) {
		t.Fatal("node of the earlier job 7 taken for the new one's")
	}
	j.SubmittedAt = t0
	if !provisionedFor(n, j) {
		t.Fatal("node of job 7 not taken for its own")
	}
	b := newBuilder(st, t0.Add(2*time.Hour), Policy{})
	j.SubmittedAt = t0.Add(time.Hour)
	if kept, _ := b.keptFor(j, *n); kept {
		t.Fatal("idle node of the earlier job 7 kept for the new job 7")
	}
}

// TestLostReportOfAJobIDReused: a snapshot taken after the recorded job
// ended shows a job with its id pending on powering-up nodes, and no report
// of it arrived: a new job, provisioned.
func TestLostReportOfAJobIDReused(t *testing.T) {
	st, _ := applied(t)
	st.Jobs["7"] = &model.Job{ID: "7", Partition: "a3u", Pool: "a3u", State: model.JobFinished, Generation: 1,
		Nodes: []string{"flexvm-a3u-1"}, UpdatedAt: t0, ReportedAt: t0}
	now := t0.Add(time.Hour)
	st.Slurm = slurmView(now.Add(-time.Minute), map[string]string{"flexvm-a3u-2": "ALLOCATED+CLOUD+NOT_RESPONDING+POWERING_UP"})
	st.Slurm.Jobs = []model.SlurmJob{{ID: "7", State: "CONFIGURING", Partition: "a3u", Nodes: []string{"flexvm-a3u-2"}, NodeCount: 1}}
	obs := listed(st)
	obs.JobRecordsFor = st.Slurm.TakenAt
	got := kinds(Reconcile(st, obs, now, Policy{}))
	if !contains(got, "CreateResizeRequest:rr-flexvm-a3u-j7-g2=flexvm-a3u-2-g1") {
		t.Fatalf("new job 7 not provisioned: %v", got)
	}
	// A snapshot older than the end says nothing.
	st.Jobs["7"].ReportedAt, st.Jobs["7"].UpdatedAt = now, now
	if got := kinds(Reconcile(st, obs, now, Policy{})); contains(got, "CreateResizeRequest:rr-flexvm-a3u-j7-g2=flexvm-a3u-2-g1") {
		t.Fatalf("an older snapshot provisioned the job that ended: %v", got)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
