package plan

import (
	"fmt"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// One MIG per resize request (docs/design/compute.md, "One MIG per resize
// request"). Every resize request flexslurm makes — a pending job's nodes,
// a static node's next VM, a replacement after a repair, a make-before-
// break successor — lives in a MIG of its own, named from (cluster, pool,
// request) and created with it. A VM is released by deleting its MIG when
// it is the MIG's last serving VM, otherwise by deleteInstances on that MIG,
// whose only request has then SUCCEEDED (it created VMs); a queued request
// is cancelled, never shrunk. So flexslurm never changes the target size of
// a MIG that holds a queued (ACCEPTED) request, whichever way Compute
// answers such a change (docs/compute-contract.md). A MIG whose request is
// final and none of whose VMs serves a node is deleted by the reconciler
// (deleteSpentRequestMIGs).
//
// Generations requested before this layout (model.Node.MIG empty) keep
// their request and VM in the pool's MIG (model.Pool.MIG) until they end;
// their queued requests are cancelled and made again in the new layout
// (endLegacyRequests), and the pool's MIG is deleted once nothing is left in it.

// migOf returns the MIG that holds n's current generation (its request
// and VM), and whether it is the pool's MIG of the earlier layout.
func migOf(pool *model.Pool, n model.Node) (mig string, legacy bool) {
	if n.MIG != "" {
		return n.MIG, false
	}
	return pool.MIG, true
}

// incarnation is the cluster's incarnation, part of the request ids of the
// calls that create resources ("" for a cluster record stored before it).
func (b *builder) incarnation() string { return b.st.Cluster.Incarnation() }

// createRequest is the CreateResizeRequest of request rr of pool for vms,
// for runDuration (0: the pool's RunDuration; model.Node.RunDuration).
func (b *builder) createRequest(pool *model.Pool, rr string, vms []string, jobID string, runDuration time.Duration, reason string) CreateResizeRequest {
	return createRequestAction(b.cluster, b.incarnation(), pool, rr, vms, jobID, runDuration, reason)
}

func createRequestAction(cluster, incarnation string, pool *model.Pool, rr string, vms []string, jobID string, runDuration time.Duration, reason string) CreateResizeRequest {
	mig := naming.RequestMIG(cluster, pool.ID, rr)
	if runDuration <= 0 {
		runDuration = pool.RunDuration
	}
	return CreateResizeRequest{Pool: pool.ID, MIG: mig, Name: rr, VMs: vms, RunDuration: runDuration, JobID: jobID,
		WorkloadPolicy: requestPolicy(pool, vms),
		RequestID:      naming.CreateResizeRequestIDFor(incarnation, mig, rr), Reason: reason}
}

// cancelRequest is the CancelResizeRequest of n's current request.
func (b *builder) cancelRequest(pool *model.Pool, n model.Node, reason string) CancelResizeRequest {
	mig, legacy := migOf(pool, n)
	id := naming.CancelResizeRequestID(mig, n.ResizeRequest)
	if !legacy {
		id = naming.CancelResizeRequestIDFor(b.incarnation(), mig, n.ResizeRequest)
	}
	return CancelResizeRequest{Pool: pool.ID, MIG: mig, Legacy: legacy, Name: n.ResizeRequest, RequestID: id, Reason: reason}
}

// servingIn reports whether a node other than except serves from mig (its
// generation is requested or running there).
func (b *builder) servingIn(pool *model.Pool, mig, except string) bool {
	for _, o := range b.poolNodes(pool.ID) {
		if o.Name != except && o.MIG == mig && o.Phase.Serving() {
			return true
		}
	}
	return false
}

// releaseVM removes node n's VM (its current generation's) from Compute:
// by deleting its request's MIG when no other node serves from it, by
// deleteInstances on it otherwise (the request then created VMs: it has
// SUCCEEDED), and by deleteInstances on the pool's MIG for a generation of
// the earlier layout. Call it before n's record leaves a serving phase or
// after: n itself is never counted. The request ids are deterministic, so
// a repeated release performs nothing twice.
func (b *builder) releaseVM(pool *model.Pool, n model.Node, reason string) {
	if n.VMName == "" {
		return
	}
	if n.MIG == "" && b.legacyQueued(pool, n.Name) {
		// The pool's MIG of the earlier layout may still hold a queued
		// request: no deleteInstances on it until the reconciler has seen
		// those requests end (endLegacyRequests cancels them); the node's
		// record says deleting, and the reconciler deletes its VM then
		// (OutcomeDeleteAgain).
		return
	}
	var members []string
	for _, o := range b.poolNodes(pool.ID) {
		if n.MIG != "" && o.MIG == n.MIG && o.Name != n.Name && o.VMName != "" {
			members = append(members, o.VMName)
		}
	}
	b.add(releaseVMAction(b.incarnation(), pool, n, members, b.servingIn(pool, n.MIG, n.Name), reason))
}

// releaseVMAction releases n's VM; members are the VMs of the other nodes
// of n's request (deleted with its MIG when none of them serves).
func releaseVMAction(incarnation string, pool *model.Pool, n model.Node, members []string, othersServe bool, reason string) Action {
	mig, legacy := migOf(pool, n)
	if legacy {
		return DeleteVMs{Pool: pool.ID, MIG: mig, VMs: []string{n.VMName},
			RequestID: naming.DeleteInstancesRequestID(mig, n.VMName), Reason: reason}
	}
	if othersServe {
		return DeleteVMs{Pool: pool.ID, MIG: mig, Request: n.ResizeRequest, VMs: []string{n.VMName},
			RequestID: naming.DeleteInstancesRequestIDFor(incarnation, mig, n.VMName), Reason: reason}
	}
	vms := append([]string{n.VMName}, members...)
	slices.Sort(vms)
	return deleteRequestMIG(incarnation, pool, mig, n.ResizeRequest, vms, reason)
}

// deleteRequestMIG is the DeleteMIG of request rr's MIG.
func deleteRequestMIG(incarnation string, pool *model.Pool, mig, rr string, vms []string, reason string) DeleteMIG {
	return DeleteMIG{Pool: pool.ID, MIG: mig, Request: rr, VMs: vms,
		RequestID: naming.DeleteRequestMIGRequestID(pool.Zone, mig, incarnation), Reason: reason}
}

// deletingMIG reports whether this decision already deletes mig.
func (b *builder) deletingMIG(mig string) bool {
	for _, a := range b.out {
		if d, ok := a.(DeleteMIG); ok && d.MIG == mig {
			return true
		}
	}
	return false
}

// ObservedMIG is a MIG of a pool as the reconciler's listing showed it:
// the pool's MIG of the earlier layout (Legacy), or the MIG of one resize
// request (Request, proved by its name and description:
// naming.IsRequestMIG).
type ObservedMIG struct {
	Name    string
	Request string
	Legacy  bool
	// RequestsListed is true when the MIG's resize requests were listed
	// this pass (ObservedPool.ResizeRequests holds them): the listing
	// skips a request MIG from which a node record's VM runs (its request
	// has SUCCEEDED).
	RequestsListed bool
	// Age is how long before the listing the MIG was created.
	Age time.Duration
}

// deleteSpentRequestMIGs deletes the pool's request MIGs that no node serves from
// once their request is final (SUCCEEDED, FAILED, CANCELLED) or gone, so
// no MIG is left behind; a queued request in such a MIG is cancelled first
// (cancelUnwantedRequests). A MIG no record names is this cluster's only by its
// name and description (the listing checked both), and is deleted only
// once older than the orphan grace: a decision records a request before
// its MIG is made, so a MIG younger than that may be one whose record this
// pass did not read. A MIG holding a VM that came after its request was
// cancelled waits for the next pass's adoptArrived (arrivedAfterCancel), as
// does one whose request SUCCEEDED while its VM is not listed yet.
func (b *builder) deleteSpentRequestMIGs(pool *model.Pool, po ObservedPool, rrs map[string]ObservedResizeRequest, vms vmIndex) {
	if !po.MIGsListed {
		return
	}
	named, arrived := map[string]bool{}, map[string]bool{}
	for _, n := range b.poolNodes(pool.ID) {
		if n.MIG != "" {
			named[n.MIG] = true
		}
		if arrivedAfterCancel(pool, n, vms) {
			arrived[n.MIG] = true // adoptArrived decides in the next pass
		}
		if rr, ok := rrs[n.ResizeRequest]; ok && rr.State == "SUCCEEDED" && n.MIG != "" && requestMayBeActive(n) {
			arrived[n.MIG] = true // its VM, not listed this pass, may run (observePreviousRequests)
		}
	}
	for _, m := range po.MIGs {
		if m.Legacy || m.Request == "" || !m.RequestsListed || b.deletingMIG(m.Name) || arrived[m.Name] {
			continue
		}
		if b.servingIn(pool, m.Name, "") {
			continue
		}
		if !named[m.Name] && m.Age < b.pol.OrphanGrace {
			continue
		}
		rr, listed := rrs[m.Request]
		if listed && !finalRequestState(rr.State) {
			continue // cancelled by cancelUnwantedRequests once past its grace; deleted once it has ended
		}
		state := "gone"
		if listed {
			state = rr.State
		}
		var vms []string
		for _, n := range b.poolNodes(pool.ID) {
			if n.MIG == m.Name && n.VMName != "" && n.Phase.HasVM() {
				vms = append(vms, n.VMName)
			}
		}
		why := fmt.Sprintf("reconciler: MIG %s holds resize request %s (%s) and no node's VM serves from it: deleted", m.Name, m.Request, state)
		if !named[m.Name] {
			why = fmt.Sprintf("reconciler: MIG %s of resize request %s (%s) is no node record's (older than %s): deleted", m.Name, m.Request, state, b.pol.OrphanGrace)
		}
		b.add(deleteRequestMIG(b.incarnation(), pool, m.Name, m.Request, vms, why))
	}
}

// legacyQueued reports whether a node other than except has a request of
// the earlier layout that may be queued in the pool's MIG: requested there,
// or cancelled and not yet seen to end.
func (b *builder) legacyQueued(pool *model.Pool, except string) bool {
	for _, o := range b.poolNodes(pool.ID) {
		if o.Name != except && o.MIG == "" && o.ResizeRequest != "" && (o.Phase == model.PhaseRequested || requestMayBeActive(o)) {
			return true
		}
	}
	return false
}

// legacyInUse reports whether a generation of the earlier layout may still
// hold a request or VM in the pool's MIG.
func (b *builder) legacyInUse(pool *model.Pool) bool {
	for _, n := range b.poolNodes(pool.ID) {
		if n.MIG == "" && n.ResizeRequest != "" && (n.Phase.Serving() || n.Phase == model.PhaseDeleting || requestMayBeActive(n)) {
			return true
		}
	}
	return false
}

// endVanishedRequestMIGs ends the generations whose request's MIG a listing
// showed before (model.Node.MIGSeen) and no longer shows: the MIG was
// deleted out of band, its request and VMs with it (flexslurm deletes only
// MIGs no node serves from). The next generation is made in a MIG of its
// own, under new names: a re-creation under the same ones would meet
// Compute's memory of the first one's request ids. A MIG never seen may
// still be on its way (commit, then act: a slow or redelivered action):
// its request is issued again, under the same names, once past
// Policy.RequestGrace (reconcileRequested). A listing that shows a node's
// MIG records it as seen.
func (b *builder) endVanishedRequestMIGs(pool *model.Pool, po ObservedPool) {
	if po.ListedAt.IsZero() || !po.MIGsListed {
		return
	}
	listed := make(map[string]bool, len(po.MIGs))
	for _, m := range po.MIGs {
		listed[m.Name] = true
	}
	for _, n := range b.poolNodes(pool.ID) {
		if n.MIG == "" || n.Phase != model.PhaseRequested {
			continue
		}
		cur, ok := b.st.Nodes[n.Name]
		if !ok || cur.Generation != n.Generation || cur.Phase != model.PhaseRequested {
			continue // ended earlier in this pass, with its request's other nodes
		}
		switch {
		case listed[n.MIG] && !cur.MIGSeen:
			node := *cur
			node.MIGSeen = true
			b.putNode(node, cur.Reason)
		case !listed[n.MIG] && cur.MIGSeen && po.ListedAt.After(cur.UpdatedAt):
			b.add(Alert{Pool: pool.ID, Node: n.Name, Reason: fmt.Sprintf("MIG %s of resize request %s is gone (deleted outside flexslurm)", n.MIG, n.ResizeRequest)})
			b.endGeneration(b.st.Pools[pool.ID], *cur, model.EndLost, fmt.Sprintf("reconciler: MIG %s of resize request %s is gone", n.MIG, n.ResizeRequest))
		}
	}
}

// endLegacyRequests moves the queued requests of the earlier layout to the
// new one: a request queued (ACCEPTED) in the pool's MIG is cancelled and
// its nodes' generations end as a queue timeout's do (endRequest), so
// the next generation of each — once the cancellation is seen to end — is
// requested in a MIG of its own. Its VMs, if the request was fulfilled
// meanwhile, serve until released.
func (b *builder) endLegacyRequests(pool *model.Pool, rrs map[string]ObservedResizeRequest) {
	for _, n := range b.poolNodes(pool.ID) {
		if n.MIG != "" || n.Phase != model.PhaseRequested || n.ResizeRequest == "" {
			continue
		}
		rr, ok := rrs[n.ResizeRequest]
		if !ok || !rr.Legacy || rr.State != "ACCEPTED" || b.cancelling(rr.Name) {
			continue
		}
		why := fmt.Sprintf("reconciler: resize request %s is queued in pool %s's MIG %s (the layout before one MIG per request): cancelled and made again in a MIG of its own", rr.Name, pool.ID, pool.MIG)
		b.add(b.cancelRequest(pool, *n, why))
		b.endRequest(rr.Name, model.EndTimeout, false, why)
	}
}

// deleteLegacyMIG deletes the pool's MIG of the earlier layout once no
// generation of that layout is left in it, no VM is listed in it and no
// request of it is active.
func (b *builder) deleteLegacyMIG(pool *model.Pool, po ObservedPool) {
	if !po.MIGsListed || !po.MIGExists || b.legacyInUse(pool) || b.deletingMIG(pool.MIG) {
		return
	}
	for _, vm := range po.VMs {
		if vm.MIG == pool.MIG {
			return
		}
	}
	for _, rr := range po.ResizeRequests {
		if rr.Legacy && activeRequestState(rr.State) {
			return
		}
	}
	b.add(DeleteMIG{Pool: pool.ID, MIG: pool.MIG, RequestID: naming.DeleteMIGRequestID(pool.Zone, pool.MIG, pool.MIGIncarnation),
		Reason: fmt.Sprintf("reconciler: pool %s's MIG %s (the layout before one MIG per request) is empty", pool.ID, pool.MIG)})
}

// orphanVM deletes a VM labelled as the pool's that no node record names:
// in its request's MIG (the whole MIG when no node serves from it), or in
// the pool's MIG of the earlier layout. A VM in no MIG of the pool is left
// alone: flexslurm deletes only members of its own MIGs.
func (b *builder) orphanVM(pool *model.Pool, po ObservedPool, vm VM, why string) {
	if vm.MIG == pool.MIG {
		b.add(DeleteVMs{Pool: pool.ID, MIG: pool.MIG, VMs: []string{vm.Name},
			RequestID: naming.DeleteInstancesRequestID(pool.MIG, vm.Name), Reason: why})
		return
	}
	for _, m := range po.MIGs {
		if m.Legacy || m.Name != vm.MIG || m.Request == "" {
			continue
		}
		switch {
		case b.deletingMIG(m.Name):
		case b.servingIn(pool, m.Name, ""):
			b.add(DeleteVMs{Pool: pool.ID, MIG: m.Name, Request: m.Request, VMs: []string{vm.Name},
				RequestID: naming.DeleteInstancesRequestIDFor(b.incarnation(), m.Name, vm.Name), Reason: why})
		default:
			b.add(deleteRequestMIG(b.incarnation(), pool, m.Name, m.Request, nil, why+": its request's MIG, which serves no node, is deleted"))
		}
		return
	}
}

// replanLegacyMIGNodes re-plans every node that waited on the pool's MIG of the
// earlier layout when that MIG was deleted out of band while generations
// of that layout were in it: its requests are gone with it and its VMs too.
// The nodes are re-planned in the new layout.
func (b *builder) replanLegacyMIGNodes(pool *model.Pool, po ObservedPool, legacy bool) {
	if !legacy || !pool.Ready || po.MIGExists || pool.Removed {
		return
	}
	b.add(Alert{Pool: pool.ID, Reason: fmt.Sprintf("MIG %s was deleted outside flexslurm", pool.MIG)})
	for _, n := range b.poolNodes(pool.ID) {
		if n.MIG != "" {
			continue
		}
		switch {
		case n.Phase == model.PhaseRequested:
			b.endGeneration(pool, *n, model.EndLost, fmt.Sprintf("reconciler: resize request %s vanished with MIG %s", n.ResizeRequest, pool.MIG))
		case requestMayBeActive(n):
			node := *n
			node.RequestOpen, node.RequestMisses = false, 0
			b.putNode(node, fmt.Sprintf("reconciler: previous resize request %s vanished with MIG %s", n.ResizeRequest, pool.MIG))
		}
	}
}

// legacyMIGDeletedPass re-plans nodes whose MIG of the earlier layout was
// deleted out of band.
type legacyMIGDeletedPass struct{}

func (legacyMIGDeletedPass) apply(b *builder, pc *poolContext) {
	b.replanLegacyMIGNodes(pc.pool, pc.observed, pc.legacy)
}

// vanishedRequestMIGsPass ends the generations whose request's MIG is gone.
type vanishedRequestMIGsPass struct{}

func (vanishedRequestMIGsPass) apply(b *builder, pc *poolContext) {
	b.endVanishedRequestMIGs(pc.pool, pc.observed)
	pc.pool = b.st.Pools[pc.pool.ID]
}

// legacyRequestsPass follows requests made in the earlier layout's pool
// MIG.
type legacyRequestsPass struct{}

func (legacyRequestsPass) apply(b *builder, pc *poolContext) { b.endLegacyRequests(pc.pool, pc.rrs) }

// requestMIGsPass deletes request MIGs that serve no node any more.
type requestMIGsPass struct{}

func (requestMIGsPass) apply(b *builder, pc *poolContext) {
	b.deleteSpentRequestMIGs(pc.pool, pc.observed, pc.rrs, pc.vms)
}

// legacyMIGPass deletes the earlier layout's pool MIG once it is empty.
type legacyMIGPass struct{}

func (legacyMIGPass) apply(b *builder, pc *poolContext) { b.deleteLegacyMIG(pc.pool, pc.observed) }
