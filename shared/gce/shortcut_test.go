package gce_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/gce"
)

// TestListShortcutMatchesREST: a Client whose list calls the simulator
// answers without JSON (computesim.ListShortcut) returns what the same
// calls return over REST, in every state a pool goes through, and leaves
// to REST exactly the calls it must: one whose answer has a next page,
// one that fails, one an injected error matches (which REST then gets,
// once).
func TestListShortcutMatchesREST(t *testing.T) {
	h := newHarness(t, computesim.Options{CapacityDelay: func(zone, machineType string) time.Duration {
		if machineType == "a4-highgpu-8g" {
			return 30 * time.Minute // b200 requests stay queued a while
		}
		return 0
	}})
	s, err := gce.New(h.ctx, project, option.WithEndpoint(h.url), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var answered []string
	s.SetListShortcut(computesim.ListShortcut{Sim: h.sim, Answered: func(method, path string) {
		if method != http.MethodGet {
			t.Errorf("answered %s %s", method, path)
		}
		answered = append(answered, path)
	}})

	type lists struct {
		Pool, Other, All []gce.Instance
		MIGs, Prefix     []gce.MIG
		RRs, OtherRRs    []gce.ResizeRequest
		Errs             []string
	}
	list := func(c *gce.Client) lists {
		var l lists
		errs := func(err error) {
			if err != nil {
				l.Errs = append(l.Errs, gce.Classify(err).String())
			} else {
				l.Errs = append(l.Errs, "")
			}
		}
		var err error
		l.Pool, err = c.ListInstances(h.ctx, zone, map[string]string{"flexslurm-cluster": "c1", "flexslurm-pool": "h200"})
		errs(err)
		l.Other, err = c.ListInstances(h.ctx, zone, map[string]string{"flexslurm-pool": "b200"})
		errs(err)
		l.All, err = c.ListInstances(h.ctx, zone, nil)
		errs(err)
		l.MIGs, err = c.ListMIGs(h.ctx, zone, "")
		errs(err)
		l.Prefix, err = c.ListMIGs(h.ctx, zone, "c1-h200")
		errs(err)
		l.RRs, err = c.ListResizeRequests(h.ctx, zone, "c1-h200")
		errs(err)
		l.OtherRRs, err = c.ListResizeRequests(h.ctx, zone, "c1-b200")
		errs(err)
		return l
	}
	check := func(when string, wantAnswered int) {
		t.Helper()
		answered = nil
		rest, short := list(h.c), list(s)
		if d := cmp.Diff(rest, short); d != "" {
			t.Errorf("%s: shortcut differs from REST (-REST +shortcut):\n%s", when, d)
		}
		if len(answered) != wantAnswered {
			t.Errorf("%s: %d calls answered without REST, want %d: %q", when, len(answered), wantAnswered, answered)
		}
	}

	// No MIG yet: the resize request lists fail (404) over REST.
	check("empty project", 5)
	h.pool()
	other := flexSpec("c1-b200-v1")
	other.Properties.Labels = map[string]string{"flexslurm-cluster": "c1", "flexslurm-pool": "b200"}
	other.Properties.MachineType = "a4-highgpu-8g"
	other.Properties.GuestAccelerators[0].AcceleratorType = "nvidia-b200"
	if err := h.c.EnsureInstanceTemplate(h.ctx, other, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: "c1-b200", Template: "c1-b200-v1"}, ""); err != nil {
		t.Fatal(err)
	}
	check("two MIGs", 7)
	var names []string
	for i := range 3 {
		names = append(names, fmt.Sprintf("c1-h200-%d", i))
	}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr-1", Instances: names, RunDuration: time.Hour}, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-b200", gce.ResizeRequestSpec{Name: "rr-2", Instances: []string{"c1-b200-0"}, RunDuration: time.Hour}, ""); err != nil {
		t.Fatal(err)
	}
	check("requests created", 7)
	h.tick(0)
	h.tick(time.Minute)
	check("h200 provisioned, b200 queued", 7)
	if err := h.c.DeleteInstances(h.ctx, zone, "c1-h200", names[:1], ""); err != nil {
		t.Fatal(err)
	}
	check("a VM being deleted", 7)
	h.tick(time.Hour)
	check("an hour later", 7)

	// An injected error is left to REST, which gets it once.
	h.sim.InjectError(computesim.Match{Method: "GET", Path: `/instances$`}, 403, "forbidden", "", 1)
	answered = nil
	if _, err := s.ListInstances(h.ctx, zone, nil); gce.Classify(err) != gce.ClassPermanent {
		t.Errorf("injected 403: %v", err)
	}
	if len(answered) != 0 {
		t.Errorf("the shortcut answered a call an injection matches: %q", answered)
	}
	if _, err := s.ListInstances(h.ctx, zone, nil); err != nil || len(answered) != 1 {
		t.Errorf("after the injection: %v, answered %q", err, answered)
	}

	// More VMs than one page holds: left to REST, which follows the pages.
	var many []string
	for i := range 510 {
		many = append(many, fmt.Sprintf("c1-h200-x%03d", i))
	}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr-3", Instances: many, RunDuration: time.Hour}, ""); err != nil {
		t.Fatal(err)
	}
	h.tick(0)
	h.tick(time.Minute)
	if n := len(h.sim.Instances()); n < 500 {
		t.Fatalf("%d VMs, want more than a page", n)
	}
	h.gets.Store(0)
	check("512 VMs", 5)
	// REST: 2 lists of 2 pages and one of 1; the shortcut's client: the
	// 2 lists of 2 pages.
	if n := h.gets.Load(); n != 5+4 {
		t.Errorf("%d VM list pages fetched over REST, want 9", n)
	}

	// Allow refuses: everything goes over REST.
	s.SetListShortcut(computesim.ListShortcut{Sim: h.sim, Allow: func(string, string) bool { return false },
		Answered: func(_, path string) { answered = append(answered, path) }})
	check("Allow refusing", 0)
}

// cannedLists is a ListShortcut answering every call with the same
// responses, which it keeps (as the simulator keeps its state).
type cannedLists struct {
	vms  *computepb.InstanceList
	migs *computepb.InstanceGroupManagerList
	rrs  *computepb.InstanceGroupManagerResizeRequestsListResponse
}

func (c cannedLists) ListInstances(_ context.Context, _ *computepb.ListInstancesRequest, read func(*computepb.InstanceList)) bool {
	read(c.vms)
	return true
}

func (c cannedLists) ListInstanceGroupManagers(_ context.Context, _ *computepb.ListInstanceGroupManagersRequest, read func(*computepb.InstanceGroupManagerList)) bool {
	read(c.migs)
	return true
}

func (c cannedLists) ListResizeRequests(_ context.Context, _ *computepb.ListInstanceGroupManagerResizeRequestsRequest, read func(*computepb.InstanceGroupManagerResizeRequestsListResponse)) bool {
	read(c.rrs)
	return true
}

// TestListShortcutDoesNotChangeOrKeepTheAnswer: the answers a ListShortcut
// hands to the Client stay the shortcut's (the simulator's live state):
// the Client changes nothing in them, and what it returns does not change
// when they change afterwards.
func TestListShortcutDoesNotChangeOrKeepTheAnswer(t *testing.T) {
	ctx := context.Background()
	c, err := gce.New(ctx, project, option.WithEndpoint("http://127.0.0.1:1"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	canned := cannedLists{
		vms: &computepb.InstanceList{Items: []*computepb.Instance{{
			Name: proto.String("c1-h200-0"), Id: proto.Uint64(7), Status: proto.String("RUNNING"),
			Labels:            map[string]string{"flexslurm-cluster": "c1", "flexslurm-pool": "h200"},
			CreationTimestamp: proto.String("2026-12-01T10:00:00.000-00:00"),
			Zone:              proto.String("https://www.googleapis.com/compute/v1/projects/proj/zones/" + zone),
			Metadata: &computepb.Metadata{Items: []*computepb.Items{{Key: proto.String("created-by"),
				Value: proto.String("projects/1/zones/" + zone + "/instanceGroupManagers/c1-h200")}}},
		}, {Name: proto.String("c1-h200-1"), Labels: map[string]string{}}}},
		migs: &computepb.InstanceGroupManagerList{Items: []*computepb.InstanceGroupManager{{
			Name: proto.String("c1-h200"), TargetSize: proto.Int32(1),
			Versions: []*computepb.InstanceGroupManagerVersion{{InstanceTemplate: proto.String("global/instanceTemplates/c1-h200-v1")}},
		}}},
		rrs: &computepb.InstanceGroupManagerResizeRequestsListResponse{Items: []*computepb.InstanceGroupManagerResizeRequest{{
			Name: proto.String("rr-1"), State: proto.String("ACCEPTED"),
			Instances: []*computepb.PerInstanceConfig{{Name: proto.String("c1-h200-0")}},
			Status: &computepb.InstanceGroupManagerResizeRequestStatus{LastAttempt: &computepb.InstanceGroupManagerResizeRequestStatusLastAttempt{
				Error: &computepb.Error{Errors: []*computepb.Errors{{Code: proto.String("ZONE_RESOURCE_POOL_EXHAUSTED"), Message: proto.String("no capacity")}}}}},
		}}},
	}
	before := cannedLists{vms: proto.CloneOf(canned.vms), migs: proto.CloneOf(canned.migs), rrs: proto.CloneOf(canned.rrs)}
	c.SetListShortcut(canned)
	list := func() (vms []gce.Instance, migs []gce.MIG, rrs []gce.ResizeRequest) {
		t.Helper()
		var err error
		if vms, err = c.ListInstances(ctx, zone, nil); err != nil {
			t.Fatal(err)
		}
		if migs, err = c.ListMIGs(ctx, zone, "c1-"); err != nil {
			t.Fatal(err)
		}
		if rrs, err = c.ListResizeRequests(ctx, zone, "c1-h200"); err != nil {
			t.Fatal(err)
		}
		return vms, migs, rrs
	}
	vms, migs, rrs := list()
	for _, d := range []string{
		cmp.Diff(before.vms, canned.vms, protocmp.Transform()),
		cmp.Diff(before.migs, canned.migs, protocmp.Transform()),
		cmp.Diff(before.rrs, canned.rrs, protocmp.Transform()),
	} {
		if d != "" {
			t.Errorf("the Client changed the shortcut's answer (-before +after):\n%s", d)
		}
	}
	if len(vms) != 2 || vms[0].Labels["flexslurm-pool"] != "h200" || vms[0].MIG != "c1-h200" || vms[1].Labels != nil ||
		len(migs) != 1 || migs[0].Template != "c1-h200-v1" ||
		len(rrs) != 1 || rrs[0].LastAttemptCode != "ZONE_RESOURCE_POOL_EXHAUSTED" || len(rrs[0].Instances) != 1 {
		t.Fatalf("translated answers: %+v %+v %+v", vms, migs, rrs)
	}
	wantVMs, wantMIGs, wantRRs := fmt.Sprint(vms), fmt.Sprint(migs), fmt.Sprint(rrs)

	// The shortcut's state changes afterwards, everywhere it can.
	v := canned.vms.Items[0]
	v.Labels["flexslurm-pool"] = "b200"
	v.Labels["x"] = "y"
	v.Name, v.Status = proto.String("renamed"), proto.String("STOPPING")
	v.Metadata.Items[0].Value = proto.String("projects/1/zones/z/instanceGroupManagers/other")
	canned.vms.Items[1].Labels["new"] = "label"
	canned.migs.Items[0].Versions[0].InstanceTemplate = proto.String("global/instanceTemplates/other")
	canned.migs.Items[0].TargetSize = proto.Int32(9)
	r := canned.rrs.Items[0]
	r.State = proto.String("FAILED")
	r.Instances[0].Name = proto.String("other")
	r.Status.LastAttempt.Error.Errors[0].Code = proto.String("OTHER")
	if got := fmt.Sprint(vms); got != wantVMs {
		t.Errorf("VMs changed with the shortcut's state: %s, want %s", got, wantVMs)
	}
	if got := fmt.Sprint(migs); got != wantMIGs {
		t.Errorf("MIGs changed with the shortcut's state: %s, want %s", got, wantMIGs)
	}
	if got := fmt.Sprint(rrs); got != wantRRs {
		t.Errorf("resize requests changed with the shortcut's state: %s, want %s", got, wantRRs)
	}
}
