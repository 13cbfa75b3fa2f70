package plan

import (
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// What a redelivered event does again. An event's decision is committed
// with the event's marker, and its external actions are carried out after
// the commit; a crash in between leaves them to the event's redelivery,
// which finds the marker (the decision is not taken twice) and re-drives
// what the decision asked for and still applies. Every name and request id
// derives from (cluster, pool, node or job, generation), so an action done
// already is done once.

// ReplayNote encodes the external actions of a decision to store with its
// event marker, within limit bytes (the store's cap on a marker's note): a
// decision with no external action stores "[]" (nothing to replay); when
// all of them do not fit (a reconcile pass over a thousand nodes coming
// up), the Compute actions alone are kept — the Slurm commands are
// re-derived by the next pass — and if even those do not fit, none: the
// redelivery then re-drives the in-flight intents of its scope (Redrive).
func ReplayNote(acts []Action, limit int) ([]byte, error) {
	note, err := EncodeExternal(acts)
	if err == nil && note == nil {
		note = []byte("[]")
	}
	if err != nil || len(note) <= limit {
		return note, err
	}
	var compute []Action
	for _, a := range acts {
		if _, ok := a.(SlurmCommand); !ok {
			compute = append(compute, a)
		}
	}
	if note, err = EncodeExternal(compute); err != nil || len(note) <= limit {
		return note, err
	}
	return nil, nil
}

// Replay returns what a redelivered event must do again: its stored
// external actions (decoded from its ReplayNote) that still apply to st. A
// resize request is created again only while a node still waits on it in
// this generation, so a late redelivery never resurrects capacity; a host
// repair, and the start of a VM after one, only while that node's host
// repair of that generation and VM is in progress; a pool's template and
// MIG only while the pool records that template. Without a stored note
// (hasNote false: none was stored, or it does not decode), every in-flight
// intent of the event's scope is re-driven (Redrive).
func Replay(st *model.State, stored []Action, hasNote bool) []Action {
	if !hasNote {
		return Redrive(st)
	}
	waiting := map[string]bool{}
	for _, n := range st.Nodes {
		if n.Phase == model.PhaseRequested && n.ResizeRequest != "" {
			waiting[n.ResizeRequest] = true
		}
	}
	inHostRepair := func(node string, generation int64, vm string) bool {
		n, ok := st.Nodes[node]
		return ok && n.Generation == generation && naming.SameVM(n.VMName, vm) && n.Repair == model.RepairHost
	}
	var out []Action
	for _, a := range stored {
		switch a := a.(type) {
		case CreateResizeRequest:
			if !waiting[a.Name] || a.MIG == "" {
				// A request of the layout before one MIG per request is
				// never made again in the pool's MIG (the reconciler ends
				// its generation when it is not visible).
				continue
			}
			// The workload policy is the pool's now: a later spec may have
			// changed or removed its compact placement (placement.go), and
			// the executor takes no other.
			if p, ok := st.Pools[a.Pool]; ok {
				a.WorkloadPolicy = requestPolicy(p, a.VMs)
			}
			out = append(out, a)
			continue
		case ReportHostAsFaulty:
			// A repair that ended (the VM runs again, or was replaced) is
			// never asked for again.
			if !inHostRepair(a.Node, a.Generation, a.VM) {
				continue
			}
		case StartVM:
			if !inHostRepair(a.Node, a.Generation, a.VM) {
				continue
			}
		case EnsurePool:
			// Only the template the pool records now: a later spec may have
			// replaced it (the MIG would be pointed back at the old one) or
			// removed the pool. A note stored before EnsurePool named its
			// template asked for the pool's current one. The body is the
			// record's: the same as the action's, by its name.
			p, ok := st.Pools[a.Pool]
			if !ok || p.Removed || p.TemplateBody == "" || (a.Template != "" && a.Template != p.Template) {
				continue
			}
			a.Template, a.TemplateBody = p.Template, p.TemplateBody
			out = append(out, a)
			continue
		}
		out = append(out, a)
	}
	return out
}

// Redrive returns the external actions that the in-flight intents of st
// need again: the resize request of Requested nodes (one per request,
// naming every node still waiting on it) and the deletion of Deleting
// nodes' VMs, pool by pool in id order, nodes in index order, with the
// request ids of the decisions that recorded them.
func Redrive(st *model.State) []Action {
	var out []Action
	seen := map[string]bool{}
	cluster, incarnation := "", st.Cluster.Incarnation()
	if st.Cluster != nil {
		cluster = st.Cluster.ID
	}
	for _, p := range st.SortedPools() {
		var deleting []model.Node
		nodes := st.PoolNodes(p.ID)
		for _, n := range nodes {
			switch n.Phase {
			case model.PhaseRequested:
				if n.ResizeRequest == "" || n.MIG == "" || seen[n.ResizeRequest] {
					continue
				}
				seen[n.ResizeRequest] = true
				var vms []string
				for _, o := range nodes {
					if o.ResizeRequest == n.ResizeRequest && o.Phase == model.PhaseRequested {
						vms = append(vms, o.VMName)
					}
				}
				out = append(out, createRequestAction(cluster, incarnation, p, n.ResizeRequest, vms, n.JobID, n.RunDuration, "re-driving an in-flight resize request"))
			case model.PhaseDeleting:
				deleting = append(deleting, *n)
			}
		}
		for _, n := range deleting {
			serving := false
			var members []string
			for _, o := range nodes {
				if o.Name == n.Name || n.MIG == "" || o.MIG != n.MIG {
					continue
				}
				serving = serving || o.Phase.Serving()
				if o.VMName != "" {
					members = append(members, o.VMName)
				}
			}
			a := releaseVMAction(incarnation, p, n, members, serving, "re-driving an in-flight deletion")
			if d, ok := a.(DeleteMIG); ok && seen["mig/"+d.MIG] {
				continue
			} else if ok {
				seen["mig/"+d.MIG] = true
			}
			out = append(out, a)
		}
	}
	return out
}
