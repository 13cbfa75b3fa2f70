package plan

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// ErrRejected marks an event that names something that does not exist or no
// longer applies (unknown cluster, pool or node, stale generation). The
// handler logs it and acknowledges the event; retrying cannot help.
var ErrRejected = errors.New("event rejected")

func rejectf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRejected, fmt.Sprintf(format, args...))
}

// Policy holds the timing knobs of the decisions. Zero fields take the defaults.
type Policy struct {
	// OneNodePerRequest requests every node through a resize request (and
	// so a MIG) of its own, a pending job's nodes included, instead of one
	// request naming all of a job's VMs. It is for projects where Compute
	// accepts no resize request that names its VMs (instances[]), on v1 or
	// beta (FLEXSLURM_RESIZE_REQUEST_API=count): each request then asks for
	// one VM (resizeBy 1), which its MIG names from the MIG's base instance
	// name, "<node>-g<generation>", so a VM still tells its node
	// (naming.ParseVMName). docs/compute-contract.md, "Named VMs".
	OneNodePerRequest bool
	// RequestGrace is how long a requested node may have no visible resize
	// request before the request is issued again (a crash between the
	// Firestore commit and the Compute call). Default 2 min.
	RequestGrace time.Duration
	// OrphanGrace is how old a VM labelled as this cluster's, with no node
	// record naming it, must be before it is deleted. Default 5 min
	// (slurm-gcp waits 90 s, https://github.com/GoogleCloudPlatform/cluster-toolkit/blob/main/community/modules/scheduler/schedmd-slurm-gcp-v6-controller/modules/slurm_files/scripts/slurmsync.py;
	// ParallelCluster 300 s, orphaned_instance_timeout in https://github.com/aws/aws-parallelcluster-node/blob/develop/src/slurm_plugin/clustermgtd.py).
	OrphanGrace time.Duration
	// ExpirySlack: a VM that vanishes within this much of its termination
	// time counts as expired rather than lost. Default 2 min.
	ExpirySlack time.Duration
	// MissThreshold is how many consecutive reconcile passes a running
	// node's VM must be missing from Compute's list before the generation is
	// given up (list results are eventually consistent; ParallelCluster's
	// ec2_instance_missing_max_count is the same idea). Counted per node and
	// generation. Default 2.
	MissThreshold int
	// ObserveGrace is how long an unexpected combination (OutcomeObserve)
	// is watched before its fallback action is taken and an alert raised.
	// Default 10 min.
	ObserveGrace time.Duration
	// SnapshotMaxAge: a Slurm snapshot older than this is ignored (Slurm
	// class unknown). Default 10 min.
	SnapshotMaxAge time.Duration
	// BackoffBase and BackoffCap bound the exponential backoff of a pool
	// after capacity errors (stock-outs): base × 2^(failures−1), at most
	// the cap. Defaults 2 min and 1 h.
	BackoffBase, BackoffCap time.Duration
	// QuotaBackoffBase and QuotaBackoffCap do the same after quota (and
	// permanent) errors, which a human must usually fix. Defaults 10 min
	// and 2 h.
	QuotaBackoffBase, QuotaBackoffCap time.Duration
	// QueueTimeout: a resize request ACCEPTED (queued for capacity) longer
	// than this is cancelled and resubmitted as a new generation, if its
	// job is still pending (static nodes always). Default 6 h.
	QueueTimeout time.Duration
	// MaxResubmits bounds those resubmissions per job (or static node);
	// past it the request stays queued and the pool is flagged. Default 3.
	MaxResubmits int
	// BreakerThreshold: after this many consecutive VMs whose node never
	// registered in Slurm, the pool's breaker opens and provisioning stops.
	// Default 3.
	BreakerThreshold int
	// BreakerCooldown: an open breaker lets one attempt through after this
	// long; its success closes the breaker. Default 30 min.
	BreakerCooldown time.Duration
	// RecreateAfterTermination turns make-before-break off: a static node
	// is then only recreated after Compute ended its VM.
	RecreateAfterTermination bool
	// LeadTime fixes how long before a static node's termination its
	// successor is requested (at most half the run duration); 0 learns it
	// from the pool's recent waits to registration, so that successors
	// arriving after their predecessor's end keep the pool below
	// min_node_count for at most 1 − TargetAvailability of the time
	// (docs/design/expiry.md, "Make-before-break"), never below LeadFloor and never
	// above LeadMaxShare of the max run duration. LeadFloor defaults to
	// 30 min.
	LeadTime, LeadFloor time.Duration
	// TargetAvailability is the share of the time a static pool should
	// hold min_node_count usable nodes across the expiries of its VMs; it
	// sizes the learnt lead time. Default 0.999.
	TargetAvailability float64
	// LeadMaxShare bounds the learnt lead time to this share of the pool's
	// max run duration, which bounds what make-before-break costs: a
	// successor runs beside its predecessor for at most the lead. Default
	// 1/8 (3 h for 1-day VMs).
	LeadMaxShare float64
	// IdleTimeout: a dynamic node that Slurm shows idle (no job) for this
	// long, with no pending job waiting for it, is released — its VM
	// deleted and the node powered down in Slurm. flexslurm's slurm.conf
	// lists every flex-start node in SuspendExcNodes, so this, not
	// SuspendTime, decides (one writer of power-down). Default 10 min.
	IdleTimeout time.Duration
	// EOLReservation is the length of the Slurm maintenance reservation
	// that starts at each flex node's termination time, so Slurm starts no
	// job that would outlive the node. Default 1 h.
	EOLReservation time.Duration
	// BootAllowance is what a resize request sized by its job's time
	// limit (model.Pool.UseJobDuration) asks beyond that limit: Compute
	// counts a VM's run duration from its creation, and the job starts
	// only once the VM has booted, run its startup script and the node
	// bootstrap (whose own deadline is 5 min: `flexslurm node boot
	// --timeout`, docs/node.md) and registered in Slurm. Default 15 min
	// (RequestRunDuration).
	BootAllowance time.Duration
	// EndWarning, when set, sends the jobs running on a node EndSignal
	// this long before its VM ends at its run duration (once per
	// generation, on the first reconcile pass within it: make it longer
	// than the reconcile period), so that a batch script can checkpoint;
	// at the end the node goes DOWN and Slurm requeues the jobs that may
	// be requeued (docs/user.md, "A warning before the end"). Zero: no
	// warning. EndSignal is one of event.Signals; default USR1, as
	// sbatch --signal's.
	EndWarning time.Duration
	EndSignal  string

	// Health repair (docs/design/repair.md, "Health repair").

	// DisableHostRepair turns host repair off: a node that failed its
	// health check then always has its VM deleted and replaced, instead of
	// first asking Compute Engine to move the VM to a healthy host
	// (instances.reportHostAsFaulty). Host repair applies only to pools
	// HostRepairSupported accepts (reservation-bound A4X Max, A4X, A4, A3
	// Ultra, A3 Mega, A3 High 8-GPU), never to Flex-Start pools.
	DisableHostRepair bool
	// RepairTimeout: a host repair whose VM is not RUNNING again, restarted
	// (lastStartTimestamp at or after the request), this long after it was
	// asked for falls back to deleting and replacing the VM, with an alert.
	// Default 20 min.
	RepairTimeout time.Duration
	// InconclusiveLimit: this many INCONCLUSIVE health verdicts on one
	// node generation within InconclusiveWindow drain the node for
	// diagnosis (no VM action). Default 2; negative: never escalate.
	InconclusiveLimit int
	// InconclusiveWindow: INCONCLUSIVE verdicts are counted from the first
	// one for this long; the count starts again after it. Default 24 h.
	InconclusiveWindow time.Duration
	// RepairMaxUnhealthy is the fraction (0–1) of a pool's serving nodes
	// (VM requested or running) that may be under repair at once (awaiting
	// drain or in host repair). A failure beyond
	// max(RepairMinBudget, ⌊RepairMaxUnhealthy × serving⌋) is blocked —
	// the node stays drained, an alert and the repair_blocked metric say
	// so — and the reconciler starts it, oldest first, as repairs finish.
	// Default 0.2 (Karpenter's node repair stops above 20 % unhealthy
	// nodes in a pool: https://github.com/kubernetes-sigs/karpenter/tree/main/pkg/controllers/node/health).
	RepairMaxUnhealthy float64
	// RepairMinBudget is the budget's absolute floor: a pool can always
	// repair this many nodes at once (a one-node pool can repair its node).
	// Default 1.
	RepairMinBudget int
	// RepairNodeLimit: a node (whatever its generation) whose repairs
	// started within RepairNodeWindow reached this count is not repaired
	// again on a node's report: it is left drained for an operator
	// (model.RepairLimit; docs/design/repair-limit.md). Default 3; negative: no limit.
	RepairNodeLimit int
	// RepairNodeWindow: a node's repairs are counted from the first one
	// for this long; the count starts again after it. Default 24 h.
	RepairNodeWindow time.Duration
	// UnreportedDrainGrace: a node that flexslurm's node-side hook drained
	// for a failed health check of its current VM, whose health.failure
	// report has not arrived this long after a reconcile pass first saw the
	// drain, is repaired by the reconciler as the report would have had it
	// (unreported.go). Default 10 min: a report still in flight (Pub/Sub
	// redelivery, the Repair function back after an outage) is usually
	// processed first and names the job the failure involved.
	UnreportedDrainGrace time.Duration

	// MaxEventAge: an event published longer ago than this is acknowledged
	// and dropped (EventTooOld), so that an event failing for a day is not
	// retried for the whole retry window; the reconciler converges what it
	// asked for. Default 1 h.
	MaxEventAge time.Duration
}

// DefaultPolicy returns the defaults of every Policy field: the one table
// of them. A zero field of the Policy handed to a decision takes its value
// from here (withDefaults); fields whose zero value is meaningful
// (RecreateAfterTermination, DisableHostRepair, LeadTime: learnt) are zero
// here too. Every other package that needs a default reads it from here.
func DefaultPolicy() Policy {
	return Policy{
		RequestGrace:       2 * time.Minute,
		OrphanGrace:        5 * time.Minute,
		ExpirySlack:        2 * time.Minute,
		MissThreshold:      2,
		ObserveGrace:       10 * time.Minute,
		SnapshotMaxAge:     10 * time.Minute,
		BackoffBase:        2 * time.Minute,
		BackoffCap:         time.Hour,
		QuotaBackoffBase:   10 * time.Minute,
		QuotaBackoffCap:    2 * time.Hour,
		QueueTimeout:       6 * time.Hour,
		MaxResubmits:       3,
		BreakerThreshold:   3,
		BreakerCooldown:    30 * time.Minute,
		LeadFloor:          30 * time.Minute,
		TargetAvailability: 0.999,
		LeadMaxShare:       1.0 / 8,
		IdleTimeout:        10 * time.Minute,
		EOLReservation:     time.Hour,
		BootAllowance:      15 * time.Minute,
		EndSignal:          "USR1",
		RepairTimeout:      20 * time.Minute,
		InconclusiveLimit:  2,
		InconclusiveWindow: 24 * time.Hour,
		RepairMaxUnhealthy: 0.2,
		RepairMinBudget:    1,
		RepairNodeLimit:    3,
		RepairNodeWindow:   24 * time.Hour,
		MaxEventAge:        time.Hour,

		UnreportedDrainGrace: 10 * time.Minute,
	}
}

// withDefaults returns p with every unset field taken from DefaultPolicy:
// a duration, count or share not above zero is unset, except
// InconclusiveLimit, for which a negative value means "never escalate", and
// RepairNodeLimit, for which it means "no limit".
// TargetAvailability is capped at 1 and LeadMaxShare at 1/2.
func (p Policy) withDefaults() Policy {
	d := DefaultPolicy()
	dur := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	count := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	share := func(v *float64, def float64) {
		if *v <= 0 {
			*v = def
		}
	}
	dur(&p.RequestGrace, d.RequestGrace)
	dur(&p.OrphanGrace, d.OrphanGrace)
	dur(&p.ExpirySlack, d.ExpirySlack)
	count(&p.MissThreshold, d.MissThreshold)
	dur(&p.ObserveGrace, d.ObserveGrace)
	dur(&p.SnapshotMaxAge, d.SnapshotMaxAge)
	dur(&p.BackoffBase, d.BackoffBase)
	dur(&p.BackoffCap, d.BackoffCap)
	dur(&p.QuotaBackoffBase, d.QuotaBackoffBase)
	dur(&p.QuotaBackoffCap, d.QuotaBackoffCap)
	dur(&p.QueueTimeout, d.QueueTimeout)
	count(&p.MaxResubmits, d.MaxResubmits)
	count(&p.BreakerThreshold, d.BreakerThreshold)
	dur(&p.BreakerCooldown, d.BreakerCooldown)
	if p.LeadTime < 0 {
		p.LeadTime = d.LeadTime
	}
	dur(&p.LeadFloor, d.LeadFloor)
	share(&p.TargetAvailability, d.TargetAvailability)
	p.TargetAvailability = min(p.TargetAvailability, 1) // 1: always the most lead
	share(&p.LeadMaxShare, d.LeadMaxShare)
	p.LeadMaxShare = min(p.LeadMaxShare, 0.5)
	dur(&p.IdleTimeout, d.IdleTimeout)
	dur(&p.EOLReservation, d.EOLReservation)
	dur(&p.BootAllowance, d.BootAllowance)
	if p.EndWarning < 0 {
		p.EndWarning = 0
	}
	if p.EndSignal == "" {
		p.EndSignal = d.EndSignal
	}
	dur(&p.RepairTimeout, d.RepairTimeout)
	if p.InconclusiveLimit == 0 {
		p.InconclusiveLimit = d.InconclusiveLimit
	}
	dur(&p.InconclusiveWindow, d.InconclusiveWindow)
	share(&p.RepairMaxUnhealthy, d.RepairMaxUnhealthy)
	count(&p.RepairMinBudget, d.RepairMinBudget)
	if p.RepairNodeLimit == 0 {
		p.RepairNodeLimit = d.RepairNodeLimit
	}
	dur(&p.RepairNodeWindow, d.RepairNodeWindow)
	dur(&p.MaxEventAge, d.MaxEventAge)
	dur(&p.UnreportedDrainGrace, d.UnreportedDrainGrace)
	return p
}

// builder accumulates actions over a working copy of the state, so that a
// later step of one decision sees the records an earlier step changed.
type builder struct {
	st      *model.State
	now     time.Time
	cluster string
	out     []Action
	pol     Policy
	view    *model.SlurmView // the fresh Slurm snapshot, when reconciling
	// listedAt is when the Compute listing of the pool being reconciled
	// was taken (zero: unknown).
	listedAt time.Time
	// key tells one event's Slurm commands from an earlier event's about
	// the same nodes (a report's time), where the command alone would not.
	key string
	// ownNodes and ownJobs report whether b.st's Nodes and Jobs maps are
	// the builder's own copies: until its first write, each is the input
	// state's (model.State.CloneRecords), copied at that write.
	ownNodes, ownJobs bool
	// operator is true for an operator's report (RepairByOperator): the
	// per-node repair limit does not hold it back (repairlimit.go).
	operator bool
	// index is what the decision looks up again and again (index.go).
	index
}

// newBuilder starts a decision over a copy of st's maps (records are
// replaced, never edited in place: model.State.CloneRecords), with pol's
// unset fields taken from DefaultPolicy.
func newBuilder(st *model.State, now time.Time, pol Policy) *builder {
	b := &builder{st: st.CloneRecords(), now: now, pol: pol.withDefaults()}
	if st.Cluster != nil {
		b.cluster = st.Cluster.ID
	}
	return b
}

func (b *builder) add(a Action) { b.out = append(b.out, a) }

func (b *builder) putNode(n model.Node, reason string) {
	if !n.Phase.Serving() {
		// A repair belongs to a generation that serves; once its VM is
		// being deleted or gone, there is nothing left to repair.
		n.ClearRepair()
	}
	n.Reason = reason
	n.UpdatedAt = b.now
	c := n
	old, existed := b.st.Nodes[n.Name]
	if existed {
		delete(b.poolRecords, old.Pool)
	}
	delete(b.poolRecords, n.Pool)
	if !b.ownNodes {
		b.st.Nodes, b.ownNodes = writable(b.st.Nodes), true
	}
	b.st.Nodes[n.Name] = &c
	b.nodeWrites++
	if !existed || old.Pool != n.Pool {
		b.indexNode(n)
	}
	b.add(PutNode{Node: n, Reason: reason})
	b.noteBeyondMax(n)
}

// writable returns the builder's own copy of a record map it shares with
// the input state (model.State.CloneRecords), to write to: maps.Clone of
// it, which copies its table without hashing a key again, or an empty map
// for a nil one.
func writable[M ~map[string]V, V any](m M) M {
	if c := maps.Clone(m); c != nil {
		return c
	}
	return M{}
}

// putJob stores a job with no provisioning stage (putJobAt records one).
func (b *builder) putJob(j model.Job, reason string) {
	b.putJobAt(j, model.JobStageNone, reason)
}

// putJobAt stores a job at a provisioning stage.
func (b *builder) putJobAt(j model.Job, stage model.JobStage, reason string) {
	j.Stage = stage
	j.Reason = reason
	j.UpdatedAt = b.now
	j.Nodes = append([]string(nil), j.Nodes...)
	c := j
	c.Nodes = append([]string(nil), j.Nodes...)
	if !b.ownJobs {
		b.st.Jobs, b.ownJobs = writable(b.st.Jobs), true
	}
	b.st.Jobs[j.ID] = &c
	b.add(PutJob{Job: j, Reason: reason})
}

// putNodeIfChanged stores n with reason why unless its record already
// says exactly that. A record rewritten on every pass would look newer
// than every Slurm snapshot (sources.go), so an unchanged one is not
// written. This is the one place where a record's reason is compared: a
// decision never branches on a reason it wrote, only this write does.
func (b *builder) putNodeIfChanged(n model.Node, why string) {
	if cur, ok := b.st.Nodes[n.Name]; ok {
		x, y := *cur, n
		x.Reason, x.UpdatedAt = "", time.Time{}
		y.Reason, y.UpdatedAt = "", time.Time{}
		if x == y && cur.Reason == why {
			return
		}
	}
	b.putNode(n, why)
}

// putJobIfChanged stores j at stage with reason why unless its record
// already says exactly that (as putNodeIfChanged).
func (b *builder) putJobIfChanged(j model.Job, stage model.JobStage, why string) {
	j.Stage = stage
	if cur, ok := b.st.Jobs[j.ID]; ok && cur.Reason == why && sameJob(*cur, j) {
		return
	}
	b.putJobAt(j, stage, why)
}

// sameJob reports whether two job records agree on everything but their
// reason and the time of their last change.
func sameJob(x, y model.Job) bool {
	if !slices.Equal(x.Nodes, y.Nodes) {
		return false
	}
	x.Nodes, x.Reason, x.UpdatedAt = nil, "", time.Time{}
	y.Nodes, y.Reason, y.UpdatedAt = nil, "", time.Time{}
	return reflect.DeepEqual(x, y)
}

func (b *builder) slurm(command event.SlurmOp, nodes []string, jobID, reason string, idParts ...string) {
	parts := append([]string{b.cluster, string(command), strings.Join(nodes, ","), jobID}, idParts...)
	b.add(SlurmCommand{ID: naming.CommandID(parts...), Command: command, Nodes: nodes, JobID: jobID, Reason: reason})
}

// node returns the record of slot i of a pool, or a fresh one.
func (b *builder) node(pool *model.Pool, i int) model.Node {
	name := model.NodeName(b.cluster, pool.ID, i)
	if n, ok := b.st.Nodes[name]; ok {
		return *n
	}
	// A slot never used is static below min_node_count (the slots Slurm
	// excludes from suspend); afterwards the record says.
	kind := model.NodeDynamic
	if i < pool.MinNodes {
		kind = model.NodeStatic
	}
	return model.Node{Name: name, Pool: pool.ID, Index: i, Kind: kind, Phase: model.PhaseReleased}
}

// nextGeneration moves n to a new generation in PhaseRequested.
func (b *builder) nextGeneration(n *model.Node, rr, jobID string) {
	b.supersede(*n)
	n.Generation++
	n.Phase = model.PhaseRequested
	n.VMName = model.VMName(n.Name, n.Generation)
	n.VMID = ""
	n.ResizeRequest = rr
	n.MIG = naming.RequestMIG(b.cluster, n.Pool, rr)
	n.MIGSeen = false
	n.RequestOpen, n.RequestMisses = false, 0
	n.JobID = jobID
	n.RequestedAt = b.now
	n.RunningAt = time.Time{}
	n.TerminationTime = time.Time{}
	n.RunDuration = 0 // the pool's, unless the caller sizes it by a job
	// What was learned about the previous generation does not carry over.
	n.Registered = false
	n.IdleSince = time.Time{}
	n.Observed, n.ObservedSince = "", time.Time{}
	n.MissCount, n.MissGeneration = 0, 0
	n.ClearRepair()
	n.InconclusiveCount, n.InconclusiveSince = 0, time.Time{}
}

// supersede re-issues, ahead of a node's next generation, the deletion of
// the VM its previous generation may have created when it was released
// before its VM ran: the release's actions may not have run yet — a crash
// between the commit and the actions leaves them to the event's
// redelivery, which can come after this decision — and once the next
// generation is recorded, no record names the old VM (it would only be
// deleted as an orphan, after the orphan grace). Its resize request has
// ended by then (requestMayBeActive: the next generation waits for that).
// The request id is the release's, so Compute performs it once.
func (b *builder) supersede(n model.Node) {
	pool, ok := b.st.Pools[n.Pool]
	if !ok || !supersedes(&n) {
		return
	}
	for _, a := range b.out {
		if d, ok := a.(DeleteVMs); ok && slices.Contains(d.VMs, n.VMName) {
			return // released in this decision: its actions come first
		}
		if d, ok := a.(DeleteMIG); ok && n.MIG != "" && d.MIG == n.MIG {
			return
		}
	}
	why := fmt.Sprintf("%s's next generation: the VM its previous request %s may have created must not stay", n.Name, n.ResizeRequest)
	b.releaseVM(pool, n, why)
}

// supersedes reports whether n's next generation re-issues the deletion of
// the VM its current one may have created (supersede).
func supersedes(n *model.Node) bool {
	return n.Phase == model.PhaseDeleting && n.RunningAt.IsZero() && n.ResizeRequest != ""
}

// provisionNode requests a new VM for one node through its own resize request.
func (b *builder) provisionNode(pool *model.Pool, n model.Node, jobID, reason string) {
	if blocked, why := b.blocked(pool); blocked {
		b.putNodeIfChanged(n, why)
		return
	}
	if why := b.holdForPreviousRequest(pool, n); why != "" {
		b.putNodeIfChanged(n, why)
		return
	}
	gen := n.Generation + 1
	rr := naming.NodeResizeRequest(n.Name, gen)
	b.nextGeneration(&n, rr, jobID)
	if j, ok := b.st.Jobs[jobID]; ok && n.Kind == model.NodeDynamic && n.Successor == "" && n.Predecessor == "" {
		n.RunDuration = b.jobRunDuration(pool, *j)
	}
	if !pool.Ready {
		b.ensurePool(pool, "pool resources not confirmed yet")
	}
	b.putNode(n, reason)
	b.add(b.createRequest(pool, rr, []string{n.VMName}, jobID, n.RunDuration, reason))
	b.bootReservation(n)
}

// ensurePool asks for the pool's instance template and records the pool as
// ready in the same transaction (one transaction per event): the action is
// stored with the event and replayed on redelivery, and every resize
// request's creation makes sure of the template again before it makes the
// request's MIG. The template
// is the one the pool record holds, built when the spec was applied
// (ClusterApplied). A record stored before template bodies were recorded
// holds none: nothing is asked for and the pool stays not ready, with an
// alert, until the next cluster.applied records the body — the template's
// inputs are the stored spec and settings, and this decision is not where
// a template is built.
func (b *builder) ensurePool(pool *model.Pool, reason string) {
	for _, a := range b.out {
		if e, ok := a.(EnsurePool); ok && e.Pool == pool.ID {
			return
		}
	}
	cur, ok := b.st.Pools[pool.ID]
	if !ok {
		cur = pool
	}
	if cur.TemplateBody == "" {
		alert := Alert{Pool: pool.ID, Reason: fmt.Sprintf("pool %s: its record holds no instance template body (stored by an earlier flexslurm), so its template and MIG (%s) cannot be created: publish the cluster spec again (flexslurm apply)", pool.ID, cur.Template)}
		for _, a := range b.out {
			if a == Action(alert) {
				return
			}
		}
		b.add(alert)
		return
	}
	if ok && !cur.Ready {
		p := *cur
		p.Ready = true
		b.putPool(p, fmt.Sprintf("pool %s: template requested", pool.ID))
	}
	b.add(EnsurePool{Pool: pool.ID, Template: cur.Template, TemplateBody: cur.TemplateBody, Reason: reason})
}

// queuedOnlyFor reports whether a node waits on capacity requested for job
// and for nothing else: requested for that job, and dynamic. A static node
// (below min_node_count, or a successor flexslurm holds as static) must
// serve whether or not the job still waits, so the capacity queued for it —
// even when a failure under that job made the request — outlives the job:
// cancelling it would only queue the node again, at the back.
func queuedOnlyFor(n *model.Node, job string) bool {
	return n.Phase == model.PhaseRequested && n.JobID == job && n.Kind != model.NodeStatic
}

// releaseNode ends the current generation of a node on purpose: a queued
// request is cancelled, a VM is deleted, and Slurm powers the node down.
func (b *builder) releaseNode(pool *model.Pool, n model.Node, reason string) {
	b.release(pool, n, reason, true)
}

// releaseQuietly releases a node's generation like releaseNode, without
// telling Slurm (which reported it).
func (b *builder) releaseQuietly(pool *model.Pool, n model.Node, reason string) {
	b.release(pool, n, reason, false)
}

func (b *builder) release(pool *model.Pool, n model.Node, reason string, tellSlurm bool) {
	switch n.Phase {
	case model.PhaseRequested:
		if keepsArrivals(pool, n) {
			// The cancellation may meet a request Compute has just
			// fulfilled: its VMs are left for the next pass to keep
			// for a pending job that can use them, or to delete.
			b.cancelKeepingArrivals(pool, n, reason)
			return
		}
		if n.ResizeRequest != "" {
			// The request is cancelled even when it also names other nodes
			// (a job's request): a request still naming this node could
			// later create a second VM for it. Its other waiting nodes end
			// their generation too, and their job is re-planned.
			b.add(b.cancelRequest(pool, n, reason))
			b.endSharedRequest(pool, n, reason)
		}
		// The VM may appear if the request was fulfilled meanwhile: its
		// request's MIG is deleted (no other node serves from it: they
		// ended with the request), which deletes it; a generation of the
		// earlier layout deletes it by name, harmless when it does not
		// exist.
		b.releaseVM(pool, n, reason)
		n.Phase = model.PhaseDeleting
		n.RequestOpen = n.ResizeRequest != "" // until it is seen to end (previous.go)
	case model.PhaseRunning:
		b.releaseVM(pool, n, reason)
		if tellSlurm {
			b.slurm(event.SlurmPowerDown, []string{n.Name}, "", reason, n.VMName)
		}
		b.endOfLifeDone(n)
		n.Phase = model.PhaseDeleting
	default:
		return
	}
	n.LastEnd = model.EndReleased
	b.putNode(n, reason)
}

// releaseQueuedCapacity ends the generation of a dynamic node whose
// capacity is still queued for a job that no longer wants it: the job
// ended (jobs.go, endLostJobs, the table), or Slurm placed it on other
// nodes (placed.go). Its resize request is cancelled, but the request's
// MIG is not deleted with it: the cancellation may meet a request Compute
// has just fulfilled, whose VMs a pending job may use — the job's other
// nodes of the same request, which it keeps, or a job Slurm gave the node
// to, whose job.pending can come before the reconciler lists the VM. The node's generation, and
// that of the request's other nodes, ends as a queue timeout's does
// (released, model.EndCancelled, the request open until seen to end), so
// that the next pass decides on the VMs that came: kept for a pending job
// that can use the node (adoptArrived), deleted otherwise with the MIG once
// its request is final (deleteSpentRequestMIGs). A generation of the
// earlier layout, in the pool's MIG, is released as before.
func (b *builder) releaseQueuedCapacity(pool *model.Pool, n model.Node, reason string) {
	if n.Phase != model.PhaseRequested || n.MIG == "" || n.ResizeRequest == "" {
		b.releaseNode(pool, n, reason)
		return
	}
	b.cancelKeepingArrivals(pool, n, reason)
}

// keepsArrivals reports whether releasing node n, which waits on its
// capacity, cancels its request without deleting the request's MIG
// (cancelKeepingArrivals): a dynamic node of one MIG per request, in a pool
// still in the spec. Every release of such a node — its job ended or
// placed elsewhere, Slurm gave up resuming it, the pool shrank below it, a
// fit refused its job — can meet the request fulfilled, and the VMs that
// came may serve a pending job: the node's own, when Slurm gives the node
// to a job again, and its siblings', when the request named the job's
// other nodes. A static node's request is never cancelled to be kept (it
// always serves: adoptArrived would take it back), and a removed pool's
// capacity serves no job.
func keepsArrivals(pool *model.Pool, n model.Node) bool {
	return n.Phase == model.PhaseRequested && n.MIG != "" && n.ResizeRequest != "" &&
		!pool.Removed && kindOf(n, pool) != model.NodeStatic
}

// cancelKeepingArrivals cancels node n's queued request and ends the
// generation of every node waiting on it as a queue timeout's does (see
// releaseQueuedCapacity).
func (b *builder) cancelKeepingArrivals(pool *model.Pool, n model.Node, reason string) {
	b.add(b.cancelRequest(pool, n, reason))
	for _, o := range b.st.SortedNodes() {
		if o.ResizeRequest != n.ResizeRequest || o.Phase != model.PhaseRequested {
			continue
		}
		node, why := n, reason // n as the caller changed it (a hedge made dynamic)
		if o.Name != n.Name {
			node = *o
			why = fmt.Sprintf("its resize request %s was cancelled with %s's: %s", n.ResizeRequest, n.Name, reason)
		}
		node.Phase = model.PhaseReleased
		node.LastEnd = model.EndCancelled
		node.RequestOpen = true // until it is seen to end (previous.go)
		b.putNode(node, why)
	}
}

// endSharedRequest ends the generation of the other nodes waiting on the
// same (cancelled) resize request, deleting by name any VM the request may
// have created meanwhile. Their job, if still pending, is provisioned again
// by the reconciler (or Slurm's next report).
func (b *builder) endSharedRequest(pool *model.Pool, n model.Node, reason string) {
	for _, o := range b.st.SortedNodes() {
		if o.Name == n.Name || o.ResizeRequest != n.ResizeRequest || o.Phase != model.PhaseRequested {
			continue
		}
		other := *o
		if other.MIG == "" {
			// The earlier layout: by name, in the pool's MIG. In one MIG
			// per request, the MIG's deletion (release) takes them all.
			b.releaseVM(pool, other, reason)
		}
		other.Phase = model.PhaseDeleting
		other.LastEnd = model.EndReleased
		other.RequestOpen = true // until it is seen to end (previous.go)
		b.putNode(other, fmt.Sprintf("its resize request %s was cancelled with %s's: %s", n.ResizeRequest, n.Name, reason))
	}
}

// vmCount counts the nodes of a pool whose VM runs or is requested.
func (b *builder) vmCount(pool string) int {
	c := 0
	for _, n := range b.poolNodes(pool) {
		if n.Phase.Serving() {
			c++
		}
	}
	return c
}

// staticServing counts the pool's static nodes that serve (requested or
// running) and are not retiring (a node with a successor counts through its
// successor).
func (b *builder) staticServing(pool string) int {
	c := 0
	for _, n := range b.poolNodes(pool) {
		if n.Kind == model.NodeStatic && n.Phase.Serving() && n.Successor == "" {
			c++
		}
	}
	return c
}

// provisionJob gives a pending job the VMs its nodes lack, through one
// resize request for the whole job. It returns false (and records why) when
// the pool has no room.
func (b *builder) provisionJob(j model.Job, why string) bool {
	pool, ok := b.st.Pools[j.Pool]
	if !ok {
		b.putJob(j, fmt.Sprintf("pool %q is not a flex-start pool of this cluster", j.Pool))
		return false
	}
	if m, fits := JobFit(pool, j); !fits {
		b.refuseUnfitJob(pool, j, m, b.key)
		return false
	}
	b.fitAgain(&j)
	if len(j.Nodes) == 0 && j.AwaitingSlurm {
		return false // Slurm requeued it after a resume failure: its next allocation decides (resumetimeout.go)
	}
	if len(j.Nodes) == 0 {
		picked, free := b.freeSlots(pool, j.NodesWanted)
		if picked == nil {
			b.putJobIfChanged(j, model.JobStageWaiting, waitingReason(pool, free, j.NodesWanted))
			return false
		}
		j.Nodes = picked
	}
	var missing []model.Node
	for _, name := range j.Nodes {
		n, ok := b.st.Nodes[name]
		var rec model.Node
		if ok {
			rec = *n
		} else {
			_, _, idx, _ := naming.ParseNodeName(name)
			rec = b.node(pool, idx)
		}
		if !rec.Phase.Serving() {
			missing = append(missing, rec)
		}
	}
	if len(missing) == 0 {
		if j.Stage != model.JobStageProvisioned {
			b.putJobAt(j, model.JobStageProvisioned, "nodes provisioned or in flight")
		}
		return true
	}
	if blocked, why := b.blocked(pool); blocked {
		b.putJobIfChanged(j, model.JobStageWaiting, why)
		return false
	}
	if b.vmCount(pool.ID)+len(missing) > pool.MaxNodes {
		b.putJobAt(j, model.JobStageWaiting, fmt.Sprintf("waiting: %d more VMs would exceed max_node_count %d of pool %s", len(missing), pool.MaxNodes, pool.ID))
		return false
	}
	var held []string
	for _, n := range missing {
		if why := b.holdForPreviousRequest(pool, n); why != "" {
			held = append(held, why)
		}
	}
	if len(held) > 0 {
		b.putJobIfChanged(j, j.Stage, strings.Join(held, "; "))
		return false
	}
	// A static node is requested through its own resize request, never
	// through the job's: a request is cancelled as a whole (when the job
	// ends and its dynamic nodes are released, or when a lowered
	// max_node_count releases one of them), and the static node must keep
	// its capacity — and its place in the queue — through both.
	dynamic := missing[:0:0]
	for _, n := range missing {
		if n.Kind == model.NodeStatic {
			b.provisionNode(pool, n, "", fmt.Sprintf("static node %s has no VM and job %s is pending on it: requested in its own resize request (%s)", n.Name, j.ID, why))
			continue
		}
		dynamic = append(dynamic, n)
	}
	if missing = dynamic; len(missing) == 0 {
		b.putJobAt(j, model.JobStageProvisioned, "nodes provisioned or in flight")
		return true
	}
	j.Generation++
	if b.pol.OneNodePerRequest {
		// Without named VMs, a request's VMs tell their nodes only through
		// their MIG's base instance name: each node has a request and a MIG
		// of its own, which Compute fulfils on its own (not all of the job's
		// nodes at once).
		j.ResizeRequest = ""
		var creates []CreateResizeRequest
		for _, n := range missing {
			rr := naming.NodeResizeRequest(n.Name, n.Generation+1)
			b.nextGeneration(&n, rr, j.ID)
			n.RunDuration = b.jobRunDuration(pool, j)
			b.putNode(n, fmt.Sprintf("provisioning for job %s", j.ID))
			b.bootReservation(n)
			creates = append(creates, b.createRequest(pool, rr, []string{n.VMName}, j.ID, n.RunDuration,
				fmt.Sprintf("job %s is pending and needs %d VMs, one request each: %s", j.ID, len(missing), why)))
		}
		b.putJobAt(j, model.JobStageProvisioned, fmt.Sprintf("nodes provisioned or in flight: %d resize requests of one VM each", len(missing)))
		if !pool.Ready {
			b.ensurePool(pool, "pool resources not confirmed yet")
		}
		for _, c := range creates {
			b.add(c)
		}
		return true
	}
	rr := naming.JobResizeRequest(b.cluster, pool.ID, j.ID, j.Generation)
	j.ResizeRequest = rr
	var vms []string
	runDuration := b.jobRunDuration(pool, j)
	for _, n := range missing {
		b.nextGeneration(&n, rr, j.ID)
		n.RunDuration = runDuration
		vms = append(vms, n.VMName)
		b.putNode(n, fmt.Sprintf("provisioning for job %s", j.ID))
		b.bootReservation(n)
	}
	b.putJobAt(j, model.JobStageProvisioned, fmt.Sprintf("nodes provisioned or in flight: resize request %s for %d VMs", rr, len(vms)))
	if !pool.Ready {
		b.ensurePool(pool, "pool resources not confirmed yet")
	}
	b.add(b.createRequest(pool, rr, vms, j.ID, runDuration, fmt.Sprintf("job %s is pending and needs %d VMs: %s", j.ID, len(vms), why)))
	return true
}

func waitingReason(pool *model.Pool, free, want int) string {
	return fmt.Sprintf("waiting: job needs %d nodes, pool %s has %d free of max_node_count %d", want, pool.ID, free, pool.MaxNodes)
}

// freeSlots picks want dynamic slots of the pool with no VM and no
// previous request that may still be active (requestMayBeActive), lowest
// index first, within max_node_count. It returns nil and the number free when there
// are not enough.
func (b *builder) freeSlots(pool *model.Pool, want int) ([]string, int) {
	room := pool.MaxNodes - b.vmCount(pool.ID)
	var free []string
	for i := pool.MinNodes; i < pool.MaxNodes; i++ {
		n := b.node(pool, i)
		if !n.Phase.Serving() && !b.claimed(n.Name) && !requestMayBeActive(&n) {
			free = append(free, n.Name)
		}
	}
	if room < len(free) {
		free = free[:max(room, 0)]
	}
	if len(free) < want || want < 1 {
		return nil, len(free)
	}
	return free[:want], len(free)
}

// claimed reports whether an active job already names the node.
func (b *builder) claimed(node string) bool {
	for _, j := range b.st.Jobs {
		if j.State.Active() {
			for _, n := range j.Nodes {
				if n == node {
					return true
				}
			}
		}
	}
	return false
}

// pendingJobFor finds a pending job that a dynamic node of the pool could
// serve: first the job the node was provisioned for or is allocated to, then
// any pending job of the pool still waiting for nodes.
func (b *builder) pendingJobFor(n model.Node) (model.Job, bool) {
	jobs := b.st.SortedJobs()
	for _, j := range jobs {
		if j.State == model.JobPending && (provisionedFor(&n, j) || slices.Contains(j.Nodes, n.Name)) {
			return *j, true
		}
	}
	for _, j := range jobs {
		if j.State == model.JobPending && j.Pool == n.Pool && len(j.Nodes) == 0 {
			return *j, true
		}
	}
	return model.Job{}, false
}
