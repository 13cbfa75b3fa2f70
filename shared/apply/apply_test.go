package apply

import (
	"fmt"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
)

// TestEventNoteStaysWithinTheCap: a pass that decides more Slurm commands
// than the note can hold keeps its Compute actions (what a redelivery must
// repeat) and stays within store.MaxEventNoteBytes, instead of failing
// every time it runs.
func TestEventNoteStaysWithinTheCap(t *testing.T) {
	var acts []plan.Action
	for i := 0; i < 2000; i++ {
		acts = append(acts, plan.SlurmCommand{ID: fmt.Sprintf("id-%d", i), Command: "reservation_create",
			Nodes: []string{fmt.Sprintf("flexvm-a3u-%d", i)}, Reservation: fmt.Sprintf("flexslurm-eol-flexvm-a3u-%d", i),
			StartTime: time.Unix(0, 0), DurationSeconds: 3600, Reason: "flexslurm: flexvm-a3u ends at some time (max run duration)"})
	}
	acts = append(acts, plan.CreateResizeRequest{Pool: "a3u", Name: "rr-1", VMs: []string{"flexvm-a3u-1-g1"}, RequestID: "x", Reason: "r"})
	note, err := eventNote(acts)
	if err != nil {
		t.Fatal(err)
	}
	if len(note) > store.MaxEventNoteBytes {
		t.Fatalf("note of %d bytes is above the cap", len(note))
	}
	got, err := plan.DecodeExternal(note)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("kept %d actions, want the one resize request", len(got))
	}
	if empty, _ := eventNote(nil); string(empty) != "[]" {
		t.Errorf("a decision without external actions stores %q, want []", empty)
	}
}

// TestReplayRepairsAHostOnlyWhileItsRepairIsInProgress: a redelivered
// health event asks for its host repair again, and a replayed reconcile
// pass starts the repaired VM again, only while the node is still in that
// repair of that generation.
func TestReplayRepairsAHostOnlyWhileItsRepairIsInProgress(t *testing.T) {
	repair := plan.ReportHostAsFaulty{Pool: "a3u", Node: "flexvm-a3u-0", Generation: 1, VM: "flexvm-a3u-0-g1",
		Behavior: plan.FaultBehavior, RequestID: "r", Reason: "r"}
	start := plan.StartVM{Pool: "a3u", Node: "flexvm-a3u-0", Generation: 1, VM: "flexvm-a3u-0-g1", RequestID: "s", Reason: "r"}
	drain := plan.SlurmCommand{ID: "d", Command: "drain", Nodes: []string{"flexvm-a3u-0"}, Reason: "r"}
	for _, tc := range []struct {
		name string
		node model.Node
		want int
	}{
		{"in host repair", model.Node{Generation: 1, VMName: "flexvm-a3u-0-g1", Repair: model.RepairHost}, 3},
		{"repaired", model.Node{Generation: 1, VMName: "flexvm-a3u-0-g1", HostRepaired: 1}, 1},
		{"replaced", model.Node{Generation: 2, VMName: "flexvm-a3u-0-g2", Phase: model.PhaseRequested}, 1},
		{"awaiting another drain", model.Node{Generation: 1, VMName: "flexvm-a3u-0-g1", Repair: model.RepairAwaitDrain}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := model.NewState()
			n := tc.node
			n.Name, n.Pool = "flexvm-a3u-0", "a3u"
			if n.Phase == "" {
				n.Phase = model.PhaseRunning
			}
			st.Nodes[n.Name] = &n
			got := Replay(st, []plan.Action{drain, repair, start}, true)
			if len(got) != tc.want {
				t.Errorf("replayed %v, want %d actions", got, tc.want)
			}
		})
	}
}
