package plan

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// VM is a Compute instance as the reconciler observed it.
type VM struct {
	Name            string
	ID              string
	Status          string // Compute instance status: PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED, REPAIRING, …
	Created         time.Time
	TerminationTime time.Time // scheduling.terminationTimestamp; zero when unknown
	// LastStart is the VM's lastStartTimestamp: when it last started
	// (after a host repair, on its new host); zero when unknown.
	LastStart time.Time
	// MIG is the MIG the VM belongs to (its created-by metadata); "" when
	// none.
	MIG string
	// Zone is the zone Compute placed the VM in.
	Zone string
}

// ObservedResizeRequest is a resize request as the reconciler observed it.
type ObservedResizeRequest struct {
	Name string
	// MIG is the MIG that holds it; Legacy is true when that is the pool's
	// MIG of the layout before one MIG per request.
	MIG     string
	Legacy  bool
	State   string // CREATING, ACCEPTED, SUCCEEDED, FAILED, CANCELLED
	VMs     []string
	Created time.Time
	// ErrorCode is the Compute error code of a FAILED request
	// (status.error); ErrorClass its class (ClassCapacity, ClassQuota,
	// ClassPermanent, or "" for others).
	ErrorCode, ErrorClass string
	// ErrorQuota is the quota status.error names (metric, region, limit),
	// for people; "" when none.
	ErrorQuota string
	// LastAttempt is the error of the latest provisioning attempt of a
	// queued (ACCEPTED) request (status.lastAttempt.error); zero when none.
	LastAttempt AttemptError
}

// activeRequestState reports whether a resize request in this state may
// still create VMs (queued or being created).
func activeRequestState(state string) bool {
	return state == "ACCEPTED" || state == "CREATING"
}

// finalRequestState reports whether a resize request in this state can
// create no VM any more.
func finalRequestState(state string) bool {
	return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED"
}

// AttemptError is a provisioning attempt's error as Compute reported it.
type AttemptError struct {
	// Class is ClassCapacity, ClassQuota, ClassPermanent, or "" when the
	// code is none of them.
	Class string
	// Code and Message are the Compute error code and message, for
	// operators.
	Code, Message string
	// Quota is the quota the error names (errorDetails.quotaInfo, or the
	// message: metric, region, limit), for people; "" when none.
	Quota string
}

// ObservedPool is what Compute showed of one pool in one pass. Listed is
// false when listing failed: the reconciler then decides nothing for that
// pool (an empty list must never read as "every VM is gone").
type ObservedPool struct {
	Listed bool
	// ListedAt is when the pool's first list call was made: the lists
	// show Compute as it was then or later, and the decision may run
	// long after (the pass reads, lists every pool, then decides). A MIG
	// missing from a list taken within Policy.ObserveGrace of the pool
	// record's last change may have been created since; zero means not
	// known, and then a missing MIG is not taken for deleted.
	ListedAt time.Time
	// MIGExists reports whether the pool's MIG of the layout before one
	// MIG per request (model.Pool.MIG) was found.
	MIGExists bool
	// MIGs are the pool's MIGs found: the pool's MIG of the earlier layout
	// and the MIG of each resize request.
	MIGs []ObservedMIG
	// MIGsListed is true when MIGs (and MIGExists) come from a listing of
	// the pool's MIGs this pass. A view without it takes no MIG for gone
	// and deletes none.
	MIGsListed     bool
	VMs            []VM                    // VMs labelled as this cluster's and pool's
	ResizeRequests []ObservedResizeRequest // of the MIGs listed with RequestsListed
}

// Observed is one reconcile pass's view of Compute, by pool id.
type Observed struct {
	Pools map[string]ObservedPool
	// JobRecordsFor is the TakenAt of the Slurm snapshot for whose jobs the
	// pass loaded every record, ended jobs included (store.Scope.Jobs; a
	// pass otherwise loads only active jobs). A job that snapshot shows
	// pending with no loaded record is then truly unknown to flexslurm,
	// never one whose end flexslurm processed; with any other snapshot
	// (zero, or a newer one stored meanwhile) such jobs wait for the next
	// pass.
	JobRecordsFor time.Time
}

// Reconcile compares the stored state, what Compute shows and the latest
// Slurm snapshot, and returns what converges them. Each node's combination
// (Slurm class × VM class × phase × static/dynamic) is looked up in Table,
// the one exhaustive decision table; unexpected combinations are observed
// for Policy.ObserveGrace, then acted on with an alert. Around the table:
// a VM missing from the list is given up only after Policy.MissThreshold
// consecutive misses of the same generation; a request lost in a crash is
// issued again (same name and request id); static pools are brought back to
// min_node_count; pending jobs are served when room appears, including jobs
// Slurm shows pending that flexslurm never heard of; queued requests no node
// waits for are cancelled; and VMs labelled as this cluster's that no record
// names are deleted once older than the orphan grace. VMs without this
// cluster's labels are never listed, so never touched. A node under health
// repair is followed by its repair before the table (reconcileRepair: a
// host repair's success, timeout or lost call; a drain awaited), and
// blocked repairs start, oldest first, as the pool's repair budget frees.
func Reconcile(st *model.State, obs Observed, now time.Time, pol Policy) []Action {
	pol = pol.withDefaults()
	b := newBuilder(st, now, pol)
	slurm := freshSlurm(st, now, pol)
	b.view = slurm
	b.provisionUnreportedJobs(slurm, obs)
	b.endLostJobs(slurm)
	b.cancelLeftBehind(slurm) // before recordStartedJobs, which makes the job's record newer than the snapshot
	b.recordStartedJobs(slurm)
	b.jobLimits(slurm)
	for _, pool := range b.st.SortedPools() {
		po, ok := obs.Pools[pool.ID]
		if !ok || !po.Listed {
			continue
		}
		b.reconcilePool(pool, po, slurm, pol)
	}
	// Pending jobs that can now be served (room freed, or capacity lost).
	for _, j := range b.st.SortedJobs() {
		if j.State != model.JobPending {
			continue
		}
		if po, ok := obs.Pools[j.Pool]; !ok || !po.Listed {
			continue
		}
		job := *j
		if job.AwaitingSlurm {
			// Requeued after a resume failure: served once Slurm's next
			// allocation is known, never on flexslurm's guess.
			var placed bool
			if job, placed = b.awaitingAllocation(job); !placed {
				continue
			}
			b.provisionJob(job, "reconciler: Slurm allocated the requeued job new nodes (snapshot) before its report arrived")
			continue
		}
		b.provisionJob(job, "reconciler: job still pending")
	}
	b.syncBeyondMax()
	b.tellActiveJobs() // jobcomment.go
	return b.out
}

// freshSlurm returns the snapshot's nodes when the snapshot is recent enough.
func freshSlurm(st *model.State, now time.Time, pol Policy) *model.SlurmView {
	if st.Slurm == nil || now.Sub(st.Slurm.TakenAt) > pol.SnapshotMaxAge {
		return nil
	}
	return st.Slurm
}

func slurmClass(v *model.SlurmView, node string) SlurmClass {
	if v == nil {
		return SlurmUnknown
	}
	n, ok := v.Nodes[node]
	if !ok {
		return SlurmUnknown
	}
	return ClassifySlurm(n)
}

func kindOf(n model.Node, pool *model.Pool) model.NodeKind {
	if n.Kind == model.NodeStatic {
		return model.NodeStatic
	}
	return model.NodeDynamic
}

// reconcilePool applies every pool pass to one pool, in the order
// poolPasses lists them (passes.go).
func (b *builder) reconcilePool(pool *model.Pool, po ObservedPool, slurm *model.SlurmView, pol Policy) {
	b.listedAt = po.ListedAt
	pc := &poolContext{pool: pool, observed: po, slurm: slurm, pol: pol, vms: b.indexVMs(po.VMs)}
	pc.rrs = make(map[string]ObservedResizeRequest, len(po.ResizeRequests))
	for _, rr := range po.ResizeRequests {
		pc.rrs[rr.Name] = rr
	}
	// A pool is recorded ready in the transaction that asks for its
	// template and MIG, before they exist (commit, then act): a MIG missing
	// from a list taken within ObserveGrace of the pool record's last
	// change may still have been on its way, and taking it for deleted
	// would plan a second VM for every node already requested in it. The
	// list's time counts, not the decision's: a pass that lists early and
	// decides late (a loaded instance) has seen nothing of what happened
	// in between. Decide nothing for the pool this pass.
	pc.legacy = b.legacyInUse(pool)
	if pc.legacy && pool.Ready && !po.MIGExists && !pool.Removed && (po.ListedAt.IsZero() || po.ListedAt.Sub(pool.UpdatedAt) < pol.ObserveGrace) {
		return
	}
	for _, pass := range poolPasses {
		pass.apply(b, pc)
	}
}

// provisionUnreportedJobs provisions for jobs the Slurm snapshot shows pending on
// this cluster's nodes while Slurm powers those nodes up, when flexslurm
// holds no record of the job (its job.pending report was lost).
func (b *builder) provisionUnreportedJobs(slurm *model.SlurmView, obs Observed) {
	if slurm == nil || !obs.JobRecordsFor.Equal(slurm.TakenAt) {
		return
	}
	for _, sj := range slurm.Jobs {
		if !sj.State.Unstarted() || len(sj.Nodes) == 0 {
			continue
		}
		// Only a job flexslurm holds no record of: a job it knows is
		// followed by its reports, and one whose end it recorded after the
		// snapshot was taken is over (an older snapshot never revives it).
		// A job whose end flexslurm recorded before the snapshot was taken
		// (by its record's last change and by Slurm's time of that end) is
		// another job with the same id (Slurm's ids repeat), or the same
		// job requeued: it waits on powering-up nodes, unreported.
		rec, known := b.st.Jobs[sj.ID]
		if known && !b.endedBefore(rec, slurm) {
			continue
		}
		pool, ok := "", true
		for _, name := range sj.Nodes {
			cl, p, idx, valid := naming.ParseNodeName(name)
			pp, hasPool := b.st.Pools[p]
			if !valid || cl != b.cluster || !hasPool || idx >= pp.MaxNodes || (pool != "" && p != pool) ||
				slurmClass(slurm, name) != SlurmPoweringUp {
				ok = false
				break
			}
			pool = p
		}
		if po, listed := obs.Pools[pool]; !ok || !listed || !po.Listed {
			continue
		}
		j := model.Job{ID: sj.ID, Partition: sj.Partition, Pool: pool, State: model.JobPending,
			NodesWanted: len(sj.Nodes), Nodes: append([]string(nil), sj.Nodes...), SubmittedAt: b.now,
			TimeLimit: time.Duration(sj.TimeLimitSeconds) * time.Second, ReportedAt: slurm.TakenAt}
		why := "reconciler: Slurm shows the job pending on powering-up nodes but its report never arrived"
		if known {
			next := newIncarnation(rec, &event.Job{Partition: sj.Partition}, b.now)
			j.Generation, j.Incarnation, j.PreviousEnd = next.Generation, next.Incarnation, next.PreviousEnd
			why = fmt.Sprintf("reconciler: Slurm shows job %s pending on powering-up nodes after the job recorded with that id ended (snapshot of %s), and no report of it arrived: a new job with the id",
				sj.ID, slurm.TakenAt.Format(time.RFC3339))
		}
		b.provisionJob(j, why)
	}
}

// endLostJobs ends the jobs flexslurm holds as pending or running that a
// snapshot taken after their last change no longer shows alive (their end
// report was lost): their queued capacity is cancelled, so no VM is made
// for a job that is gone.
func (b *builder) endLostJobs(slurm *model.SlurmView) {
	if slurm == nil {
		return
	}
	alive := map[string]bool{}
	for _, sj := range slurm.Jobs {
		if sj.State.Alive() {
			alive[sj.ID] = true
		}
	}
	for _, j := range b.st.SortedJobs() {
		if !j.State.Active() || alive[j.ID] || Newest(j.UpdatedAt, slurm) != SourceSlurm {
			continue
		}
		job := *j
		job.State = model.JobFinished
		job.ReportedAt = laterOf(job.ReportedAt, slurm.TakenAt)
		why := fmt.Sprintf("reconciler: Slurm no longer shows job %s (snapshot of %s): its end report was lost", j.ID, slurm.TakenAt.Format(time.RFC3339))
		b.putJob(job, why)
		if pool, ok := b.st.Pools[job.Pool]; ok {
			for _, name := range job.Nodes {
				if n, ok := b.st.Nodes[name]; ok && queuedOnlyFor(n, job.ID) {
					b.releaseQueuedCapacity(pool, *n, why) // a VM that came may serve another job (adopt.go)
				}
			}
		}
	}
}
