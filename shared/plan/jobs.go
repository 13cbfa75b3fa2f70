package plan

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// Job decides what a job lifecycle report requires. c is the cluster spec
// (partitions → node pools). Reports may arrive twice, late or out of order:
// a report older than the job's last change is ignored, a pending job with
// capacity in flight gets nothing new, and every resize request is named
// from (cluster, pool, job, generation).
func Job(st *model.State, c *spec.Cluster, ev *event.Job, now time.Time, pol Policy) ([]Action, error) {
	b := newBuilder(st, now, pol)
	b.cluster = c.ID
	old, known := b.st.Jobs[ev.JobID]
	if known && staleJobReport(old, ev) {
		return nil, nil // a late report: the job has moved on since, or it is an earlier job's with the same id
	}
	switch ev.Type {
	case event.TypeJobPending:
		return b.jobPending(c, ev, old, known)
	case event.TypeJobStarted:
		if !known {
			// Never provisioned by flexslurm (a node already up, or a
			// static node): no job record, but its nodes run it now
			// (started.go).
			b.noteStarted(ev)
			return b.out, nil
		}
		j := *old
		if j.State == model.JobFinished || j.State == model.JobCancelled {
			return nil, nil
		}
		b.noteStarted(ev)
		j.State = model.JobRunning
		if len(ev.Nodes) > 0 {
			j.Nodes = ev.Nodes
		}
		j.ReportedAt = laterOf(j.ReportedAt, ev.ReportedAt)
		b.putJob(j, "job started")
		b.leaveBehind(j, ev.Nodes, "its job.started") // placed.go
		b.tellJobs(j.ID)                              // it runs: flexslurm's comment is cleared
		return b.out, nil
	case event.TypeJobFinished, event.TypeJobCancelled:
		if !known {
			// A tombstone, so that a pending report delivered late (after
			// this one) does not provision for a job that has ended.
			st := model.JobFinished
			if ev.Type == event.TypeJobCancelled {
				st = model.JobCancelled
			}
			b.putJob(model.Job{ID: ev.JobID, Partition: ev.Partition, State: st, ReportedAt: ev.ReportedAt}, "job ended before flexslurm saw it pending")
			return b.out, nil
		}
		j := *old
		if j.State == model.JobFinished || j.State == model.JobCancelled {
			return nil, nil
		}
		j.State = model.JobFinished
		why := "job finished"
		if ev.Type == event.TypeJobCancelled {
			j.State, why = model.JobCancelled, "job cancelled"
		}
		j.ReportedAt = laterOf(j.ReportedAt, ev.ReportedAt)
		b.putJob(j, why)
		// Capacity still queued for this job is no longer wanted: cancel
		// exactly its own request and free its nodes (a static node's
		// replacement stays queued: queuedOnlyFor). A job that finished on
		// nodes Slurm showed up ran there: its capacity came, though the
		// reconciler may not have seen the VMs yet (this report overtook
		// job.started, or came before the pass that lists them). Those
		// nodes are kept, as any node that ran a job is, for the next job
		// or until Slurm suspends them idle. A resize request is fulfilled
		// all at once, so a request that made one of them made every VM
		// it names: its other nodes are kept too (cancelling it would end
		// theirs and the kept nodes' generations alike).
		came := map[string]bool{}
		if ev.Type == event.TypeJobFinished && ev.NodesUp {
			for _, name := range ev.Nodes {
				if n, ok := b.st.Nodes[name]; ok && n.Phase == model.PhaseRequested && provisionedFor(n, &j) && n.ResizeRequest != "" {
					came[n.ResizeRequest] = true
				}
			}
		}
		if pool, ok := b.st.Pools[j.Pool]; ok {
			for _, name := range j.Nodes {
				if n, ok := b.st.Nodes[name]; ok && queuedOnlyFor(n, j.ID) && provisionedFor(n, &j) && !came[n.ResizeRequest] {
					b.releaseQueuedCapacity(pool, *n, fmt.Sprintf("%s before its capacity arrived", why))
				}
			}
		}
		return b.out, nil
	}
	return nil, rejectf("job event type %q", ev.Type)
}

func (b *builder) jobPending(c *spec.Cluster, ev *event.Job, old *model.Job, known bool) ([]Action, error) {
	var j model.Job
	if known {
		j = *old
		switch j.State {
		case model.JobFinished, model.JobCancelled:
			switch {
			case ev.Requeued:
				j.Requeues++
			case ev.ReportedAt.IsZero():
				// Without the report's time, a late report of the
				// job that ended cannot be told from a new job.
				return nil, nil
			default:
				// Reported after the recorded job ended, and not a
				// requeue: a new job with the same id (Slurm's ids
				// repeat). staleJobReport turned away the late pending
				// reports of the job that ended.
				j = newIncarnation(old, ev, b.now)
			}
		case model.JobRunning:
			j.Requeues++
		}
		j.State = model.JobPending
	} else {
		j = model.Job{ID: ev.JobID, Partition: ev.Partition, State: model.JobPending, SubmittedAt: b.now}
	}
	j.ReportedAt = laterOf(j.ReportedAt, ev.ReportedAt)
	if ev.NodeCount > 0 {
		j.NodesWanted = ev.NodeCount
	}
	// 1. The pool: from the nodes Slurm allocated, else from the partition.
	if len(ev.Nodes) > 0 {
		pool := ""
		for _, name := range ev.Nodes {
			cl, p, idx, ok := naming.ParseNodeName(name)
			if !ok || cl != c.ID {
				return nil, rejectf("node %q is not a node of cluster %s", name, c.ID)
			}
			sp, ok := c.Pool(p)
			if !ok || !sp.IsFlexStart() {
				return nil, rejectf("node %q: pool %q is not a flex-start pool of cluster %s", name, p, c.ID)
			}
			if idx >= spec.MaxPoolNodes {
				return nil, rejectf("node %q: index %d is beyond any pool's size", name, idx)
			}
			if pool != "" && pool != p {
				return nil, rejectf("job %s spans pools %s and %s; one job is served by one pool", j.ID, pool, p)
			}
			pool = p
		}
		j.Pool = pool
		j.Nodes = append([]string(nil), ev.Nodes...)
		j.AwaitingSlurm = false // Slurm's allocation is known again
		// Capacity requested for the job on a node it left (placed.go).
		b.leaveBehind(j, j.Nodes, "its job.pending")
	} else if j.Pool == "" {
		pool, err := b.choosePool(c, ev.Partition, j.NodesWanted)
		if err != nil {
			return nil, err
		}
		j.Pool = pool
	}
	if _, ok := b.st.Pools[j.Pool]; !ok {
		return nil, rejectf("pool %s of job %s has no record: the cluster spec was not applied", j.Pool, j.ID)
	}
	if ev.TimeLimitSeconds > 0 {
		j.TimeLimit = time.Duration(ev.TimeLimitSeconds) * time.Second
	}
	// A job the pool cannot serve (JobFit: its time limit, its size, a
	// node beyond max_node_count) is not provisioned; provisionJob says
	// why, in Slurm too.
	b.key = ev.ReportedAt.UTC().Format(time.RFC3339Nano)
	why := "job pending"
	if ev.Requeued || j.Requeues > 0 {
		why = "job requeued and pending again"
	}
	b.provisionJob(j, why)
	b.tellJobs(j.ID) // jobcomment.go
	return b.out, nil
}

// choosePool picks the first flex-start pool of the partition (spec order)
// that can hold the job.
func (b *builder) choosePool(c *spec.Cluster, partition string, want int) (string, error) {
	var pools []string
	for _, p := range c.Slurm.Partitions {
		if p.ID == partition {
			for _, id := range p.NodePoolIDs {
				if sp, ok := c.Pool(id); ok && sp.IsFlexStart() {
					pools = append(pools, id)
				}
			}
		}
	}
	if len(pools) == 0 {
		return "", rejectf("partition %q has no flex-start node pool in cluster %s", partition, c.ID)
	}
	for _, id := range pools {
		if p, ok := b.st.Pools[id]; ok {
			if picked, _ := b.freeSlots(p, want); picked != nil {
				return id, nil
			}
		}
	}
	return pools[0], nil
}

// newIncarnation is the record of a new Slurm job that took the id of the
// job rec recorded, which has ended: a pending job like any other, the
// next incarnation of the id, whose reports count only after rec's end.
// It keeps rec's generation counter, so its resize requests and MIGs are
// named apart from the earlier job's (some of which may still exist).
func newIncarnation(rec *model.Job, ev *event.Job, now time.Time) model.Job {
	end := rec.ReportedAt
	if end.IsZero() {
		end = rec.UpdatedAt // a record stored before ReportedAt existed
	}
	return model.Job{ID: rec.ID, Partition: ev.Partition, State: model.JobPending, SubmittedAt: now,
		Generation: rec.Generation, Incarnation: rec.Incarnation + 1, PreviousEnd: end}
}

// provisionedFor reports whether node n was provisioned for the job j
// records, not for an earlier job with the same id: its JobID is j's and
// its generation was requested since j's record began.
func provisionedFor(n *model.Node, j *model.Job) bool {
	return n.JobID == j.ID && (j.SubmittedAt.IsZero() || !n.RequestedAt.Before(j.SubmittedAt))
}
