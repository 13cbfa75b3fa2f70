package plan

import (
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// TestReconcileRecordsJobsSlurmRuns: a job reported pending by
// ResumeProgram (its PrologSlurmctld report came first, while its nodes were
// powering up) is recorded running once a snapshot taken after its last
// change shows it RUNNING; an older snapshot, or one showing it still
// CONFIGURING, changes nothing.
func TestReconcileRecordsJobsSlurmRuns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		state    slurmstate.JobState
		takenAt  time.Duration // after the job's last change
		wantRuns bool
	}{
		{"RUNNING in a newer snapshot", "RUNNING", time.Minute, true},
		{"CONFIGURING: nodes still booting", "CONFIGURING", time.Minute, false},
		{"RUNNING in a snapshot older than the job's last change", "RUNNING", -time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")))
			running(st, "flexvm-a3u-0", t0.Add(week))
			running(st, "flexvm-a3u-1", t0.Add(week))
			st.Jobs["7"].UpdatedAt = t0
			st.Slurm = slurmView(t0.Add(tc.takenAt), map[string]string{"flexvm-a3u-0": "IDLE+CLOUD", "flexvm-a3u-1": "ALLOCATED+CLOUD"})
			st.Slurm.Jobs = []model.SlurmJob{{ID: "7", State: tc.state, Nodes: []string{"flexvm-a3u-1"}}}
			now := t0.Add(2 * time.Minute)
			vms := []VM{
				{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)},
				{Name: "flexvm-a3u-1-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)},
			}
			acts := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: vms}}}, now, Policy{})
			Apply(st, acts)
			if got := st.Jobs["7"].State == model.JobRunning; got != tc.wantRuns {
				t.Errorf("job 7 is %s after the pass (actions %v); want running: %v", st.Jobs["7"].State, kinds(acts), tc.wantRuns)
			}
		})
	}
}
