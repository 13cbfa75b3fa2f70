package spec

import (
	"fmt"
	"slices"
	"strings"
)

// compactPlacementKey is the pool extension that places every multi-node
// request of the pool close together (docs/extensions.md,
// "compact_placement"; docs/design/placement.md).
const compactPlacementKey = "compact_placement"

// Maximum topology distances of a workload policy
// (ResourcePolicyWorkloadPolicy.maxTopologyDistance in the Compute v1
// discovery document, https://www.googleapis.com/discovery/v1/apis/compute/v1/rest:
// "VMs must be provisioned in the same subblock / block / cluster").
const (
	TopologySubblock = "SUBBLOCK"
	TopologyBlock    = "BLOCK"
	TopologyCluster  = "CLUSTER"
)

// CompactPlacement is a pool's "compact_placement" setting: every resize
// request of more than one VM gets a MIG that references the pool's
// workload policy (type HIGH_THROUGHPUT), so Compute Engine places its VMs
// close together.
type CompactPlacement struct {
	// MaxTopologyDistance is "" (Compute places the VMs as close as it can,
	// best effort) or one of TopologySubblock, TopologyBlock,
	// TopologyCluster (a strict bound: Compute creates none of a request's
	// VMs rather than place them farther apart).
	MaxTopologyDistance string
}

type wireCompactPlacement struct {
	MaxTopologyDistance string `json:"max_topology_distance,omitempty"`
}

func (c *CompactPlacement) wire() *wireCompactPlacement {
	if c == nil {
		return nil
	}
	return &wireCompactPlacement{MaxTopologyDistance: c.MaxTopologyDistance}
}

// placementFamily is what flexslurm knows of a machine family's workload
// policies under Flex-Start: the largest request (VMs in one MIG) each
// maximum topology distance allows; a distance absent is not supported.
type placementFamily struct {
	name   string
	limits map[string]int
}

// placementFamilies are the machine types of flexslurm's catalog whose
// Flex-Start MIGs accept a workload policy. Google's comparison table
// (https://cloud.google.com/ai-hypercomputer/docs/placement-policy-and-workload-policy)
// lists workload policies "for Flex-start: A4 and A3 Ultra" (A3 Mega and
// A3 High only for Spot or reservations); Cluster Toolkit accepts compact
// placement with DWS Flex-Start for A3 Ultra, A4 and H4D only
// (GoogleCloudPlatform/cluster-toolkit, docs/slurm-dws-flex.md, and the
// nodeset module's metadata.yaml). The sizes per distance are Cluster
// Toolkit's (schedmd-slurm-gcp-v6-controller resume.py,
// calculate_chunk_size: 22 VMs in a sub-block, 256 in a block for A3 and
// 150 for the others, 1500 in a cluster), and A3 machines take no
// sub-block distance (the nodeset module's outputs.tf: "A3 machines do not
// support a placement_max_distance of 1").
var placementFamilies = map[string]placementFamily{
	"a4-highgpu-8g":  {name: "A4", limits: map[string]int{TopologySubblock: 22, TopologyBlock: 150, TopologyCluster: 1500}},
	"a3-ultragpu-8g": {name: "A3 Ultra", limits: map[string]int{TopologyBlock: 256, TopologyCluster: 1500}},
}

// spotOnlyPlacement are machine types Google lists for workload policies
// only with Spot or reservations, not Flex-Start (same table).
var spotOnlyPlacement = map[string]string{
	"a3-megagpu-8g": "A3 Mega",
	"a3-highgpu-8g": "A3 High (8 GPUs)",
}

// compactPlacement reads the pool extension's "compact_placement" object
// into p.Ext.CompactPlacement and checks it against the pool's machine
// type, provisioning model and max_node_count.
func (w *walker) compactPlacement(eo *object, p *NodePool) {
	v := eo.get(compactPlacementKey)
	if v == nil {
		return
	}
	path := eo.child(compactPlacementKey)
	co := w.object(v, path, "max_topology_distance")
	if co == nil {
		return
	}
	cp := &CompactPlacement{}
	ok := true
	if d, sok := co.optString("max_topology_distance"); !sok {
		ok = false
	} else if d != "" {
		if !slices.Contains([]string{TopologySubblock, TopologyBlock, TopologyCluster}, d) {
			w.add(co.get("max_topology_distance").pos, co.child("max_topology_distance"), "unknown topology distance %q; use SUBBLOCK, BLOCK or CLUSTER, or omit it for best-effort placement", d)
			ok = false
		}
		cp.MaxTopologyDistance = d
	}
	if p.ProvisioningModel != "" && !p.IsFlexStart() {
		w.add(v.pos, path, "compact placement applies to FLEX_START pools only; this pool is %s", p.ProvisioningModel)
		return
	}
	mt := p.MachineSpec.MachineType
	fam, known := placementFamilies[mt]
	switch {
	case mt == "":
		return // reported where machine_type is
	case !known:
		if name, spot := spotOnlyPlacement[mt]; spot {
			w.add(v.pos, path, "machine type %s (%s) takes a workload policy only with Spot or reservations, not Flex-Start; compact placement with Flex-Start supports %s", mt, name, placementTypes())
		} else {
			w.add(v.pos, path, "machine type %s does not support workload policies with Flex-Start; compact placement supports %s", mt, placementTypes())
		}
		return
	}
	if !ok || cp.MaxTopologyDistance == "" {
		if ok {
			p.Ext.CompactPlacement = cp
		}
		return
	}
	limit, supported := fam.limits[cp.MaxTopologyDistance]
	dpos, dpath := co.get("max_topology_distance").pos, co.child("max_topology_distance")
	switch {
	case !supported:
		w.add(dpos, dpath, "%s machines (%s) do not support max_topology_distance %s; use %s", fam.name, mt, cp.MaxTopologyDistance, strings.Join(distances(fam), " or "))
	case p.MaxNodeCount > limit:
		w.add(dpos, dpath, "%s places at most %d %s VMs together, but scaling_spec.max_node_count is %d: lower max_node_count, or use a larger distance", cp.MaxTopologyDistance, limit, fam.name, p.MaxNodeCount)
	default:
		p.Ext.CompactPlacement = cp
	}
}

// distances lists the distances fam supports, nearest first.
func distances(fam placementFamily) []string {
	var out []string
	for _, d := range []string{TopologySubblock, TopologyBlock, TopologyCluster} {
		if _, ok := fam.limits[d]; ok {
			out = append(out, d)
		}
	}
	return out
}

// placementTypes names the machine types compact placement supports.
func placementTypes() string {
	var out []string
	for mt, f := range placementFamilies {
		out = append(out, fmt.Sprintf("%s (%s)", mt, f.name))
	}
	slices.Sort(out)
	return strings.Join(out, " and ")
}
