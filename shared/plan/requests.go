package plan

import (
	"fmt"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// cancelUnwantedRequests cancels queued requests that no requested node waits for
// (their job was cancelled or finished, or they belong to an older
// generation), and only those.
func (b *builder) cancelUnwantedRequests(pool *model.Pool, po ObservedPool, pol Policy) {
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

// deleteFinishedRequests deletes the resize requests that reached a final state
// (SUCCEEDED, FAILED, CANCELLED) and whose outcome is recorded: no node
// waits on them any more (its VM runs, or its generation ended — possibly
// in this very pass, whose records commit before any action runs). A
// request a node still waits on is kept: it is how the reconciler learns
// what became of that node's VM. Compute refuses to delete an active
// request, and this never asks it to.
func (b *builder) deleteFinishedRequests(pool *model.Pool, po ObservedPool) {
	for _, rr := range po.ResizeRequests {
		if !finalRequestState(rr.State) || !rr.Legacy {
			continue // a request's own MIG is deleted whole (deleteSpentRequestMIGs)
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

// unwantedRequestsPass cancels requests no node waits for.
type unwantedRequestsPass struct{}

func (unwantedRequestsPass) apply(b *builder, pc *poolContext) {
	b.cancelUnwantedRequests(pc.pool, pc.observed, pc.pol)
}

// finishedRequestsPass deletes finished requests.
type finishedRequestsPass struct{}

func (finishedRequestsPass) apply(b *builder, pc *poolContext) {
	b.deleteFinishedRequests(pc.pool, pc.observed)
}
