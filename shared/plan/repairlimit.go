package plan

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// MetricRepairLimit counts nodes left drained for an operator at their
// repair limit.
const MetricRepairLimit = "repair_limit"

// overRepairLimit reports whether a node has used up its repairs: the
// repairs started on it (whatever its generation) within
// Policy.RepairNodeWindow reached Policy.RepairNodeLimit. The window is
// fixed, counted from its first repair; one that ended starts again here,
// so the count is 0 for the repair about to start. An operator's report
// (RepairByOperator) is never over the limit.
//
// The managed service documents that it does not repair a node past a
// restart limit per node and window (docs/design/repair-limit.md); flexslurm follows it
// so that a node whose VMs keep failing — a fault that a new VM does not
// fix, such as a bad image or a job that breaks every node it runs on — is
// not replaced again and again at the price of a new VM each time.
func (b *builder) overRepairLimit(node *model.Node) bool {
	if node.RepairCountSince.IsZero() || b.now.Sub(node.RepairCountSince) >= b.pol.RepairNodeWindow {
		node.RepairCount, node.RepairCountSince = 0, b.now
	}
	return !b.operator && b.pol.RepairNodeLimit >= 0 && node.RepairCount >= b.pol.RepairNodeLimit
}

// leaveForOperator drains a node at its repair limit with a reason that
// says so (Slurm's reason, `flexslurm status`, the alert), and takes no VM
// action: an operator repairs it (reportFaultyNodes), resumes it in Slurm,
// or lets its VM end.
func (b *builder) leaveForOperator(pool *model.Pool, node model.Node, why string) {
	msg := fmt.Sprintf("repair limit reached: %d repairs within %s, left drained for an operator: %s",
		node.RepairCount, shortDuration(b.pol.RepairNodeWindow), node.RepairReason)
	b.slurm(event.SlurmDrain, []string{node.Name}, "", fmt.Sprintf("%s (%s)", msg, node.VMName),
		node.VMName, "repair-limit", node.RepairCountSince.UTC().Format(time.RFC3339Nano))
	node.Repair, node.RepairSince = model.RepairLimit, b.now
	b.putNode(node, why+": "+msg)
	b.add(Alert{Pool: pool.ID, Node: node.Name, Reason: fmt.Sprintf("%s: %s; no VM action until an operator reports it (reportFaultyNodes)", node.Name, msg)})
	b.add(Metric{Name: MetricRepairLimit, Labels: map[string]string{"pool": pool.ID}, Reason: msg})
}

// resumedByOperator ends a node's stay at its repair limit once a Slurm
// snapshot taken well after it began (Policy.RequestGrace, so that the
// drain asked for then had time to apply) shows the node without a drain:
// an operator resumed it (scontrol update nodename=N state=resume) and
// took it back as it is. Its count stays: another failure within the
// window leaves it drained again.
func (b *builder) resumedByOperator(node model.Node) {
	if b.view == nil || b.view.TakenAt.Sub(node.RepairSince) < b.pol.RequestGrace {
		return
	}
	sn, ok := b.view.Nodes[node.Name]
	if !ok || sn.DrainSet() {
		return
	}
	node.ClearRepair()
	b.putNode(node, fmt.Sprintf("reconciler: Slurm's snapshot of %s shows %s no longer drained: an operator resumed it at its repair limit (%d repairs since %s)",
		b.view.TakenAt.Format(time.RFC3339), node.Name, node.RepairCount, node.RepairCountSince.Format(time.RFC3339)))
}
