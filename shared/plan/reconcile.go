package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"
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
	b.lostJobReports(slurm, obs)
	b.lostJobEnds(slurm)
	b.placedElsewhere(slurm) // before jobsStarted, which makes the job's record newer than the snapshot
	b.jobsStarted(slurm)
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

func (b *builder) reconcilePool(pool *model.Pool, po ObservedPool, slurm *model.SlurmView, pol Policy) {
	b.listedAt = po.ListedAt
	vms := b.indexVMs(po.VMs)
	rrs := make(map[string]ObservedResizeRequest, len(po.ResizeRequests))
	for _, rr := range po.ResizeRequests {
		rrs[rr.Name] = rr
	}
	// A pool is recorded ready in the transaction that asks for its
	// template and MIG, before they exist (commit, then act): a MIG missing
	// from a list taken within ObserveGrace of the pool record's last
	// change may still have been on its way, and taking it for deleted
	// would plan a second VM for every node already requested in it. The
	// list's time counts, not the decision's: a pass that lists early and
	// decides late (a loaded instance) has seen nothing of what happened
	// in between. Decide nothing for the pool this pass.
	legacy := b.legacyInUse(pool)
	if legacy && pool.Ready && !po.MIGExists && !pool.Removed && (po.ListedAt.IsZero() || po.ListedAt.Sub(pool.UpdatedAt) < pol.ObserveGrace) {
		return
	}
	b.queuedShortage(pool, po.ResizeRequests)
	pool = b.st.Pools[pool.ID]
	// The pool's MIG of the earlier layout was deleted out of band while
	// generations of that layout were in it: its requests are gone with it
	// and its VMs too. Re-plan every node that waited on it (in the new
	// layout).
	if legacy && pool.Ready && !po.MIGExists && !pool.Removed {
		b.add(Alert{Pool: pool.ID, Reason: fmt.Sprintf("MIG %s was deleted outside flexslurm", pool.MIG)})
		for _, n := range b.poolNodes(pool.ID) {
			if n.MIG != "" {
				continue
			}
			switch {
			case n.Phase == model.PhaseRequested:
				b.generationEnded(pool, *n, model.EndLost, fmt.Sprintf("reconciler: resize request %s vanished with MIG %s", n.ResizeRequest, pool.MIG))
			case requestMayBeActive(n):
				node := *n
				node.RequestOpen, node.RequestMisses = false, 0
				b.putNode(node, fmt.Sprintf("reconciler: previous resize request %s vanished with MIG %s", n.ResizeRequest, pool.MIG))
			}
		}
	}
	b.vanishedRequestMIGs(pool, po)
	pool = b.st.Pools[pool.ID]
	b.legacyRequests(pool, rrs)
	b.adoptArrived(pool, vms) // adopt.go
	b.observePreviousRequests(pool, vms, rrs)
	// Every node of the pool: the stored ones and every slot below
	// max_node_count (a slot never used has no record, but Slurm knows it).
	// The stored nodes in index order, then the slots with no record in
	// index order. Records are replaced, never edited, so stored keeps the
	// records as they were here.
	stored, writes := b.poolNodes(pool.ID), b.nodeWrites
	seen := make([]bool, pool.MaxNodes) // by slot index
	for _, n := range stored {
		if n.Index >= 0 && n.Index < len(seen) {
			seen[n.Index] = true
		}
	}
	slot := 0 // next slot index to look at once the stored nodes are done
	for k := 0; ; k++ {
		var node model.Node
		if k < len(stored) {
			node = *stored[k]
		} else {
			for slot < pool.MaxNodes && seen[slot] {
				slot++
			}
			if slot >= pool.MaxNodes {
				break
			}
			node = b.node(pool, slot)
			slot++
		}
		// An earlier node's decision in this pass may have changed this
		// one (a job it serves provisioned with it): decide on the record
		// as it is now, never on the copy taken before the loop. While no
		// record was stored since stored was read, its records are the
		// current ones (b.st.Nodes is keyed by node name).
		if k >= len(stored) || b.nodeWrites != writes {
			if cur, ok := b.st.Nodes[node.Name]; ok {
				node = *cur
			}
		}
		vm, present := vms.get(node.VMName)
		if node.VMName == "" {
			present = false
		}
		if present && incompleteVM(vm) {
			continue // listed without its status or creation time: decided next pass (listing.go)
		}
		// A node under repair is followed by its repair first, so that the
		// table never acts against it (a drained node whose VM is
		// REPAIRING, or RUNNING on its old host until the repair starts).
		if b.unreportedHealthDrain(pool, &node, vm, present) {
			continue
		}
		b.liftDrainOfGoneVM(node)
		if node.Repair != model.RepairNone && b.reconcileRepair(pool, node, vm, present) {
			continue
		}
		combo := Combo{Slurm: nodeSlurmClass(slurm, node), VM: ClassifyVM(vm.Status, present), Phase: node.Phase, Kind: kindOf(node, pool)}
		if node.Phase == "" {
			combo.Phase = model.PhaseReleased
		}
		rule, ok := b.decide(combo)
		if !ok { // unreachable: TestTableIsExhaustive
			b.add(Alert{Pool: pool.ID, Node: node.Name, Reason: "reconciler: no decision for " + combo.String()})
			continue
		}
		outcome := rule.Outcome
		dirty := false
		if outcome == OutcomeObserve && rule.Fallback == OutcomeSlurmPowerDown && b.claimed(node.Name) {
			outcome = OutcomeWait // Slurm resumes it for a job flexslurm is serving
		}
		if outcome == OutcomeObserve {
			if node.Observed != combo.String() {
				node.Observed, node.ObservedSince = combo.String(), b.now
				b.putNode(node, "reconciler: observing an unexpected state: "+rule.Why+" ("+combo.String()+")")
				continue
			}
			if b.now.Sub(node.ObservedSince) < pol.ObserveGrace {
				continue
			}
			b.add(Alert{Pool: pool.ID, Node: node.Name, Reason: fmt.Sprintf("reconciler: %s for %s (%s): acting (%s)",
				rule.Why, b.now.Sub(node.ObservedSince).Round(time.Second), combo, rule.Fallback)})
			outcome = rule.Fallback
			node.Observed, node.ObservedSince, dirty = "", time.Time{}, true
		} else if node.Observed != "" {
			node.Observed, node.ObservedSince, dirty = "", time.Time{}, true
		}
		if outcome != OutcomeVMGone && outcome != OutcomeCheckRequest && node.MissCount != 0 {
			node.MissCount, node.MissGeneration, dirty = 0, 0, true
		}
		if b.commandDone(&node, outcome, combo.Slurm) {
			dirty = true
		}
		if b.act(pool, node, vm, outcome, rule, combo, rrs, pol) {
			continue
		}
		if dirty {
			b.putNode(node, node.Reason)
		}
	}
	if cur, ok := b.st.Pools[pool.ID]; ok {
		b.unblockRepairs(cur)
	}
	if !pool.Removed {
		b.shrunk(pool)
	}
	b.makeBeforeBreak(pool, slurm)
	b.warnBeforeEnd(pool)
	b.ensureStatic(pool, "reconciler: static pool below min_node_count")
	b.orphans(pool, po, vms, pol)
	b.unwantedRequests(pool, po, pol)
	b.finishedRequests(pool, po)
	b.requestMIGs(pool, po, rrs)
	b.legacyMIG(pool, po)
	if pool.Removed {
		b.removedPool(pool, po)
	}
}

// decide is Decide, remembering the last combination it was asked about:
// most nodes of a pool are in the same combination as the node before
// them, and comparing one is cheaper than scanning the table for it.
func (b *builder) decide(c Combo) (Rule, bool) {
	if b.decided.valid && b.decided.combo == c {
		return b.decided.rule, b.decided.ok
	}
	rule, ok := Decide(c)
	b.decided = lastDecision{valid: true, combo: c, rule: rule, ok: ok}
	return rule, ok
}

// lastDecision is the table's answer for one combination.
type lastDecision struct {
	valid bool // false until decide is first asked
	combo Combo
	rule  Rule
	ok    bool
}

// vmIndex finds a pool's listed VMs by name: the position in the list of
// the last VM of each name. It holds positions rather than copies of the
// VMs, so a pass allocates a few bytes per VM for it.
type vmIndex struct {
	list []VM
	at   map[string]int
}

// indexVMs indexes one pool's list. The index lives while that pool is
// reconciled: its map is the builder's, emptied and refilled for the next
// pool, so that a pass over a hundred pools does not allocate a hundred
// maps.
func (b *builder) indexVMs(list []VM) vmIndex {
	if b.vmAt == nil {
		b.vmAt = make(map[string]int, len(list))
	} else {
		clear(b.vmAt)
	}
	for i, vm := range list {
		b.vmAt[vm.Name] = i
	}
	// A VM its MIG named from a generation's base name (a request that
	// could not name its VMs: naming.ParseVMName) is found under the base
	// too, which is what the records name; a VM of the base's own name
	// comes first.
	for i, vm := range list {
		if base := naming.BaseVMName(vm.Name); base != vm.Name {
			if _, taken := b.vmAt[base]; !taken {
				b.vmAt[base] = i
			}
		}
	}
	return vmIndex{list: list, at: b.vmAt}
}

// get returns the VM listed under name.
func (x vmIndex) get(name string) (VM, bool) {
	i, ok := x.at[name]
	if !ok {
		return VM{}, false
	}
	return x.list[i], true
}

// has reports whether a VM of that name is listed.
func (x vmIndex) has(name string) bool {
	_, ok := x.at[name]
	return ok
}

// removedPool releases the nodes of a pool removed from the spec as their
// jobs end; its MIGs are deleted as they empty (requestMIGs, legacyMIG),
// and the pool is forgotten once no MIG of it is left.
func (b *builder) removedPool(pool *model.Pool, po ObservedPool) {
	b.releaseSurplus(pool)
	for _, n := range b.poolNodes(pool.ID) {
		if n.Phase.HasVM() || requestMayBeActive(n) {
			return
		}
	}
	if len(po.VMs) > 0 || len(po.MIGs) > 0 || po.MIGExists {
		return
	}
	b.add(ForgetPool{Pool: pool.ID, Reason: fmt.Sprintf("reconciler: pool %s was removed from the spec and no MIG of it is left", pool.ID)})
	delete(b.st.Pools, pool.ID)
}

// act carries out one node's outcome. It returns true when it stored the
// node (so the caller need not).
func (b *builder) act(pool *model.Pool, node model.Node, vm VM, outcome Outcome, rule Rule, combo Combo, rrs map[string]ObservedResizeRequest, pol Policy) bool {
	// del deletes the node's VM (the one vm names: vms.get(node.VMName)).
	del := func(_, reason string) { b.releaseVM(pool, node, reason) }
	switch outcome {
	case OutcomeOK, OutcomeWait:
		if outcome == OutcomeOK && b.endAtConfiguredDuration(pool, node, vm) {
			return true
		}
		if combo.Slurm == SlurmDrain && node.Phase == model.PhaseRunning && node.Successor == "" {
			b.liftOwnDrain(node)
		}
		if released, stored := b.idle(pool, &node, combo); released || stored {
			return true
		}
		changed := false
		if outcome == OutcomeOK && node.Phase == model.PhaseRunning && !vm.TerminationTime.IsZero() && !vm.TerminationTime.Equal(node.TerminationTime) {
			node.TerminationTime = vm.TerminationTime
			changed = true
		}
		if node.Phase == model.PhaseRunning && !node.Registered && slices.Contains([]SlurmClass{SlurmIdle, SlurmBusy, SlurmDrain}, combo.Slurm) {
			b.registered(pool, &node)
			b.recordCapacityWait(b.st.Pools[pool.ID], node, b.now)
			changed = true
		}
		if changed {
			b.putNode(node, "reconciler: VM runs until "+node.TerminationTime.Format(time.RFC3339))
			return true
		}
		return false
	case OutcomeMarkRunning:
		node.Phase = model.PhaseRunning
		node.VMID = vm.ID
		node.RunningAt = b.now
		node.TerminationTime = vm.TerminationTime
		if node.TerminationTime.IsZero() && !vm.Created.IsZero() {
			node.TerminationTime = vm.Created.Add(pool.RunDuration)
		}
		if pool.MaxRunDuration > 0 && pool.MaxRunDuration < pool.RunDuration && !vm.Created.IsZero() {
			// 30–599 s pools: Compute was asked for 600 s; the node ends
			// at the configured time, by flexslurm.
			node.TerminationTime = vm.Created.Add(pool.MaxRunDuration)
		}
		b.putNode(node, fmt.Sprintf("VM %s is running until %s", vm.Name, node.TerminationTime.Format(time.RFC3339)))
		if b.view == nil {
			b.recordCapacityWait(pool, node, vm.Created)
		}
		b.succeeded(b.st.Pools[pool.ID])
		b.endOfLife(node)
		return true
	case OutcomeCheckRequest:
		return b.reconcileRequested(pool, node, rrs, pol)
	case OutcomeVMGone:
		pastEnd := !node.TerminationTime.IsZero() && !b.now.Before(node.TerminationTime.Add(-pol.ExpirySlack))
		if node.MissGeneration != node.Generation {
			node.MissGeneration, node.MissCount = node.Generation, 0
		}
		node.MissCount++
		if !pastEnd && node.MissCount < pol.MissThreshold {
			b.putNode(node, fmt.Sprintf("reconciler: VM %s missing from Compute's list (%d of %d passes before it is given up)", node.VMName, node.MissCount, pol.MissThreshold))
			return true
		}
		node.MissCount, node.MissGeneration = 0, 0
		if pastEnd {
			b.generationEnded(pool, node, model.EndExpired, fmt.Sprintf("reconciler: VM %s is gone at its termination time %s (max run duration)", node.VMName, node.TerminationTime.Format(time.RFC3339)))
		} else {
			b.generationEnded(pool, node, model.EndLost, fmt.Sprintf("reconciler: VM %s is gone (missing for %d passes)", node.VMName, pol.MissThreshold))
		}
		return true
	case OutcomeEndStopped:
		del(node.VMName, rule.reconcilerWhy())
		end := model.EndLost
		if !node.TerminationTime.IsZero() && !b.now.Before(node.TerminationTime.Add(-pol.ExpirySlack)) {
			end = model.EndExpired
		}
		b.generationEnded(pool, node, end, fmt.Sprintf("%s: VM %s is %s", rule.reconcilerWhy(), vm.Name, vm.Status))
		return true
	case OutcomeEndGoing:
		end := model.EndLost
		if !node.TerminationTime.IsZero() && !b.now.Before(node.TerminationTime.Add(-pol.ExpirySlack)) {
			end = model.EndExpired
		}
		b.generationEnded(pool, node, end, fmt.Sprintf("%s: VM %s is %s", rule.reconcilerWhy(), vm.Name, vm.Status))
		return true
	case OutcomeResumeFailed:
		b.resumeFailed(pool, node, b.view.TakenAt, rule.reconcilerWhy())
		return true
	case OutcomeDeleteAgain:
		del(node.VMName, fmt.Sprintf("%s (VM %s is %s)", rule.reconcilerWhy(), vm.Name, vm.Status))
		return false
	case OutcomeMarkReleased:
		node.Phase = model.PhaseReleased
		node.VMID = ""
		if node.Successor != "" {
			b.handoverEnded(pool, &node)
		}
		b.putNode(node, fmt.Sprintf("reconciler: VM %s is gone", node.VMName))
		return true
	case OutcomeDeleteStray:
		if incompleteVM(vm) || b.now.Sub(vm.Created) < pol.OrphanGrace {
			return false
		}
		del(vm.Name, rule.reconcilerWhy())
		return false
	case OutcomeReleaseIdle:
		b.releaseQuietly(pool, node, rule.reconcilerWhy())
		if combo.Slurm == SlurmDownPowered {
			b.slurm(event.SlurmResume, []string{node.Name}, "", rule.Why, node.VMName, "resume")
		}
		return true
	case OutcomeSlurmResume:
		cmd := event.SlurmResume
		if node.Phase == model.PhaseRunning && combo.Slurm == SlurmPoweredDown {
			cmd = event.SlurmPowerUp
		}
		return b.nodeCommand(node, cmd, rule.Why)
	case OutcomeSlurmPowerDown:
		if b.claimed(node.Name) {
			return false // a pending job waits for this node (capacity or backoff): Slurm is right to resume it
		}
		return b.nodeCommand(node, event.SlurmPowerDownForce, rule.Why)
	case OutcomeReplace:
		if !node.Registered {
			b.bootstrapFailed(pool, node, fmt.Sprintf("VM %s ran but node %s never registered in Slurm", node.VMName, node.Name))
			pool = b.st.Pools[pool.ID]
		}
		b.replaceLost(pool, node, rule.reconcilerWhy(), rule.Why)
		return true
	}
	return false
}

// reconcilerWhy is the reason of an action the rule's outcome takes,
// built only by the outcomes that act (most nodes need none).
func (r Rule) reconcilerWhy() string { return "reconciler: " + r.Why }

// replaceLost deletes a node's VM that will never serve: a static node
// gets a new generation at once, a dynamic node is powered down in Slurm
// (its job, requeued, asks for it again).
func (b *builder) replaceLost(pool *model.Pool, node model.Node, why, slurmReason string) {
	b.releaseVM(pool, node, why)
	if kindOf(node, pool) == model.NodeStatic {
		b.generationEnded(pool, node, model.EndLost, why+": replaced")
		return
	}
	b.slurm(event.SlurmPowerDownForce, []string{node.Name}, "", slurmReason, node.VMName)
	node.Phase = model.PhaseDeleting
	node.LastEnd = model.EndLost
	b.putNode(node, why+": released")
}

// reconcileRequested follows the resize request of a requested node whose
// VM is not there yet. It returns true when it stored the node.
func (b *builder) reconcileRequested(pool *model.Pool, node model.Node, rrs map[string]ObservedResizeRequest, pol Policy) bool {
	rr, seen := rrs[node.ResizeRequest]
	switch {
	case !seen:
		if b.now.Sub(node.RequestedAt) < pol.RequestGrace || b.issued(node.ResizeRequest) {
			return false
		}
		if b.endedBeforeListing(pool, node) {
			// Never issued, and its job has ended: not issued now.
			b.releaseNode(pool, node, fmt.Sprintf("reconciler: job %s has ended and resize request %s for node %s was never seen: not issued", node.JobID, node.ResizeRequest, node.Name))
			return true
		}
		if node.MIG == "" {
			// A request of the earlier layout is never made again in the
			// pool's MIG: the generation ends, and the next one is made
			// in a MIG of its own.
			b.generationEnded(pool, node, model.EndLost, fmt.Sprintf("reconciler: resize request %s in MIG %s is not visible %s after it was recorded", node.ResizeRequest, pool.MIG, b.now.Sub(node.RequestedAt).Round(time.Second)))
			return true
		}
		// A crash between the Firestore commit and the Compute call: issue
		// the same request again (same name and request id: never twice).
		var vms []string
		for _, n := range b.poolNodes(pool.ID) {
			if n.ResizeRequest == node.ResizeRequest && n.Phase == model.PhaseRequested {
				vms = append(vms, n.VMName)
			}
		}
		b.add(b.createRequest(pool, node.ResizeRequest, vms, node.JobID,
			fmt.Sprintf("reconciler: resize request %s is not visible %s after it was recorded: issuing it again", node.ResizeRequest, b.now.Sub(node.RequestedAt).Round(time.Second))))
		return false
	case rr.State == "FAILED" && rr.ErrorClass != "":
		// Capacity, quota or a permanent error: back off (stored), then end
		// the generation; its replacement waits for the backoff to end.
		why := fmt.Sprintf("reconciler: resize request %s FAILED: %s", rr.Name, rr.ErrorCode)
		b.backOffQuota(pool, rr.ErrorClass, rr.ErrorCode, rr.ErrorQuota, why)
		b.generationEnded(b.st.Pools[pool.ID], node, model.EndFailed, why)
		return true
	case rr.State == "SUCCEEDED":
		// The request created the VM, yet the list does not show it:
		// eventual consistency, or the VM already came and went. Give it
		// up only after the same consecutive misses as a running VM.
		if node.MissGeneration != node.Generation {
			node.MissGeneration, node.MissCount = node.Generation, 0
		}
		node.MissCount++
		if node.MissCount < pol.MissThreshold {
			b.putNode(node, fmt.Sprintf("reconciler: resize request %s SUCCEEDED but VM %s is not listed (%d of %d passes)", rr.Name, node.VMName, node.MissCount, pol.MissThreshold))
			return true
		}
		node.MissCount, node.MissGeneration = 0, 0
		b.generationEnded(pool, node, model.EndLost, fmt.Sprintf("reconciler: resize request %s SUCCEEDED but VM %s is gone", rr.Name, node.VMName))
		return true
	case rr.State == "FAILED" || rr.State == "CANCELLED":
		// The request ended without this VM (failed, cancelled out of band,
		// or its VM already came and went): this generation is over.
		why := fmt.Sprintf("reconciler: resize request %s is %s and VM %s does not exist", rr.Name, rr.State, node.VMName)
		b.generationEnded(pool, node, model.EndLost, why)
		return true
	case rr.State == "ACCEPTED" && b.endedBeforeListing(pool, node):
		// No job waits for this capacity: a job's end releases its queued
		// nodes, but keeps those it ran on (job.finished with nodes_up:
		// their requests were fulfilled, unless Slurm showed the node up
		// from an older VM), and names only the nodes the job has now (it
		// may have been requested here, then placed elsewhere).
		b.releaseNode(pool, node, fmt.Sprintf("reconciler: job %s has ended and resize request %s still queues for node %s", node.JobID, rr.Name, node.Name))
		return true
	case rr.State == "ACCEPTED" && b.now.Sub(rr.Created) > pol.QueueTimeout:
		return b.queueTimedOut(pool, node, rr)
	}
	return false
}

// endedBeforeListing reports whether node is a dynamic node requested for
// a job flexslurm recorded as finished or cancelled before the pool's
// Compute listing was taken, that no active job names now, and that the
// Slurm snapshot does not show up or powering up. The reconciler's scope
// loads such a job's record (store.Scope.JobsOfRequested). A listing
// taken before the job's end was recorded may show a request as queued
// that has since made the VM the job ran on (the pass lists first and
// decides later), and a node Slurm shows up has a VM serving: neither is
// acted on.
func (b *builder) endedBeforeListing(pool *model.Pool, node model.Node) bool {
	if node.JobID == "" || kindOf(node, pool) != model.NodeDynamic || b.claimed(node.Name) {
		return false
	}
	j, ok := b.st.Jobs[node.JobID]
	if !ok || (j.State != model.JobFinished && j.State != model.JobCancelled) || !b.listedAt.After(j.UpdatedAt) {
		return false
	}
	switch nodeSlurmClass(b.view, node) {
	case SlurmIdle, SlurmBusy, SlurmDrain, SlurmPoweringUp:
		return false // a VM serves, or Slurm resumes the node for a job not yet reported
	}
	return true
}

// issued reports whether this pass already re-issued the request.
func (b *builder) issued(rr string) bool {
	for _, a := range b.out {
		if c, ok := a.(CreateResizeRequest); ok && c.Name == rr {
			return true
		}
	}
	return false
}

// orphans deletes VMs of the pool (by label) that no node record names,
// once older than the orphan grace.
func (b *builder) orphans(pool *model.Pool, po ObservedPool, vms vmIndex, pol Policy) {
	deleting := map[string]bool{}
	for _, a := range b.out {
		switch d := a.(type) {
		case DeleteVMs:
			for _, name := range d.VMs {
				deleting[name] = true
			}
		case DeleteMIG:
			for _, name := range d.VMs {
				deleting[name] = true
			}
		}
	}
	// A node names only VMs of its own name (model.VMName: <node>-g<k>),
	// so the one record that could name a VM is found from the VM's name.
	named := func(vm string) bool {
		vm = naming.BaseVMName(vm)
		i := strings.LastIndex(vm, "-g")
		if i <= 0 {
			return false
		}
		n, ok := b.st.Nodes[vm[:i]]
		return ok && n.VMName == vm
	}
	// Most of the pool's VMs are named by the pool's own records, which
	// the pass has just read: those are marked from the records first
	// (b.st.Nodes is keyed by node name, so the record a VM's name points
	// to is the one found here), and only the others are looked up in the
	// map of every record.
	byRecord := make([]bool, len(po.VMs))
	for _, n := range b.poolNodes(pool.ID) {
		i, ok := vms.at[n.VMName]
		if !ok || n.VMName == "" {
			continue
		}
		if j := strings.LastIndex(n.VMName, "-g"); j > 0 && n.VMName[:j] == n.Name {
			byRecord[i] = true
		}
	}
	var names []string
	for i, vm := range po.VMs {
		if byRecord[i] || named(vm.Name) || deleting[vm.Name] || deleting[naming.BaseVMName(vm.Name)] {
			continue
		}
		if vm.Status == "STOPPING" || incompleteVM(vm) || b.now.Sub(vm.Created) < pol.OrphanGrace {
			continue
		}
		if b.orphanRunsJob(vm) { // started.go
			continue
		}
		names = append(names, vm.Name)
	}
	sort.Strings(names)
	for _, name := range names {
		vm, _ := vms.get(name)
		b.orphanVM(pool, po, vm, fmt.Sprintf("reconciler: VM %s is labelled as pool %s's but no node record names it (orphan older than %s)", name, pool.ID, pol.OrphanGrace))
	}
}

// unwantedRequests cancels queued requests that no requested node waits for
// (their job was cancelled or finished, or they belong to an older
// generation), and only those.
func (b *builder) unwantedRequests(pool *model.Pool, po ObservedPool, pol Policy) {
	for _, rr := range po.ResizeRequests {
		if !activeRequestState(rr.State) {
			continue
		}
		if b.requestWanted(rr.Name) || b.now.Sub(rr.Created) < pol.RequestGrace || b.cancelling(rr.Name) {
			continue
		}
		id := naming.CancelResizeRequestID(rr.MIG, rr.Name)
		if !rr.Legacy {
			id = naming.CancelResizeRequestIDFor(b.incarnation(), rr.MIG, rr.Name)
		}
		b.add(CancelResizeRequest{Pool: pool.ID, MIG: rr.MIG, Legacy: rr.Legacy, Name: rr.Name,
			RequestID: id,
			Reason:    fmt.Sprintf("reconciler: resize request %s is queued but no node waits for it", rr.Name)})
	}
}

// finishedRequests deletes the resize requests that reached a final state
// (SUCCEEDED, FAILED, CANCELLED) and whose outcome is recorded: no node
// waits on them any more (its VM runs, or its generation ended — possibly
// in this very pass, whose records commit before any action runs). A
// request a node still waits on is kept: it is how the reconciler learns
// what became of that node's VM. Compute refuses to delete an active
// request, and this never asks it to.
func (b *builder) finishedRequests(pool *model.Pool, po ObservedPool) {
	for _, rr := range po.ResizeRequests {
		if !finalRequestState(rr.State) || !rr.Legacy {
			continue // a request's own MIG is deleted whole (requestMIGs)
		}
		if b.requestWanted(rr.Name) {
			continue
		}
		b.add(DeleteResizeRequest{Pool: pool.ID, MIG: rr.MIG, Legacy: true, Name: rr.Name, State: rr.State,
			RequestID: naming.DeleteResizeRequestID(pool.MIG, rr.Name, pool.MIGIncarnation),
			Reason:    fmt.Sprintf("reconciler: resize request %s is %s and its outcome is recorded: deleted so the MIG's list stays short", rr.Name, rr.State)})
	}
}

// cancelling reports whether this pass already cancels the request (a
// node released earlier in the pass).
func (b *builder) cancelling(rr string) bool {
	for _, a := range b.out {
		if c, ok := a.(CancelResizeRequest); ok && c.Name == rr {
			return true
		}
	}
	return false
}

// requestWanted reports whether a requested node waits on this request.
func (b *builder) requestWanted(rr string) bool {
	for _, n := range b.st.Nodes {
		if n.ResizeRequest == rr && n.Phase == model.PhaseRequested {
			return true
		}
	}
	return false
}

// lostJobReports provisions for jobs the Slurm snapshot shows pending on
// this cluster's nodes while Slurm powers those nodes up, when flexslurm
// holds no record of the job (its job.pending report was lost).
func (b *builder) lostJobReports(slurm *model.SlurmView, obs Observed) {
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

// liftOwnDrain resumes a node that flexslurm itself drained for an earlier
// generation (a health failure), now that a new VM backs it: a drain
// survives a node's reboot in Slurm. Only a reason with flexslurm's prefix
// that names an older VM of the node ("… (<node>-g<k>)") is lifted; any
// other drain — an administrator's, or one that does not say which VM it
// was for — is left alone, and so is a node under repair: the repair's own
// drain, asked for after the snapshot was taken, is not in it yet, and
// resuming the node would lift that drain too.
func (b *builder) liftOwnDrain(node model.Node) {
	if b.view == nil || node.Repair != model.RepairNone {
		return
	}
	if !b.view.Nodes[node.Name].OwnReasonFor(node.Generation) {
		return
	}
	b.slurm(event.SlurmResume, []string{node.Name}, "", fmt.Sprintf("lifting flexslurm's drain: %s replaced the VM it was set for", node.VMName), node.VMName, "lift-drain")
}

// idle tracks how long Slurm has shown a running dynamic node idle and
// releases it past Policy.IdleTimeout when no pending job waits for it. It
// reports whether it released the node or stored a change to it.
func (b *builder) idle(pool *model.Pool, node *model.Node, combo Combo) (released, stored bool) {
	// Slurm is the authority on whether a job runs there: an idle class
	// means none does, whatever job the node was first provisioned for.
	idle := combo.Slurm == SlurmIdle && node.Phase == model.PhaseRunning && node.Kind == model.NodeDynamic && node.Predecessor == ""
	if !idle {
		if !node.IdleSince.IsZero() && combo.Slurm != SlurmUnknown {
			node.IdleSince = time.Time{}
			b.putNode(*node, "reconciler: node busy in Slurm")
			return false, true
		}
		return false, false
	}
	if node.IdleSince.IsZero() {
		node.IdleSince = b.now
		b.putNode(*node, "reconciler: node idle in Slurm")
		return false, true
	}
	if idleRestarts(node, b.now) {
		b.putNode(*node, fmt.Sprintf("reconciler: node idle in Slurm again after job %s", node.StartedJob))
		return false, true
	}
	if b.now.Sub(node.IdleSince) < b.pol.IdleTimeout {
		return false, false
	}
	// Kept for a pending job only while that job can still use it
	// (keptFor): a job of the pool that Slurm did not place here has no use
	// for it — including the job it was provisioned for once Slurm runs it
	// on other nodes or allocated it others (requeued after a failure here,
	// then placed elsewhere while this node was drained for its repair).
	var notKept []string
	for _, j := range b.st.SortedJobs() {
		if j.State != model.JobPending {
			continue
		}
		kept, why := b.keptFor(j, *node)
		if kept {
			return false, false
		}
		if provisionedFor(node, j) || slices.Contains(j.Nodes, node.Name) {
			notKept = append(notKept, why)
		}
	}
	reason := fmt.Sprintf("reconciler: dynamic node idle in Slurm since %s (idle timeout %s): VM released and node powered down",
		node.IdleSince.Format(time.RFC3339), b.pol.IdleTimeout)
	if len(notKept) > 0 {
		reason += " (not kept: " + strings.Join(notKept, "; ") + ")"
	}
	b.releaseNode(pool, *node, reason)
	return true, true
}

// lostJobEnds ends the jobs flexslurm holds as pending or running that a
// snapshot taken after their last change no longer shows alive (their end
// report was lost): their queued capacity is cancelled, so no VM is made
// for a job that is gone.
func (b *builder) lostJobEnds(slurm *model.SlurmView) {
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
					b.releaseNode(pool, *n, why)
				}
			}
		}
	}
}
