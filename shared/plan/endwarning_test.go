package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// TestWarnBeforeEnd pins when the jobs on a node are sent the end signal:
// once per generation, on the first pass within Policy.EndWarning of its
// VM's end; never without the policy, before the warning, after the end,
// or for a node that does not run.
func TestWarnBeforeEnd(t *testing.T) {
	end := t0.Add(7 * 24 * time.Hour)
	warn := Policy{EndWarning: 10 * time.Minute, RecreateAfterTermination: true}
	signal := "Slurm:signal:flexvm-a3u-0"
	tests := []struct {
		name    string
		pol     Policy
		now     time.Time
		prepare func(st *model.State)
		want    []string
	}{
		{name: "no warning configured", pol: Policy{RecreateAfterTermination: true}, now: end.Add(-5 * time.Minute)},
		{name: "before the warning", pol: warn, now: end.Add(-12 * time.Minute)},
		{name: "within the warning: signalled once", pol: warn, now: end.Add(-9 * time.Minute),
			want: []string{signal, "PutNode:flexvm-a3u-0/running"}},
		{name: "already warned in this generation", pol: warn, now: end.Add(-5 * time.Minute),
			prepare: func(st *model.State) { st.Nodes["flexvm-a3u-0"].EndWarned = st.Nodes["flexvm-a3u-0"].Generation }},
		{name: "warned in an earlier generation only", pol: warn, now: end.Add(-5 * time.Minute),
			prepare: func(st *model.State) { st.Nodes["flexvm-a3u-0"].EndWarned = st.Nodes["flexvm-a3u-0"].Generation - 1 },
			want:    []string{signal, "PutNode:flexvm-a3u-0/running"}},
		{name: "past the end", pol: warn, now: end.Add(time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			running(st, "flexvm-a3u-0", end)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			vms := []VM{runningVM("0", end)}
			got := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: vms}}}, tc.now, tc.pol)
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			for _, a := range got {
				switch a := a.(type) {
				case SlurmCommand:
					if a.Signal != "USR1" || a.ID == "" {
						t.Errorf("signal command %+v: want USR1 (the default) and an id", a)
					}
				case PutNode:
					if a.Node.EndWarned != a.Node.Generation {
						t.Errorf("node record EndWarned %d, want generation %d", a.Node.EndWarned, a.Node.Generation)
					}
				}
			}
			// The next pass sends nothing again.
			Apply(st, got)
			again := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: vms}}}, tc.now.Add(time.Minute), tc.pol)
			for _, a := range again {
				if c, ok := a.(SlurmCommand); ok && c.Command == event.SlurmSignal {
					t.Errorf("signalled again on the next pass: %+v", c)
				}
			}
		})
	}
}

// TestWarnOfRepair: a repair that starts on a node sends its running jobs
// the end signal with the drain, once per generation, when a warning is
// configured; never otherwise.
func TestWarnOfRepair(t *testing.T) {
	for _, tc := range []struct {
		name string
		pol  Policy
		want bool
	}{
		{"warning configured", Policy{EndWarning: 10 * time.Minute}, true},
		{"no warning", Policy{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			running(st, "flexvm-a3u-0", t0.Add(7*24*time.Hour))
			gen := st.Nodes["flexvm-a3u-0"].Generation
			got, err := Repair(st, fail("flexvm-a3u-0", gen, "7", "RUNNING", false), t0, tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			var signals int
			for _, a := range got {
				if c, ok := a.(SlurmCommand); ok && c.Command == event.SlurmSignal {
					signals++
					if c.Signal != "USR1" || len(c.Nodes) != 1 || c.Nodes[0] != "flexvm-a3u-0" {
						t.Errorf("signal %+v", c)
					}
				}
				if p, ok := a.(PutNode); ok && tc.want && p.Node.Name == "flexvm-a3u-0" && p.Node.EndWarned != gen {
					t.Errorf("record EndWarned %d, want %d", p.Node.EndWarned, gen)
				}
			}
			if (signals == 1) != tc.want || signals > 1 {
				t.Errorf("%d signal commands in %v, want %v", signals, kinds(got), tc.want)
			}
			// Another hook reporting the same fault sends nothing more.
			Apply(st, got)
			again, err := Repair(st, fail("flexvm-a3u-0", gen, "7", "RUNNING", false), t0.Add(time.Minute), tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range again {
				if c, ok := a.(SlurmCommand); ok && c.Command == event.SlurmSignal {
					t.Errorf("signalled again: %+v", c)
				}
			}
		})
	}
}
