package plan

import (
	"fmt"

	"github.com/flexslurm/flexslurm/shared/model"
)

// Capacity that arrives while its request is being cancelled serves the
// job. A request queued past the queue timeout is cancelled and its nodes'
// generation ends (queueTimedOut: released, the request open until it is
// seen to end); the cancellation can meet a request Compute has just
// fulfilled. Its VMs then exist, in the request's MIG, and the job they
// were asked for may still be pending. Deleting them and queuing anew
// would throw away the capacity the job waited hours for and make it wait
// again from the start. So, before anything else in a pool's pass, a node
// whose generation ended that way (model.EndTimeout, before its VM was
// seen running, one MIG per request) and whose VM of that generation is
// listed alive takes that generation back — requested again, so that the
// table marks it running — when the VM can still serve: the node is
// static (it always serves), or the pending job it was requested for can
// still use it (keptFor: flexslurm holds the job pending with the node
// among its nodes, and a newer Slurm snapshot does not show it placed
// elsewhere). No request is made, no VM deleted, and the request's MIG
// serves again, so the reconciler keeps it. A VM no job can use is
// released as before (the MIG deleted once its request is final and no
// node serves from it). A node already requested again in a new generation
// (its job's report came before the listing) is not taken back: its old VM
// is named by no record and goes as an orphan.

// adoptArrived takes back the generations of the pool's nodes whose
// capacity arrived as their queue-timed-out request was being cancelled,
// when a job can still use it.
func (b *builder) adoptArrived(pool *model.Pool, vms vmIndex) {
	if pool.Removed {
		return
	}
	for _, n := range b.poolNodes(pool.ID) {
		if n.Phase != model.PhaseReleased || n.LastEnd != model.EndTimeout || !n.RunningAt.IsZero() ||
			n.VMName == "" || n.MIG == "" || n.ResizeRequest == "" || n.Index >= pool.MaxNodes {
			continue
		}
		vm, ok := vms.get(n.VMName)
		if !ok || incompleteVM(vm) {
			continue
		}
		if c := ClassifyVM(vm.Status, true); c != VMRunning && c != VMProvisioning {
			continue
		}
		node := *b.st.Nodes[n.Name]
		who := "static node " + node.Name
		if kindOf(node, pool) != model.NodeStatic {
			j, ok := b.st.Jobs[node.JobID]
			if !ok {
				continue
			}
			if kept, _ := b.keptFor(j, node); !kept {
				continue
			}
			who = "job " + j.ID
		}
		node.Phase = model.PhaseRequested
		node.RequestOpen, node.RequestMisses = false, 0
		b.putNode(node, fmt.Sprintf("reconciler: resize request %s was fulfilled as it was being cancelled past the queue timeout: VM %s kept for %s", node.ResizeRequest, node.VMName, who))
	}
}

// adoptArrivedPass takes back capacity that came for a cancelled request.
type adoptArrivedPass struct{}

func (adoptArrivedPass) apply(b *builder, pc *poolContext) { b.adoptArrived(pc.pool, pc.vms) }
