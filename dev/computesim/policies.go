package computesim

import (
	"maps"
	"slices"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// Resource policies: the simulator serves workload policies
// (resourcePolicies.insert/get/delete with workloadPolicy, Compute v1
// discovery document) and the zonal MIGs that reference one
// (InstanceGroupManager.resourcePolicies.workloadPolicy). What it refuses,
// and where the rule comes from:
//   - type and maxTopologyDistance outside their enums: the contract
//     (contract.json) refuses them with the field named;
//   - maxTopologyDistance or acceleratorTopology with a type other than
//     HIGH_THROUGHPUT, or both together: "This field can be set only when
//     the workload policy type is HIGH_THROUGHPUT and cannot be set if
//     accelerator topology is set" (magic-modules ResourcePolicy,
//     google_compute_resource_policy's workload_policy; gcloud's
//     resource-policies create workload-policy makes the two flags a
//     mutually exclusive group);
//   - a MIG that names a policy that does not exist, in another project or
//     in another region than the MIG's zone, or a resource policy that is
//     no workload policy;
//   - a MIG whose template's machine type is not one workload policies
//     apply to ("You can only apply workload policies to MIGs that use A4X
//     Max, A4X, A4, A3 Ultra, A3 Mega, A3 High (8 GPUs), H4D",
//     https://cloud.google.com/compute/docs/instance-groups/about-workload-policies),
//     and, for a FLEX_START template, one other than A4 and A3 Ultra
//     ("For Flex-start: A4 and A3 Ultra",
//     https://cloud.google.com/ai-hypercomputer/docs/placement-policy-and-workload-policy);
//   - deleting a policy a MIG references.
// Other kinds of resource policy (snapshot schedules, placement, instance
// schedules) are not simulated and are refused as such.

func policyKey(project, region, name string) string {
	return "projects/" + project + "/regions/" + region + "/resourcePolicies/" + name
}

// workloadPolicyMachines are the machine types a MIG with a workload policy
// may use, by provisioning model ("" for any other than FLEX_START).
var workloadPolicyMachines = map[string]bool{
	"a4x-maxgpu-4g-metal": true, "a4x-highgpu-4g": true, "a4-highgpu-8g": true,
	"a3-ultragpu-8g": true, "a3-megagpu-8g": true, "a3-highgpu-8g": true,
	"h4d-highmem-192-lssd": true, "h4d-standard-192": true, "h4d-highmem-192": true,
}

var flexStartWorkloadPolicyMachines = map[string]bool{"a4-highgpu-8g": true, "a3-ultragpu-8g": true}

func (s *Sim) policyInsertLocked(req *request) (proto.Message, *apiError) {
	rp := &computepb.ResourcePolicy{}
	if aerr := decodeBody(req, rp); aerr != nil {
		return nil, aerr
	}
	if aerr := checkName("resource.name", rp.GetName()); aerr != nil {
		return nil, aerr
	}
	if !regionName.MatchString(req.region) {
		return nil, errInvalidField("region", req.region, "Unknown region.")
	}
	wp := rp.GetWorkloadPolicy()
	if wp == nil || rp.GroupPlacementPolicy != nil || rp.SnapshotSchedulePolicy != nil || rp.InstanceSchedulePolicy != nil || rp.DiskConsistencyGroupPolicy != nil {
		return nil, &apiError{code: 501, reason: "notImplemented", status: "UNIMPLEMENTED",
			message: "computesim simulates workload policies only (resource.workloadPolicy, and no other policy)"}
	}
	if wp.GetType() == "" {
		return nil, errRequired("resource.workloadPolicy.type")
	}
	if wp.GetType() != "HIGH_THROUGHPUT" {
		if wp.MaxTopologyDistance != nil {
			return nil, errInvalidField("resource.workloadPolicy.maxTopologyDistance", wp.GetMaxTopologyDistance(), "Can be set only when the workload policy type is HIGH_THROUGHPUT.")
		}
		if wp.AcceleratorTopology != nil {
			return nil, errInvalidField("resource.workloadPolicy.acceleratorTopology", wp.GetAcceleratorTopology(), "Can be set only when the workload policy type is HIGH_THROUGHPUT.")
		}
	}
	if wp.MaxTopologyDistance != nil && wp.AcceleratorTopology != nil {
		return nil, errInvalidField("resource.workloadPolicy.maxTopologyDistance", wp.GetMaxTopologyDistance(), "Cannot be set if acceleratorTopology is set.")
	}
	key := policyKey(req.project, req.region, rp.GetName())
	if s.policies[key] != nil {
		return nil, errAlreadyExists(key)
	}
	rp.Kind = strp("compute#resourcePolicy")
	rp.Id = u64p(s.newIDLocked())
	rp.CreationTimestamp = strp(formatTime(req.now))
	rp.SelfLink = strp(link(key))
	rp.Region = strp(link("projects/" + req.project + "/regions/" + req.region))
	rp.Status = strp("READY")
	s.policies[key] = rp
	return s.newOpLocked(req.project, req.opScope(), "insert", link(key), rp.GetId(), s.callerPrincipal(req.project), req.now), nil
}

func (s *Sim) policyGetLocked(req *request) (proto.Message, *apiError) {
	key := policyKey(req.project, req.region, req.name)
	rp := s.policies[key]
	if rp == nil {
		return nil, errNotFound(key)
	}
	return rp, nil
}

func (s *Sim) policyDeleteLocked(req *request) (proto.Message, *apiError) {
	key := policyKey(req.project, req.region, req.name)
	rp := s.policies[key]
	if rp == nil {
		return nil, errNotFound(key)
	}
	for _, mk := range slices.Sorted(maps.Keys(s.migs)) {
		if m := s.migs[mk]; m.policyKey == key {
			return nil, &apiError{code: 400, reason: "resourceInUseByAnotherResource",
				message: "The resource_policy resource '" + key + "' is already being used by '" + mk + "'"}
		}
	}
	delete(s.policies, key)
	return s.newOpLocked(req.project, req.opScope(), "delete", link(key), rp.GetId(), s.callerPrincipal(req.project), req.now), nil
}

// parsePolicyRef reads a MIG's resourcePolicies.workloadPolicy: a full URL,
// "projects/P/regions/R/resourcePolicies/N" or
// "regions/R/resourcePolicies/N" (the discovery document's examples).
func parsePolicyRef(project, ref string) (p, region, name string, ok bool) {
	rest := strings.TrimPrefix(ref, linkBase)
	rest = strings.TrimPrefix(rest, "https://compute.googleapis.com/compute/v1/")
	p = project
	if after, found := strings.CutPrefix(rest, "projects/"); found {
		var cut bool
		p, rest, cut = strings.Cut(after, "/")
		if !cut {
			return "", "", "", false
		}
	}
	f := strings.Split(rest, "/")
	if len(f) != 4 || f[0] != "regions" || f[2] != "resourcePolicies" || f[1] == "" || f[3] == "" {
		return "", "", "", false
	}
	return p, f[1], f[3], true
}

// checkMIGWorkloadPolicyLocked checks the workload policy a MIG being
// inserted references, if any, and records it on the MIG's record.
func (s *Sim) checkMIGWorkloadPolicyLocked(req *request, m *computepb.InstanceGroupManager, tkey string) *apiError {
	ref := m.GetResourcePolicies().GetWorkloadPolicy()
	if ref == "" {
		return nil
	}
	const field = "resource.resourcePolicies.workloadPolicy"
	project, region, name, ok := parsePolicyRef(req.project, ref)
	if !ok {
		return errInvalidField(field, ref, "Must be a URL of a resource policy: projects/PROJECT/regions/REGION/resourcePolicies/NAME.")
	}
	if project != req.project {
		return errInvalidField(field, ref, "The workload policy must be in the project of the managed instance group.")
	}
	if region != regionOf(req.zone) {
		return errInvalidField(field, ref, "The workload policy must be in region "+regionOf(req.zone)+", the region of zone "+req.zone+".")
	}
	key := policyKey(project, region, name)
	if s.policies[key] == nil {
		return errInvalidField(field, ref, "The resource '"+key+"' was not found.")
	}
	t := s.templates[tkey]
	if t == nil {
		return nil // reported where the template is resolved
	}
	props := t.pb.GetProperties()
	mt := props.GetMachineType()
	flex := props.GetScheduling().GetProvisioningModel() == "FLEX_START"
	if flex && s.opts.Readings.RefuseWorkloadPolicyOnFlexStart {
		// The wording is the simulator's: Compute's is not published.
		return errInvalidField(field, ref, "A workload policy can't be applied to a managed instance group whose instance template uses the FLEX_START provisioning model.")
	}
	if !workloadPolicyMachines[mt] || (flex && !flexStartWorkloadPolicyMachines[mt]) {
		why := "Workload policies apply only to MIGs of A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High (8 GPUs) or H4D instances."
		if flex && workloadPolicyMachines[mt] {
			why = "Workload policies apply to MIGs of FLEX_START instances only for A4 and A3 Ultra machine types."
		}
		return errInvalidField(field, ref, "Machine type "+mt+": "+why)
	}
	m.ResourcePolicies.WorkloadPolicy = proto.String(link(key))
	return nil
}

// policyAggregatedListLocked serves resourcePolicies.aggregatedList
// (GET projects/P/aggregated/resourcePolicies): the project's policies by
// "regions/R" scope.
func (s *Sim) policyAggregatedListLocked(req *request) (proto.Message, *apiError) {
	var items []scopedItem
	for _, k := range slices.Sorted(maps.Keys(s.policies)) {
		rp := s.policies[k]
		if p, region, _, ok := parsePolicyRef(req.project, k); ok && p == req.project {
			items = append(items, scopedItem{scope: "regions/" + region, name: rp.GetName(), msg: rp})
		}
	}
	page, next, aerr := paginateScoped(items, req.query)
	if aerr != nil {
		return nil, aerr
	}
	base := "projects/" + req.project + "/aggregated/resourcePolicies"
	out := &computepb.ResourcePolicyAggregatedList{
		Kind: strp("compute#resourcePolicyAggregatedList"), Id: strp(base), SelfLink: strp(link(base)),
		Items: scopedLists(page, func(v []*computepb.ResourcePolicy) *computepb.ResourcePoliciesScopedList {
			return &computepb.ResourcePoliciesScopedList{ResourcePolicies: v}
		}),
	}
	if next != "" {
		out.NextPageToken = strp(next)
	}
	return out, nil
}
