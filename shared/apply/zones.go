package apply

import (
	"context"
	"slices"

	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// Multi-zone pools (docs/design/zones.md). A pool that is or was multi-zone
// (model.Pool.Region set) may have request MIGs in its region (regional,
// ANY_SINGLE_ZONE) and, from before, in its zone; its VMs are in any of its
// zones. Everything that addresses one of them asks Compute where it is,
// and a single-zone pool (Region "") makes exactly the calls it always
// made.

// migLocation is where MIG mig of pool p is: p's region when a regional
// MIG of that name exists there, else p's zone.
func (r *Runner) migLocation(ctx context.Context, p *model.Pool, mig string) (string, error) {
	if p.Region == "" {
		return p.Zone, nil
	}
	migs, err := r.d.Compute.ListMIGs(ctx, p.Region, mig)
	if err != nil {
		return "", err
	}
	for _, m := range migs {
		if m.Name == mig {
			return p.Region, nil
		}
	}
	return p.Zone, nil
}

// listPoolVMs lists the pool's labelled VMs in every zone of zones (the
// pool's zones and those of its regional MIGs: observePool).
func (r *Runner) listPoolVMs(ctx context.Context, cluster string, p *model.Pool, zones []string) ([]gce.Instance, error) {
	labels := naming.Labels(cluster, p.ID)
	if p.Region == "" {
		return r.d.Compute.ListInstances(ctx, p.Zone, labels)
	}
	var out []gce.Instance
	for _, z := range zones {
		vms, err := r.d.Compute.ListInstances(ctx, z, labels)
		if err != nil {
			return nil, err
		}
		out = append(out, vms...)
	}
	return out, nil
}

// poolZones are the zones a pool's VMs may be in: its zone first, then
// its other zones.
func poolZones(p *model.Pool) []string {
	out := []string{p.Zone}
	for _, z := range p.Zones {
		if z != p.Zone {
			out = append(out, z)
		}
	}
	return out
}

// getPoolVM reads VM vm of pool p in the zone that holds it; a VM in none
// of the pool's zones is an error gce.IsNotFound matches.
func (r *Runner) getPoolVM(ctx context.Context, p *model.Pool, vm string) (gce.Instance, error) {
	if p.Region == "" {
		return r.d.Compute.GetInstance(ctx, p.Zone, vm)
	}
	zones := poolZones(p)
	var first error
	for i := 0; i < len(zones); i++ {
		inst, err := r.d.Compute.GetInstance(ctx, zones[i], vm)
		if err == nil {
			return inst, nil
		}
		if !gce.IsNotFound(err) {
			return gce.Instance{}, err
		}
		if first == nil {
			first = err
			// Not in the zones the pool names now: its regional
			// MIGs, made while the pool named others, may have put
			// it in one of theirs.
			migs, lerr := r.d.Compute.ListMIGs(ctx, p.Region, p.MIG)
			if lerr != nil {
				return gce.Instance{}, lerr
			}
			for _, m := range migs {
				for _, z := range m.Zones {
					if !slices.Contains(zones, z) {
						zones = append(zones, z)
					}
				}
			}
		}
	}
	return gce.Instance{}, first
}
