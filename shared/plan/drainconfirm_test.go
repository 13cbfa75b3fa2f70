package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// awaitingDrain is the applied example (Flex-Start) with static node
// flexvm-a3u-0 running and a FAIL on it decided at t0: it awaits its drain.
func awaitingDrain(t *testing.T) *model.State {
	t.Helper()
	st, _ := applied(t)
	running(st, "flexvm-a3u-0", t0.Add(farEnd))
	acts, err := Repair(st, fail("flexvm-a3u-0", 1, "", "", true), t0, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, acts)
	if n := st.Nodes["flexvm-a3u-0"]; n.Repair != model.RepairAwaitDrain || !n.RepairSince.Equal(t0) {
		t.Fatalf("after the FAIL: repair %q since %s, want awaiting the drain since %s", n.Repair, n.RepairSince, t0)
	}
	return st
}

// TestSnapshotContinuesRepairsAwaitingDrain: storing the agent's snapshot
// takes the repair step of a node awaiting its drain when, and only when,
// the snapshot was taken after the repair started and shows the node
// drained (DRAIN, no job).
func TestSnapshotContinuesRepairsAwaitingDrain(t *testing.T) {
	drained := map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"}
	replaced := []string{"DeleteVMs:flexvm-a3u-0-g1", "Slurm:reservation_delete:flexvm-a3u-0",
		"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"}
	for _, tc := range []struct {
		name    string
		prepare func(st *model.State)
		snap    *event.SlurmSnapshot
		now     time.Time
		want    []string
	}{
		{name: "taken after the repair started, drained: the VM is replaced in the same event",
			snap: confirmSnapshot(t0.Add(30*time.Second), drained), now: t0.Add(31 * time.Second), want: replaced},
		{name: "taken before the repair started: nothing",
			snap: confirmSnapshot(t0.Add(-time.Second), drained), now: t0.Add(time.Second)},
		{name: "taken at the instant the repair started: nothing (ties go to the record)",
			snap: confirmSnapshot(t0, drained), now: t0.Add(time.Second)},
		{name: "still draining, a job on the node: nothing",
			snap: confirmSnapshot(t0.Add(30*time.Second), map[string]string{"flexvm-a3u-0": "ALLOCATED+CLOUD+DRAIN"}), now: t0.Add(31 * time.Second)},
		{name: "not drained at all (the node's claim was false): nothing",
			snap: confirmSnapshot(t0.Add(30*time.Second), map[string]string{"flexvm-a3u-0": "ALLOCATED+CLOUD"}), now: t0.Add(31 * time.Second)},
		{name: "older than the snapshot already stored: not stored, nothing",
			prepare: func(st *model.State) {
				st.Slurm = slurmView(t0.Add(time.Minute), map[string]string{"flexvm-a3u-0": "ALLOCATED+CLOUD"})
			},
			snap: confirmSnapshot(t0.Add(30*time.Second), drained), now: t0.Add(61 * time.Second)},
		{name: "delivered past the snapshot's maximum age: nothing",
			snap: confirmSnapshot(t0.Add(30*time.Second), drained), now: t0.Add(30*time.Second + time.Hour)},
		{name: "the node's pool not loaded: nothing",
			prepare: func(st *model.State) { delete(st.Pools, "a3u") },
			snap:    confirmSnapshot(t0.Add(30*time.Second), drained), now: t0.Add(31 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := awaitingDrain(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			got, err := Snapshot(st, tc.snap, tc.now, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, rkinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
}

// TestRepairJobNeedsControllerConfirmation: the job a FAIL names, and the
// state the hook gives it, buy nothing on their own: the repaired dynamic
// node is replaced for the job only when flexslurm's records or Slurm's
// snapshot show the job waiting, and a running job's record is never
// turned pending by the hook's word.
func TestRepairJobNeedsControllerConfirmation(t *testing.T) {
	deleted := []string{"DeleteVMs:flexvm-a3u-1-g1", "Slurm:reservation_delete:flexvm-a3u-1", "PutNode:flexvm-a3u-1/deleting"}
	drained1 := map[string]string{"flexvm-a3u-1": "IDLE+CLOUD+DRAIN"}
	for _, tc := range []struct {
		name     string
		job      string // the job the FAIL names, "requeued"
		jobState model.JobState
		snapJobs []event.SnapshotJob
		want     []string
		// wantJob is job 7's state after both decisions.
		wantJob model.JobState
	}{
		{name: "job 7 runs on other nodes in Slurm: the node is deleted, job 7 stays running",
			job: "7", jobState: model.JobRunning,
			snapJobs: []event.SnapshotJob{{ID: "7", State: "RUNNING", Partition: "a3u", Nodes: []string{"flexvm-a3u-2"}, NodeCount: 1}},
			want:     deleted, wantJob: model.JobRunning},
		{name: "job 7 ended in Slurm: the node is deleted, job 7 is not revived",
			job: "7", jobState: model.JobRunning, want: deleted, wantJob: model.JobRunning},
		{name: "a job neither flexslurm nor Slurm knows: the node is deleted, not replaced",
			job: "4242", jobState: model.JobFinished, want: deleted, wantJob: model.JobFinished},
		{name: "job 7 requeued, pending in Slurm: pending again, the node is replaced for it",
			job: "7", jobState: model.JobRunning,
			snapJobs: []event.SnapshotJob{{ID: "7", State: "PENDING", Partition: "a3u", NodeCount: 1}},
			want: []string{"PutJob:7/pending", "DeleteVMs:flexvm-a3u-1-g1", "Slurm:reservation_delete:flexvm-a3u-1",
				"PutNode:flexvm-a3u-1/released", "PutNode:flexvm-a3u-1/requested", "PutJob:7/pending",
				"CreateResizeRequest:rr-flexvm-a3u-j7-g2=flexvm-a3u-1-g2"},
			wantJob: model.JobPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			dynRunning(t, st, tc.jobState)
			acts, err := Repair(st, fail("flexvm-a3u-1", 1, tc.job, "requeued", true), t0, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]string{"Slurm:drain:flexvm-a3u-1", "PutNode:flexvm-a3u-1/running/await_drain"}, rkinds(acts)); d != "" {
				t.Fatalf("the FAIL (-want +got):\n%s", d)
			}
			Apply(st, acts)
			if j := st.Jobs["7"]; j.State != tc.jobState {
				t.Fatalf("the hook's job state changed job 7's record: %s, want %s", j.State, tc.jobState)
			}
			got, err := Snapshot(st, confirmSnapshot(t0.Add(time.Second), drained1, tc.snapJobs...), t0.Add(2*time.Second), Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, rkinds(got)); d != "" {
				t.Errorf("the confirming snapshot (-want +got):\n%s", d)
			}
			Apply(st, got)
			if j := st.Jobs["7"]; j.State != tc.wantJob {
				t.Errorf("job 7 is %s, want %s", j.State, tc.wantJob)
			}
		})
	}
}
