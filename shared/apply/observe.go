package apply

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// Observe lists, for every pool of st, its MIGs (the MIG of each resize
// request, proved by name and description, and the pool's MIG of the
// layout before one MIG per request), the resize requests of each of those
// MIGs, and the VMs labelled as this cluster's and pool's: two list calls
// per pool plus one per MIG. A pool whose listing fails is left out
// (Listed false), so the reconciler decides nothing for it.
func (r *Runner) Observe(ctx context.Context, cluster string, st *model.State) plan.Observed {
	obs := plan.Observed{Pools: map[string]plan.ObservedPool{}}
	for _, p := range st.SortedPools() {
		// The pool's logger, built only when there is something to log.
		log := func() *slog.Logger { return r.d.Log.With("flow", "flex.reconcile", "cluster", cluster, "pool", p.ID) }
		op, err := r.observePool(ctx, cluster, st, p)
		if err != nil {
			log().Error("listing the pool's resources failed: pool skipped this pass", "error", err.Error(), "error_class", gce.Classify(err).String())
			continue
		}
		obs.Pools[p.ID] = op
	}
	return obs
}

// observePool lists one pool. MIGs first, then their resize requests, then
// VMs: a request seen SUCCEEDED has created its VMs before the VM list is
// taken. What the lists show is true as of listedAt or later
// (plan.ObservedPool.ListedAt).
func (r *Runner) observePool(ctx context.Context, cluster string, st *model.State, p *model.Pool) (plan.ObservedPool, error) {
	listedAt := r.d.Clock.Now()
	migs, err := r.d.Compute.ListMIGs(ctx, p.Zone, p.MIG)
	if err != nil {
		return plan.ObservedPool{}, fmt.Errorf("listing MIGs: %w", err)
	}
	if p.Region != "" {
		// A multi-zone pool's request MIGs are regional (zones.go).
		regional, err := r.d.Compute.ListMIGs(ctx, p.Region, p.MIG)
		if err != nil {
			return plan.ObservedPool{}, fmt.Errorf("listing regional MIGs: %w", err)
		}
		migs = append(migs, regional...)
	}
	op := plan.ObservedPool{Listed: true, ListedAt: listedAt, MIGsListed: true}
	migAt := map[string]string{} // MIG name → its zone, or region
	vmZones := poolZones(p)      // where the pool's VMs may be
	for _, m := range migs {
		migAt[m.Name] = m.Zone
		// A regional MIG made before the pool's zones changed places
		// VMs in the zones it was made with.
		for _, z := range m.Zones {
			if !slices.Contains(vmZones, z) {
				vmZones = append(vmZones, z)
			}
		}
	}
	addRequests := func(mig string, legacy bool) error {
		rrs, err := r.d.Compute.ListResizeRequests(ctx, orStr(migAt[mig], p.Zone), mig)
		if gce.IsNotFound(err) {
			return nil // deleted since it was listed
		}
		if err != nil {
			return fmt.Errorf("listing the resize requests of MIG %s: %w", mig, err)
		}
		for _, rr := range rrs {
			o := plan.ObservedResizeRequest{Name: rr.Name, MIG: mig, Legacy: legacy, State: rr.State, VMs: rr.Instances, Created: rr.Created, ErrorCode: rr.ErrorCode}
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
		return nil
	}
	for _, m := range migs {
		switch request, ok := naming.IsRequestMIG(cluster, p.ID, m.Name, m.Description); {
		case m.Name == p.MIG && m.Description == poolMIGDescription(cluster, p.ID):
			// The pool's MIG of the earlier layout, which flexslurm always
			// created with that description; a MIG that only has its name
			// is not the cluster's (a MIG listed by the name prefix is
			// proved by name and description alike).
			op.MIGExists = true
			op.MIGs = append(op.MIGs, plan.ObservedMIG{Name: m.Name, Legacy: true, RequestsListed: true, Age: listedAt.Sub(m.Created)})
			if err := addRequests(m.Name, true); err != nil {
				return plan.ObservedPool{}, err
			}
		case ok:
			if err := addRequests(m.Name, false); err != nil {
				return plan.ObservedPool{}, err
			}
			op.MIGs = append(op.MIGs, plan.ObservedMIG{Name: m.Name, Request: request, RequestsListed: true, Age: listedAt.Sub(m.Created)})
		}
	}
	vms, err := r.listPoolVMs(ctx, cluster, p, vmZones)
	if err != nil {
		return plan.ObservedPool{}, fmt.Errorf("listing VMs: %w", err)
	}
	op.VMs = observedVMs(vms)
	return op, nil
}

// observedVMs returns the listed VMs as the decision sees them, their
// names copied into one string in list order. The decision reads every
// VM's name several times (finding each node's VM, then the VMs no node
// names); as decoded, each name lies among its Instance's other fields, a
// cache line of its own, so copied together they share cache lines (the
// gain is in BENCHMARKS.md, "Reconcile decision: memory layout"). A
// status is already one of a handful of shared strings
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
		// A pool's VMs share a zone or a few: one copy each, not a
		// substring of each VM's decoded zone URL.
		zone := vm.Zone
		if i > 0 && zone == out[i-1].Zone {
			zone = out[i-1].Zone
		} else {
			zone = strings.Clone(zone)
		}
		out[i] = plan.VM{Name: all[at : at+len(vm.Name)], ID: strconv.FormatUint(vm.ID, 10), Status: vm.Status,
			Created: vm.Created, TerminationTime: vm.TerminationTime, LastStart: vm.LastStart, MIG: vm.MIG, Zone: zone}
		at += len(vm.Name)
	}
	return out
}
