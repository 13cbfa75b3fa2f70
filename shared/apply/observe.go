package apply

import (
	"context"
	"log/slog"
	"strconv"

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
		for _, vm := range vms {
			op.VMs = append(op.VMs, plan.VM{Name: vm.Name, ID: strconv.FormatUint(vm.ID, 10), Status: vm.Status,
				Created: vm.Created, TerminationTime: vm.TerminationTime, LastStart: vm.LastStart})
		}
		for _, rr := range rrs {
			o := plan.ObservedResizeRequest{Name: rr.Name, State: rr.State, VMs: rr.Instances, Created: rr.Created, ErrorCode: rr.ErrorCode}
			if rr.State == "FAILED" {
				o.ErrorClass = failureClass(gce.ClassifyCode(rr.ErrorCode)).Provisioning()
			}
			if rr.State == gce.StateAccepted && rr.LastAttemptCode != "" {
				o.LastAttempt = plan.AttemptError{Class: failureClass(gce.ClassifyCode(rr.LastAttemptCode)).Provisioning(),
					Code: rr.LastAttemptCode, Message: rr.LastAttemptMessage}
			}
			op.ResizeRequests = append(op.ResizeRequests, o)
		}
		obs.Pools[p.ID] = op
	}
	return obs
}
