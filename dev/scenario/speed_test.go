package scenario

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
	reused, fresh := run(RunOptions{Trace: true}), run(RunOptions{Trace: true, NoReuse: true})
	if d := cmp.Diff(fresh, reused); d != "" {
		t.Errorf("reusing reads changes the run (-fresh +reused):\n%s", d)
	}
	if len(reused.Results) == 0 || reused.Stats.Deliveries == 0 {
		t.Errorf("nothing was checked or delivered: %d results, %+v", len(reused.Results), reused.Stats)
	}
}
