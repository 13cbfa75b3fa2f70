package plan

import (
	"fmt"
	"sort"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// VM is a Compute instance as the reconciler observed it.
type VM struct {
	Name            string
	ID              string
	Status          string // Compute instance status: PROVISIONING, STAGING, RUNNING, STOPPING, TERMINATED, REPAIRING, …
	Created         time.Time
	TerminationTime time.Time // scheduling.terminationTimestamp; zero when unknown
}

// ObservedResizeRequest is a resize request as the reconciler observed it.
type ObservedResizeRequest struct {
	Name    string
	State   string // CREATING, ACCEPTED, SUCCEEDED, FAILED, CANCELLED
	VMs     []string
	Created time.Time
}

// ObservedPool is what Compute showed of one pool in one pass. Listed is
// false when listing failed: the reconciler then decides nothing for that
// pool (an empty list must never read as "every VM is gone").
type ObservedPool struct {
	Listed         bool
	VMs            []VM // VMs labelled as this cluster's and pool's
	ResizeRequests []ObservedResizeRequest
}

// Observed is one reconcile pass's view of Compute, by pool id.
type Observed struct {
	Pools map[string]ObservedPool
}

// Reconcile compares the stored state with what Compute shows and returns
// what converges them. It is the safety net behind every event: a VM that
// came up is recorded running, a VM that vanished is handled as an expiry or
// a loss, a request lost in a crash is issued again (same name, same request
// id), static pools are brought back to min_node_count, pending jobs are
// served when room appears, and VMs labelled as this cluster's that no record
// names are deleted once older than the orphan grace. VMs without this
// cluster's labels are never listed, so never touched.
func Reconcile(st *model.State, obs Observed, now time.Time, pol Policy) []Action {
	pol = pol.withDefaults()
	b := newBuilder(st, now)
	for _, pool := range sortedPools(b.st) {
		po, ok := obs.Pools[pool.ID]
		if !ok || !po.Listed {
			continue
		}
		b.reconcilePool(pool, po, pol)
	}
	// Pending jobs that can now be served (room freed, or capacity lost).
	for _, j := range b.st.SortedJobs() {
		if j.State != model.JobPending {
			continue
		}
		if po, ok := obs.Pools[j.Pool]; !ok || !po.Listed {
			continue
		}
		b.provisionJob(*j, "reconciler: job still pending")
	}
	return b.out
}

func (b *builder) reconcilePool(pool *model.Pool, po ObservedPool, pol Policy) {
	vms := map[string]VM{}
	for _, vm := range po.VMs {
		vms[vm.Name] = vm
	}
	rrs := map[string]ObservedResizeRequest{}
	for _, rr := range po.ResizeRequests {
		rrs[rr.Name] = rr
	}
	known := map[string]bool{}
	for _, n := range b.st.PoolNodes(pool.ID) {
		known[n.VMName] = true
		node := *n
		vm, present := vms[node.VMName]
		switch node.Phase {
		case model.PhaseRequested:
			b.reconcileRequested(pool, node, vm, present, rrs, pol)
		case model.PhaseRunning:
			switch {
			case !present:
				end, why := model.EndLost, fmt.Sprintf("reconciler: VM %s is gone", node.VMName)
				if !node.TerminationTime.IsZero() && !b.now.Before(node.TerminationTime.Add(-pol.ExpirySlack)) {
					end, why = model.EndExpired, fmt.Sprintf("reconciler: VM %s is gone at its termination time %s (max run duration)", node.VMName, node.TerminationTime.Format(time.RFC3339))
				}
				b.generationEnded(pool, node, end, why)
			case !vm.TerminationTime.IsZero() && !vm.TerminationTime.Equal(node.TerminationTime):
				node.TerminationTime = vm.TerminationTime
				b.putNode(node, "reconciler: termination time from the VM's scheduling status")
			}
		case model.PhaseDeleting:
			if !present {
				node.Phase = model.PhaseReleased
				node.VMID = ""
				b.putNode(node, fmt.Sprintf("reconciler: VM %s is gone", node.VMName))
			} else if vm.Status != "STOPPING" {
				b.add(DeleteVMs{Pool: pool.ID, VMs: []string{node.VMName},
					RequestID: naming.RequestID("delete-instances", pool.MIG+"/"+node.VMName),
					Reason:    fmt.Sprintf("reconciler: VM %s should be deleted and is %s", node.VMName, vm.Status)})
			}
		}
	}
	b.ensureStatic(pool, "reconciler: static pool below min_node_count")

	// Orphans: VMs of this pool (by label) that no node record names.
	var orphans []string
	for _, vm := range po.VMs {
		if known[vm.Name] || b.named(vm.Name) {
			continue
		}
		if vm.Status == "STOPPING" || b.now.Sub(vm.Created) < pol.OrphanGrace {
			continue
		}
		orphans = append(orphans, vm.Name)
	}
	sort.Strings(orphans)
	for _, name := range orphans {
		b.add(DeleteVMs{Pool: pool.ID, VMs: []string{name},
			RequestID: naming.RequestID("delete-instances", pool.MIG+"/"+name),
			Reason:    fmt.Sprintf("reconciler: VM %s is labelled as pool %s's but no node record names it (orphan older than %s)", name, pool.ID, pol.OrphanGrace)})
	}

	// Queued requests of jobs that are gone: cancel exactly those.
	for _, rr := range po.ResizeRequests {
		if rr.State != "ACCEPTED" && rr.State != "CREATING" {
			continue
		}
		if b.requestWanted(rr.Name) {
			continue
		}
		if b.now.Sub(rr.Created) < pol.RequestGrace {
			continue
		}
		b.add(CancelResizeRequest{Pool: pool.ID, Name: rr.Name,
			RequestID: naming.RequestID("cancel-resize-request", pool.MIG+"/"+rr.Name),
			Reason:    fmt.Sprintf("reconciler: resize request %s is queued but no node waits for it", rr.Name)})
	}
}

// named reports whether any node's current generation is this VM.
func (b *builder) named(vm string) bool {
	_, ok := b.st.NodeByVM(vm)
	return ok
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

func (b *builder) reconcileRequested(pool *model.Pool, node model.Node, vm VM, present bool, rrs map[string]ObservedResizeRequest, pol Policy) {
	if present {
		if vm.Status != "RUNNING" {
			return
		}
		node.Phase = model.PhaseRunning
		node.VMID = vm.ID
		node.RunningAt = b.now
		node.TerminationTime = vm.TerminationTime
		if node.TerminationTime.IsZero() && !vm.Created.IsZero() {
			node.TerminationTime = vm.Created.Add(pool.RunDuration)
		}
		b.putNode(node, fmt.Sprintf("VM %s is running until %s", vm.Name, node.TerminationTime.Format(time.RFC3339)))
		return
	}
	rr, seen := rrs[node.ResizeRequest]
	switch {
	case !seen:
		if b.now.Sub(node.RequestedAt) < pol.RequestGrace || b.issued(node.ResizeRequest) {
			return
		}
		// A crash between the Firestore commit and the Compute call: issue
		// the same request again (same name and request id: never twice).
		var vms []string
		for _, n := range b.st.PoolNodes(pool.ID) {
			if n.ResizeRequest == node.ResizeRequest && n.Phase == model.PhaseRequested {
				vms = append(vms, n.VMName)
			}
		}
		b.add(CreateResizeRequest{Pool: pool.ID, Name: node.ResizeRequest, VMs: vms, RunDuration: pool.RunDuration,
			JobID: node.JobID, RequestID: naming.RequestID("create-resize-request", pool.MIG+"/"+node.ResizeRequest),
			Reason: fmt.Sprintf("reconciler: resize request %s is not visible %s after it was recorded: issuing it again", node.ResizeRequest, b.now.Sub(node.RequestedAt).Round(time.Second))})
	case rr.State == "FAILED" || rr.State == "CANCELLED" || rr.State == "SUCCEEDED":
		// The request ended without this VM (failed, cancelled out of band,
		// or its VM already came and went): this generation is over.
		why := fmt.Sprintf("reconciler: resize request %s is %s and VM %s does not exist", rr.Name, rr.State, node.VMName)
		b.generationEnded(pool, node, model.EndLost, why)
	}
}

// issued reports whether this pass already re-issued the request.
func (b *builder) issued(rr string) bool {
	for _, a := range b.out {
		if c, ok := a.(CreateResizeRequest); ok && c.Name == rr {
			return true
		}
	}
	return false
}
