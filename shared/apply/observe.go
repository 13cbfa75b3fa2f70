package apply

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// Observe lists, for every pool of st, the VMs labelled as this cluster's
// and pool's, the resize requests of the pool's MIG and the MIG itself:
// three Compute list calls per pool, whatever the number of nodes. A pool whose listing fails
// is left out (Listed false), so the reconciler decides nothing for it.
func (r *Runner) Observe(ctx context.Context, cluster string, st *model.State) plan.Observed {
	obs := plan.Observed{Pools: map[string]plan.ObservedPool{}}
	for _, p := range st.SortedPools() {
		// The pool's logger, built only when there is something to log.
		log := func() *slog.Logger { return r.d.Log.With("flow", "flex.reconcile", "cluster", cluster, "pool", p.ID) }
		// Resize requests first, then VMs: a request seen SUCCEEDED has
		// created its VMs before the VM list is taken. What the lists show
		// is true as of listedAt or later (plan.ObservedPool.ListedAt).
		listedAt := r.d.Clock.Now()
		rrs, err := r.d.Compute.ListResizeRequests(ctx, p.Zone, p.MIG)
		if err != nil && !gce.IsNotFound(err) {
			log().Error("listing resize requests failed: pool skipped this pass", "error", err.Error(), "error_class", gce.Classify(err).String())
			continue
		}
		vms, err := r.d.Compute.ListInstances(ctx, p.Zone, naming.Labels(cluster, p.ID))
		if err != nil {
			log().Error("listing VMs failed: pool skipped this pass", "error", err.Error(), "error_class", gce.Classify(err).String())
			continue
		}
		migs, err := r.d.Compute.ListMIGs(ctx, p.Zone, p.MIG)
		if err != nil {
			log().Error("listing MIGs failed: pool skipped this pass", "error", err.Error(), "error_class", gce.Classify(err).String())
			continue
		}
		op := plan.ObservedPool{Listed: true, ListedAt: listedAt}
		for _, m := range migs {
			op.MIGExists = op.MIGExists || m.Name == p.MIG
		}
		op.VMs = observedVMs(vms)
		for _, rr := range rrs {
			o := plan.ObservedResizeRequest{Name: rr.Name, State: rr.State, VMs: rr.Instances, Created: rr.Created, ErrorCode: rr.ErrorCode}
			if rr.State == "FAILED" {
				o.ErrorClass = failureClass(gce.ClassifyCode(rr.ErrorCode)).Provisioning()
				o.ErrorQuota = rr.ErrorQuota.String()
			}
			if rr.State == gce.StateAccepted && rr.LastAttemptCode != "" {
				o.LastAttempt = plan.AttemptError{Class: failureClass(gce.ClassifyCode(rr.LastAttemptCode)).Provisioning(),
					Code: rr.LastAttemptCode, Message: rr.LastAttemptMessage, Quota: rr.LastAttemptQuota.String()}
			}
			op.ResizeRequests = append(op.ResizeRequests, o)
		}
		obs.Pools[p.ID] = op
	}
	return obs
}

// observedVMs returns the listed VMs as the decision sees them, their
// names copied into one string in list order. The decision reads every
// VM's name several times (finding each node's VM, then the VMs no node
// names); as decoded, each name lies among its Instance's other fields, a
// cache line of its own, and at 10,000 VMs copying them together made a
// steady decision 11–13 % faster (docs/reconcile-scale.md, "Fourth
// round"). A status is already one of a handful of shared strings
// (gce.canonicalStatus), and each id is a string of its own: a node
// record keeps its VM's id, and a substring would keep the pool's whole
// listing alive with it.
func observedVMs(vms []gce.Instance) []plan.VM {
	if len(vms) == 0 {
		return nil
	}
	var names strings.Builder
	size := 0
	for _, vm := range vms {
		size += len(vm.Name)
	}
	names.Grow(size)
	for _, vm := range vms {
		names.WriteString(vm.Name)
	}
	all, at := names.String(), 0
	out := make([]plan.VM, len(vms))
	for i, vm := range vms {
		out[i] = plan.VM{Name: all[at : at+len(vm.Name)], ID: strconv.FormatUint(vm.ID, 10), Status: vm.Status,
			Created: vm.Created, TerminationTime: vm.TerminationTime, LastStart: vm.LastStart}
		at += len(vm.Name)
	}
	return out
}
