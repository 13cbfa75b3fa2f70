package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// Expiry decides what an audit-log entry about one of the cluster's VMs
// requires. It tells apart, by generation, labels-derived name and principal:
//   - an expiry (Compute ended the VM at its max run duration): a static
//     node is recreated always; a dynamic node only if a job is pending for it;
//   - the completion of a deletion flexslurm asked for (phase Deleting);
//   - a deletion outside flexslurm or a system interruption: the node is
//     treated as lost, with the same static/dynamic rule;
//   - an entry about an older generation (already replaced): ignored.
//
// A deletion flexslurm did not ask for is acted on at its first entry (the
// deletion started: operation.first), not only at its last (done): the
// node's next generation has a new VM name, so it is requested while the
// old VM is still being deleted, and the later entry finds the generation
// already handled.
func Expiry(st *model.State, a *event.Audit, now time.Time, pol Policy) ([]Action, error) {
	pol = pol.withDefaults()
	if st.Cluster == nil {
		return nil, rejectf("no cluster record")
	}
	nodeName, cl, poolID, gen, ok := naming.ParseVMName(a.Instance)
	if !ok || cl != st.Cluster.ID {
		return nil, rejectf("instance %s is not a VM of cluster %s", a.Instance, st.Cluster.ID)
	}
	pool, ok := st.Pools[poolID]
	if !ok {
		return nil, rejectf("instance %s: pool %s is not a flex-start pool of cluster %s", a.Instance, poolID, cl)
	}
	if !pool.HasZone(a.Zone) {
		return nil, rejectf("instance %s is in zone %s, pool %s is in zone %s", a.Instance, a.Zone, poolID, strings.Join(pool.VMZones(), ", "))
	}
	n, ok := st.Nodes[nodeName]
	if !ok {
		return nil, rejectf("instance %s: node %s has no record", a.Instance, nodeName)
	}
	if !naming.SameVM(n.VMName, a.Instance) {
		return nil, rejectf("instance %s is generation %d; node %s is at generation %d: already handled", a.Instance, gen, nodeName, n.Generation)
	}
	switch {
	case a.Kind == event.AuditOther:
		return nil, rejectf("%s on %s is not a termination", a.Method, a.Instance)
	case a.Kind == event.AuditDelete && !a.First && !a.Last:
		return nil, rejectf("entry of the delete operation on %s is neither its first nor its last", a.Instance)
	case a.Kind == event.AuditDelete && !a.Last && n.Phase == model.PhaseDeleting:
		return nil, rejectf("first entry of the deletion flexslurm asked for on %s: acting on the last", a.Instance)
	}
	b := newBuilder(st, now, pol)
	node := *n
	switch node.Phase {
	case model.PhaseReleased:
		return nil, rejectf("instance %s: node %s is already released", a.Instance, nodeName)
	case model.PhaseDeleting:
		node.Phase = model.PhaseReleased
		node.VMID = ""
		if node.Successor != "" {
			b.endHandover(pool, &node)
		}
		b.putNode(node, fmt.Sprintf("VM %s deleted as requested", a.Instance))
		b.ensureStatic(b.st.Pools[poolID], "a static node's VM was deleted")
		return b.out, nil
	}
	expired := a.Kind == event.AuditDeferredDelete || a.Kind == event.AuditDeferredStop ||
		(a.Kind == event.AuditDelete && event.ServiceAgent(a.Principal) &&
			(node.TerminationTime.IsZero() || atEnd(node, a.Timestamp, pol)))
	var why string
	end := model.EndLost
	switch {
	case expired:
		end = model.EndExpired
		why = fmt.Sprintf("VM %s reached its max run duration (%s)", a.Instance, a.Method)
	case a.Kind == event.AuditInterruption:
		why = fmt.Sprintf("VM %s was interrupted by Compute Engine (%s)", a.Instance, a.Method)
	default:
		why = fmt.Sprintf("VM %s was deleted outside flexslurm (%s by %s)", a.Instance, a.Method, a.Principal)
	}
	if a.Kind == event.AuditDeferredStop || a.Kind == event.AuditInterruption {
		// The VM may still exist, stopped: make sure it is gone.
		b.releaseVM(pool, node, why)
	}
	b.endGeneration(pool, node, end, why)
	return b.out, nil
}

// atEnd reports whether a VM that ended at time at ended at its max run
// duration: at or after the node's recorded termination time, less
// ExpirySlack for clock skew. Unknown termination time: false. Every path
// that finds a VM gone without flexslurm asking (the audit log, a pass that
// no longer lists it, a pass that lists it stopped or going) asks this.
func atEnd(node model.Node, at time.Time, pol Policy) bool {
	return !node.TerminationTime.IsZero() && !at.Before(node.TerminationTime.Add(-pol.ExpirySlack))
}

// goneEnd is why a node's VM that ended without flexslurm asking ended, as
// seen at time at: expired at its end (atEnd), otherwise lost.
func goneEnd(node model.Node, at time.Time, pol Policy) model.EndReason {
	if atEnd(node, at, pol) {
		return model.EndExpired
	}
	return model.EndLost
}

// endGeneration handles a node whose VM is gone without flexslurm asking:
// Slurm is told (so it requeues the job that ran there and schedules nothing
// on the node), then a static node is recreated always and a dynamic node
// only for a pending job.
func (b *builder) endGeneration(pool *model.Pool, n model.Node, end model.EndReason, why string) {
	b.slurm(event.SlurmPowerDownForce, []string{n.Name}, "", why, n.VMName)
	if n.MIG != "" && !b.servingIn(pool, n.MIG, n.Name) && !b.deletingMIG(n.MIG) {
		// Its request's MIG serves no node any more: deleted now rather
		// than left to the reconciler (deleteSpentRequestMIGs), so that a MIG that
		// keeps its target size after its VM ended never recreates it
		// (docs/compute-contract.md).
		b.add(deleteRequestMIG(b.incarnation(), pool, n.MIG, n.ResizeRequest, nil, why+": its request's MIG serves no node any more"))
	}
	b.endOfLifeDone(n)
	n.LastEnd = end
	n.Phase = model.PhaseReleased
	n.VMID = ""
	if n.Successor != "" {
		succ := n.Successor
		if b.endHandover(pool, &n) {
			// A successor already took (or is taking) this static node's place.
			b.putNode(n, fmt.Sprintf("%s: not recreated, successor %s replaces it", why, succ))
			return
		}
		// The successor does not take its place (released or made dynamic
		// by a lowered max_node_count, or its capacity never came): a node
		// the pool's static count needs is static again, and recreated
		// below.
		why = fmt.Sprintf("%s (successor %s does not take its place)", why, succ)
	}
	if n.Kind == model.NodeStatic {
		b.provisionNode(pool, n, "", why+": static node recreated (static nodes are always recreated)")
		return
	}
	if j, ok := b.pendingJobFor(n); ok {
		b.putNode(n, why)
		b.provisionJob(j, fmt.Sprintf("%s, and job %s is pending for it: recreated", why, j.ID))
		return
	}
	b.putNode(n, why+": dynamic node not recreated, no job is pending for it")
}
