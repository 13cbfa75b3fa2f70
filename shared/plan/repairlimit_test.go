package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// repairedAgain fails the static node's current VM at now and has Slurm
// confirm the drain, so the VM is replaced; the new VM then runs.
func repairedAgain(t *testing.T, st *model.State, now time.Time, pol Policy) []Action {
	t.Helper()
	const name = "flexvm-a3u-0"
	gen := st.Nodes[name].Generation
	acts := failAndConfirm(t, st, fail(name, gen, "", "", false), now, pol)
	if got := st.Nodes[name].Generation; got != gen+1 {
		t.Fatalf("after the repair at %s the node is at generation %d, want %d (replaced): %v", now.Sub(t0), got, gen+1, rkinds(acts))
	}
	running(st, name, now.Add(farEnd))
	return acts
}

func vmActions(acts []Action) []string {
	var out []string
	for _, a := range acts {
		switch a.(type) {
		case DeleteVMs, DeleteMIG, CreateResizeRequest, ReportHostAsFaulty, StartVM:
			out = append(out, kinds([]Action{a})...)
		}
	}
	return out
}

// TestRepairLimit: a node repaired RepairNodeLimit times within
// RepairNodeWindow is, at its next failure, left drained for an operator
// with that reason in Slurm, and no VM action — whatever the node reports
// again and however many passes follow — until an operator reports it;
// repairs spaced beyond the window, or with no limit, go on.
func TestRepairLimit(t *testing.T) {
	const name = "flexvm-a3u-0"
	for _, tc := range []struct {
		name    string
		pol     Policy
		spacing time.Duration
		limited bool
	}{
		{name: "three repairs within 24h: the fourth failure is left to an operator", spacing: time.Hour, limited: true},
		{name: "repairs 25h apart: each window counts one", spacing: 25 * time.Hour},
		{name: "a limit of 5: the fourth failure is repaired", pol: Policy{RepairNodeLimit: 5}, spacing: time.Hour},
		{name: "no limit (negative)", pol: Policy{RepairNodeLimit: -1}, spacing: time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			running(st, name, t0.Add(farEnd))
			now := t0
			for i := 1; i <= 3; i++ {
				repairedAgain(t, st, now, tc.pol)
				if n := st.Nodes[name]; n.RepairCount != i && tc.spacing < 24*time.Hour {
					t.Fatalf("after repair %d: RepairCount %d", i, n.RepairCount)
				}
				now = now.Add(tc.spacing)
			}
			gen := st.Nodes[name].Generation
			acts, err := Repair(st, fail(name, gen, "", "", false), now, tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.limited {
				if n := lastNode(t, acts, name); n.Repair == model.RepairLimit {
					t.Fatalf("left to an operator: %v", rkinds(acts))
				}
				Apply(st, acts)
				more, _ := Snapshot(st, confirmSnapshot(now.Add(time.Second), map[string]string{name: "IDLE+CLOUD+DRAIN"}), now.Add(2*time.Second), tc.pol)
				if len(vmActions(more)) == 0 {
					t.Fatalf("the fourth failure was not repaired: %v", rkinds(more))
				}
				return
			}
			want := []string{"Slurm:drain:" + name, "PutNode:" + name + "/running/limit", "Alert:a3u", "Metric:repair_limit"}
			if d := cmp.Diff(want, rkinds(acts)); d != "" {
				t.Fatalf("fourth failure (-want +got):\n%s", d)
			}
			drain, _ := find[SlurmCommand](acts)
			wantReason := "repair limit reached: 3 repairs within 24h, left drained for an operator: health check failed: GPU 3: 2 uncorrectable ECC errors (flexvm-a3u-0-g4)"
			if drain.Reason != wantReason {
				t.Errorf("Slurm's reason:\n got %q\nwant %q", drain.Reason, wantReason)
			}
			Apply(st, acts)
			// Slurm confirms the drain; passes follow; the node reports again.
			snap := confirmSnapshot(now.Add(time.Second), map[string]string{name: "IDLE+CLOUD+DRAIN"})
			snap.Nodes[0].Reason = event.RenderReason(event.SlurmDrain, wantReason)
			more, err := Snapshot(st, snap, now.Add(2*time.Second), tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			Apply(st, more)
			for i := 1; i <= 3; i++ {
				rec := Reconcile(st, listed(st), now.Add(time.Duration(i)*5*time.Minute), tc.pol)
				more = append(more, rec...)
				Apply(st, rec)
			}
			again, err := Repair(st, fail(name, gen, "", "", false), now.Add(20*time.Minute), tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			more = append(more, again...)
			if v := vmActions(more); len(v) > 0 {
				t.Fatalf("VM actions on a node left to an operator: %v", v)
			}
			for _, a := range more {
				if c, ok := a.(SlurmCommand); ok && c.Command == event.SlurmResume {
					t.Fatalf("the operator's drain was lifted: %v", rkinds(more))
				}
			}
			if n := st.Nodes[name]; n.Repair != model.RepairLimit || n.Generation != gen {
				t.Fatalf("node %s at generation %d, want limit at %d", n.Repair, n.Generation, gen)
			}
			// The operator reports it: repaired, at once.
			op, err := RepairByOperator(st, fail(name, gen, "", "", false), now.Add(30*time.Minute), tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			Apply(st, op)
			conf, _ := Snapshot(st, confirmSnapshot(now.Add(31*time.Minute), map[string]string{name: "IDLE+CLOUD+DRAIN"}), now.Add(31*time.Minute+time.Second), tc.pol)
			if v := vmActions(append(op, conf...)); !slices.ContainsFunc(v, func(s string) bool { return strings.HasPrefix(s, "CreateResizeRequest:") }) {
				t.Fatalf("the operator's report did not replace the VM: %v", rkinds(append(op, conf...)))
			}
		})
	}
}

// TestRepairLimitHoldsBlockedRepairs: a repair blocked by the pool's
// budget that starts once the budget frees is held to the node's limit too.
func TestRepairLimitHoldsBlockedRepairs(t *testing.T) {
	const name = "flexvm-a3u-0"
	st, _ := applied(t)
	running(st, name, t0.Add(farEnd))
	n := st.Nodes[name]
	n.Repair, n.RepairSince, n.RepairReason = model.RepairBlocked, t0, "health check failed: GPU 3: 2 uncorrectable ECC errors"
	n.RepairCount, n.RepairCountSince = 3, t0.Add(-time.Hour)
	acts := Reconcile(st, listed(st), t0.Add(5*time.Minute), Policy{})
	if got := lastNode(t, acts, name); got.Repair != model.RepairLimit {
		t.Fatalf("blocked repair at the limit: %s (%v)", got.Repair, rkinds(acts))
	}
	if v := vmActions(acts); len(v) > 0 {
		t.Fatalf("VM actions: %v", v)
	}
}

// TestRepairLimitResumedByOperator: an operator who resumes a node left at
// its repair limit takes it back: a snapshot taken well after the drain
// that shows no drain ends the state (the count stays); one taken just
// after the drain was asked for proves nothing.
func TestRepairLimitResumedByOperator(t *testing.T) {
	const name = "flexvm-a3u-0"
	for _, tc := range []struct {
		name    string
		taken   time.Duration // after the node was left to an operator
		words   string
		resumed bool
	}{
		{name: "resumed: no drain 10m later", taken: 10 * time.Minute, words: "IDLE+CLOUD", resumed: true},
		{name: "still drained", taken: 10 * time.Minute, words: "IDLE+CLOUD+DRAIN"},
		{name: "a snapshot taken before the drain applied", taken: 10 * time.Second, words: "IDLE+CLOUD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			running(st, name, t0.Add(farEnd))
			n := st.Nodes[name]
			n.Repair, n.RepairSince, n.RepairReason = model.RepairLimit, t0, "health check failed: GPU 3: 2 uncorrectable ECC errors"
			n.RepairCount, n.RepairCountSince = 3, t0.Add(-time.Hour)
			st.Slurm = &model.SlurmView{TakenAt: t0.Add(tc.taken), Nodes: map[string]model.SlurmNode{
				name: slurmNode(name, "", strings.Split(tc.words, "+")...)}}
			Apply(st, Reconcile(st, listed(st), t0.Add(tc.taken+time.Minute), Policy{}))
			got := st.Nodes[name]
			if resumed := got.Repair == model.RepairNone; resumed != tc.resumed {
				t.Fatalf("repair %q after the pass, want resumed %v", got.Repair, tc.resumed)
			}
			if got.RepairCount != 3 {
				t.Errorf("count %d, want it kept", got.RepairCount)
			}
		})
	}
}
