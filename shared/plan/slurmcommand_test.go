package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// TestSlurmCommandSentOnce follows one node through reconcile passes: a
// Slurm command is sent once, however fast the clock runs, and sent again
// (as the next attempt, with a new id) only once SlurmCommandMisses
// snapshots taken after the send still show it not carried out.
func TestSlurmCommandSentOnce(t *testing.T) {
	const node = "flexvm-a3u-2"
	up := "IDLE+CLOUD+NOT_RESPONDING"       // Slurm thinks the node (no VM) is up: power_down_force
	down := "IDLE+CLOUD+POWERED_DOWN"       // carried out
	goingDown := "IDLE+CLOUD+POWERING_DOWN" // carried out, in progress
	downTimeout := "DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING"
	id := func(cmd string, attempt int) string {
		return fmt.Sprintf("%s %s %s", cmd, node, naming.CommandID("flexvm", cmd, node, "", "g0", fmt.Sprintf("attempt-%d", attempt)))
	}
	steps := []struct {
		name     string
		snapshot time.Duration // after t0
		slurm    string
		now      time.Duration // after t0
		want     []string      // the commands sent: "command node id"
		wantSent model.SentCommand
		stored   bool // the node record was written
	}{
		{name: "first send", snapshot: time.Second, slurm: up, now: time.Minute,
			want: []string{id("power_down_force", 1)}, stored: true,
			wantSent: model.SentCommand{Command: "power_down_force", Attempt: 1, SentAt: t0.Add(time.Minute)}},
		{name: "hours later on the same snapshot: nothing (the id once changed with the hour)", snapshot: time.Second, slurm: up, now: 2*time.Hour + 5*time.Minute,
			wantSent: model.SentCommand{Command: "power_down_force", Attempt: 1, SentAt: t0.Add(time.Minute)}},
		{name: "a snapshot taken after the send still shows it: counted once", snapshot: 3 * time.Hour, slurm: up, now: 3*time.Hour + time.Second, stored: true,
			wantSent: model.SentCommand{Command: "power_down_force", Attempt: 1, SentAt: t0.Add(time.Minute), Misses: 1, LastMiss: t0.Add(3 * time.Hour)}},
		{name: "the same snapshot again: not counted twice", snapshot: 3 * time.Hour, slurm: up, now: 3*time.Hour + 2*time.Minute,
			wantSent: model.SentCommand{Command: "power_down_force", Attempt: 1, SentAt: t0.Add(time.Minute), Misses: 1, LastMiss: t0.Add(3 * time.Hour)}},
		{name: "a second newer snapshot still shows it: sent again as attempt 2", snapshot: 3*time.Hour + 30*time.Second, slurm: up, now: 3*time.Hour + 3*time.Minute,
			want: []string{id("power_down_force", 2)}, stored: true,
			wantSent: model.SentCommand{Command: "power_down_force", Attempt: 2, SentAt: t0.Add(3*time.Hour + 3*time.Minute)}},
		{name: "a snapshot older than the new send: nothing", snapshot: 3*time.Hour + time.Minute, slurm: up, now: 3*time.Hour + 4*time.Minute,
			wantSent: model.SentCommand{Command: "power_down_force", Attempt: 2, SentAt: t0.Add(3*time.Hour + 3*time.Minute)}},
		{name: "carried out (powering down): recorded done", snapshot: 3*time.Hour + 5*time.Minute, slurm: goingDown, now: 3*time.Hour + 6*time.Minute, stored: true,
			wantSent: model.SentCommand{Command: "power_down_force", Attempt: 2, SentAt: t0.Add(3*time.Hour + 3*time.Minute), Done: true}},
		{name: "powered down: nothing more", snapshot: 3*time.Hour + 7*time.Minute, slurm: down, now: 3*time.Hour + 8*time.Minute,
			wantSent: model.SentCommand{Command: "power_down_force", Attempt: 2, SentAt: t0.Add(3*time.Hour + 3*time.Minute), Done: true}},
		{name: "needed again later: a new attempt at once (a reused id would be skipped as a redelivery)", snapshot: 5 * time.Hour, slurm: up, now: 5*time.Hour + time.Second,
			want: []string{id("power_down_force", 3)}, stored: true,
			wantSent: model.SentCommand{Command: "power_down_force", Attempt: 3, SentAt: t0.Add(5*time.Hour + time.Second)}},
		{name: "another command while one is outstanding: sent at once as the next attempt", snapshot: 5*time.Hour + time.Minute, slurm: downTimeout, now: 5*time.Hour + 2*time.Minute,
			want: []string{id("resume", 4)}, stored: true,
			wantSent: model.SentCommand{Command: "resume", Attempt: 4, SentAt: t0.Add(5*time.Hour + 2*time.Minute)}},
		{name: "no snapshot: nothing", snapshot: -time.Hour, slurm: downTimeout, now: 9 * time.Hour,
			wantSent: model.SentCommand{Command: "resume", Attempt: 4, SentAt: t0.Add(5*time.Hour + 2*time.Minute)}},
	}
	st, _ := applied(t)
	running(st, "flexvm-a3u-0", t0.Add(week))
	vm0 := VM{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
	for _, s := range steps {
		st.Slurm = slurmView(t0.Add(s.snapshot), map[string]string{"flexvm-a3u-0": "IDLE+CLOUD", node: s.slurm})
		if s.snapshot < 0 {
			st.Slurm = nil
		}
		obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{vm0}}}}
		if st.Slurm != nil {
			obs.JobRecordsFor = st.Slurm.TakenAt
		}
		got := Reconcile(st, obs, t0.Add(s.now), Policy{})
		Apply(st, got)
		var sent []string
		stored := false
		for _, a := range got {
			switch a := a.(type) {
			case SlurmCommand:
				sent = append(sent, fmt.Sprintf("%s %v %s", a.Command, a.Nodes[0], a.ID))
			case PutNode:
				stored = stored || a.Node.Name == node
			}
		}
		if d := cmp.Diff(s.want, sent); d != "" {
			t.Errorf("%s: commands (-want +got):\n%s", s.name, d)
		}
		if stored != s.stored {
			t.Errorf("%s: node stored = %v, want %v", s.name, stored, s.stored)
		}
		var rec model.SentCommand
		if n, ok := st.Nodes[node]; ok {
			rec = n.SlurmCommand
		}
		if d := cmp.Diff(s.wantSent, rec); d != "" {
			t.Errorf("%s: SlurmCommand (-want +got):\n%s", s.name, d)
		}
	}
}
