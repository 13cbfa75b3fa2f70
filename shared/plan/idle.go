package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// releaseIfIdle tracks how long Slurm has shown a running dynamic node idle and
// releases it past Policy.IdleTimeout when no pending job waits for it. It
// reports whether it released the node or stored a change to it.
func (b *builder) releaseIfIdle(pool *model.Pool, node *model.Node, combo Combo) (released, stored bool) {
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
