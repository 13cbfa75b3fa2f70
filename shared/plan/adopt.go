package plan

import (
	"fmt"
	"maps"
	"slices"

	"github.com/flexslurm/flexslurm/shared/model"
)

// Capacity that arrives while its request is being cancelled serves the
// job. Two decisions cancel a request while a job may still want its
// capacity: the queue timeout (queueTimedOut: the request cancelled to be
// made again; with the pool's breaker open or in backoff, not made again
// yet), and the end of the job the request was made for
// (releaseQueuedCapacity), when Slurm may already have given the node
// to another pending job. Either cancellation can meet a request Compute
// has just fulfilled. Its VMs then exist, in the request's MIG, while a job
// that can use them waits. Deleting them and queuing anew would throw
// away the capacity the job waited for and make it wait again from the
// start.
//
// Both end the node's generation without deleting anything (released,
// model.EndTimeout or model.EndCancelled, the request open until seen to
// end), and the node gets no next generation until the reconciler has seen
// that request end (previous.go; a cancellation Compute answers with "no
// longer queued" does not count, as the request may have SUCCEEDED). So,
// before anything else in a pool's pass, a node whose generation ended so,
// before its VM was seen running, and whose VM of that generation is listed
// alive in its request's MIG takes that generation back — requested again,
// so that the table marks it running — when the VM can still serve: the
// node is static (it always serves), or a pending job flexslurm assigned
// the node can still use it (keptFor, which takes the job's record or a
// newer Slurm snapshot): the job the request was made for, else another
// pending job with the node among its nodes, to which the node passes. No
// request is made, no VM deleted, and the request's MIG serves again, so
// the reconciler keeps it. A VM no job can use is deleted in the same pass
// (releaseArrived: the request's MIG when no other node serves from it, the
// VM by name otherwise).

// adoptArrived takes back the generations of the pool's nodes whose
// capacity arrived as their request was being cancelled, when a job can
// still use it.
func (b *builder) adoptArrived(pool *model.Pool, vms vmIndex) {
	if pool.Removed {
		return
	}
	// Every node a job can use is taken back before any VM is released:
	// a release deletes the request's MIG when no other node serves from
	// it, and a node of the same request taken back later in the loop
	// would lose its VM with it.
	var unwanted []model.Node
	for _, n := range b.poolNodes(pool.ID) {
		if !arrivedAfterCancel(pool, n, vms) {
			continue
		}
		node := *b.st.Nodes[n.Name]
		if node.Index >= pool.MaxNodes {
			unwanted = append(unwanted, node) // beyond max_node_count: no job may use it
			continue
		}
		who := "static node " + node.Name
		switch started := b.startedOnArrived(node); {
		case kindOf(node, pool) == model.NodeStatic:
		case started != "":
			// Slurm started a job there since the VM was asked for:
			// the VM that came runs it (a newer report than any
			// snapshot that shows the node idle).
			node.JobID = started
			who = "job " + started + ", which Slurm started there"
		default:
			j := b.arrivedFor(node)
			if j == nil {
				unwanted = append(unwanted, node)
				continue
			}
			node.JobID = j.ID
			who = "job " + j.ID
		}
		node.Phase = model.PhaseRequested
		node.RequestOpen, node.RequestMisses = false, 0
		cancel := "past the queue timeout"
		if n.LastEnd == model.EndCancelled {
			cancel = "as the job it was made for ended or left the node"
		}
		b.putNode(node, fmt.Sprintf("reconciler: resize request %s was fulfilled as it was being cancelled %s: VM %s kept for %s", node.ResizeRequest, cancel, node.VMName, who))
	}
	for _, node := range unwanted {
		b.releaseArrived(pool, node)
	}
}

// arrivedAfterCancel reports whether node n's generation ended with its
// request cancelled (a queue timeout or a release that keeps arrivals,
// before its VM was seen running) and the VM of that generation is listed
// alive in the request's MIG: adoptArrived decides on it in the pool's next
// pass, keeping it for a job or deleting it. Until then nothing else
// deletes the request's MIG (deleteSpentRequestMIGs): the pass that
// cancelled may be the one that lists the request fulfilled. A removed
// pool's capacity serves no job: its MIGs go as spent.
func arrivedAfterCancel(pool *model.Pool, n *model.Node, vms vmIndex) bool {
	if pool.Removed || n.Phase != model.PhaseReleased || (n.LastEnd != model.EndTimeout && n.LastEnd != model.EndCancelled) ||
		!n.RunningAt.IsZero() || n.VMName == "" || n.MIG == "" || n.ResizeRequest == "" {
		return false
	}
	vm, ok := vms.get(n.VMName)
	if !ok || incompleteVM(vm) {
		return false
	}
	c := ClassifyVM(vm.Status, true)
	return c == VMRunning || c == VMProvisioning
}

// releaseArrived deletes a VM that came for a node's ended generation and
// that no job can use: the node's record says deleting, as a release of a
// running VM does, so that its next generation re-issues the deletion
// (supersede) and the VM is never left beside the next one. The VM is
// listed, so its request SUCCEEDED: it is not open any more.
func (b *builder) releaseArrived(pool *model.Pool, node model.Node) {
	why := fmt.Sprintf("reconciler: resize request %s was fulfilled as it was being cancelled, and no pending job can use %s: VM %s released", node.ResizeRequest, node.Name, node.VMName)
	b.releaseVM(pool, node, why)
	node.Phase = model.PhaseDeleting
	node.RequestOpen, node.RequestMisses = false, 0
	b.putNode(node, why)
}

// startedOnArrived returns the job a job.started report names on node
// since its generation's VM was asked for, while flexslurm does not hold
// that job ended ("" for none): only the VM that came for the generation
// can run it.
func (b *builder) startedOnArrived(node model.Node) string {
	if !startedSince(node, node.RequestedAt) {
		return ""
	}
	if j, ok := b.st.Jobs[node.StartedJob]; ok && !j.State.Active() {
		return ""
	}
	return node.StartedJob
}

// arrivedFor returns the pending job that capacity arrived for node may
// serve (nil for none): the job it was requested for while that job can
// still use it, else the first pending job (by id) with the node among its
// nodes that can (keptFor). A job flexslurm refused as fitting no node
// (model.Job.Unfit) is served by none.
func (b *builder) arrivedFor(node model.Node) *model.Job {
	if j, ok := b.st.Jobs[node.JobID]; ok && j.Unfit == "" {
		if kept, _ := b.keptFor(j, node); kept {
			return j
		}
	}
	for _, id := range slices.Sorted(maps.Keys(b.st.Jobs)) {
		j := b.st.Jobs[id]
		if id == node.JobID || j.Pool != node.Pool || !slices.Contains(j.Nodes, node.Name) || j.Unfit != "" {
			continue
		}
		if kept, _ := b.keptFor(j, node); kept {
			return j
		}
	}
	return nil
}

// adoptArrivedPass takes back capacity that came for a cancelled request.
type adoptArrivedPass struct{}

func (adoptArrivedPass) apply(b *builder, pc *poolContext) { b.adoptArrived(pc.pool, pc.vms) }
