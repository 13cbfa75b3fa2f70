package spec

import (
	"slices"
	"strings"

	"github.com/flexslurm/flexslurm/shared/inputs"
)

// zonesKey is the pool extension that lets a FLEX_START pool take capacity
// in any of several zones of its region (docs/extensions.md "zones",
// docs/design/zones.md). Its resize requests then go to a regional managed
// instance group whose distributionPolicy is targetShape ANY_SINGLE_ZONE
// over exactly these zones (Compute v1 discovery document,
// DistributionPolicy.targetShape and zones[].zone), so Compute places each
// request, all its VMs, in one zone that has capacity.
const zonesKey = "zones"

// minZones is the fewest zones the key may name: one zone is the pool's
// own zone, which needs no extension.
const minZones = 2

// extZones reads the "zones" key into p.Ext.Zones. Every zone must match
// inputs.Zone (it is a path segment of Compute calls), lie in the pool's
// region (a regional MIG's zones "must exist in the region where the
// managed instance group is located", discovery document
// DistributionPolicyZoneConfiguration.zone), appear once, and the list must
// hold the pool's own zone, which stays its zone for everything that is
// not a resize request's placement.
func (w *walker) extZones(eo *object, p *NodePool) {
	v := eo.get(zonesKey)
	if v == nil {
		return
	}
	path := eo.child(zonesKey)
	elems, ok := w.array(v, path)
	if !ok {
		return
	}
	if !p.IsFlexStart() {
		w.add(v.pos, path, "is only allowed when provisioning_model is FLEX_START: only a FLEX_START pool's VMs come from resize requests, which Compute places in one of the zones")
		return
	}
	if len(elems) < minZones {
		w.add(v.pos, path, "lists %d zone(s); name at least %d zones of the region (the pool's zone among them), or remove the key for a single-zone pool", len(elems), minZones)
		return
	}
	// The pool's zone was checked against the cluster's region already;
	// its region is the one every listed zone must share.
	region := ""
	if m := inputs.Zone.Submatch(p.Zone); m != nil {
		region = m[1]
	}
	var zones []string
	good := true
	for i, e := range elems {
		epath := joinIndex(path, i)
		z, ok := w.str(e, epath)
		if !ok {
			good = false
			continue
		}
		switch {
		case !inputs.Zone.Match(z):
			w.add(e.pos, epath, "%q is not %s", z, inputs.Zone.Allowed)
			good = false
		case region != "" && !strings.HasPrefix(z, region+"-"):
			w.add(e.pos, epath, "%q is not a zone of the pool's region %q: a regional managed instance group places VMs only in zones of its own region", z, region)
			good = false
		case slices.Contains(zones, z):
			w.add(e.pos, epath, "%q is listed twice", z)
			good = false
		default:
			zones = append(zones, z)
		}
	}
	if !good {
		return
	}
	if p.Zone != "" && !slices.Contains(zones, p.Zone) {
		w.add(v.pos, path, "does not list the pool's zone %q; add it (the pool's zone must be one of its zones)", p.Zone)
		return
	}
	p.Ext.Zones = zones
}

// MultiZone reports whether the pool may take capacity in several zones of
// its region ("zones" extension): its resize requests go to regional MIGs.
func (p NodePool) MultiZone() bool { return len(p.Ext.Zones) >= minZones }
