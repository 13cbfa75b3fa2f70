package scenario

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/scenario/slurmmodel"
)

// TestForeignReservationCheckIsIncremental: scanning the commands as they
// come gives what a scan of all of them gives, after every new command.
func TestForeignReservationCheckIsIncremental(t *testing.T) {
	all := []slurmmodel.Command{
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

// TestStateReuseChangesNothing: checks sharing one read of the store until
// the next write give the same timeline and results as reading it afresh
// for every check.
func TestStateReuseChangesNothing(t *testing.T) {
	f, err := Parse([]byte(base + `
random_faults: {seed: 11, duplicate: 0.5, delay: 0.5, crash: 0.3}
invariants: {one_vm_per_node: true, no_unrecorded_vm: {within: 30m}, static_at_min: {within: 30m}}
steps:
  - at: 1m
    job: {type: pending, id: "7", partition: a3u, count: 2}
  - at: 2h
    expire: {node: flexvm-a3u-1}
  - at: 4h
    tick: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	run := func(o RunOptions) Report {
		rep, err := RunFile(context.Background(), f, o)
		if err != nil {
			t.Fatal(err)
		}
		rep.Wall = 0
		return rep
	}
	reused, fresh := run(RunOptions{Trace: true}), run(RunOptions{Trace: true, noStateReuse: true})
	if d := cmp.Diff(fresh, reused); d != "" {
		t.Errorf("reusing reads changes the run (-fresh +reused):\n%s", d)
	}
	if len(reused.Results) == 0 || reused.Stats.Deliveries == 0 {
		t.Errorf("nothing was checked or delivered: %d results, %+v", len(reused.Results), reused.Stats)
	}
}
