package plan

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// Repair decides what a failed health check requires: Slurm drains the node
// (reason given), its VM is deleted, and a replacement is requested at once
// for a static node, or for a dynamic node whose job is pending or was
// requeued by the failure. An event naming an unknown node or another
// generation than the current one is rejected (the VM was already replaced).
func Repair(st *model.State, h *event.Health, now time.Time) ([]Action, error) {
	if st.Cluster == nil {
		return nil, rejectf("no cluster record")
	}
	cl, poolID, _, ok := naming.ParseNodeName(h.Node)
	if !ok || cl != st.Cluster.ID || cl != h.Cluster {
		return nil, rejectf("node %s is not a node of cluster %s", h.Node, st.Cluster.ID)
	}
	pool, ok := st.Pools[poolID]
	if !ok {
		return nil, rejectf("node %s: pool %s is not a flex-start pool of cluster %s", h.Node, poolID, cl)
	}
	n, ok := st.Nodes[h.Node]
	if !ok {
		return nil, rejectf("node %s has no record", h.Node)
	}
	gen := h.Generation
	if gen == 0 && h.VMName != "" {
		if vmNode, _, _, g, ok := naming.ParseVMName(h.VMName); ok && vmNode == h.Node {
			gen = g
		}
	}
	if gen == 0 {
		gen = n.Generation
	}
	if gen != n.Generation {
		return nil, rejectf("health failure for generation %d of %s, which is at generation %d: already replaced", gen, h.Node, n.Generation)
	}
	if !n.Phase.Serving() {
		return nil, rejectf("node %s generation %d is %s: no VM to repair", h.Node, gen, n.Phase)
	}
	b := newBuilder(st, now)
	reason := "health check failed"
	if len(h.Reasons) > 0 {
		reason += ": " + h.Reasons[0]
	}
	why := fmt.Sprintf("%s on %s", reason, n.VMName)
	node := *n
	b.slurm(event.SlurmDrain, []string{node.Name}, "", fmt.Sprintf("flexslurm: %s (%s)", reason, node.VMName), node.VMName)
	b.add(DeleteVMs{Pool: poolID, VMs: []string{node.VMName},
		RequestID: naming.RequestID("delete-instances", pool.MIG+"/"+node.VMName), Reason: why})
	node.LastEnd = model.EndHealth
	b.endOfLifeDone(node)

	// The job the failure hit: pending (prolog failure) or requeued.
	jobID := h.JobID
	if jobID == "" {
		jobID = node.JobID
	}
	j, known := b.st.Jobs[jobID]
	jobWaiting := h.JobState == "pending" || h.JobState == "requeued" || (known && j.State == model.JobPending)
	if known && jobWaiting && j.State != model.JobPending {
		jj := *j
		jj.State = model.JobPending
		jj.Requeues++
		b.putJob(jj, "job requeued by a failed health check on "+node.Name)
	}

	switch {
	case node.Kind == model.NodeStatic && node.Successor == "":
		node.Phase = model.PhaseReleased
		b.provisionNode(pool, node, jobIfWaiting(jobID, jobWaiting), why+": static node replaced at once")
	case jobWaiting && known:
		node.Phase = model.PhaseReleased
		b.putNode(node, why)
		b.provisionJob(*b.st.Jobs[jobID], fmt.Sprintf("%s; job %s is %s: replacement requested at once", why, jobID, nonEmpty(h.JobState, "pending")))
	case jobWaiting:
		node.Phase = model.PhaseReleased
		b.provisionNode(pool, node, jobID, fmt.Sprintf("%s; job %s is %s: replacement requested at once", why, jobID, nonEmpty(h.JobState, "pending")))
	default:
		node.Phase = model.PhaseDeleting
		b.putNode(node, why+": no job waits for this dynamic node, not replaced")
	}
	return b.out, nil
}

func jobIfWaiting(id string, waiting bool) string {
	if waiting {
		return id
	}
	return ""
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
