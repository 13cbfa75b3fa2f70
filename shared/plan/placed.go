package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
)

// A requeued job placed elsewhere leaves nothing to buy. When a node of a
// multi-node job fails its prolog check, Slurm requeues the job and may
// place it on other nodes; the node's replacement, requested for the job
// (repair.go: the job waits for it), would then come for a node no job
// runs on. From the moment the job's new allocation is known — its
// job.pending or job.started naming its nodes, or a Slurm snapshot newer
// than the job's record showing it alive on nodes — every node still
// waiting on capacity requested for that job alone (queuedOnlyFor: dynamic,
// requested for the job) that is not among those nodes is released: its
// queued request is cancelled while it costs nothing. Its MIG is left to
// the next pass, which keeps a VM the request made meanwhile for a node the
// job (or another pending job) uses, and deletes the rest with the MIG
// (adopt.go). Nodes the job keeps that wait on another request are left as
// they are, and so is a static node's replacement (it serves whatever the
// job does).

// leaveBehind releases the nodes of job j's pool requested for j alone that
// Slurm's allocation alloc (the job's nodes, as Slurm placed it now) does
// not name.
func (b *builder) leaveBehind(j model.Job, alloc []string, source string) {
	if len(alloc) == 0 {
		return
	}
	pool, ok := b.st.Pools[j.Pool]
	if !ok {
		return
	}
	for _, n := range b.poolNodes(j.Pool) {
		if !queuedOnlyFor(n, j.ID) || slices.Contains(alloc, n.Name) {
			continue
		}
		cur := *b.st.Nodes[n.Name] // as an earlier release in this loop left it
		if cur.Phase != model.PhaseRequested {
			continue
		}
		// The request is cancelled whole, its MIG left to the next pass: a
		// VM it made for a node the job keeps serves the job (adopt.go).
		b.releaseQueuedCapacity(pool, cur, fmt.Sprintf("job %s is placed on %s (%s), not on %s: its capacity for %s is not wanted",
			j.ID, strings.Join(alloc, ","), source, cur.Name, cur.Name))
	}
}

// cancelLeftBehind applies leaveBehind to every pending or running job
// that a Slurm snapshot newer than its record shows alive on nodes.
func (b *builder) cancelLeftBehind(slurm *model.SlurmView) {
	if slurm == nil {
		return
	}
	for _, j := range b.st.SortedJobs() {
		if !j.State.Active() {
			continue
		}
		sj, found, newer := slurmJobFact(slurm, j, j.ID)
		if !newer || !found || !sj.State.Alive() || len(sj.Nodes) == 0 {
			continue
		}
		b.leaveBehind(*j, sj.Nodes, fmt.Sprintf("Slurm snapshot of %s", slurm.TakenAt.Format(time.RFC3339)))
	}
}

// leftBehindOutside reports whether job j's record names a node that the
// event's nodes do not: a job.pending so placed may leave capacity
// requested for that node behind (leaveBehind), which only a decision
// holding the pool's nodes can release (narrowRefusal).
func leftBehindOutside(j *model.Job, nodes []string) (string, bool) {
	if j == nil {
		return "", false
	}
	for _, n := range j.Nodes {
		if !slices.Contains(nodes, n) {
			return n, true
		}
	}
	return "", false
}
