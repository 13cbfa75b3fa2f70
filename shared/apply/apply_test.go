package apply

import (
	"fmt"
	"testing"
	"time"

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
