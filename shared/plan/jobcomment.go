package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/text"
)

// WaitKind is why a pending job that flexslurm knows still waits, as its
// user is told in Slurm (the job's Comment; docs/user.md, "Why is my job
// still waiting?").
type WaitKind string

// Wait kinds. WaitNone has nothing to tell: the job runs, its VMs run (Slurm
// boots and starts it), or flexslurm waits on Slurm, not on capacity.
const (
	WaitNone     WaitKind = ""
	WaitCapacity WaitKind = "capacity" // its resize request is queued for Flex-Start capacity
	WaitBackoff  WaitKind = "backoff"  // the pool backs off after a capacity, quota or provisioning error
	WaitBreaker  WaitKind = "breaker"  // the pool's circuit breaker is open after VMs that never registered
	WaitRoom     WaitKind = "room"     // the pool has not enough free nodes below max_node_count
	WaitRefused  WaitKind = "refused"  // the job as submitted fits no node of its pool
)

// JobWait is the typed reason a pending job waits: the facts its comment
// is built from. Comment renders it; no decision reads the text back.
type JobWait struct {
	Kind      WaitKind
	Pool      string
	Partition string
	// WaitCapacity: the zones the job's capacity may land in (the pool's
	// zone, or a multi-zone pool's zones), the resize request it is queued
	// in, and when it was requested.
	Zones   []string
	Request string
	Since   time.Time
	// Shortage is the error Compute reports of that request's latest
	// attempt (model.Shortage.Code, e.g. ZONE_RESOURCE_POOL_EXHAUSTED or
	// QUOTA_EXCEEDED); "" when none.
	Shortage string
	// WaitBackoff, WaitBreaker: when the pool asks Compute again; the
	// backoff's error class (ClassCapacity, ClassQuota, ClassPermanent) and
	// the breaker's count of VMs that never registered.
	Until    time.Time
	Class    string
	Failures int
	// WaitRoom: nodes the job needs, free nodes of the pool, max_node_count.
	Want, Free, Max int
	// WaitRefused: why no node of the pool can serve the job (JobFit).
	Misfit string
}

// Comment is the job's comment for its user, without flexslurm's prefix
// (event.RenderReason adds it): one line, in Slurm's words, bounded so that
// with the prefix it fits event.MaxJobComment. Empty for WaitNone, which
// clears a comment flexslurm set.
func (w JobWait) Comment() string {
	var s string
	switch w.Kind {
	case WaitCapacity:
		where := "zone " + strings.Join(w.Zones, "")
		if len(w.Zones) > 1 {
			where = "any of zones " + strings.Join(w.Zones, ", ")
		}
		s = fmt.Sprintf("waiting for Flex-Start capacity in %s since %s (request %s)", where, stamp(w.Since), w.Request)
		if w.Shortage != "" {
			s = fmt.Sprintf("waiting for Flex-Start capacity in %s since %s (request %s; Compute reports %s)", where, stamp(w.Since), w.Request, w.Shortage)
		}
	case WaitBackoff:
		what := "a stockout"
		switch w.Class {
		case ClassQuota:
			what = "a quota error"
		case ClassPermanent:
			what = "a provisioning error"
		}
		s = fmt.Sprintf("backing off after %s until %s (pool %s)", what, stamp(w.Until), w.Pool)
	case WaitBreaker:
		s = fmt.Sprintf("pool %s circuit breaker open until %s (%d VMs in a row never registered in Slurm)", w.Pool, stamp(w.Until), w.Failures)
	case WaitRoom:
		s = fmt.Sprintf("waiting for free nodes in pool %s (needs %d, %d free of max_node_count %d)", w.Pool, w.Want, w.Free, w.Max)
	case WaitRefused:
		s = fmt.Sprintf("refused: fits no node of partition %s (%s)", w.Partition, w.Misfit)
	default:
		return ""
	}
	return text.Truncate(s, event.MaxJobComment-len(event.JobCommentPrefix)-1)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// jobWait decides why pending job j waits, from the records as this
// decision left them: the pool's backoff and breaker, the job's nodes and
// their requests, JobFit. A job whose pool has no record here (a narrow
// scope, or a partition flexslurm does not serve) has nothing to tell.
//
// free caches each pool's count of free nodes across the jobs of one
// decision (nil: count each time); a comment changes no node.
func (b *builder) jobWait(j model.Job, free map[string]int) JobWait {
	if j.State != model.JobPending || j.AwaitingSlurm {
		return JobWait{}
	}
	pool, ok := b.st.Pools[j.Pool]
	if !ok {
		return JobWait{}
	}
	w := JobWait{Pool: pool.ID, Partition: j.Partition}
	if w.Partition == "" {
		w.Partition = pool.ID
	}
	if m, fits := JobFit(pool, j); !fits {
		if m.Placement {
			return JobWait{} // Slurm places it again once its nodes are down (fit.go)
		}
		w.Kind, w.Misfit = WaitRefused, m.Reason
		return w
	}
	// Capacity queued for its nodes: the oldest request it waits on.
	var first *model.Node
	serving := len(j.Nodes) > 0
	for _, name := range j.Nodes {
		n, ok := b.st.Nodes[name]
		if !ok || !n.Phase.Serving() {
			serving = false
			continue
		}
		if n.Phase == model.PhaseRequested && (first == nil || n.RequestedAt.Before(first.RequestedAt)) {
			first = n
		}
	}
	if first != nil {
		w.Kind, w.Zones, w.Request, w.Since = WaitCapacity, []string{pool.Zone}, first.ResizeRequest, first.RequestedAt
		if len(pool.Zones) > 1 {
			w.Zones = slices.Clone(pool.Zones)
		}
		if sh := pool.Shortage; sh != nil && sh.Request == first.ResizeRequest {
			w.Shortage = sh.Code
		}
		return w
	}
	if serving {
		return JobWait{} // every VM runs: Slurm boots the nodes and starts the job
	}
	if b.now.Before(pool.BackoffUntil) {
		w.Kind, w.Until, w.Class = WaitBackoff, pool.BackoffUntil, pool.BackoffReason
		return w
	}
	if !pool.BreakerOpenedAt.IsZero() && b.now.Before(pool.BreakerOpenedAt.Add(b.pol.BreakerCooldown)) {
		w.Kind, w.Until, w.Failures = WaitBreaker, pool.BreakerOpenedAt.Add(b.pol.BreakerCooldown), pool.BootstrapFailures
		return w
	}
	if len(j.Nodes) == 0 {
		n, ok := free[pool.ID]
		if !ok {
			_, n = b.freeSlots(pool, 0)
			if free != nil {
				free[pool.ID] = n
			}
		}
		if n < j.NodesWanted {
			w.Kind, w.Want, w.Free, w.Max = WaitRoom, j.NodesWanted, n, pool.MaxNodes
			return w
		}
	}
	return JobWait{}
}

// tellJobs sets the comment of each named job to why it waits (jobWait),
// when that differs from the comment flexslurm last set on it (Job.Comment):
// once per change, not once per pass. A job that runs has its comment
// cleared; an ended job is left alone (Slurm shows it no more). The agent
// never overwrites a comment that is not flexslurm's (shared/agent).
func (b *builder) tellJobs(ids ...string) {
	free := map[string]int{}
	for _, id := range ids {
		j, ok := b.st.Jobs[id]
		if !ok || !j.State.Active() {
			continue
		}
		want := b.jobWait(*j, free).Comment()
		if want == j.Comment {
			continue
		}
		job := *j
		job.Comment = want
		b.putJobComment(job)
		b.jobComment(job.ID, want)
	}
}

// tellActiveJobs runs tellJobs on every active job of the state.
func (b *builder) tellActiveJobs() {
	var ids []string
	for _, j := range b.st.SortedJobs() {
		if j.State.Active() {
			ids = append(ids, j.ID)
		}
	}
	b.tellJobs(ids...)
}

// putJobComment stores a job whose recorded comment changed: in the write
// this decision already makes of the job when there is one, otherwise in a
// write of its own that keeps the record's UpdatedAt and Reason, which say
// when and why flexslurm last learnt or decided something of the job (a
// record newer than a Slurm snapshot makes the snapshot say nothing of the
// job: sources.go); a comment is neither.
func (b *builder) putJobComment(j model.Job) {
	c := j
	c.Nodes = append([]string(nil), j.Nodes...)
	if !b.ownJobs {
		b.st.Jobs, b.ownJobs = writable(b.st.Jobs), true
	}
	b.st.Jobs[j.ID] = &c
	for i := len(b.out) - 1; i >= 0; i-- {
		if put, ok := b.out[i].(PutJob); ok && put.Job.ID == j.ID {
			put.Job.Comment = j.Comment
			b.out[i] = put
			return
		}
	}
	why := "comment in Slurm cleared"
	if j.Comment != "" {
		why = "comment in Slurm: " + j.Comment
	}
	j.Nodes = append([]string(nil), j.Nodes...)
	b.add(PutJob{Job: j, Reason: why})
}

// jobComment asks the agent to set (or, empty, clear) a job's Comment. The
// decision's time is part of the command's id: a comment set again after
// another (A, B, A) is a new command, which the agent applies.
func (b *builder) jobComment(job, text string) {
	id := naming.CommandID(b.cluster, string(event.SlurmJobComment), job, text, b.now.UTC().Format(time.RFC3339Nano))
	b.add(SlurmCommand{ID: id, Command: event.SlurmJobComment, JobID: job, Reason: text})
}
