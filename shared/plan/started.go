package plan

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// A newer report beats an older snapshot for release decisions too. Slurm
// gives an idle node a new job without asking flexslurm (no ResumeProgram,
// so no job.pending): the only news of it is PrologSlurmctld's
// job.started. Until a Slurm snapshot taken after that report arrives, the
// stored snapshot still shows the node idle — and past the idle timeout
// the reconciler would release it: its VM deleted and the node powered
// down, the job requeued. So every job.started is recorded on the nodes it
// names (model.Node.StartedJob, StartedAt), whether or not flexslurm holds
// a record of the job, and that record speaks over older views of the
// node: nodeRecordedAt (sources.go: a snapshot taken before it gives the
// node no Slurm class, so the table neither releases nor powers it down),
// startedSince (a node.suspend reported before it is not acted on),
// idleRestarts (the node's idle time counts again from after the job), and
// orphanRunsJob (a VM no record names that may run the job is not deleted
// as an orphan).

// noteStarted records a job.started report on the nodes of this cluster
// it names that have had a VM (whatever their phase: an old generation's
// VM may still run as the node, orphanRunsJob). A report whose job
// flexslurm holds as ended is not
// recorded (its caller returns first).
func (b *builder) noteStarted(ev *event.Job) {
	for _, name := range ev.Nodes {
		cl, _, _, ok := naming.ParseNodeName(name)
		if !ok || cl != b.cluster {
			continue
		}
		cur, ok := b.st.Nodes[name]
		if !ok || cur.Generation == 0 {
			continue // no VM of the node was ever asked for
		}
		n := *cur
		n.StartedJob, n.StartedAt = ev.JobID, b.now
		b.putNode(n, fmt.Sprintf("job %s started on %s (PrologSlurmctld): Slurm snapshots taken before now say nothing of whether it is idle", ev.JobID, name))
	}
}

// idleRestarts restarts the count of a node's idle time when a job.started
// naming it was recorded after the count began: the node ran a job since,
// however briefly, and a snapshot that shows it idle again shows the idle
// time after that job, not before it. It reports whether it changed node.
func idleRestarts(node *model.Node, now time.Time) bool {
	if node.IdleSince.IsZero() || !startedSince(*node, node.IdleSince) {
		return false
	}
	node.IdleSince = now
	return true
}
