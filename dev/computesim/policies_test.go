package computesim

import (
	"net/http"
	"strings"
	"testing"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"
)

func (e *env) policies() *compute.ResourcePoliciesClient {
	e.t.Helper()
	c, err := compute.NewResourcePoliciesRESTClient(e.ctx, option.WithEndpoint(e.srv.URL), option.WithoutAuthentication())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

func workload(name, typ, distance string) *computepb.ResourcePolicy {
	wp := &computepb.ResourcePolicyWorkloadPolicy{Type: proto.String(typ)}
	if distance != "" {
		wp.MaxTopologyDistance = proto.String(distance)
	}
	return &computepb.ResourcePolicy{Name: proto.String(name), WorkloadPolicy: wp}
}

func (e *env) insertPolicy(rp *computepb.ResourcePolicy, region string) error {
	return do(e.policies().Insert(e.ctx, &computepb.InsertResourcePolicyRequest{Project: testProject, Region: region, ResourcePolicyResource: rp}))
}

func (e *env) insertPlacedMIG(name, template, policy string) error {
	m := &computepb.InstanceGroupManager{
		Name:             proto.String(name),
		BaseInstanceName: proto.String(name),
		InstanceTemplate: proto.String("projects/" + testProject + "/global/instanceTemplates/" + template),
		TargetSize:       proto.Int32(0),
		ResourcePolicies: &computepb.InstanceGroupManagerResourcePolicies{WorkloadPolicy: proto.String(policy)},
	}
	return do(e.igm.Insert(e.ctx, &computepb.InsertInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManagerResource: m}))
}

// TestWorkloadPolicies: the simulator keeps workload policies (insert, get,
// 409 on a second insert, delete) and a MIG that references one records
// it; it refuses what Compute refuses, naming the field.
func TestWorkloadPolicies(t *testing.T) {
	e := newEnv(t, Options{})
	region := regionOf(testZone)
	if err := e.insertTemplate(flexTemplate("tpl", 7200)); err != nil {
		t.Fatal(err)
	}
	if err := e.insertPolicy(workload("wp", "HIGH_THROUGHPUT", "BLOCK"), region); err != nil {
		t.Fatal(err)
	}
	wantHTTP(t, e.insertPolicy(workload("wp", "HIGH_THROUGHPUT", ""), region), 409, "alreadyExists")
	got, err := e.policies().Get(e.ctx, &computepb.GetResourcePolicyRequest{Project: testProject, Region: region, ResourcePolicy: "wp"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetWorkloadPolicy().GetMaxTopologyDistance() != "BLOCK" || got.GetWorkloadPolicy().GetType() != "HIGH_THROUGHPUT" {
		t.Errorf("policy read back as %v", got.GetWorkloadPolicy())
	}
	if err := e.insertPlacedMIG("placed", "tpl", "regions/"+region+"/resourcePolicies/wp"); err != nil {
		t.Fatal(err)
	}
	if ref := e.getMIG("placed").GetResourcePolicies().GetWorkloadPolicy(); !strings.HasSuffix(ref, "projects/"+testProject+"/regions/"+region+"/resourcePolicies/wp") {
		t.Errorf("MIG records workload policy %q", ref)
	}
	// A policy a MIG references is not deleted.
	wantHTTP(t, do(e.policies().Delete(e.ctx, &computepb.DeleteResourcePolicyRequest{Project: testProject, Region: region, ResourcePolicy: "wp"})), 400, "resourceInUseByAnotherResource")

	refusals := []struct {
		name string
		err  func() error
		code int
		msg  string
	}{
		{"a distance outside the enum", func() error { return e.insertPolicy(workload("bad1", "HIGH_THROUGHPUT", "RACK"), region) }, 400, "maxTopologyDistance"},
		{"a type outside the enum", func() error { return e.insertPolicy(workload("bad2", "COMPACT", ""), region) }, 400, "type"},
		{"a distance with HIGH_AVAILABILITY", func() error { return e.insertPolicy(workload("bad3", "HIGH_AVAILABILITY", "BLOCK"), region) }, 400, "maxTopologyDistance"},
		{"no type", func() error {
			return e.insertPolicy(&computepb.ResourcePolicy{Name: proto.String("bad4"), WorkloadPolicy: &computepb.ResourcePolicyWorkloadPolicy{}}, region)
		}, 400, "workloadPolicy.type"},
		{"a MIG naming a missing policy", func() error { return e.insertPlacedMIG("m1", "tpl", "regions/"+region+"/resourcePolicies/nope") }, 400, "was not found"},
		{"a MIG naming a policy in another region", func() error {
			if err := e.insertPolicy(workload("far", "HIGH_THROUGHPUT", ""), "europe-west4"); err != nil {
				return err
			}
			return e.insertPlacedMIG("m2", "tpl", "regions/europe-west4/resourcePolicies/far")
		}, 400, "must be in region " + region},
	}
	for _, r := range refusals {
		err := r.err()
		code, _ := httpErr(t, err)
		if code != r.code || !strings.Contains(err.Error(), r.msg) {
			t.Errorf("%s: got %d %v, want %d mentioning %q", r.name, code, err, r.code, r.msg)
		}
	}
	// Machine types: a FLEX_START A3 Mega MIG takes no workload policy
	// (Flex-Start: A4 and A3 Ultra only), nor a G2 MIG at all.
	for _, mt := range []string{"a3-megagpu-8g", "g2-standard-96"} {
		tpl := flexTemplate("tpl-"+strings.Split(mt, "-")[0], 7200)
		tpl.Properties.MachineType = proto.String(mt)
		tpl.Properties.GuestAccelerators = nil
		if err := e.insertTemplate(tpl); err != nil {
			t.Fatalf("%s template: %v", mt, err)
		}
		err := e.insertPlacedMIG("m-"+strings.Split(mt, "-")[0], tpl.GetName(), "regions/"+region+"/resourcePolicies/wp")
		if code, _ := httpErr(t, err); code != http.StatusBadRequest || !strings.Contains(err.Error(), "resourcePolicies.workloadPolicy") {
			t.Errorf("%s: got %v, want 400 naming resourcePolicies.workloadPolicy", mt, err)
		}
	}
	// Without the MIG, the policy deletes; deleting it again is 404.
	if err := do(e.igm.Delete(e.ctx, &computepb.DeleteInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "placed"})); err != nil {
		t.Fatal(err)
	}
	if err := do(e.policies().Delete(e.ctx, &computepb.DeleteResourcePolicyRequest{Project: testProject, Region: region, ResourcePolicy: "wp"})); err != nil {
		t.Fatal(err)
	}
	wantHTTP(t, do(e.policies().Delete(e.ctx, &computepb.DeleteResourcePolicyRequest{Project: testProject, Region: region, ResourcePolicy: "wp"})), 404, "notFound")
}

// TestWorkloadPolicyOnFlexStartReading: with RefuseWorkloadPolicyOnFlexStart
// (in strict) a MIG whose FLEX_START template is A3 Ultra and that
// references a workload policy is refused with a 400 naming the field, and
// no MIG is made; without it the same MIG is accepted. A MIG of the same
// template without a policy is accepted either way.
func TestWorkloadPolicyOnFlexStartReading(t *testing.T) {
	if !StrictReadings().RefuseWorkloadPolicyOnFlexStart {
		t.Error("strict readings accept a workload policy on a Flex-Start MIG")
	}
	for _, refuse := range []bool{false, true} {
		e := newEnv(t, Options{Readings: Readings{RefuseWorkloadPolicyOnFlexStart: refuse}})
		region := regionOf(testZone)
		if err := e.insertTemplate(flexTemplate("tpl", 7200)); err != nil {
			t.Fatal(err)
		}
		if err := e.insertPolicy(workload("wp", "HIGH_THROUGHPUT", ""), region); err != nil {
			t.Fatal(err)
		}
		err := e.insertPlacedMIG("placed", "tpl", "regions/"+region+"/resourcePolicies/wp")
		code := 0
		if err != nil {
			code, _ = httpErr(t, err)
		}
		switch {
		case !refuse && err != nil:
			t.Errorf("lenient: a Flex-Start A3 Ultra MIG with a workload policy refused: %v", err)
		case refuse && (err == nil || code != http.StatusBadRequest || !strings.Contains(err.Error(), "resourcePolicies.workloadPolicy")):
			t.Errorf("refusing: got %v, want a 400 naming resourcePolicies.workloadPolicy", err)
		case refuse && len(e.sim.MIGs()) != 0:
			t.Errorf("refusing: the refused insert made MIGs %+v", e.sim.MIGs())
		}
		if err := e.insertPlacedMIG("unplaced", "tpl", ""); err != nil {
			t.Errorf("refuse=%t: a Flex-Start MIG without a policy: %v", refuse, err)
		}
	}
}
