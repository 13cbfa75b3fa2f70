package plan

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

func TestNewestSource(t *testing.T) {
	at := func(d time.Duration) *model.SlurmView { return &model.SlurmView{TakenAt: t0.Add(d)} }
	for _, tc := range []struct {
		name       string
		recordedAt time.Time
		view       *model.SlurmView
		want       Source
	}{
		{"no snapshot: the record", t0, nil, SourceRecord},
		{"snapshot taken after the record's change: Slurm", t0, at(time.Second), SourceSlurm},
		{"snapshot taken before the record's change: the record", t0, at(-time.Second), SourceRecord},
		{"same instant: the record (its change may not be in the snapshot)", t0, at(0), SourceRecord},
		{"a fact flexslurm never recorded: any snapshot", time.Time{}, at(-time.Hour), SourceSlurm},
	} {
		if got := Newest(tc.recordedAt, tc.view); got != tc.want {
			t.Errorf("%s: Newest = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestNodeSlurmClassTakesTheNewestSource(t *testing.T) {
	idleDown := slurmNode("flexvm-a3u-1", "", "idle", "CLOUD", "POWERED_DOWN")
	for _, tc := range []struct {
		name  string
		node  model.Node
		taken time.Duration // relative to t0
		want  SlurmClass
	}{
		{"running, snapshot taken after its VM was asked for", model.Node{Phase: model.PhaseRunning, RequestedAt: t0}, time.Minute, SlurmPoweredDown},
		{"running, snapshot taken before its VM was asked for: says nothing of that VM", model.Node{Phase: model.PhaseRunning, RequestedAt: t0}, -time.Minute, SlurmUnknown},
		{"running, record changed (idle tracking) after the snapshot: Slurm still speaks", model.Node{Phase: model.PhaseRunning, RequestedAt: t0, UpdatedAt: t0.Add(time.Hour)}, time.Minute, SlurmPoweredDown},
		{"requested, snapshot taken before the request", model.Node{Phase: model.PhaseRequested, RequestedAt: t0, UpdatedAt: t0}, -time.Second, SlurmUnknown},
		{"released after the snapshot: says nothing of the node as it is now", model.Node{Phase: model.PhaseReleased, RequestedAt: t0, UpdatedAt: t0.Add(2 * time.Minute)}, time.Minute, SlurmUnknown},
		{"released before the snapshot", model.Node{Phase: model.PhaseReleased, RequestedAt: t0, UpdatedAt: t0.Add(2 * time.Minute)}, 3 * time.Minute, SlurmPoweredDown},
		{"never requested: any snapshot", model.Node{Phase: model.PhaseReleased}, -time.Hour, SlurmPoweredDown},
	} {
		tc.node.Name = "flexvm-a3u-1"
		v := &model.SlurmView{TakenAt: t0.Add(tc.taken), Nodes: map[string]model.SlurmNode{"flexvm-a3u-1": idleDown}}
		if got := nodeSlurmClass(v, tc.node); got != tc.want {
			t.Errorf("%s: class %s, want %s", tc.name, got, tc.want)
		}
	}
	if got := nodeSlurmClass(nil, model.Node{Name: "flexvm-a3u-1"}); got != SlurmUnknown {
		t.Errorf("no snapshot: class %s, want unknown", got)
	}
}

func TestSlurmJobFactTakesTheNewestSource(t *testing.T) {
	v := &model.SlurmView{TakenAt: t0, Jobs: []model.SlurmJob{{ID: "8", State: "CONFIGURING", Nodes: []string{"flexvm-a3u-2"}}}}
	for _, tc := range []struct {
		name         string
		rec          *model.Job
		id           string
		found, newer bool
	}{
		{"no record: the snapshot speaks", nil, "8", true, true},
		{"ended after the snapshot was taken: the record wins (never revived)", &model.Job{ID: "8", State: model.JobCancelled, UpdatedAt: t0.Add(time.Minute)}, "8", false, false},
		{"changed before the snapshot was taken: the snapshot speaks", &model.Job{ID: "8", State: model.JobPending, UpdatedAt: t0.Add(-time.Minute)}, "8", true, true},
		{"a newer snapshot that no longer lists the job", &model.Job{ID: "9", State: model.JobPending, UpdatedAt: t0.Add(-time.Minute)}, "9", false, true},
	} {
		_, found, newer := slurmJobFact(v, tc.rec, tc.id)
		if found != tc.found || newer != tc.newer {
			t.Errorf("%s: found=%v newer=%v, want found=%v newer=%v", tc.name, found, newer, tc.found, tc.newer)
		}
	}
}

func TestKeptForOnlyWhileTheJobCanUseTheNode(t *testing.T) {
	node := model.Node{Name: "flexvm-a3u-3", JobID: "101", IdleSince: t0.Add(-20 * time.Minute)}
	pending := func(nodes ...string) *model.Job {
		return &model.Job{ID: "101", State: model.JobPending, Nodes: nodes, UpdatedAt: t0.Add(-time.Hour)}
	}
	snap := func(jobs ...model.SlurmJob) *model.SlurmView {
		return &model.SlurmView{TakenAt: t0.Add(-time.Minute), Jobs: jobs}
	}
	for _, tc := range []struct {
		name string
		job  *model.Job
		view *model.SlurmView
		want bool
	}{
		{"pending for it, no snapshot newer than the record", pending("flexvm-a3u-0", "flexvm-a3u-3"), nil, true},
		{"provisioned for it, not placed yet, no newer snapshot", pending(), nil, true},
		{"pending on other nodes in flexslurm's record", pending("flexvm-a3u-0", "flexvm-a3u-1"), nil, false},
		{"running elsewhere in flexslurm's record", &model.Job{ID: "101", State: model.JobRunning, Nodes: []string{"flexvm-a3u-0", "flexvm-a3u-2"}}, nil, false},
		{"Slurm allocated it this node (configuring)", pending("flexvm-a3u-0", "flexvm-a3u-3"),
			snap(model.SlurmJob{ID: "101", State: "CONFIGURING", Nodes: []string{"flexvm-a3u-0", "flexvm-a3u-3"}}), true},
		{"Slurm runs it on other nodes (its start report not processed yet)", pending("flexvm-a3u-0", "flexvm-a3u-3"),
			snap(model.SlurmJob{ID: "101", State: "RUNNING", Nodes: []string{"flexvm-a3u-0", "flexvm-a3u-2"}}), false},
		{"Slurm allocated it other nodes", pending("flexvm-a3u-0", "flexvm-a3u-3"),
			snap(model.SlurmJob{ID: "101", State: "CONFIGURING", Nodes: []string{"flexvm-a3u-0", "flexvm-a3u-2"}}), false},
		{"Slurm holds it pending without placing it here (requeued, waiting for resources)", pending("flexvm-a3u-0", "flexvm-a3u-3"),
			snap(model.SlurmJob{ID: "101", State: "PENDING", Reason: "Resources"}), false},
		{"Slurm no longer shows it", pending("flexvm-a3u-0", "flexvm-a3u-3"), snap(), false},
		{"a snapshot older than the record says nothing", &model.Job{ID: "101", State: model.JobPending, Nodes: []string{"flexvm-a3u-3"}, UpdatedAt: t0},
			snap(model.SlurmJob{ID: "101", State: "RUNNING", Nodes: []string{"flexvm-a3u-0"}}), true},
	} {
		b := newBuilder(model.NewState(), t0, Policy{})
		b.pol = Policy{}.withDefaults()
		b.view = tc.view
		if got, why := b.keptFor(tc.job, node); got != tc.want {
			t.Errorf("%s: kept=%v (%s), want %v", tc.name, got, why, tc.want)
		}
	}
}

func TestSnapshotKeepsTheNewest(t *testing.T) {
	snap := func(at time.Time, job string) *event.SlurmSnapshot {
		return &event.SlurmSnapshot{Header: event.Header{Version: 1, Type: event.TypeSlurmSnapshot, Cluster: "flexvm"}, TakenAt: at,
			Nodes: []event.SnapshotNode{{Name: "flexvm-a3u-1", Node: slurmNode("flexvm-a3u-1", "", "idle", "CLOUD")}},
			Jobs:  []event.SnapshotJob{{ID: job, State: "PENDING"}}}
	}
	for _, tc := range []struct {
		name    string
		stored  *model.SlurmView
		in      *event.SlurmSnapshot
		wantJob string // the stored snapshot's job afterwards
	}{
		{"first snapshot is stored", nil, snap(t0, "1"), "1"},
		{"a newer one replaces it", &model.SlurmView{TakenAt: t0, Jobs: []model.SlurmJob{{ID: "0"}}}, snap(t0.Add(time.Second), "1"), "1"},
		{"an older one, delivered late, is ignored", &model.SlurmView{TakenAt: t0, Jobs: []model.SlurmJob{{ID: "0"}}}, snap(t0.Add(-time.Second), "1"), "0"},
		{"one of the same instant (a redelivery) is ignored", &model.SlurmView{TakenAt: t0, Jobs: []model.SlurmJob{{ID: "0"}}}, snap(t0, "1"), "0"},
	} {
		st, _ := applied(t)
		st.Slurm = tc.stored
		acts, err := Snapshot(st, tc.in, t0.Add(time.Minute), Policy{})
		if err != nil || len(acts) != 0 {
			t.Fatalf("%s: Snapshot = %v, %v; want no action, no error", tc.name, acts, err)
		}
		if got := st.Slurm.Jobs[0].ID; got != tc.wantJob {
			t.Errorf("%s: stored snapshot has job %s, want %s", tc.name, got, tc.wantJob)
		}
	}
	st, _ := applied(t)
	if _, err := Snapshot(st, snap(time.Time{}, "1"), t0, Policy{}); !errors.Is(err, ErrRejected) {
		t.Errorf("snapshot without taken_at: err = %v, want ErrRejected", err)
	}
	if _, err := Snapshot(model.NewState(), snap(t0, "1"), t0, Policy{}); !errors.Is(err, ErrRejected) {
		t.Errorf("snapshot for an unknown cluster: err = %v, want ErrRejected", err)
	}
}

// A snapshot delivered after flexslurm acted never undoes what flexslurm
// did since it was taken: the VM asked for after it is not deleted, and the
// job cancelled after it is not provisioned again.
func TestReconcileIgnoresFactsOlderThanTheRecords(t *testing.T) {
	st, _ := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")))
	n := st.Nodes["flexvm-a3u-1"]
	n.Phase, n.VMID, n.Registered, n.TerminationTime = model.PhaseRunning, "42", true, t0.Add(week)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2")))
	c, _ := example(t)
	acts, err := Job(st, c, jobEv(event.TypeJobCancelled, "8", 1), t0.Add(3*time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, acts)
	// The active-jobs scope leaves the cancelled job's record out unless the
	// pass loads the snapshot's jobs: here it did.
	st.Slurm = &model.SlurmView{TakenAt: t0.Add(-time.Minute),
		Nodes: map[string]model.SlurmNode{
			"flexvm-a3u-1": slurmNode("flexvm-a3u-1", "", "idle", "CLOUD", "POWERED_DOWN"),
			"flexvm-a3u-2": slurmNode("flexvm-a3u-2", "", "allocated", "CLOUD", "NOT_RESPONDING", "POWERING_UP"),
		},
		Jobs: []model.SlurmJob{{ID: "8", State: "CONFIGURING", Partition: "a3u", Nodes: []string{"flexvm-a3u-2"}, NodeCount: 1}}}
	vm := VM{Name: "flexvm-a3u-1-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{vm}}}, JobRecordsFor: st.Slurm.TakenAt}
	got := kinds(Reconcile(st, obs, t0.Add(5*time.Minute), Policy{}))
	for _, a := range got {
		switch a {
		case "DeleteVMs:flexvm-a3u-1-g1", "PutJob:8/pending", "PutNode:flexvm-a3u-2/requested":
			t.Errorf("a snapshot older than the records acted: %v", got)
		}
	}
	// Without the ended job's record loaded for this snapshot, the pass
	// does not take the job for unknown.
	delete(st.Jobs, "8")
	obs.JobRecordsFor = time.Time{}
	st.Slurm.TakenAt = t0.Add(4 * time.Minute)
	got = kinds(Reconcile(st, obs, t0.Add(5*time.Minute), Policy{}))
	if d := cmp.Diff([]string(nil), filter(got, "PutJob:8/pending")); d != "" {
		t.Errorf("a job without a loaded record was provisioned (-want +got):\n%s", d)
	}
}

func filter(got []string, want string) []string {
	var out []string
	for _, g := range got {
		if g == want {
			out = append(out, g)
		}
	}
	return out
}
