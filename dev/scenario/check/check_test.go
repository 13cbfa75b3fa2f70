package check

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/scenario/slurmmodel"
)

var t0 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// withCommands is a Checker of a run in which flexslurm published cmds.
func withCommands(cmds []slurmmodel.Command) *Checker {
	return New(Run{Start: t0, Commands: func() []slurmmodel.Command { return cmds }})
}

func TestForeignReservationCheck(t *testing.T) {
	r := withCommands([]slurmmodel.Command{
		{Command: "reservation_create", Raw: map[string]any{"command": "reservation_create", "reservation": "flexslurm-eol-flexvm-a3u-0", "start_time": "2026-12-07T00:00:00Z"}},
		{Command: "reservation_delete", Raw: map[string]any{"command": "reservation_delete", "reservation": "maint-gpu-swap"}},
		{Command: "update_reservation", Raw: map[string]any{"command": "update_reservation", "name": "maint-gpu-swap"}},
		{Command: "drain", Raw: map[string]any{"command": "drain", "nodes": []any{"flexvm-a3u-0"}, "reason": "maint-gpu-swap"}},
	})
	got := r.foreignReservations("flexslurm-")
	if len(got) != 2 || !strings.Contains(got[0], "reservation_delete") || !strings.Contains(got[1], "update_reservation") {
		t.Errorf("violations = %q; want the reservation_delete and update_reservation of maint-gpu-swap", got)
	}
}

// TestForeignReservationCheckIsIncremental: scanning the commands as they
// come gives what a scan of all of them gives, after every new command.
func TestForeignReservationCheckIsIncremental(t *testing.T) {
	all := []slurmmodel.Command{
		{Command: "reservation_create", Raw: map[string]any{"command": "reservation_create", "reservation": "flexslurm-eol-flexvm-a3u-0"}},
		{Command: "reservation_delete", Raw: map[string]any{"command": "reservation_delete", "reservation": "maint-gpu-swap"}},
		{Command: "drain", Raw: map[string]any{"command": "drain", "nodes": []any{"flexvm-a3u-0"}, "reason": "maint"}},
		{Command: "update_reservation", Raw: map[string]any{"command": "update_reservation", "name": "maint-gpu-swap"}},
	}
	var cmds []slurmmodel.Command
	inc := New(Run{Start: t0, Commands: func() []slurmmodel.Command { return cmds }})
	for i := range all {
		cmds = all[:i+1]
		got := inc.foreignReservations("flexslurm-")
		want := withCommands(all[:i+1]).foreignReservations("flexslurm-")
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

func TestMaxPerHour(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	n, start := maxPerHour([]time.Time{at(0), at(10), at(59), at(61), at(62), at(63), at(120)})
	if n != 5 || !start.Equal(at(10)) {
		t.Errorf("maxPerHour = %d from %v, want 5 from %v", n, start, at(10))
	}
}
