package plan

import (
	"fmt"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// decideNodes runs the reconciler's decision table (table.go) for every
// node of the pool, and act carries out each node's outcome.
func (b *builder) decideNodes(pool *model.Pool, slurm *model.SlurmView, vms vmIndex, rrs map[string]ObservedResizeRequest, pol Policy) {
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
}

// act carries out one node's outcome. It returns true when it stored the
// node (so the caller need not).
func (b *builder) act(pool *model.Pool, node model.Node, vm VM, outcome Outcome, rule Rule, combo Combo, rrs map[string]ObservedResizeRequest, pol Policy) bool {
	// del deletes the node's VM (the one vm names: vms.get(node.VMName)).
	del := func(_, reason string) { b.releaseVM(pool, node, reason) }
	switch outcome {
	case OutcomeOK, OutcomeWait:
		return b.followRunning(pool, node, vm, outcome, combo)
	case OutcomeMarkRunning:
		return b.markRunning(pool, node, vm)
	case OutcomeCheckRequest:
		return b.reconcileRequested(pool, node, rrs, pol)
	case OutcomeVMGone:
		return b.countMissing(pool, node, pol)
	case OutcomeEndStopped:
		del(node.VMName, rule.reconcilerWhy())
		b.endGeneration(pool, node, goneEnd(node, b.now, pol), fmt.Sprintf("%s: VM %s is %s", rule.reconcilerWhy(), vm.Name, vm.Status))
		return true
	case OutcomeEndGoing:
		b.endGeneration(pool, node, goneEnd(node, b.now, pol), fmt.Sprintf("%s: VM %s is %s", rule.reconcilerWhy(), vm.Name, vm.Status))
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
			b.endHandover(pool, &node)
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

// followRunning follows a node whose VM is where it should be (OutcomeOK) or
// on its way (OutcomeWait): it ends a VM at a configured duration shorter
// than Compute's floor, lifts flexslurm's own drain of a running node,
// releases the node when it has been idle long enough, and records the
// VM's termination time and the node's registration. It returns true when
// it stored the node.
func (b *builder) followRunning(pool *model.Pool, node model.Node, vm VM, outcome Outcome, combo Combo) bool {
	if outcome == OutcomeOK && b.endAtConfiguredDuration(pool, node, vm) {
		return true
	}
	if combo.Slurm == SlurmDrain && node.Phase == model.PhaseRunning && node.Successor == "" {
		b.liftOwnDrain(node)
	}
	if released, stored := b.releaseIfIdle(pool, &node, combo); released || stored {
		return true
	}
	changed := false
	if outcome == OutcomeOK && node.Phase == model.PhaseRunning && !vm.TerminationTime.IsZero() && !vm.TerminationTime.Equal(node.TerminationTime) {
		node.TerminationTime = vm.TerminationTime
		changed = true
	}
	if node.Phase == model.PhaseRunning && !node.Registered && slices.Contains([]SlurmClass{SlurmIdle, SlurmBusy, SlurmDrain}, combo.Slurm) {
		b.markRegistered(pool, &node)
		b.recordCapacityWait(b.st.Pools[pool.ID], node, b.now)
		changed = true
	}
	if changed {
		b.putNode(node, "reconciler: VM runs until "+node.TerminationTime.Format(time.RFC3339))
		return true
	}
	return false
}

// markRunning records that a requested node's VM runs: its id, when it
// started running, when it ends, the capacity wait it took, and its
// end-of-life reservation.
func (b *builder) markRunning(pool *model.Pool, node model.Node, vm VM) bool {
	node.Phase = model.PhaseRunning
	node.VMID = vm.ID
	if pool.MultiZone() || pool.Region != "" {
		node.Zone = vm.Zone // where Compute placed this generation's request
	}
	node.RunningAt = b.now
	node.TerminationTime = vm.TerminationTime
	if node.TerminationTime.IsZero() && !vm.Created.IsZero() {
		node.TerminationTime = vm.Created.Add(requestedRunDuration(pool, node))
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
	b.clearBackoff(b.st.Pools[pool.ID])
	b.reserveEndOfLife(node)
	return true
}

// countMissing counts the passes a node's VM has been missing from
// Compute's list, and ends its generation once that is past the miss
// threshold, or at once when the VM was due to end.
func (b *builder) countMissing(pool *model.Pool, node model.Node, pol Policy) bool {
	pastEnd := atEnd(node, b.now, pol)
	if node.MissGeneration != node.Generation {
		node.MissGeneration, node.MissCount = node.Generation, 0
	}
	node.MissCount++
	if !pastEnd && node.MissCount < pol.MissThreshold {
		b.putNode(node, fmt.Sprintf("reconciler: VM %s missing from Compute's list (%d of %d passes before it is given up)", node.VMName, node.MissCount, pol.MissThreshold))
		return true
	}
	node.MissCount, node.MissGeneration = 0, 0
	why := fmt.Sprintf("reconciler: VM %s is gone (missing for %d passes)", node.VMName, pol.MissThreshold)
	if pastEnd {
		why = fmt.Sprintf("reconciler: VM %s is gone at its termination time %s (max run duration)", node.VMName, node.TerminationTime.Format(time.RFC3339))
	}
	b.endGeneration(pool, node, goneEnd(node, b.now, pol), why)
	return true
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
		b.endGeneration(pool, node, model.EndLost, why+": replaced")
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
			b.endGeneration(pool, node, model.EndLost, fmt.Sprintf("reconciler: resize request %s in MIG %s is not visible %s after it was recorded", node.ResizeRequest, pool.MIG, b.now.Sub(node.RequestedAt).Round(time.Second)))
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
		b.add(b.createRequest(pool, node.ResizeRequest, vms, node.JobID, node.RunDuration,
			fmt.Sprintf("reconciler: resize request %s is not visible %s after it was recorded: issuing it again", node.ResizeRequest, b.now.Sub(node.RequestedAt).Round(time.Second))))
		return false
	case rr.State == "FAILED" && rr.ErrorClass != "":
		// Capacity, quota or a permanent error: back off (stored), then end
		// the generation; its replacement waits for the backoff to end.
		why := fmt.Sprintf("reconciler: resize request %s FAILED: %s", rr.Name, rr.ErrorCode)
		b.backOffQuota(pool, rr.ErrorClass, rr.ErrorCode, rr.ErrorQuota, why)
		b.endGeneration(b.st.Pools[pool.ID], node, model.EndFailed, why)
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
		b.endGeneration(pool, node, model.EndLost, fmt.Sprintf("reconciler: resize request %s SUCCEEDED but VM %s is gone", rr.Name, node.VMName))
		return true
	case rr.State == "FAILED" || rr.State == "CANCELLED":
		// The request ended without this VM (failed, cancelled out of band,
		// or its VM already came and went): this generation is over.
		why := fmt.Sprintf("reconciler: resize request %s is %s and VM %s does not exist", rr.Name, rr.State, node.VMName)
		b.endGeneration(pool, node, model.EndLost, why)
		return true
	case rr.State == "ACCEPTED" && b.endedBeforeListing(pool, node):
		// No job waits for this capacity: a job's end releases its queued
		// nodes, but keeps those it ran on (job.finished with nodes_up:
		// their requests were fulfilled, unless Slurm showed the node up
		// from an older VM), and names only the nodes the job has now (it
		// may have been requested here, then placed elsewhere).
		b.releaseQueuedCapacity(pool, node, fmt.Sprintf("reconciler: job %s has ended and resize request %s still queues for node %s", node.JobID, rr.Name, node.Name))
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

// nodeTablePass runs the decision table for every node.
type nodeTablePass struct{}

func (nodeTablePass) apply(b *builder, pc *poolContext) {
	b.decideNodes(pc.pool, pc.slurm, pc.vms, pc.rrs, pc.pol)
}
