package computesim

import (
	"fmt"
	"slices"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
)

// Regional managed instance groups, as a multi-zone node pool uses them
// (docs/design/zones.md): regionInstanceGroupManagers (insert, get, list, delete,
// listManagedInstances, deleteInstances), their resize requests
// (regionInstanceGroupManagerResizeRequests) and region operations, at the
// Compute v1 discovery document's paths
// (projects/{project}/regions/{region}/instanceGroupManagers/…). They are
// served by the zonal handlers with the region in request.zone: a MIG's
// key, self link and operations are then under regions/R, and its VMs are
// created in one of its distributionPolicy zones.
//
// What the simulator refuses, beyond the contract's enums and types:
//   - a distributionPolicy zone outside the MIG's region (400: "The zone
//     must exist in the region where the managed instance group is
//     located", DistributionPolicyZoneConfiguration.zone);
//   - targetShape BALANCED or ANY_SINGLE_ZONE without
//     updatePolicy.instanceRedistributionType NONE ("To set the target
//     distribution shape to BALANCED or ANY_SINGLE_ZONE, you must disable
//     proactive instance redistribution",
//     https://cloud.google.com/compute/docs/instance-groups/regional-mig-set-target-distribution-shape);
//   - a distributionPolicy on a zonal MIG (the field is "Policy specifying
//     the intended distribution of managed instances across zones in a
//     regional managed instance group");
//   - a resize request in a regional MIG whose targetShape is not
//     ANY_SINGLE_ZONE. Google's pages do not say which shapes resize
//     requests accept; Google's regional resize-request samples
//     (magic-modules compute_rmig_resize_request) and Cluster Toolkit's
//     mig_flex.py use ANY_SINGLE_ZONE only, so the simulator accepts only
//     that (it may refuse what Compute would accept, never the reverse for
//     what flexslurm sends).
//
// A fulfilled regional request places all its VMs in ONE zone: the first
// of the MIG's zones, in the order the MIG lists them, that no Shortage
// covers (Shortage.Zone is the per-zone capacity switch). While every zone
// is short, the request stays ACCEPTED with the first zone's error in
// status.lastAttempt.error.

// regionalPrefix maps the regional method ids onto the zonal handlers'.
var regionalPrefix = map[string]string{
	"regionInstanceGroupManagers.":              "instanceGroupManagers.",
	"regionInstanceGroupManagerResizeRequests.": "instanceGroupManagerResizeRequests.",
	"regionOperations.":                         "zoneOperations.",
}

// baseMethod is the zonal method id a regional one is served as; other ids
// are returned unchanged.
func baseMethod(m string) string {
	for r, z := range regionalPrefix {
		if rest, ok := strings.CutPrefix(m, r); ok {
			return z + rest
		}
	}
	return m
}

// regionalMethod is the regional id of a zonal method routed under
// regions/R, or "" for a zonal method with no regional counterpart the
// simulator serves (which routes refuse as unsupported).
func regionalMethod(zonal string) string {
	for r, z := range regionalPrefix {
		if rest, ok := strings.CutPrefix(zonal, z); ok {
			id := r + rest
			if apiContract().Methods[id] != nil {
				return id
			}
		}
	}
	return ""
}

// isRegional reports whether a method id is one of the regional ones.
func isRegional(m string) bool { return baseMethod(m) != m }

// isRegionName reports whether loc, where a zone usually is, is a region.
func isRegionName(loc string) bool { return regionName.MatchString(loc) }

// scopeOf is "regions/R" for a region, "zones/Z" for a zone.
func scopeOf(loc string) string {
	if isRegionName(loc) {
		return "regions/" + loc
	}
	return "zones/" + loc
}

func regionLink(project, region string) string {
	return link("projects/" + project + "/regions/" + region)
}

// checkDistributionPolicy checks (and completes) a MIG insert's
// distributionPolicy. For a regional MIG without zones, Compute picks
// zones of the region; the simulator takes its "-a", "-b" and "-c" zones.
func checkDistributionPolicy(project, loc string, m *computepb.InstanceGroupManager) ([]string, *apiError) {
	dp := m.GetDistributionPolicy()
	if !isRegionName(loc) {
		if dp != nil {
			return nil, errInvalidField("resource.distributionPolicy", "", "A distribution policy is only allowed for a regional managed instance group.")
		}
		return nil, nil
	}
	if dp == nil {
		dp = &computepb.DistributionPolicy{}
		m.DistributionPolicy = dp
	}
	if dp.GetTargetShape() == "" {
		dp.TargetShape = strp(computepb.DistributionPolicy_EVEN.String()) // the API's default
	}
	var zones []string
	for i, zc := range dp.GetZones() {
		field := fmt.Sprintf("resource.distributionPolicy.zones[%d].zone", i)
		ref := zc.GetZone()
		z := lastSegment(ref)
		if ref == "" {
			return nil, errRequired(field)
		}
		if !zoneName.MatchString(z) || (strings.Contains(ref, "/projects/") || strings.HasPrefix(ref, "projects/")) && !strings.Contains(ref, "projects/"+project+"/zones/") {
			return nil, errInvalidField(field, ref, "The URL is malformed.")
		}
		if regionOf(z) != loc {
			return nil, errInvalidField(field, ref, fmt.Sprintf("The zone must exist in the region where the managed instance group is located ('%s').", loc))
		}
		if slices.Contains(zones, z) {
			return nil, errInvalidField(field, ref, "The zone is listed more than once.")
		}
		zones = append(zones, z)
	}
	if len(zones) == 0 {
		zones = []string{loc + "-a", loc + "-b", loc + "-c"}
		for _, z := range zones {
			dp.Zones = append(dp.Zones, &computepb.DistributionPolicyZoneConfiguration{Zone: strp(zoneLink(project, z))})
		}
	} else {
		for i, z := range zones {
			dp.Zones[i].Zone = strp(zoneLink(project, z)) // Compute answers full URLs
		}
	}
	shape := dp.GetTargetShape()
	redistribution := m.GetUpdatePolicy().GetInstanceRedistributionType()
	if (shape == computepb.DistributionPolicy_ANY_SINGLE_ZONE.String() || shape == computepb.DistributionPolicy_BALANCED.String()) && redistribution != "NONE" {
		return nil, errInvalidField("resource.updatePolicy.instanceRedistributionType", orDefault(redistribution, "PROACTIVE"),
			fmt.Sprintf("To use target distribution shape %s, proactive instance redistribution must be disabled (instanceRedistributionType NONE).", shape))
	}
	return zones, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkRegionalResizeRequestMIG refuses a resize request in a regional MIG
// whose target shape is not ANY_SINGLE_ZONE (see the file comment).
func checkRegionalResizeRequestMIG(m *migRec) *apiError {
	if !isRegionName(m.zone) {
		return nil
	}
	if shape := m.pb.GetDistributionPolicy().GetTargetShape(); shape != computepb.DistributionPolicy_ANY_SINGLE_ZONE.String() {
		return errInvalidField("instanceGroupManager", m.name, fmt.Sprintf(
			"Resize requests in a regional managed instance group need target distribution shape ANY_SINGLE_ZONE; this group's is %s (computesim's reading: Google documents no other shape for resize requests).", shape))
	}
	return nil
}

// placementZonesLocked are the zones a request of MIG m may place its VMs
// in: the MIG's zone, or a regional MIG's distribution zones in order.
func placementZones(m *migRec) []string {
	if len(m.zones) > 0 {
		return m.zones
	}
	return []string{m.zone}
}

// placeZone is the zone MIG m creates its next VMs in.
func (m *migRec) placeZone() string {
	if m.place != "" {
		return m.place
	}
	return m.zone
}

// candidateZonesLocked are the zones a request of MIG m may land in: a
// zonal MIG's zone; for a regional (ANY_SINGLE_ZONE) MIG the zone its live
// VMs are in, if any ("All instances are created in one zone. The MIG
// picks the zone when scaling out from zero VMs", regional-mig-distribution-shape),
// else its distribution zones in order.
func (s *Sim) candidateZonesLocked(m *migRec) []string {
	if len(m.zones) == 0 {
		return []string{m.zone}
	}
	for _, in := range s.migMembersLocked(m) {
		if in.deleteAt.IsZero() {
			return []string{in.zone}
		}
	}
	return m.zones
}
