package plan

import (
	"fmt"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// Resume timeouts. When a node's VM is not up within ResumeTimeout, Slurm
// 22.05 logs "node N not resumed by ResumeTimeout(T) - marking down and
// power_save", runs ResumeFailProgram, requeues the node's job and leaves
// the node DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING with reason "ResumeTimeout
// reached" (down~); `scontrol update nodename=N state=resume` returns it to
// idle~, from where Slurm can power it up again (docs/slurm.md). Slurm then
// places the requeued job anew, on whichever nodes are free.
//
// So, on a resume failure (the node.resume_failed report, or a snapshot
// newer than the node's request showing it down~ while flexslurm still
// waits for its VM), flexslurm at once:
//   - releases what it asked for the node (its queued request is
//     cancelled) — Slurm no longer allocates it, so its capacity would
//     arrive unused; a VM that came meanwhile, for it or for another node
//     of the same request, is kept when Slurm's next allocation gives the
//     job its node, and deleted otherwise (adopt.go);
//   - resumes the node in Slurm, so that it is schedulable (idle~) again
//     without waiting for a reconcile pass;
//   - forgets the nodes the node's job had been allocated: the job, which
//     Slurm requeued, waits for Slurm's next allocation (job.pending with
//     its nodes, or a newer snapshot showing them) and no capacity is bought
//     for it on flexslurm's guess meanwhile (model.Job.AwaitingSlurm);
//   - keeps a static node's queued capacity (a static node always has a
//     VM; a new request would wait again from the start), and replaces a
//     static node's VM that ran without the node coming up.

// resumeFailed carries out a resume failure of node n (see above).
func (b *builder) resumeFailed(pool *model.Pool, n model.Node, at time.Time, why string) {
	static := n.Kind == model.NodeStatic
	// A static node keeps its queued capacity (it always has a VM, and a
	// new request would start waiting again); its VM that ran without its
	// node coming up is replaced.
	renew := static && n.Phase == model.PhaseRunning
	if n.Phase.Serving() && (!static || renew) {
		released := why + ": VM released"
		if keepsArrivals(pool, n) {
			released = why + ": its queued capacity cancelled"
		}
		b.releaseQuietly(pool, n, released)
		n = *b.st.Nodes[n.Name]
	}
	stamp := at.UTC().Format(time.RFC3339)
	b.slurm(event.SlurmResume, []string{n.Name}, "", why+": node returned to service, powered down", n.VMName, "resume-failed", stamp)
	for _, j := range b.st.SortedJobs() {
		if !j.State.Active() || !(slices.Contains(j.Nodes, n.Name) || (j.ID == n.JobID && len(j.Nodes) == 0 && j.State == model.JobPending)) {
			continue
		}
		job := *j
		job.State = model.JobPending
		job.Nodes = nil
		job.AwaitingSlurm = true
		b.putJob(job, fmt.Sprintf("%s: Slurm requeued job %s; it waits for Slurm's next allocation", why, j.ID))
	}
	if renew || (static && !n.Phase.Serving()) {
		b.provisionNode(pool, n, "", why+": static node requested again")
	}
}

// awaitingAllocation is what the reconciler knows of a job waiting for
// Slurm's next allocation after a resume failure: the nodes a snapshot
// newer than the job's record shows Slurm allocated it (ok), or none yet.
func (b *builder) awaitingAllocation(j model.Job) (model.Job, bool) {
	sj, found, newer := slurmJobFact(b.view, &j, j.ID)
	if !newer || !found || !sj.State.Unstarted() || len(sj.Nodes) == 0 {
		return j, false
	}
	j.Nodes = append([]string(nil), sj.Nodes...)
	j.AwaitingSlurm = false
	return j, true
}
