package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// TestReplayNoteStaysWithinTheCap: a pass that decides more Slurm commands
// than the note can hold keeps its Compute actions (what a redelivery must
// repeat) within the limit, instead of failing every time it runs; if even
// those do not fit, no note (the redelivery re-drives from the state).
func TestReplayNoteStaysWithinTheCap(t *testing.T) {
	const limit = 256 << 10
	var slurm []Action
	for i := 0; i < 2000; i++ {
		slurm = append(slurm, SlurmCommand{ID: fmt.Sprintf("id-%d", i), Command: "reservation_create",
			Nodes: []string{fmt.Sprintf("flexvm-a3u-%d", i)}, Reservation: fmt.Sprintf("flexslurm-eol-flexvm-a3u-%d", i),
			StartTime: time.Unix(0, 0), DurationSeconds: 3600, Reason: "flexslurm: flexvm-a3u ends at some time (max run duration)"})
	}
	create := CreateResizeRequest{Pool: "a3u", Name: "rr-1", VMs: []string{"flexvm-a3u-1-g1"}, RequestID: "x", Reason: "r"}
	put := PutNode{Node: model.Node{Name: "flexvm-a3u-1"}, Reason: "r"}
	tests := []struct {
		name    string
		acts    []Action
		limit   int
		want    []Action
		noteNil bool
	}{
		{name: "no external action: an empty list, nothing to replay", acts: []Action{put}, limit: limit, want: []Action{}},
		{name: "all fit", acts: []Action{put, slurm[0], create}, limit: limit, want: []Action{slurm[0], create}},
		{name: "too many Slurm commands: the Compute actions alone", acts: append(append([]Action{}, slurm...), create), limit: limit, want: []Action{create}},
		{name: "not even the Compute actions: no note", acts: []Action{slurm[0], create}, limit: 10, noteNil: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			note, err := ReplayNote(tc.acts, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(note) > tc.limit {
				t.Fatalf("note of %d bytes is above the limit %d", len(note), tc.limit)
			}
			if tc.noteNil {
				if note != nil {
					t.Fatalf("note %q, want none", note)
				}
				return
			}
			got, err := DecodeExternal(note)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				got = []Action{}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("stored actions (-want +got):\n%s", d)
			}
		})
	}
}

// TestReplay: a redelivered event repeats its stored actions that still
// apply: a resize request only while a node waits on it, a host repair and
// the start after it only while that node is in that host repair.
func TestReplay(t *testing.T) {
	rr := "rr-flexvm-a3u-1-g1"
	create := CreateResizeRequest{Pool: "a3u", MIG: naming.RequestMIG("flexvm", "a3u", rr), Name: rr, VMs: []string{"flexvm-a3u-1-g1"}, RequestID: "c", Reason: "r"}
	repair := ReportHostAsFaulty{Pool: "a3u", Node: "flexvm-a3u-0", Generation: 1, VM: "flexvm-a3u-0-g1",
		Behavior: FaultBehavior, RequestID: "r", Reason: "r"}
	start := StartVM{Pool: "a3u", Node: "flexvm-a3u-0", Generation: 1, VM: "flexvm-a3u-0-g1", RequestID: "s", Reason: "r"}
	drain := SlurmCommand{ID: "d", Command: "drain", Nodes: []string{"flexvm-a3u-0"}, Reason: "r"}
	del := DeleteVMs{Pool: "a3u", VMs: []string{"flexvm-a3u-2-g1"}, RequestID: "x", Reason: "r"}
	// A request stored by the layout before one MIG per request (no MIG)
	// is never made again: the reconciler ends its generation.
	legacy := create
	legacy.MIG = ""
	stored := []Action{drain, create, legacy, repair, start, del}
	node0 := func(n model.Node) model.Node {
		n.Name, n.Pool, n.Index = "flexvm-a3u-0", "a3u", 0
		if n.Phase == "" {
			n.Phase = model.PhaseRunning
		}
		return n
	}
	waiting := model.Node{Name: "flexvm-a3u-1", Pool: "a3u", Index: 1, Generation: 1, Phase: model.PhaseRequested,
		VMName: "flexvm-a3u-1-g1", ResizeRequest: rr}
	tests := []struct {
		name  string
		nodes []model.Node
		want  []Action
	}{
		{"in host repair, request waited on", []model.Node{node0(model.Node{Generation: 1, VMName: "flexvm-a3u-0-g1", Repair: model.RepairHost}), waiting},
			[]Action{drain, create, repair, start, del}},
		{"host repaired", []model.Node{node0(model.Node{Generation: 1, VMName: "flexvm-a3u-0-g1", HostRepaired: 1}), waiting},
			[]Action{drain, create, del}},
		{"replaced: another generation", []model.Node{node0(model.Node{Generation: 2, VMName: "flexvm-a3u-0-g2", Phase: model.PhaseRequested, Repair: model.RepairHost})},
			[]Action{drain, del}},
		{"awaiting another drain", []model.Node{node0(model.Node{Generation: 1, VMName: "flexvm-a3u-0-g1", Repair: model.RepairAwaitDrain})},
			[]Action{drain, del}},
		{"node gone", nil, []Action{drain, del}},
		{"the request's node was released", []model.Node{func() model.Node { n := waiting; n.Phase = model.PhaseDeleting; return n }()},
			[]Action{drain, del}},
		{"the node waits on a newer request", []model.Node{func() model.Node {
			n := waiting
			n.Generation, n.VMName, n.ResizeRequest = 2, "flexvm-a3u-1-g2", "rr-flexvm-a3u-1-g2"
			return n
		}()}, []Action{drain, del}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := model.NewState()
			for _, n := range tc.nodes {
				st.Nodes[n.Name] = &n
			}
			if d := cmp.Diff(tc.want, Replay(st, stored, true)); d != "" {
				t.Errorf("replayed (-want +got):\n%s", d)
			}
		})
	}
}

// TestRedrive: without a stored note, a redelivery re-drives every
// in-flight intent of its scope: one resize request per request that nodes
// still wait on, naming each of them, and each deleting node's deletion,
// with the recording decision's request ids; nothing for settled nodes.
func TestRedrive(t *testing.T) {
	st := model.NewState()
	st.Cluster = &model.Cluster{ID: "flexvm", CreatedAt: t0}
	for _, p := range []*model.Pool{
		{ID: "b", Zone: "z", MIG: "fs-flexvm-b", RunDuration: time.Hour},
		{ID: "a3u", Zone: "z", MIG: "fs-flexvm-a3u", RunDuration: 2 * time.Hour},
	} {
		st.Pools[p.ID] = p
	}
	mig := func(pool, rr string) string { return naming.RequestMIG("flexvm", pool, rr) }
	add := func(pool string, i int, phase model.Phase, rr, job string, legacy bool) {
		name := model.NodeName("flexvm", pool, i)
		n := &model.Node{Name: name, Pool: pool, Index: i, Generation: 1, Phase: phase,
			VMName: model.VMName(name, 1), ResizeRequest: rr, JobID: job}
		if rr != "" && !legacy {
			n.MIG = mig(pool, rr)
		}
		st.Nodes[name] = n
	}
	jobRR := naming.JobResizeRequest("flexvm", "a3u", "7", 1)
	add("a3u", 0, model.PhaseRunning, "rr-flexvm-a3u-0-g1", "", false)
	add("a3u", 2, model.PhaseRequested, jobRR, "7", false)
	add("a3u", 1, model.PhaseRequested, jobRR, "7", false)
	add("a3u", 3, model.PhaseDeleting, "rr-flexvm-a3u-3-g1", "", false) // its request's MIG goes with it
	add("a3u", 4, model.PhaseRequested, "", "", false)                  // no request recorded: nothing to re-drive
	add("a3u", 5, model.PhaseReleased, "", "", false)                   //
	add("a3u", 6, model.PhaseDeleting, "rr-flexvm-a3u-6-g1", "", true)  // the earlier layout: by name in the pool's MIG
	add("a3u", 7, model.PhaseRequested, "rr-flexvm-a3u-7-g1", "", true) // the earlier layout: never made again there
	add("b", 0, model.PhaseRequested, "rr-flexvm-b-0-g1", "", false)
	inc := st.Cluster.Incarnation()
	want := []Action{
		CreateResizeRequest{Pool: "a3u", MIG: mig("a3u", jobRR), Name: jobRR, VMs: []string{"flexvm-a3u-1-g1", "flexvm-a3u-2-g1"}, RunDuration: 2 * time.Hour, JobID: "7",
			RequestID: naming.CreateResizeRequestIDFor(inc, mig("a3u", jobRR), jobRR), Reason: "re-driving an in-flight resize request"},
		DeleteMIG{Pool: "a3u", MIG: mig("a3u", "rr-flexvm-a3u-3-g1"), Request: "rr-flexvm-a3u-3-g1", VMs: []string{"flexvm-a3u-3-g1"},
			RequestID: naming.DeleteRequestMIGRequestID("z", mig("a3u", "rr-flexvm-a3u-3-g1"), inc), Reason: "re-driving an in-flight deletion"},
		DeleteVMs{Pool: "a3u", MIG: "fs-flexvm-a3u", VMs: []string{"flexvm-a3u-6-g1"}, RequestID: naming.DeleteInstancesRequestID("fs-flexvm-a3u", "flexvm-a3u-6-g1"),
			Reason: "re-driving an in-flight deletion"},
		CreateResizeRequest{Pool: "b", MIG: mig("b", "rr-flexvm-b-0-g1"), Name: "rr-flexvm-b-0-g1", VMs: []string{"flexvm-b-0-g1"}, RunDuration: time.Hour,
			RequestID: naming.CreateResizeRequestIDFor(inc, mig("b", "rr-flexvm-b-0-g1"), "rr-flexvm-b-0-g1"), Reason: "re-driving an in-flight resize request"},
	}
	if d := cmp.Diff(want, Redrive(st)); d != "" {
		t.Errorf("re-driven (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, Replay(st, nil, false)); d != "" {
		t.Errorf("Replay without a note (-want +got):\n%s", d)
	}
	if got := Replay(st, nil, true); len(got) != 0 {
		t.Errorf("Replay of an empty note re-drove %v, want nothing", got)
	}
}
