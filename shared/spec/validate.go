package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flexslurm/flexslurm/shared/inputs"
)

var (
	// nameRE is the resource name of a modelDevelopmentClusters resource;
	// the id segment may be empty because the API takes the id at create
	// time (examples/cluster_config.json leaves it empty). Its project and region are then
	// held to inputs.ProjectID and inputs.Region: both reach the paths of
	// Google API calls.
	nameRE = regexp.MustCompile(`^projects/([^/]+)/locations/([^/]+)/modelDevelopmentClusters/([^/]*)$`)
	// durationRE is flex_start_max_duration: whole seconds, "s" suffix.
	durationRE = regexp.MustCompile(`^[0-9]+s$`)
)

// maxDisplayNameChars is the API's display_name limit (magic-modules
// ModelDevelopmentCluster.yaml).
const maxDisplayNameChars = 128

var provisioningModels = []ProvisioningModel{ProvisioningOnDemand, ProvisioningReservation, ProvisioningSpot, ProvisioningFlexStart}

// bootDiskTypes are the boot_disk_type values the API accepts
// (https://github.com/GoogleCloudPlatform/magic-modules/blob/main/mmv1/products/vertexai/ModelDevelopmentCluster.yaml).
var bootDiskTypes = []string{"pd-ssd", "pd-standard", "hyperdisk-balanced"}

// poolRef remembers where a pool's values sit, for checks that need the
// whole document (partitions, login pool).
type poolRef struct {
	idx        int
	path       string
	scaling    *value // scaling_spec, or nil
	scalingOK  bool   // counts parsed and consistent
	minN, maxN int
}

func (w *walker) cluster(root *value) *Cluster {
	o := w.object(root, "", "display_name", "name", "network", "node_pools", "orchestrator_spec")
	if o == nil {
		return nil
	}
	c := &Cluster{}

	// 1. Identity: name gives project and region, and the id unless its
	// last segment is empty, in which case display_name is the id.
	nameID, nameOK := "", false
	if name, ok := o.reqString("name"); ok {
		c.Name = name
		m := nameRE.FindStringSubmatch(name)
		switch {
		case m == nil:
			w.add(o.get("name").pos, "name", "%q is not of the form projects/PROJECT/locations/REGION/modelDevelopmentClusters/[ID]", name)
		case !inputs.ProjectID.Match(m[1]):
			// The project and region reach the paths of every Compute and
			// Pub/Sub call.
			w.add(o.get("name").pos, "name", "%q: project %q is not %s", name, m[1], inputs.ProjectID.Allowed)
		case !inputs.Region.Match(m[2]):
			w.add(o.get("name").pos, "name", "%q: region %q is not %s", name, m[2], inputs.Region.Allowed)
		default:
			c.Project, c.Region, nameID, nameOK = m[1], m[2], m[3], true
		}
	}
	displayOK, displayEmpty := false, false
	dv := o.get("display_name")
	if dv != nil {
		if s, ok := w.str(dv, "display_name"); ok {
			c.DisplayName = s
			if n := utf8.RuneCountInString(s); n > maxDisplayNameChars {
				w.add(dv.pos, "display_name", "is %d characters long; the managed Slurm API allows at most %d", n, maxDisplayNameChars)
			} else {
				displayOK, displayEmpty = s != "", s == ""
			}
		}
	}
	switch {
	case nameOK && nameID != "":
		c.ID = nameID
		if !inputs.ClusterID.Match(nameID) {
			w.add(o.get("name").pos, "name", "cluster id %q (the last segment) %s", nameID, clusterIDRule)
		}
	case displayOK:
		c.ID = c.DisplayName
		if !inputs.ClusterID.Match(c.DisplayName) {
			w.add(dv.pos, "display_name", "cluster id %q (taken from display_name because name has no id segment) %s", c.DisplayName, clusterIDRule)
		}
	case dv == nil:
		o.missingf("display_name", "required field is missing (it is the cluster id when name ends in \"/\")")
	case displayEmpty:
		w.add(dv.pos, "display_name", "must not be empty (it is the cluster id when name ends in \"/\")")
	}

	// 2. Network.
	if v := o.get("network"); v == nil {
		o.missing("network")
	} else if no := w.object(v, "network", "network", "subnetwork"); no != nil {
		// Both go into every instance template as resource paths.
		if n, ok := no.reqString("network"); ok {
			c.Network.Network = n
			if !inputs.Network.Match(n) {
				w.add(no.get("network").pos, "network.network", "%q is not a network: want %s", n, inputs.Network.Allowed)
			}
		}
		if sn, ok := no.optString("subnetwork"); ok && sn != "" {
			c.Network.Subnetwork = sn
			if m := inputs.Subnetwork.Submatch(sn); m == nil {
				w.add(no.get("subnetwork").pos, "network.subnetwork", "%q is not a subnetwork: want %s", sn, inputs.Subnetwork.Allowed)
			} else if c.Region != "" && m[2] != c.Region {
				// A VM's subnetwork is in the VM's region
				// (https://cloud.google.com/vpc/docs/subnets).
				w.add(no.get("subnetwork").pos, "network.subnetwork", "%q is in region %q, not the cluster's region %q (from name)", sn, m[2], c.Region)
			}
		}
	}

	// 3. Node pools.
	refs := map[string]*poolRef{}
	var poolIDs []string
	if v := o.get("node_pools"); v == nil {
		o.missing("node_pools")
	} else if elems, ok := w.array(v, "node_pools"); ok {
		if len(elems) == 0 {
			w.add(v.pos, "node_pools", "must list at least one node pool")
		}
		for i, e := range elems {
			path := joinIndex("node_pools", i)
			p, ref := w.nodePool(e, path, c.Region)
			if p == nil {
				continue
			}
			c.NodePools = append(c.NodePools, *p)
			if p.ID == "" {
				continue
			}
			ref.idx = len(c.NodePools) - 1
			if first, dup := refs[p.ID]; dup {
				idv := e.fields["id"]
				w.add(idv.pos, path+".id", "duplicate node pool id %q (also %s.id)", p.ID, first.path)
				continue
			}
			refs[p.ID] = ref
			poolIDs = append(poolIDs, p.ID)
		}
	}

	// 4. Slurm orchestrator spec, cross-checked against the pools.
	if v := o.get("orchestrator_spec"); v == nil {
		o.missing("orchestrator_spec")
	} else if oo := w.object(v, "orchestrator_spec", "slurm_spec"); oo != nil {
		if sv := oo.get("slurm_spec"); sv == nil {
			oo.missing("slurm_spec")
		} else {
			c.Slurm = w.slurmSpec(sv, "orchestrator_spec.slurm_spec", refs, poolIDs)
		}
	}
	return c
}

const clusterIDRule = "must be 1–10 lowercase letters and digits starting with a letter (^[a-z][a-z0-9]{0,9}$; the managed Slurm API allows no hyphens in the id of a cluster with a slurm_spec)"

// nodePool reads one node pool. It returns nil when the element is not an
// object.
func (w *walker) nodePool(v *value, path, region string) (*NodePool, *poolRef) {
	o := w.object(v, path, "id", "machine_spec", "provisioning_model", "flex_start_max_duration",
		"scaling_spec", "zone", "enable_public_ips", "boot_disk", "node_image", extensionKey)
	if o == nil {
		return nil, nil
	}
	p := &NodePool{}
	ref := &poolRef{path: path}

	if id, ok := o.reqString("id"); ok {
		// An id that breaks the pattern is kept so that references to it
		// are not reported a second time as unknown.
		p.ID = id
		if !inputs.PoolID.Match(id) {
			w.add(o.get("id").pos, o.child("id"), "%q must be 1–16 characters of lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen (flexslurm's bound: node and VM names built from cluster id, pool id and index must fit Compute's 63 characters)", id)
		}
	}

	// Machine shape. gpu is whether the pool has accelerators; gpuKnown is false when
	// the accelerator fields themselves are invalid.
	gpu, gpuKnown := false, true
	if mv := o.get("machine_spec"); mv == nil {
		o.missing("machine_spec")
	} else if mo := w.object(mv, o.child("machine_spec"), "machine_type", "accelerator_type", "accelerator_count"); mo != nil {
		p.MachineSpec.MachineType, _ = mo.reqString("machine_type")
		at, atOK := mo.optString("accelerator_type")
		p.MachineSpec.AcceleratorType = at
		n, present, ok := mo.optInt("accelerator_count")
		gpuKnown = atOK && ok
		switch {
		case !ok:
		case n < 0:
			w.add(mo.get("accelerator_count").pos, mo.child("accelerator_count"), "%d is negative", n)
		default:
			p.MachineSpec.AcceleratorCount = n
		}
		if atOK && at != "" && ok && n == 0 {
			if present {
				w.add(mo.get("accelerator_count").pos, mo.child("accelerator_count"), "is 0 but accelerator_type is %q; give the number of accelerators per VM", at)
			} else {
				mo.missingf("accelerator_count", "is missing but accelerator_type is %q; give the number of accelerators per VM", at)
			}
		}
		gpu = at != "" || n > 0
		if m, known := w.machine(mo, p.MachineSpec.MachineType, at, atOK, n, ok && n >= 0); known && m.Bundled() {
			gpu = true
		}
	}

	// Provisioning model. Omitted (or PROVISIONING_MODEL_UNSPECIFIED) means
	// ON_DEMAND for a CPU pool; for a GPU pool the API would default to
	// RESERVATION only with machine_spec.reservation_affinity, which is not
	// modelled here, and rejects the pool otherwise (https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/create-cluster).
	modelKnown, modelDefaulted := true, false
	if mv := o.get("provisioning_model"); mv != nil {
		if s, ok := w.str(mv, o.child("provisioning_model")); !ok {
			modelKnown = false
		} else if s == "" || s == "PROVISIONING_MODEL_UNSPECIFIED" {
			p.ProvisioningModel = ""
		} else if m := ProvisioningModel(s); slices.Contains(provisioningModels, m) {
			p.ProvisioningModel = m
		} else {
			w.add(mv.pos, o.child("provisioning_model"), "unknown provisioning model %q; use one of ON_DEMAND, RESERVATION, SPOT, FLEX_START", s)
			modelKnown = false
		}
	}
	if p.ProvisioningModel == "" && modelKnown {
		if !gpuKnown {
			modelKnown = false
		} else if gpu {
			o.missingf("provisioning_model", "is required for a pool with accelerators: the managed Slurm API defaults a GPU pool only when machine_spec.reservation_affinity is set, which flexslurm does not support; set it, e.g. to FLEX_START")
			modelKnown = false
		} else {
			p.ProvisioningModel = ProvisioningOnDemand
			modelDefaulted = true
		}
	}

	// Flex-start maximum run duration (managed Slurm API: 30 s–7 days,
	// default 7 days, FLEX_START only;
	// https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/using-flex-start-vms-with-slurm-clusters).
	if dv := o.get("flex_start_max_duration"); dv != nil {
		dpath := o.child("flex_start_max_duration")
		switch {
		case modelKnown && modelDefaulted:
			w.add(dv.pos, dpath, "is only allowed when provisioning_model is FLEX_START; this pool's is ON_DEMAND, the default for a pool without accelerators")
		case modelKnown && !p.IsFlexStart():
			w.add(dv.pos, dpath, "is only allowed when provisioning_model is FLEX_START, not %s", p.ProvisioningModel)
		case dv.kind != kindString:
			w.add(dv.pos, dpath, `must be a string of whole seconds with an "s" suffix, such as "604800s", got %s`, dv.describe())
		default:
			if s, ok := w.str(dv, dpath); ok {
				if d, ok := w.flexDuration(dv, dpath, s); ok && p.IsFlexStart() {
					p.FlexStartMaxDuration = d
				}
			}
		}
	} else if p.IsFlexStart() {
		p.FlexStartMaxDuration = DefaultFlexStartMaxDuration
	}

	// Scaling.
	if sv := o.get("scaling_spec"); sv != nil {
		ref.scaling = sv
		if so := w.object(sv, o.child("scaling_spec"), "min_node_count", "max_node_count"); so != nil {
			minN, _, minOK := so.optInt("min_node_count")
			maxN, _, maxOK := so.optInt("max_node_count")
			if minOK && minN < 0 {
				w.add(so.get("min_node_count").pos, so.child("min_node_count"), "%d is negative", minN)
				minOK = false
			}
			if maxOK && maxN < 0 {
				w.add(so.get("max_node_count").pos, so.child("max_node_count"), "%d is negative", maxN)
				maxOK = false
			}
			if minOK && maxOK && minN > maxN {
				w.add(so.get("min_node_count").pos, so.child("min_node_count"), "%d is greater than max_node_count %d", minN, maxN)
				minOK = false
			}
			if maxOK && maxN > MaxPoolNodes {
				w.add(so.get("max_node_count").pos, so.child("max_node_count"), "%d is above %d: a pool is one zonal MIG, which holds at most %d VMs, and one resize request cannot ask for more", maxN, MaxPoolNodes, MaxPoolNodes)
			}
			if maxOK && maxN == 0 && p.IsFlexStart() {
				if so.get("max_node_count") != nil {
					w.add(so.get("max_node_count").pos, so.child("max_node_count"), "is 0: a FLEX_START pool needs at least one node")
				} else {
					so.missingf("max_node_count", "is missing (0): a FLEX_START pool needs at least one node")
				}
			}
			p.MinNodeCount, p.MaxNodeCount = minN, maxN
			ref.minN, ref.maxN, ref.scalingOK = minN, maxN, minOK && maxOK
		}
	} else {
		ref.scalingOK = true
		if p.IsFlexStart() {
			o.missingf("scaling_spec", "is missing: a FLEX_START pool needs max_node_count of at least 1")
		}
	}

	if zone, ok := o.reqString("zone"); ok {
		p.Zone = zone
		if !inputs.Zone.Match(zone) {
			// The zone is a path segment of every Compute call on the
			// pool's MIG and VMs: a prefix match would let
			// "us-central1-a/../../x" through.
			w.add(o.get("zone").pos, o.child("zone"), "%q is not %s", zone, inputs.Zone.Allowed)
		} else if region != "" && !strings.HasPrefix(zone, region+"-") {
			w.add(o.get("zone").pos, o.child("zone"), "%q is not a zone of the cluster's region %q (from name)", zone, region)
		}
	}

	if bv := o.get("enable_public_ips"); bv != nil {
		p.EnablePublicIPs, _ = w.boolean(bv, o.child("enable_public_ips"))
	}

	// Boot disk, with the API's defaults.
	p.BootDisk.SizeGB = DefaultBootDiskSizeGB
	if bv := o.get("boot_disk"); bv != nil {
		if bo := w.object(bv, o.child("boot_disk"), "boot_disk_type", "boot_disk_size_gb"); bo != nil {
			if t, ok := bo.optString("boot_disk_type"); ok && t != "" {
				if slices.Contains(bootDiskTypes, t) {
					p.BootDisk.Type = t
				} else {
					w.add(bo.get("boot_disk_type").pos, bo.child("boot_disk_type"), "unknown boot disk type %q; use one of pd-ssd, pd-standard, hyperdisk-balanced", t)
				}
			}
			if n, present, ok := bo.optInt("boot_disk_size_gb"); ok && present {
				if n <= 0 {
					w.add(bo.get("boot_disk_size_gb").pos, bo.child("boot_disk_size_gb"), "%d GB is not a positive size", n)
				} else {
					p.BootDisk.SizeGB = n
				}
			}
		}
	}
	if p.BootDisk.Type == "" {
		p.BootDisk.Type = defaultBootDiskType(p.MachineSpec.MachineType)
	}
	if img, ok := o.optString("node_image"); ok && img != "" {
		p.NodeImage = img
		if !inputs.Image.Match(img) {
			w.add(o.get("node_image").pos, o.child("node_image"), "%q is not an image (projects/PROJECT/global/images/NAME) or image family (projects/PROJECT/global/images/family/FAMILY)", img)
		}
	}
	w.poolExtension(o, p)
	return p, ref
}

// MaxPoolNodes bounds max_node_count: each pool is one zonal managed
// instance group, and "by default, you can create up to 1,000 VMs in a
// zonal MIG" (https://cloud.google.com/compute/docs/instance-groups/creating-groups-of-managed-instances,
// "Limitations"); a resize request asks for at most as many.
const MaxPoolNodes = 1000

// machine checks machine_type against the catalog (LookupMachine) and the
// accelerator fields against it: an accelerator-optimized type takes only
// its own GPU type and count (or none given), N1 only the GPU types and
// counts that can be attached to it, a CPU type none. It returns the
// machine and whether the type is known.
func (w *walker) machine(mo *object, name, at string, atOK bool, n int, nOK bool) (Machine, bool) {
	if name == "" {
		return Machine{}, false
	}
	m, ok := LookupMachine(name)
	if !ok {
		w.add(mo.get("machine_type").pos, mo.child("machine_type"), "unknown machine type %q; flexslurm supports the accelerator-optimized a4-highgpu, a3-ultragpu, a3-megagpu, a3-highgpu, a2-ultragpu, a2-highgpu, a2-megagpu and g2-standard types, n1-standard with attached GPUs, and n2, c2 and e2 CPU types (docs/design/compute.md, \"Machine types\")", name)
		return Machine{}, false
	}
	if !atOK || !nOK {
		return m, true
	}
	acc := AcceleratorName(at)
	switch {
	case at == "" && n > 0:
		mo.missingf("accelerator_type", "is missing but accelerator_count is %d", n)
	case at == "":
	case m.Bundled():
		if acc != m.Accelerator {
			w.add(mo.get("accelerator_type").pos, mo.child("accelerator_type"), "%q does not match machine type %s, which comes with %d × %s (%s)", at, name, m.GPUs, m.Accelerator, apiAccelerator(m.Accelerator))
		} else if n != 0 && n != m.GPUs {
			w.add(mo.get("accelerator_count").pos, mo.child("accelerator_count"), "%d does not match machine type %s, which comes with %d GPUs", n, name, m.GPUs)
		}
	case len(m.Attachable) > 0:
		counts, ok := m.Attachable[acc]
		if !ok {
			var types []string
			for t := range m.Attachable {
				types = append(types, apiAccelerator(t))
			}
			slices.Sort(types)
			w.add(mo.get("accelerator_type").pos, mo.child("accelerator_type"), "%q cannot be attached to machine type %s (it takes %s)", at, name, strings.Join(types, ", "))
		} else if n != 0 && !slices.Contains(counts, n) {
			w.add(mo.get("accelerator_count").pos, mo.child("accelerator_count"), "%d %s GPUs cannot be attached to machine type %s (counts: %v)", n, at, name, counts)
		}
	default:
		w.add(mo.get("accelerator_type").pos, mo.child("accelerator_type"), "machine type %s takes no accelerators, got %q", name, at)
	}
	return m, true
}

// apiAccelerator spells a Compute accelerator type as the managed Slurm API
// does ("nvidia-h100-80gb" → "NVIDIA_H100_80GB").
func apiAccelerator(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// defaultBootDiskType is the API's default: hyperdisk-balanced for A3 Ultra
// machines, pd-ssd for everything else (magic-modules
// ModelDevelopmentCluster.yaml, bootDiskType).
func defaultBootDiskType(machineType string) string {
	if strings.HasPrefix(machineType, "a3-ultragpu-") {
		return "hyperdisk-balanced"
	}
	return "pd-ssd"
}

// flexDuration parses a flex_start_max_duration string such as "604800s":
// whole seconds only (no fractions, no other units), within
// MinFlexStartMaxDuration..MaxFlexStartMaxDuration.
func (w *walker) flexDuration(v *value, path, s string) (time.Duration, bool) {
	if !durationRE.MatchString(s) {
		w.add(v.pos, path, `%q is not a whole number of seconds with an "s" suffix, such as "604800s"`, s)
		return 0, false
	}
	rangeNote := fmt.Sprintf("(managed Slurm API: %ds–%ds)", int64(MinFlexStartMaxDuration/time.Second), int64(MaxFlexStartMaxDuration/time.Second))
	secs, err := strconv.ParseInt(strings.TrimSuffix(s, "s"), 10, 64)
	if err != nil || secs > int64(MaxFlexStartMaxDuration/time.Second) {
		w.add(v.pos, path, "%q is above the maximum of %ds %s", s, int64(MaxFlexStartMaxDuration/time.Second), rangeNote)
		return 0, false
	}
	if secs < int64(MinFlexStartMaxDuration/time.Second) {
		w.add(v.pos, path, "%q is below the minimum of %ds %s", s, int64(MinFlexStartMaxDuration/time.Second), rangeNote)
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

func (w *walker) slurmSpec(v *value, path string, refs map[string]*poolRef, poolIDs []string) SlurmSpec {
	var s SlurmSpec
	o := w.object(v, path, "home_directory_storage", "partitions", "login_node_pool_id", "default_partition_id")
	if o == nil {
		return s
	}
	if hs, ok := o.reqString("home_directory_storage"); ok {
		s.HomeDirectoryStorage = hs
		if !inputs.HomeStorage.Match(hs) {
			w.add(o.get("home_directory_storage").pos, o.child("home_directory_storage"), "%q is not a Filestore or Lustre instance: want %s", hs, inputs.HomeStorage.Allowed)
		}
	}

	partIdx := map[string]string{}
	if pv := o.get("partitions"); pv != nil {
		if elems, ok := w.array(pv, o.child("partitions")); ok {
			for i, e := range elems {
				ppath := joinIndex(o.child("partitions"), i)
				po := w.object(e, ppath, "id", "node_pool_ids")
				if po == nil {
					continue
				}
				var part Partition
				if id, ok := po.reqString("id"); ok {
					part.ID = id
					if !inputs.PartitionID.Match(id) {
						// The id is written into slurm.conf as
						// PartitionName=ID: a newline or a blank would
						// add a line or a parameter of its own.
						w.add(po.get("id").pos, po.child("id"), "%q is not a Slurm partition name flexslurm writes: want %s", id, inputs.PartitionID.Allowed)
					}
					if first, dup := partIdx[id]; dup {
						w.add(po.get("id").pos, po.child("id"), "duplicate partition id %q (also %s.id)", id, first)
					} else {
						partIdx[id] = ppath
					}
				}
				if nv := po.get("node_pool_ids"); nv == nil {
					po.missing("node_pool_ids")
				} else if ids, ok := w.array(nv, po.child("node_pool_ids")); ok {
					if len(ids) == 0 {
						w.add(nv.pos, po.child("node_pool_ids"), "must name at least one node pool")
					}
					for j, iv := range ids {
						ipath := joinIndex(po.child("node_pool_ids"), j)
						id, ok := w.str(iv, ipath)
						if !ok {
							continue
						}
						if refs[id] == nil {
							w.add(iv.pos, ipath, "unknown node pool %q%s", id, known("node pools", poolIDs))
							continue
						}
						part.NodePoolIDs = append(part.NodePoolIDs, id)
					}
				}
				s.Partitions = append(s.Partitions, part)
			}
		}
	}

	if id, ok := o.reqString("login_node_pool_id"); ok {
		s.LoginNodePoolID = id
		ref := refs[id]
		switch {
		case ref == nil:
			w.add(o.get("login_node_pool_id").pos, o.child("login_node_pool_id"), "unknown node pool %q%s", id, known("node pools", poolIDs))
		case ref.scalingOK && ref.minN != ref.maxN:
			// The login pool's min_node_count must equal its max_node_count
			// (https://docs.cloud.google.com/gemini-enterprise-agent-platform/machine-learning/training/training-clusters/create-cluster).
			w.add(ref.scaling.pos, ref.path+".scaling_spec", "login node pool %q must have min_node_count equal to max_node_count, got %d and %d", id, ref.minN, ref.maxN)
		}
	}

	if id, ok := o.optString("default_partition_id"); ok && id != "" {
		s.DefaultPartitionID = id
		if _, found := partIdx[id]; !found {
			var ids []string
			for _, p := range s.Partitions {
				if p.ID != "" && !slices.Contains(ids, p.ID) {
					ids = append(ids, p.ID)
				}
			}
			w.add(o.get("default_partition_id").pos, o.child("default_partition_id"), "unknown partition %q%s", id, known("partitions", ids))
		}
	}
	return s
}

// known renders " (node pools: a, b)" for an unknown-reference message.
func known(what string, ids []string) string {
	if len(ids) == 0 {
		return " (no valid " + what + " are defined)"
	}
	return " (" + what + ": " + strings.Join(ids, ", ") + ")"
}
