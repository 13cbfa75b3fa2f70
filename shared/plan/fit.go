package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// Misfit says why a pool cannot serve a job as Slurm asked for it.
type Misfit struct {
	// Reason is for the job's user and for operators; it names the
	// field and the values that disagree.
	Reason string
	// Placement is true when only Slurm's placement is at fault (nodes
	// beyond the pool's max_node_count, after the pool shrank): once those
	// nodes are powered down Slurm requeues the job and places it again,
	// so the user is not told. Otherwise the job as submitted fits no node
	// of the pool, and the user is told in Slurm (the job's Comment).
	Placement bool
}

// JobFit decides whether pool can serve job j at all — the one decision
// ScaleUp (a job.pending report) and the reconciler (pending jobs, and jobs
// Slurm shows pending that flexslurm never heard of) take before asking
// for capacity, so no path buys a VM the job cannot use. It returns false
// with the reason when:
//
//   - the pool was removed from the cluster spec;
//   - the job's time limit exceeds the pool's max run duration (every VM
//     ends before the job would, and the end-of-life reservations keep
//     Slurm from starting it);
//   - the job asks for more nodes than the pool's max_node_count;
//   - Slurm allocated it a node at or beyond max_node_count (the pool
//     shrank while the job waited: Placement).
func JobFit(pool *model.Pool, j model.Job) (Misfit, bool) {
	if pool == nil {
		return Misfit{Reason: fmt.Sprintf("job %s: its pool %q has no record", j.ID, j.Pool)}, false
	}
	if pool.Removed {
		return Misfit{Reason: fmt.Sprintf("pool %s was removed from the cluster spec", pool.ID)}, false
	}
	if j.TimeLimit > 0 && pool.MaxRunDuration > 0 && j.TimeLimit > pool.MaxRunDuration {
		return Misfit{Reason: fmt.Sprintf("time limit %s exceeds pool %s's max run duration %s (flex_start_max_duration): no node lives long enough; lower the time limit",
			fmtLimit(j.TimeLimit), pool.ID, fmtLimit(pool.MaxRunDuration))}, false
	}
	if j.NodesWanted > pool.MaxNodes {
		return Misfit{Reason: fmt.Sprintf("asks for %d nodes, pool %s has max_node_count %d", j.NodesWanted, pool.ID, pool.MaxNodes)}, false
	}
	var beyond []string
	for _, name := range j.Nodes {
		if _, p, idx, ok := naming.ParseNodeName(name); ok && p == pool.ID && idx >= pool.MaxNodes {
			beyond = append(beyond, name)
		}
	}
	if len(beyond) > 0 {
		return Misfit{Reason: fmt.Sprintf("allocated %s, beyond pool %s's max_node_count %d", strings.Join(beyond, ","), pool.ID, pool.MaxNodes), Placement: true}, false
	}
	return Misfit{}, true
}

// fmtLimit prints a duration as Slurm users write time limits.
func fmtLimit(d time.Duration) string {
	d = d.Round(time.Second)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h, m, s := d/time.Hour, (d%time.Hour)/time.Minute, (d%time.Minute)/time.Second
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, s)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
}

// refuseUnfitJob records that the job's pool cannot serve it and acts on it:
// capacity still queued for the job is cancelled, the nodes Slurm powers
// up for it (none of which has a VM serving) are powered down so Slurm
// requeues the job at once instead of waiting out ResumeTimeout, and — when
// the job as submitted fits no node — its user is told through the job's
// Comment and operators through an alert, once per reason. key makes the
// power-down commands of one decision distinct from an earlier one's (the
// event's report time; the reconciler's hour).
func (b *builder) refuseUnfitJob(pool *model.Pool, j model.Job, m Misfit, key string) {
	changed := j.Unfit != m.Reason
	j.Unfit = m.Reason
	var down []string
	for _, name := range j.Nodes {
		n, ok := b.st.Nodes[name]
		if ok && queuedOnlyFor(n, j.ID) && pool != nil {
			b.releaseNode(pool, *n, fmt.Sprintf("job %s fits no node: %s", j.ID, m.Reason))
			n = b.st.Nodes[name]
		}
		if !ok || !n.Phase.Serving() {
			down = append(down, name)
		}
	}
	if len(down) > 0 && (changed || key != "") {
		if key == "" {
			key = b.now.Truncate(time.Hour).Format(time.RFC3339)
		}
		b.slurm(event.SlurmPowerDownForce, down, "", fmt.Sprintf("job %s: %s", j.ID, m.Reason), "unfit", key)
	}
	if !changed {
		return
	}
	b.putJob(j, "fits no node: "+m.Reason)
	if m.Placement {
		return
	}
	poolID := j.Pool
	if pool != nil {
		poolID = pool.ID
	}
	b.add(Alert{Pool: poolID, Reason: fmt.Sprintf("job %s fits no node: %s", j.ID, m.Reason)})
	// Its user is told in Slurm by the decision's tellJobs (jobcomment.go).
}

// fitAgain clears a job's misfit once its pool can serve it (the spec or
// the job's time limit changed); the decision's tellJobs (jobcomment.go)
// replaces the comment that told its user.
func (b *builder) fitAgain(j *model.Job) {
	if j.Unfit == "" {
		return
	}
	j.Unfit = ""
	b.putJob(*j, "fits its pool again")
}

// jobLimits takes pending jobs' time limits from a Slurm snapshot taken
// after their records last changed: a user who lowers a job's time limit
// (scontrol update jobid=J timelimit=…) makes it fit again, and the same
// pass provisions it.
func (b *builder) jobLimits(slurm *model.SlurmView) {
	if slurm == nil {
		return
	}
	for _, sj := range slurm.Jobs {
		j, ok := b.st.Jobs[sj.ID]
		limit := time.Duration(sj.TimeLimitSeconds) * time.Second
		if !ok || j.State != model.JobPending || limit <= 0 || limit == j.TimeLimit || slurm.TakenAt.Before(j.UpdatedAt) {
			continue
		}
		job := *j
		job.TimeLimit = limit
		b.putJob(job, fmt.Sprintf("Slurm shows job %s's time limit as %s", job.ID, fmtLimit(limit)))
	}
}
