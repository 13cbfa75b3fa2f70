package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// startedState is a dynamic node flexvm-a3u-1 whose VM runs, whose job 7
// ended, and which Slurm showed idle since t0 (IdleSince), past the idle
// timeout at t0+11m.
func startedState(t *testing.T) *model.State {
	t.Helper()
	st, _ := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
	running(st, "flexvm-a3u-0", t0.Add(week))
	running(st, "flexvm-a3u-1", t0.Add(week))
	st.Jobs["7"].State = model.JobFinished
	st.Nodes["flexvm-a3u-1"].IdleSince = t0
	return st
}

func startedObs() Observed {
	return Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{
		{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)},
		{Name: "flexvm-a3u-1-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)},
	}}}}
}

// releases reports whether the actions delete node's VM or power it down.
func releases(actions []Action, node, vm string) bool {
	for _, a := range actions {
		switch a := a.(type) {
		case DeleteVMs:
			if slices.Contains(a.VMs, vm) {
				return true
			}
		case DeleteMIG:
			if slices.Contains(a.VMs, vm) {
				return true
			}
		case SlurmCommand:
			if (a.Command == event.SlurmPowerDown || a.Command == event.SlurmPowerDownForce) && slices.Contains(a.Nodes, node) {
				return true
			}
		}
	}
	return false
}

func TestJobStartedIsRecordedOnItsNodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(st *model.State)
		ev      *event.Job
		want    string // the node's StartedJob after the decision
	}{
		{"a job flexslurm never heard of (the node was up: no job.pending)", nil, jobEv(event.TypeJobStarted, "9", 1, "flexvm-a3u-1"), "9"},
		{"a job flexslurm provisioned", func(st *model.State) { st.Jobs["7"].State = model.JobPending }, jobEv(event.TypeJobStarted, "7", 1, "flexvm-a3u-1"), "7"},
		{"a job flexslurm holds as ended: a late report, not recorded", nil, jobEv(event.TypeJobStarted, "7", 1, "flexvm-a3u-1"), ""},
		{"a node whose VM is being deleted: recorded (an old VM may run as the node)", func(st *model.State) { st.Nodes["flexvm-a3u-1"].Phase = model.PhaseDeleting }, jobEv(event.TypeJobStarted, "9", 1, "flexvm-a3u-1"), "9"},
		{"a slot that never had a VM: not written", nil, jobEv(event.TypeJobStarted, "9", 1, "flexvm-a3u-2"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := startedState(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			c, _ := example(t)
			now := t0.Add(10 * time.Minute)
			acts, err := Job(st, c, tc.ev, now, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			Apply(st, acts)
			n, ok := st.Nodes[tc.ev.Nodes[0]]
			if !ok {
				if tc.want != "" {
					t.Fatalf("no record of %s", tc.ev.Nodes[0])
				}
				return
			}
			if n.StartedJob != tc.want {
				t.Fatalf("StartedJob = %q, want %q", n.StartedJob, tc.want)
			}
			if tc.want != "" && !n.StartedAt.Equal(now) {
				t.Errorf("StartedAt = %s, want the decision's time %s", n.StartedAt, now)
			}
			for _, a := range acts {
				if c, ok := a.(CreateResizeRequest); ok {
					t.Errorf("job.started requested capacity: %s", c.Name)
				}
			}
		})
	}
}

// A node idle past the idle timeout in the stored snapshot is released
// only when no job.started recorded after that snapshot was taken names
// it; and its idle time starts again after such a job.
func TestJobStartedNewerThanTheSnapshotKeepsTheNode(t *testing.T) {
	idle := map[string]string{"flexvm-a3u-0": "idle+CLOUD", "flexvm-a3u-1": "idle+CLOUD"}
	for _, tc := range []struct {
		name      string
		startedAt time.Duration // after t0; 0: no job.started
		taken     time.Duration // when the snapshot was taken, after t0
		release   bool
		idleSince time.Duration // the node's IdleSince after the pass, after t0 (-1: unchanged t0)
	}{
		{"no job started: released past the idle timeout", 0, 9 * time.Minute, true, -1},
		{"a job started after the snapshot was taken: kept, its idle time untouched until Slurm speaks again", 10 * time.Minute, 9 * time.Minute, false, -1},
		{"same instant: the report wins (ties go to the record)", 9 * time.Minute, 9 * time.Minute, false, -1},
		{"a snapshot taken after the start shows the node idle again: idle counts from now", 5 * time.Minute, 9 * time.Minute, false, 11 * time.Minute},
		{"a job that started before the node went idle changes nothing", -time.Minute, 9 * time.Minute, true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := startedState(t)
			if tc.startedAt != 0 {
				n := st.Nodes["flexvm-a3u-1"]
				n.StartedJob, n.StartedAt = "9", t0.Add(tc.startedAt)
			}
			st.Slurm = slurmView(t0.Add(tc.taken), idle)
			now := t0.Add(11 * time.Minute)
			acts := Reconcile(st, startedObs(), now, Policy{})
			if got := releases(acts, "flexvm-a3u-1", "flexvm-a3u-1-g1"); got != tc.release {
				t.Fatalf("released = %v, want %v: %v", got, tc.release, kinds(acts))
			}
			if tc.release {
				return
			}
			Apply(st, acts)
			want := t0
			if tc.idleSince >= 0 {
				want = t0.Add(tc.idleSince)
			}
			if got := st.Nodes["flexvm-a3u-1"].IdleSince; !got.Equal(want) {
				t.Errorf("IdleSince = %s, want %s", got, want)
			}
		})
	}
}

func TestSuspendReportedBeforeAJobStartedKeepsTheNode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		startedAt time.Duration // after t0; 0: none
		release   bool
		reported  time.Duration // the suspend's report, after t0 (when the node's VM was requested)
	}{
		{"no job started since: released", 0, true, time.Second},
		{"a job reported started after the suspend was reported: kept", 2 * time.Minute, false, time.Second},
		{"a job that started before the suspend: released", -time.Minute, true, time.Second},
		// The decision that powered the node down may have requested its
		// next VM at the same instant: ties go to the record.
		{"reported at the instant the VM was requested: kept", 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := startedState(t)
			if tc.startedAt != 0 {
				n := st.Nodes["flexvm-a3u-1"]
				n.StartedJob, n.StartedAt = "9", t0.Add(tc.startedAt)
			}
			ev := nodeEv(event.TypeNodeSuspend, "flexvm-a3u-1")
			ev.ReportedAt = t0.Add(tc.reported)
			acts, err := NodePower(st, ev, t0.Add(5*time.Minute), Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if got := releases(acts, "flexvm-a3u-1", "flexvm-a3u-1-g1") || slices.Contains(kinds(acts), "PutNode:flexvm-a3u-1/deleting"); got != tc.release {
				t.Errorf("released = %v, want %v: %v", got, tc.release, kinds(acts))
			}
		})
	}
}

func TestNodeSlurmClassYieldsToANewerJobStarted(t *testing.T) {
	v := &model.SlurmView{TakenAt: t0, Nodes: map[string]model.SlurmNode{"flexvm-a3u-1": slurmNode("flexvm-a3u-1", "", "idle", "CLOUD")}}
	n := model.Node{Name: "flexvm-a3u-1", Phase: model.PhaseRunning, RequestedAt: t0.Add(-time.Hour), StartedJob: "9"}
	for _, tc := range []struct {
		at   time.Duration
		want SlurmClass
	}{{time.Second, SlurmUnknown}, {0, SlurmUnknown}, {-time.Second, SlurmIdle}} {
		n.StartedAt = t0.Add(tc.at)
		if got := nodeSlurmClass(v, n); got != tc.want {
			t.Errorf("job.started recorded at snapshot%+v: class %s, want %s", tc.at, got, tc.want)
		}
	}
}

// A VM no record names (the node's record moved on to generation 2) is an
// orphan, deleted past the orphan grace — unless a job.started naming its
// node was recorded after it was created and no newer snapshot shows the
// node without a job: the old VM runs the job as the node.
func TestOrphanThatMayRunAStartedJobIsKept(t *testing.T) {
	created := t0.Add(-time.Hour)
	for _, tc := range []struct {
		name      string
		startedAt time.Duration // after t0; 0: no job.started
		taken     time.Duration // snapshot, after t0
		state     string        // flexvm-a3u-1 in the snapshot
		deleted   bool
	}{
		{"no job started on the node: deleted", 0, time.Minute, "idle+CLOUD", true},
		{"a job started after the VM came, no snapshot since: kept", 2 * time.Minute, time.Minute, "idle+CLOUD", false},
		{"a newer snapshot shows the node busy: kept", 2 * time.Minute, 3 * time.Minute, "allocated+CLOUD", false},
		{"a newer snapshot shows the node idle: deleted", 2 * time.Minute, 3 * time.Minute, "idle+CLOUD", true},
		{"the job started before the VM was created: deleted", -2 * time.Hour, time.Minute, "idle+CLOUD", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := startedState(t)
			n := st.Nodes["flexvm-a3u-1"]
			// Generation 2 requested; generation 1's VM still runs, named by no record.
			n.Generation, n.Phase, n.VMName, n.ResizeRequest = 2, model.PhaseRequested, "flexvm-a3u-1-g2", "rr-flexvm-a3u-1-g2"
			n.MIG, n.RequestedAt, n.UpdatedAt, n.IdleSince = "fs-flexvm-a3u-rg2", t0.Add(-10*time.Minute), t0.Add(-10*time.Minute), time.Time{}
			if tc.startedAt != 0 {
				n.StartedJob, n.StartedAt = "9", t0.Add(tc.startedAt)
			}
			st.Slurm = slurmView(t0.Add(tc.taken), map[string]string{"flexvm-a3u-0": "idle+CLOUD", "flexvm-a3u-1": tc.state})
			obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{
				{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: created, TerminationTime: t0.Add(week)},
				{Name: "flexvm-a3u-1-g1", Status: "RUNNING", Created: created, TerminationTime: t0.Add(week), MIG: "fs-flexvm-a3u-rg1"},
			}, MIGsListed: true, MIGs: []ObservedMIG{{Name: "fs-flexvm-a3u-rg1", Request: "rr-flexvm-a3u-j7-g1", RequestsListed: true, Age: time.Hour}}}}}
			acts := Reconcile(st, obs, t0.Add(4*time.Minute), Policy{})
			orphaned := false
			for _, a := range acts {
				if d, ok := a.(DeleteVMs); ok && slices.Contains(d.VMs, "flexvm-a3u-1-g1") {
					orphaned = true
				}
				if d, ok := a.(DeleteMIG); ok && (slices.Contains(d.VMs, "flexvm-a3u-1-g1") || strings.Contains(d.Reason, "flexvm-a3u-1-g1")) {
					orphaned = true
				}
			}
			if orphaned != tc.deleted {
				t.Errorf("flexvm-a3u-1-g1 deleted = %v, want %v: %v", orphaned, tc.deleted, kinds(acts))
			}
		})
	}
}
