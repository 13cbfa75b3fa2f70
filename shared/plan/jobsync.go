package plan

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
)

// recordStartedJobs records as running the pending jobs that a fresh Slurm
// snapshot shows RUNNING. With power saving, PrologSlurmctld (job.started)
// runs when Slurm allocates nodes, before ResumeProgram reports the job
// pending (job.pending) and long before the nodes are up: no event says
// when the job really starts, so Slurm's view does. A snapshot older than
// the job record's last change says nothing about it (a requeue reported
// since).
func (b *builder) recordStartedJobs(slurm *model.SlurmView) {
	if slurm == nil {
		return
	}
	for _, sj := range slurm.Jobs {
		j, ok := b.st.Jobs[sj.ID]
		if !ok || !sj.State.Running() || j.State != model.JobPending || Newest(j.UpdatedAt, slurm) != SourceSlurm {
			continue
		}
		job := *j
		job.State = model.JobRunning
		if len(sj.Nodes) > 0 {
			job.Nodes = append([]string(nil), sj.Nodes...)
		}
		b.putJob(job, fmt.Sprintf("reconciler: Slurm shows job %s running (snapshot of %s)", sj.ID, slurm.TakenAt.Format(time.RFC3339)))
	}
}
