package scenario

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestForeignReservationCheckIsIncremental: scanning the commands as they
// come gives what a scan of all of them gives, after every new command.
func TestForeignReservationCheckIsIncremental(t *testing.T) {
	all := []slurmCommandRecord{
		{Command: "reservation_create", Raw: map[string]any{"command": "reservation_create", "reservation": "flexslurm-eol-flexvm-a3u-0"}},
		{Command: "reservation_delete", Raw: map[string]any{"command": "reservation_delete", "reservation": "maint-gpu-swap"}},
		{Command: "drain", Raw: map[string]any{"command": "drain", "nodes": []any{"flexvm-a3u-0"}, "reason": "maint"}},
		{Command: "update_reservation", Raw: map[string]any{"command": "update_reservation", "name": "maint-gpu-swap"}},
	}
	inc := &runner{start: DefaultStart}
	for i := range all {
		inc.cmds = all[:i+1]
		got := inc.foreignReservations("flexslurm-")
		want := (&runner{start: DefaultStart, cmds: all[:i+1]}).foreignReservations("flexslurm-")
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("after %d commands (-full scan +incremental):\n%s", i+1, d)
		}
		if again := inc.foreignReservations("flexslurm-"); !cmp.Equal(got, again) {
			t.Fatalf("a second check with no new command gives %q, want %q", again, got)
		}
	}
	if got := inc.foreignReservations("maint-"); len(got) != 1 {
		t.Errorf("another prefix: %q, want the one reservation not named maint-", got)
	}
	if got := inc.foreignReservations("flexslurm-"); len(got) != 2 {
		t.Errorf("back to flexslurm-: %q, want 2 violations", got)
	}
}
