package plan

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/text"
)

// MetricUnreportedDrain counts repairs the reconciler started for a node
// that flexslurm's node-side hook drained for a failed health check whose
// report never arrived (label: pool).
const MetricUnreportedDrain = "repair_unreported_drain"

// unreportedHealthDrain finishes what flexslurm's node-side hook started.
// On FAIL the hook (Prolog, Epilog, HealthCheckProgram) first drains the
// node in Slurm, with flexslurm's reason naming the VM the check ran on,
// then publishes health.failure. When that report never reaches the Repair
// function (lost, dead-lettered, the function down past MaxEventAge), the
// first half stays done and the second never comes: the node would stay
// drained by flexslurm's own hand for good.
//
// So a running node with no repair in progress that a fresh snapshot,
// taken after flexslurm asked for the node's current VM, shows drained
// (DRAIN) with flexslurm's reason for that very VM (the typed owner, kind and
// generation of the reason: slurmstate.Node.OwnHealthDrainOf) is marked
// awaiting its report
// (model.RepairAwaitReport). A newer snapshot without that drain ends the
// wait (the drain was lifted: an operator, or a later pass of the check).
// Past Policy.UnreportedDrainGrace with the drain still shown by a snapshot
// taken after the wait began, the reconciler repairs the node as the report
// would have had it: within the pool's repair budget (else blocked), the
// repair step at once when Slurm shows the node drained with no job left,
// else after the drain completes; the job that waits is the one the node
// was provisioned for (the report would have named the job the failure
// involved: when it comes first, it starts the repair itself).
//
// flexslurm's other drains of the current VM (end of life, diagnosis) are
// not a failed check's, and a node whose record holds another repair state
// is followed by that repair. A static node handing over to its successor
// is repaired as the report would have had it: its VM deleted, not
// replaced (the successor takes its place). It returns true when it
// decided for the node this pass (the table is not consulted); a node it
// only marked or released from the wait goes on to the table.
func (b *builder) unreportedHealthDrain(pool *model.Pool, node *model.Node, vm VM, present bool) bool {
	if node.Repair != model.RepairNone && node.Repair != model.RepairAwaitReport {
		return false
	}
	if node.Phase != model.PhaseRunning || !present || vm.Status != "RUNNING" || b.view == nil {
		return false
	}
	if node.Repair == model.RepairNone {
		if Newest(nodeRecordedAt(*node), b.view) != SourceSlurm || !b.ownHealthDrain(*node) {
			return false
		}
		node.Repair, node.RepairSince = model.RepairAwaitReport, b.now
		node.RepairReason = text.Truncate(fmt.Sprintf("health check failed on %s (drained by flexslurm's node-side hook; its health.failure report has not arrived)", node.VMName), MaxFaultDescription)
		node.RepairJob = node.JobID
		b.putNode(*node, fmt.Sprintf("reconciler: Slurm's snapshot of %s shows %s drained by flexslurm's health check of %s, and no health.failure report of it arrived: repaired past %s unless the report comes or the drain is lifted",
			b.view.TakenAt.Format(time.RFC3339), node.Name, node.VMName, shortDuration(b.pol.UnreportedDrainGrace)))
		return false
	}
	// Awaiting the report: only a snapshot taken after the wait began
	// says whether the drain is still there.
	if Newest(node.RepairSince, b.view) != SourceSlurm {
		return false
	}
	if !b.ownHealthDrain(*node) {
		node.ClearRepair()
		b.putNode(*node, fmt.Sprintf("reconciler: Slurm's snapshot of %s no longer shows flexslurm's health drain of %s: nothing to repair",
			b.view.TakenAt.Format(time.RFC3339), node.VMName))
		return false
	}
	if b.now.Sub(node.RepairSince) < b.pol.UnreportedDrainGrace {
		return false
	}
	repair := *node
	why := fmt.Sprintf("reconciler: %s drained by flexslurm's health check of %s since at least %s, and its health.failure report never arrived",
		node.Name, node.VMName, node.RepairSince.Format(time.RFC3339))
	b.add(Alert{Pool: pool.ID, Node: node.Name, Reason: why + ": repaired as the report would have had it"})
	b.add(Metric{Name: MetricUnreportedDrain, Labels: map[string]string{"pool": pool.ID}, Reason: why})
	// The drain was asked for before the wait began, so a snapshot taken
	// since that shows the node drained with no job left confirms it.
	drained := b.drainConfirmed(node.Name, node.RepairSince)
	repair.Repair = model.RepairNone
	if unhealthy, allowed, serving := b.repairBudget(pool, node.Name); unhealthy >= allowed {
		repair.Repair, repair.RepairSince = model.RepairBlocked, b.now
		msg := fmt.Sprintf("repair of %s blocked: %d of pool %s's %d serving nodes are under repair, the budget is %d; the node stays drained and is repaired when a repair finishes",
			node.Name, unhealthy, pool.ID, serving, allowed)
		b.putNode(repair, why+": "+msg)
		b.add(Metric{Name: MetricRepairBlocked, Labels: map[string]string{"pool": pool.ID}, Reason: msg})
		return true
	}
	b.startRepair(pool, repair, drained, why)
	return true
}

// ownHealthDrain reports whether the fresh snapshot shows the node with
// the DRAIN flag and flexslurm's health-check reason for the node's
// current VM.
func (b *builder) ownHealthDrain(n model.Node) bool {
	sn, ok := b.view.Nodes[n.Name]
	return ok && sn.OwnHealthDrainOf(n.Generation)
}

// liftDrainOfGoneVM lifts a drain flexslurm set for a VM of a node that no
// longer has one: a node whose generation ended (released, no VM wanted)
// that a snapshot taken since shows drained with flexslurm's reason for
// that VM or an earlier one (a failed health check whose VM then expired
// or was deleted, an end-of-life or diagnosis drain). Slurm allocates no
// job to a drained node, so no job would ever bring it a new VM, whose
// registration lifts such a drain otherwise (liftOwnDrain): flexslurm's
// own drain would keep the node out of service for good. Powered down, the
// node stays powered down and available. The command's id names the VM,
// so it is sent once per VM.
func (b *builder) liftDrainOfGoneVM(node model.Node) {
	if b.view == nil || node.Phase != model.PhaseReleased || node.Generation == 0 || Newest(nodeRecordedAt(node), b.view) != SourceSlurm {
		return
	}
	sn, ok := b.view.Nodes[node.Name]
	if !ok || !sn.OwnDrainUpTo(node.Generation) {
		return
	}
	b.slurm(event.SlurmResume, []string{node.Name}, "", fmt.Sprintf("lifting flexslurm's drain: %s has no VM any more (the VM it was set for is gone)", node.Name),
		node.VMName, "lift-drain-released")
}
