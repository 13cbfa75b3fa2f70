package plan

import (
	"fmt"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
)

// One active request per node. A node's next generation is requested only
// once its previous generation's resize request can create no VM any more.
// A generation that ends before its VM ran — released while its capacity was
// queued (a resume failure, a job that ended, a shrink, an idle release), or
// the other nodes of a job's request cancelled with it, or a request past its
// queue timeout — leaves its request cancelled but not yet seen to end: the
// cancel may not have run (a crash between the commit and the call), may
// fail (Compute answering 500s for a while), or may lose a race with the
// request succeeding. Until flexslurm has seen that request end, the node
// waits and the cancel is issued again (same request id: Compute performs it
// once); a pending job for it stays pending (it is served by the reconciler
// pass, or the job's next report, that finds the request ended).
//
// Every decision that ends a generation while its request may still be
// queued marks the node (model.Node.RequestOpen: release, the other nodes
// of a cancelled job request, a queue timeout). The mark is cleared when
// Compute confirms the end on the cancellation itself (RequestsEnded,
// recorded by shared/apply right after the call), or when the reconciler
// sees the request end (observePreviousRequests): listed
// SUCCEEDED, FAILED or CANCELLED, a VM of the generation listed (a resize
// request creates its VMs only when it succeeds), or the request not listed
// at all in Policy.MissThreshold consecutive passes (never created, or
// deleted once final; one listing is not trusted); or when its MIG was
// deleted with it. A generation that ends otherwise — its VM ran, its
// request was seen to fail or was refused at creation — does not mark it.
//
// Only a request blocks: a VM of an earlier generation that is stopping or
// being deleted does not, since every generation's VM has its own name (a
// static node whose VM expired or was lost is requested again at once).

// requestMayBeActive reports whether the resize request of n's ended
// generation may still be active (ACCEPTED or CREATING), so that n must
// not be requested again yet. It takes the record by pointer: a pass asks
// it of every record of a pool.
func requestMayBeActive(n *model.Node) bool {
	return n.RequestOpen && n.ResizeRequest != "" && !n.Phase.Serving()
}

// holdForPreviousRequest returns why n cannot have its next generation yet
// ("" when it can), and asks again for the cancellation of its previous
// request, once per decision.
func (b *builder) holdForPreviousRequest(pool *model.Pool, n model.Node) string {
	if !requestMayBeActive(&n) {
		return ""
	}
	why := fmt.Sprintf("waiting: %s's previous resize request %s may still be active (cancelled, not yet seen to end); its next generation is requested once it has ended", n.Name, n.ResizeRequest)
	if !b.cancelling(n.ResizeRequest) {
		b.add(b.cancelRequest(pool, n, fmt.Sprintf("%s's previous generation: its resize request %s must end before the next one is made", n.Name, n.ResizeRequest)))
	}
	return why
}

// observePreviousRequests follows the resize requests of the pool's nodes
// whose generation ended before its VM ran, in the pool's listing of this
// pass: a request listed in a final state, or whose VM is listed, has ended
// (one listed SUCCEEDED without its VM, once the VM has been missing from
// Policy.MissThreshold listings); one listed queued is
// left to cancelUnwantedRequests, which cancels it; one not listed is taken as
// gone after Policy.MissThreshold consecutive passes. A request in a final
// state is deleted by deleteFinishedRequests in the same pass, after its end is
// recorded here.
func (b *builder) observePreviousRequests(pool *model.Pool, vms vmIndex, rrs map[string]ObservedResizeRequest) {
	for _, n := range b.poolNodes(pool.ID) {
		if !requestMayBeActive(n) {
			continue
		}
		node := *n
		rr, seen := rrs[node.ResizeRequest]
		vmListed := vms.has(node.VMName)
		switch {
		case vmListed:
			node.RequestOpen, node.RequestMisses = false, 0
			b.putNode(node, fmt.Sprintf("reconciler: VM %s of %s's previous generation exists: its resize request %s succeeded", node.VMName, node.Name, node.ResizeRequest))
		case seen && rr.State == "SUCCEEDED" && node.MIG != "":
			// The request made the node's VM, which this listing does
			// not show: a list can omit a VM for a while, so the VM may
			// run, and a job may still use it (adopt.go); its MIG is
			// kept meanwhile (deleteSpentRequestMIGs). Missing from
			// MissThreshold listings, it is gone.
			node.RequestMisses++
			if node.RequestMisses >= b.pol.MissThreshold {
				node.RequestOpen, node.RequestMisses = false, 0
				b.putNode(node, fmt.Sprintf("reconciler: previous resize request %s of %s SUCCEEDED and its VM %s is not listed in %d consecutive passes: gone", rr.Name, node.Name, node.VMName, b.pol.MissThreshold))
				continue
			}
			b.putNode(node, fmt.Sprintf("reconciler: previous resize request %s of %s SUCCEEDED but its VM %s is not listed (%d of %d passes before it is taken as gone)", rr.Name, node.Name, node.VMName, node.RequestMisses, b.pol.MissThreshold))
		case seen && finalRequestState(rr.State):
			node.RequestOpen, node.RequestMisses = false, 0
			b.putNode(node, fmt.Sprintf("reconciler: previous resize request %s is %s: %s may be requested again", rr.Name, rr.State, node.Name))
		case seen:
			if node.RequestMisses != 0 {
				node.RequestMisses = 0
				b.putNode(node, fmt.Sprintf("reconciler: previous resize request %s of %s is still %s", rr.Name, node.Name, rr.State))
			}
		default:
			node.RequestMisses++
			if node.RequestMisses >= b.pol.MissThreshold {
				node.RequestOpen, node.RequestMisses = false, 0
				b.putNode(node, fmt.Sprintf("reconciler: previous resize request %s of %s is not listed in %d consecutive passes: gone", node.ResizeRequest, node.Name, b.pol.MissThreshold))
				continue
			}
			b.putNode(node, fmt.Sprintf("reconciler: previous resize request %s of %s is not listed (%d of %d passes before it is taken as gone)", node.ResizeRequest, node.Name, node.RequestMisses, b.pol.MissThreshold))
		}
	}
}

// NodesAwaitingRequests names the nodes of st whose ended generation waits
// for one of these resize requests to end (requestMayBeActive), sorted.
func NodesAwaitingRequests(st *model.State, rrs []string) []string {
	var out []string
	for _, n := range st.SortedNodes() {
		if requestMayBeActive(n) && slices.Contains(rrs, n.ResizeRequest) {
			out = append(out, n.Name)
		}
	}
	return out
}

// RequestsEnded records that these resize requests can create no VM any
// more — Compute confirmed it when they were cancelled: the operation of
// the cancellation completed, or Compute answered that the request is no
// longer queued and did not succeed — so the nodes whose ended generation
// waited on one of them may be requested again (their job is served by its
// next report or the next reconcile pass). A request that SUCCEEDED before
// its cancellation is not among them: its VMs exist, and a pending job may
// use them (adopt.go); its nodes wait for the reconciler's listing, which
// takes them back for the job or records the request ended
// (observePreviousRequests), rather than being requested again first.
//
// A request of one MIG per request that ended so made no VM: its MIG is
// deleted at once when no node serves from it, as the reconciler would on
// its next pass (deleteSpentRequestMIGs).
func RequestsEnded(st *model.State, rrs []string, now time.Time, pol Policy) []Action {
	b := newBuilder(st, now, pol)
	type spent struct{ pool, mig, rr string }
	var migs []spent
	for _, name := range NodesAwaitingRequests(b.st, rrs) {
		n := *b.st.Nodes[name]
		n.RequestOpen, n.RequestMisses = false, 0
		b.putNode(n, fmt.Sprintf("previous resize request %s cancelled (Compute confirmed it is no longer queued): %s may be requested again", n.ResizeRequest, n.Name))
		if n.MIG != "" && !slices.Contains(migs, spent{n.Pool, n.MIG, n.ResizeRequest}) {
			migs = append(migs, spent{n.Pool, n.MIG, n.ResizeRequest})
		}
	}
	for _, m := range migs {
		pool, ok := b.st.Pools[m.pool]
		if !ok || b.servingIn(pool, m.mig, "") || b.deletingMIG(m.mig) {
			continue
		}
		b.add(deleteRequestMIG(b.incarnation(), pool, m.mig, m.rr, nil,
			fmt.Sprintf("resize request %s was cancelled before it made a VM (Compute confirmed it) and no node's VM serves from MIG %s: deleted", m.rr, m.mig)))
	}
	return b.out
}

// previousRequestsPass follows a node's previous request until it is seen
// to end.
type previousRequestsPass struct{}

func (previousRequestsPass) apply(b *builder, pc *poolContext) {
	b.observePreviousRequests(pc.pool, pc.vms, pc.rrs)
}
