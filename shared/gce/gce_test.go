package gce_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
)

const (
	project = "proj"
	zone    = "us-central1-a"
)

// rid derives a request ID from a name, as callers derive them from event IDs.
func rid(name string) string { return uuid.NewSHA1(uuid.NameSpaceURL, []byte(name)).String() }

var t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

type harness struct {
	t     *testing.T
	ctx   context.Context
	clk   *clock.Manual
	sim   *computesim.Sim
	url   string
	c     *gce.Client
	gets  atomic.Int64 // GET …/instances list calls
	mu    sync.Mutex
	audit []map[string]any
}

func newHarness(t *testing.T, opts computesim.Options) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, clk: clock.NewManual(t0)}
	opts.Project = project
	opts.AuditSink = func(_ context.Context, entry []byte, attrs map[string]string) error {
		var m map[string]any
		if err := json.Unmarshal(entry, &m); err != nil {
			return err
		}
		if attrs[computesim.AuditTimestampAttr] != m["timestamp"] {
			t.Errorf("attribute %s = %q, entry timestamp %v", computesim.AuditTimestampAttr, attrs[computesim.AuditTimestampAttr], m["timestamp"])
		}
		h.mu.Lock()
		h.audit = append(h.audit, m)
		h.mu.Unlock()
		return nil
	}
	h.sim = computesim.New(opts, h.clk)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/instances") {
			h.gets.Add(1)
		}
		h.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	c, err := gce.New(ctx, project, option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	h.c = c
	return h
}

func (h *harness) auditEntries() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.audit...)
}

func flexSpec(name string) instancetemplate.Template {
	no := false
	return instancetemplate.Template{Name: name, Description: "h200 pool", Properties: instancetemplate.Properties{
		Description: "h200 pool",
		MachineType: "a3-ultragpu-8g",
		Disks: []instancetemplate.Disk{{Boot: true, AutoDelete: true, Type: "PERSISTENT", InitializeParams: instancetemplate.InitializeParams{
			DiskType: "hyperdisk-balanced", DiskSizeGb: 200, SourceImage: "projects/debian-cloud/global/images/family/debian-12"}}},
		NetworkInterfaces: []instancetemplate.NetworkInterface{{
			Network:       "projects/proj/global/networks/default",
			Subnetwork:    "projects/proj/regions/us-central1/subnetworks/default",
			AccessConfigs: []instancetemplate.AccessConfig{{Name: "External NAT", Type: "ONE_TO_ONE_NAT"}},
		}},
		ServiceAccounts:   []instancetemplate.ServiceAccount{{Email: "node@proj.iam.gserviceaccount.com", Scopes: []string{instancetemplate.CloudPlatformScope}}},
		GuestAccelerators: []instancetemplate.Accelerator{{AcceleratorType: "nvidia-h200-141gb", AcceleratorCount: 8}},
		Scheduling: instancetemplate.Scheduling{ProvisioningModel: "FLEX_START", InstanceTerminationAction: "DELETE",
			MaxRunDuration: &instancetemplate.Duration{Seconds: 7200}, OnHostMaintenance: "TERMINATE", AutomaticRestart: &no},
		ReservationAffinity: &instancetemplate.ReservationAffinity{ConsumeReservationType: "NO_RESERVATION"},
		Labels:              map[string]string{"flexslurm-cluster": "c1", "flexslurm-pool": "h200"},
		Metadata: &instancetemplate.Metadata{Items: []instancetemplate.MetadataItem{
			{Key: "enable-oslogin", Value: "TRUE"}, {Key: "startup-script", Value: "#!/bin/sh\necho hi"}}},
	}}
}

// pool creates template and MIG "c1-h200".
func (h *harness) pool() {
	h.t.Helper()
	if err := h.c.EnsureInstanceTemplate(h.ctx, flexSpec("c1-h200-v1"), rid("ensure template c1-h200-v1")); err != nil {
		h.t.Fatal(err)
	}
	if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: "c1-h200", Template: "c1-h200-v1", BaseInstanceName: "c1-h200"}, rid("ensure MIG c1-h200")); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) tick(d time.Duration) { h.sim.Tick(h.clk.Advance(d)) }

func (h *harness) rest() *compute.InstanceTemplatesClient {
	h.t.Helper()
	c, err := compute.NewInstanceTemplatesRESTClient(h.ctx, option.WithEndpoint(h.url), option.WithoutAuthentication())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

func TestTemplateMaxRunDurationRejected(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	for _, tc := range []struct {
		name string
		edit func(*instancetemplate.Template)
	}{
		{"599 s", func(s *instancetemplate.Template) { s.Properties.Scheduling.MaxRunDuration.Seconds = 599 }},
		{"604801 s", func(s *instancetemplate.Template) { s.Properties.Scheduling.MaxRunDuration.Seconds = 604801 }},
		{"zero", func(s *instancetemplate.Template) { s.Properties.Scheduling.MaxRunDuration = nil }},
		{"standard with duration", func(s *instancetemplate.Template) {
			s.Properties.Scheduling.ProvisioningModel = gce.ProvisioningStandard
		}},
		{"unknown model", func(s *instancetemplate.Template) { s.Properties.Scheduling.ProvisioningModel = "PREEMPTIBLE" }},
		{"bad name", func(s *instancetemplate.Template) { s.Name = "C1" }},
		{"no network", func(s *instancetemplate.Template) {
			s.Properties.NetworkInterfaces[0].Network, s.Properties.NetworkInterfaces[0].Subnetwork = "", ""
		}},
		{"machine type URL", func(s *instancetemplate.Template) { s.Properties.MachineType = "zones/z/machineTypes/a3-ultragpu-8g" }},
		{"count without type", func(s *instancetemplate.Template) { s.Properties.GuestAccelerators[0].AcceleratorType = "" }},
		{"boot disk without image", func(s *instancetemplate.Template) { s.Properties.Disks[0].InitializeParams.SourceImage = "" }},
		{"no boot disk", func(s *instancetemplate.Template) { s.Properties.Disks = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := flexSpec("tpl")
			tc.edit(&spec)
			err := h.c.EnsureInstanceTemplate(h.ctx, spec, "")
			if !errors.Is(err, gce.ErrInvalidSpec) || gce.Classify(err) != gce.ClassPermanent {
				t.Errorf("err = %v (class %v), want ErrInvalidSpec", err, gce.Classify(err))
			}
		})
	}
	if n := len(h.sim.Calls()); n != 0 {
		t.Errorf("%d API calls for invalid specs, want 0", n)
	}
	// The API rejects it too.
	tpl := &computepb.InstanceTemplate{Name: proto.String("tpl"), Properties: &computepb.InstanceProperties{
		MachineType: proto.String("a3-ultragpu-8g"),
		Scheduling: &computepb.Scheduling{
			ProvisioningModel: proto.String("FLEX_START"), InstanceTerminationAction: proto.String("DELETE"),
			OnHostMaintenance: proto.String("TERMINATE"), MaxRunDuration: &computepb.Duration{Seconds: proto.Int64(599)},
		},
	}}
	_, err := h.rest().Insert(h.ctx, &computepb.InsertInstanceTemplateRequest{Project: project, InstanceTemplateResource: tpl})
	if err == nil || gce.Classify(err) != gce.ClassPermanent {
		t.Errorf("API accepted maxRunDuration 599 s: %v", err)
	}
}

func TestEnsureInstanceTemplate(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	spec := flexSpec("c1-h200-v1")
	if err := h.c.EnsureInstanceTemplate(h.ctx, spec, rid("template event 1")); err != nil {
		t.Fatal(err)
	}
	// Created before: a duplicate (409) is success, even with a new request ID.
	if err := h.c.EnsureInstanceTemplate(h.ctx, spec, rid("template event 2")); err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	calls := h.sim.Calls()
	if len(calls) != 2 || calls[1].Status != 409 || calls[0].RequestID != rid("template event 1") {
		t.Errorf("calls = %+v", calls)
	}
	got, err := h.rest().Get(h.ctx, &computepb.GetInstanceTemplateRequest{Project: project, InstanceTemplate: "c1-h200-v1"})
	if err != nil {
		t.Fatal(err)
	}
	p := got.GetProperties()
	want := &computepb.InstanceProperties{
		Description: proto.String("h200 pool"),
		MachineType: proto.String("a3-ultragpu-8g"),
		Labels:      spec.Properties.Labels,
		Metadata: &computepb.Metadata{Items: []*computepb.Items{
			{Key: proto.String("enable-oslogin"), Value: proto.String("TRUE")},
			{Key: proto.String("startup-script"), Value: proto.String("#!/bin/sh\necho hi")},
		}},
		Disks: []*computepb.AttachedDisk{{
			Boot: proto.Bool(true), AutoDelete: proto.Bool(true), Type: proto.String("PERSISTENT"),
			InitializeParams: &computepb.AttachedDiskInitializeParams{
				DiskType: proto.String("hyperdisk-balanced"), DiskSizeGb: proto.Int64(200),
				SourceImage: proto.String("projects/debian-cloud/global/images/family/debian-12"),
			},
		}},
		NetworkInterfaces: []*computepb.NetworkInterface{{
			Network:       proto.String(spec.Properties.NetworkInterfaces[0].Network),
			Subnetwork:    proto.String(spec.Properties.NetworkInterfaces[0].Subnetwork),
			AccessConfigs: []*computepb.AccessConfig{{Name: proto.String("External NAT"), Type: proto.String("ONE_TO_ONE_NAT")}},
		}},
		GuestAccelerators: []*computepb.AcceleratorConfig{{AcceleratorType: proto.String("nvidia-h200-141gb"), AcceleratorCount: proto.Int32(8)}},
		ServiceAccounts: []*computepb.ServiceAccount{{
			Email: proto.String("node@proj.iam.gserviceaccount.com"), Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"},
		}},
		ReservationAffinity: &computepb.ReservationAffinity{ConsumeReservationType: proto.String("NO_RESERVATION")},
		Scheduling: &computepb.Scheduling{
			ProvisioningModel:         proto.String("FLEX_START"),
			InstanceTerminationAction: proto.String("DELETE"),
			MaxRunDuration:            &computepb.Duration{Seconds: proto.Int64(7200)},
			OnHostMaintenance:         proto.String("TERMINATE"),
			AutomaticRestart:          proto.Bool(false),
		},
	}
	if !proto.Equal(want, p) {
		t.Errorf("template properties:\n got %v\nwant %v", p, want)
	}
}

func TestMIGs(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	h.pool()
	if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: "c1-h200", Template: "c1-h200-v1"}, ""); err != nil {
		t.Fatalf("ensure existing MIG: %v", err)
	}
	if err := h.c.EnsureInstanceTemplate(h.ctx, flexSpec("c2-b200-v1"), ""); err != nil {
		t.Fatal(err)
	}
	long := "c2-" + strings.Repeat("b", 60)
	if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: long, Template: "projects/proj/global/instanceTemplates/c2-b200-v1", Description: "b200"}, ""); err != nil {
		t.Fatal(err)
	}
	err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: "c1-x", Template: "missing"}, "")
	if !gce.IsNotFound(err) || !errors.Is(err, gce.ErrNotFound) {
		t.Errorf("MIG with a missing template: %v", err)
	}
	sims := h.sim.MIGs()
	if len(sims) != 2 || sims[0].ActionOnFailure != "DO_NOTHING" || sims[0].TargetSize != 0 || sims[1].BaseInstanceName != long[:58] {
		t.Errorf("simulated MIGs = %+v", sims)
	}
	all, err := h.c.ListMIGs(h.ctx, zone, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("ListMIGs = %+v", all)
	}
	c1, err := h.c.ListMIGs(h.ctx, zone, "c1-")
	if err != nil {
		t.Fatal(err)
	}
	want := []gce.MIG{{Zone: zone, Name: "c1-h200", Template: "c1-h200-v1", TargetSize: 0, Created: t0}}
	if diff := cmp.Diff(want, c1); diff != "" {
		t.Errorf("ListMIGs(c1-) (-want +got):\n%s", diff)
	}
	if err := h.c.DeleteMIG(h.ctx, zone, "c1-h200", rid("delete MIG 1")); err != nil {
		t.Fatal(err)
	}
	if err := h.c.DeleteMIG(h.ctx, zone, "c1-h200", rid("delete MIG 2")); err != nil {
		t.Errorf("deleting a missing MIG: %v", err)
	}
	if c1, _ := h.c.ListMIGs(h.ctx, zone, "c1-"); len(c1) != 0 {
		t.Errorf("after delete: %+v", c1)
	}
}

// TestResizeRequestLifecycle: ACCEPTED, SUCCEEDED after the capacity delay,
// RUNNING VMs with their termination time, deleted at expiry with the audit
// entries of each style.
func TestResizeRequestLifecycle(t *testing.T) {
	for _, style := range []string{computesim.ExpiryLogDeferredDelete, computesim.ExpiryLogMIGDelete} {
		t.Run(style, func(t *testing.T) {
			h := newHarness(t, computesim.Options{
				ExpiryLogStyle: style,
				CapacityDelay:  func(string, string) time.Duration { return 20 * time.Minute },
			})
			h.pool()
			spec := gce.ResizeRequestSpec{Name: "rr-1", Instances: []string{"c1-h200-0"}, RunDuration: time.Hour, Description: "job 42"}
			if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, rid("scale up rr-1")); err != nil {
				t.Fatal(err)
			}
			h.tick(0)
			rr, err := h.c.GetResizeRequest(h.ctx, zone, "c1-h200", "rr-1")
			if err != nil {
				t.Fatal(err)
			}
			want := gce.ResizeRequest{Zone: zone, MIG: "c1-h200", Name: "rr-1", State: gce.StateAccepted, Instances: []string{"c1-h200-0"}, Created: t0}
			if diff := cmp.Diff(want, rr); diff != "" {
				t.Errorf("accepted (-want +got):\n%s", diff)
			}
			if _, err := h.c.GetInstance(h.ctx, zone, "c1-h200-0"); !gce.IsNotFound(err) {
				t.Errorf("VM before capacity: %v", err)
			}
			h.tick(20 * time.Minute)
			rrs, err := h.c.ListResizeRequests(h.ctx, zone, "c1-h200")
			if err != nil || len(rrs) != 1 || rrs[0].State != gce.StateSucceeded {
				t.Fatalf("after capacity: %+v %v", rrs, err)
			}
			created := t0.Add(20 * time.Minute)
			vms, err := h.c.ListInstances(h.ctx, zone, map[string]string{"flexslurm-pool": "h200"})
			if err != nil {
				t.Fatal(err)
			}
			if len(vms) != 1 {
				t.Fatalf("VMs = %+v", vms)
			}
			vm := vms[0]
			wantVM := gce.Instance{
				Zone: zone, Name: "c1-h200-0", ID: vm.ID, Status: "RUNNING",
				Labels:  map[string]string{"flexslurm-cluster": "c1", "flexslurm-pool": "h200"},
				Created: created, TerminationTime: created.Add(time.Hour), LastStart: created, MIG: "c1-h200",
			}
			if diff := cmp.Diff(wantVM, vm); diff != "" || vm.ID == 0 {
				t.Errorf("VM (-want +got):\n%s", diff)
			}
			got, err := h.c.GetInstance(h.ctx, zone, "c1-h200-0")
			if diff := cmp.Diff(vm, got); err != nil || diff != "" {
				t.Errorf("GetInstance: %v (-list +get):\n%s", err, diff)
			}
			if migs, _ := h.c.ListMIGs(h.ctx, zone, "c1-h200"); len(migs) != 1 || migs[0].TargetSize != 1 {
				t.Errorf("MIG = %+v", migs)
			}

			// Expiry.
			h.clk.Set(created.Add(time.Hour))
			h.sim.Tick(h.clk.Now())
			_, err = h.c.GetInstance(h.ctx, zone, "c1-h200-0")
			if !errors.Is(err, gce.ErrNotFound) || !gce.IsNotFound(err) {
				t.Errorf("GetInstance after expiry: %v", err)
			}
			if migs, _ := h.c.ListMIGs(h.ctx, zone, "c1-h200"); len(migs) != 1 || migs[0].TargetSize != 0 {
				t.Errorf("MIG after expiry = %+v", migs)
			}
			entries := h.auditEntries()
			type summary struct {
				Method, LogName, Principal, Resource, InstanceID string
				First, Last                                      bool
			}
			var got2 []summary
			for _, e := range entries {
				pp := e["protoPayload"].(map[string]any)
				op := e["operation"].(map[string]any)
				first, _ := op["first"].(bool)
				last, _ := op["last"].(bool)
				got2 = append(got2, summary{
					Method: pp["methodName"].(string), LogName: e["logName"].(string),
					Principal:  pp["authenticationInfo"].(map[string]any)["principalEmail"].(string),
					Resource:   pp["resourceName"].(string),
					InstanceID: e["resource"].(map[string]any)["labels"].(map[string]any)["instance_id"].(string),
					First:      first, Last: last,
				})
			}
			id := fmt.Sprint(vm.ID)
			res := "projects/proj/zones/us-central1-a/instances/c1-h200-0"
			var wantAudit []summary
			if style == computesim.ExpiryLogDeferredDelete {
				wantAudit = []summary{{"compute.instances.deferredDelete", "projects/proj/logs/cloudaudit.googleapis.com%2Fsystem_event", "system@google.com", res, id, true, true}}
			} else {
				activity := "projects/proj/logs/cloudaudit.googleapis.com%2Factivity"
				wantAudit = []summary{
					{"v1.compute.instances.delete", activity, "123456789012@cloudservices.gserviceaccount.com", res, id, true, false},
					{"v1.compute.instances.delete", activity, "123456789012@cloudservices.gserviceaccount.com", res, id, false, true},
				}
			}
			if diff := cmp.Diff(wantAudit, got2); diff != "" {
				t.Errorf("audit entries (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRepeatedRequestIDActsOnce(t *testing.T) {
	h := newHarness(t, computesim.Options{CapacityDelay: func(string, string) time.Duration { return time.Hour }})
	h.pool()
	spec := gce.ResizeRequestSpec{Name: "rr-1", Instances: []string{"c1-h200-0", "c1-h200-1"}, RunDuration: time.Hour}
	for range 3 {
		if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, rid("scale up rr-1")); err != nil {
			t.Fatal(err)
		}
	}
	// The same name under another request ID: 409, which is success.
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, rid("scale up rr-1 again")); err != nil {
		t.Fatal(err)
	}
	if migs, _ := h.c.ListMIGs(h.ctx, zone, "c1-h200"); len(migs) != 1 || migs[0].TargetSize != 2 {
		t.Errorf("MIG = %+v, want target size 2", migs)
	}
	if n := len(h.sim.ResizeRequests()); n != 1 {
		t.Errorf("%d resize requests", n)
	}
	var statuses []int
	for _, c := range h.sim.Calls() {
		if strings.HasSuffix(c.Path, "/resizeRequests") {
			statuses = append(statuses, c.Status)
		}
	}
	if diff := cmp.Diff([]int{200, 200, 200, 409}, statuses); diff != "" {
		t.Errorf("insert statuses (-want +got):\n%s", diff)
	}
}

func TestCancelAndDeleteResizeRequest(t *testing.T) {
	h := newHarness(t, computesim.Options{
		AcceptDelay:   time.Minute,
		CapacityDelay: func(string, string) time.Duration { return time.Hour },
	})
	h.pool()
	spec := gce.ResizeRequestSpec{Name: "rr-1", Instances: []string{"c1-h200-0"}, RunDuration: time.Hour}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, ""); err != nil {
		t.Fatal(err)
	}
	// Still CREATING: not cancellable yet, retry later.
	err := h.c.CancelResizeRequest(h.ctx, zone, "c1-h200", "rr-1", "")
	if err == nil || errors.Is(err, gce.ErrNotCancellable) || gce.Classify(err) != gce.ClassTransient {
		t.Errorf("cancel while CREATING: %v (class %v)", err, gce.Classify(err))
	}
	h.tick(time.Minute)
	// ACCEPTED: cannot be deleted, can be cancelled.
	if err := h.c.DeleteResizeRequest(h.ctx, zone, "c1-h200", "rr-1", ""); err == nil {
		t.Error("deleted an ACCEPTED request")
	}
	if err := h.c.CancelResizeRequest(h.ctx, zone, "c1-h200", "rr-1", rid("cancel rr-1")); err != nil {
		t.Fatal(err)
	}
	rr, err := h.c.GetResizeRequest(h.ctx, zone, "c1-h200", "rr-1")
	if err != nil || rr.State != gce.StateCancelled {
		t.Fatalf("after cancel: %+v %v", rr, err)
	}
	if migs, _ := h.c.ListMIGs(h.ctx, zone, "c1-h200"); migs[0].TargetSize != 0 {
		t.Errorf("target size after cancel = %d", migs[0].TargetSize)
	}
	err = h.c.CancelResizeRequest(h.ctx, zone, "c1-h200", "rr-1", rid("cancel rr-1 again"))
	if !errors.Is(err, gce.ErrNotCancellable) || gce.Classify(err).Retryable() || errors.Is(err, gce.ErrRequestSucceeded) {
		t.Errorf("cancel of a CANCELLED request: %v", err)
	}
	if err := h.c.DeleteResizeRequest(h.ctx, zone, "c1-h200", "rr-1", ""); err != nil {
		t.Fatal(err)
	}
	if err := h.c.DeleteResizeRequest(h.ctx, zone, "c1-h200", "rr-1", ""); err != nil {
		t.Errorf("deleting a missing request: %v", err)
	}
	_, err = h.c.GetResizeRequest(h.ctx, zone, "c1-h200", "rr-1")
	if !errors.Is(err, gce.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	err = h.c.CancelResizeRequest(h.ctx, zone, "c1-h200", "rr-1", "")
	if !errors.Is(err, gce.ErrNotCancellable) || !gce.IsNotFound(err) {
		t.Errorf("cancel of a missing request: %v", err)
	}

	// A SUCCEEDED request is not cancellable either.
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr-2", Instances: []string{"c1-h200-0"}}, ""); err != nil {
		t.Fatal(err)
	}
	h.tick(time.Minute)
	h.tick(time.Hour)
	// Its VMs exist: the error says it SUCCEEDED.
	if err := h.c.CancelResizeRequest(h.ctx, zone, "c1-h200", "rr-2", ""); !errors.Is(err, gce.ErrNotCancellable) || !errors.Is(err, gce.ErrRequestSucceeded) {
		t.Errorf("cancel of a SUCCEEDED request: %v", err)
	}
	// With no RunDuration the template's maxRunDuration (2 h) applies.
	vm, err := h.c.GetInstance(h.ctx, zone, "c1-h200-0")
	if err != nil || !vm.TerminationTime.Equal(vm.Created.Add(2*time.Hour)) {
		t.Errorf("VM = %+v %v", vm, err)
	}
	// A FAILED request reports its error.
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr-3", Instances: []string{"c1-h200-9"}}, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.sim.FailResizeRequest(zone, "c1-h200", "rr-3", "ZONE_RESOURCE_POOL_EXHAUSTED", "no capacity"); err != nil {
		t.Fatal(err)
	}
	rr, err = h.c.GetResizeRequest(h.ctx, zone, "c1-h200", "rr-3")
	if err != nil || rr.State != gce.StateFailed || rr.ErrorCode != "ZONE_RESOURCE_POOL_EXHAUSTED" || rr.ErrorMessage != "no capacity" {
		t.Errorf("failed request = %+v %v", rr, err)
	}
}

func TestCreateResizeRequestValidation(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	for _, spec := range []gce.ResizeRequestSpec{
		{Name: "rr", Instances: []string{"vm-0"}, RunDuration: 599 * time.Second},
		{Name: "rr", Instances: []string{"vm-0"}, RunDuration: 8 * 24 * time.Hour},
		{Name: "rr"},
		{Name: "RR", Instances: []string{"vm-0"}},
		{Name: "rr", Instances: []string{"VM_0"}},
	} {
		if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, ""); !errors.Is(err, gce.ErrInvalidSpec) {
			t.Errorf("%+v: %v", spec, err)
		}
	}
	if n := len(h.sim.Calls()); n != 0 {
		t.Errorf("%d calls", n)
	}
	// A MIG that does not exist.
	err := h.c.CreateResizeRequest(h.ctx, zone, "nope", gce.ResizeRequestSpec{Name: "rr", Instances: []string{"vm-0"}}, "")
	if !gce.IsNotFound(err) {
		t.Errorf("missing MIG: %v", err)
	}
}

func TestDeleteInstances(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	h.pool()
	names := []string{"c1-h200-0", "c1-h200-1", "c1-h200-2"}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr", Instances: names, RunDuration: time.Hour}, ""); err != nil {
		t.Fatal(err)
	}
	h.tick(0)
	h.tick(0)
	before := len(h.sim.Calls())
	if err := h.c.DeleteInstances(h.ctx, zone, "c1-h200", nil, ""); err != nil {
		t.Fatal(err)
	}
	if len(h.sim.Calls()) != before {
		t.Error("an empty DeleteInstances made a call")
	}
	// A name that is not a member is skipped.
	if err := h.c.DeleteInstances(h.ctx, zone, "c1-h200", []string{"c1-h200-0", "c1-h200-2", "ghost"}, rid("delete instances")); err != nil {
		t.Fatal(err)
	}
	h.tick(0)
	vms, err := h.c.ListInstances(h.ctx, zone, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != 1 || vms[0].Name != "c1-h200-1" {
		t.Errorf("left = %+v", vms)
	}
	if migs, _ := h.c.ListMIGs(h.ctx, zone, "c1-h200"); migs[0].TargetSize != 1 {
		t.Errorf("target size = %d", migs[0].TargetSize)
	}
	calls := h.sim.Calls()
	last := calls[len(calls)-1]
	if !strings.HasSuffix(last.Path, "/instanceGroupManagers/c1-h200/deleteInstances") || last.RequestID != rid("delete instances") {
		t.Errorf("last call = %+v", last)
	}
	if err := h.c.DeleteInstances(h.ctx, zone, "nope", []string{"x"}, ""); !gce.IsNotFound(err) {
		t.Errorf("missing MIG: %v", err)
	}
}

func TestInjectedErrorsClassify(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	h.pool()
	spec := gce.ResizeRequestSpec{Name: "rr", Instances: []string{"c1-h200-0"}, RunDuration: time.Hour}
	rrPath := `/instanceGroupManagers/c1-h200/resizeRequests$`

	h.sim.InjectError(computesim.Match{Method: "POST", Path: rrPath}, 503, "", "ZONE_RESOURCE_POOL_EXHAUSTED", 1)
	err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, rid("scale up rr"))
	var oe *gce.OperationError
	if !errors.As(err, &oe) || oe.Code != "ZONE_RESOURCE_POOL_EXHAUSTED" || oe.HTTPStatus != 503 || oe.Op == "" {
		t.Fatalf("err = %v", err)
	}
	if c := gce.Classify(err); c != gce.ClassCapacity || !c.Retryable() {
		t.Errorf("class = %v", c)
	}
	// The request ID now names the failed operation: retrying with it
	// returns the same failure, as Compute does.
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, rid("scale up rr")); gce.Classify(err) != gce.ClassCapacity {
		t.Errorf("retry with the same request ID: %v", err)
	}
	// An operation that ends DONE with errors but no HTTP status: op.Wait
	// alone would report success.
	h.sim.InjectError(computesim.Match{Method: "POST", Path: rrPath}, 200, "", "QUOTA_EXCEEDED", 1)
	err = h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, "")
	if gce.Classify(err) != gce.ClassQuota || gce.Classify(err).Retryable() {
		t.Errorf("quota: %v (%v)", err, gce.Classify(err))
	}
	h.sim.InjectError(computesim.Match{Method: "POST", Path: rrPath}, 429, "rateLimitExceeded", "", 1)
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, ""); gce.Classify(err) != gce.ClassRateLimit {
		t.Errorf("rate limit: %v", err)
	}
	h.sim.InjectError(computesim.Match{Method: "POST", Path: rrPath}, 503, "backendError", "", 1)
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, ""); gce.Classify(err) != gce.ClassTransient {
		t.Errorf("backend error: %v", err)
	}
	h.sim.InjectError(computesim.Match{Method: "GET", Path: `/instances$`}, 403, "forbidden", "", 1)
	if _, err := h.c.ListInstances(h.ctx, zone, nil); gce.Classify(err) != gce.ClassPermanent {
		t.Errorf("forbidden: %v", err)
	}
	if rrs := h.sim.ResizeRequests(); len(rrs) != 0 {
		t.Errorf("failed calls created %+v", rrs)
	}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, ""); err != nil {
		t.Errorf("after the injections: %v", err)
	}
}

func TestListInstancesFilterAndPaging(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	h.pool()
	other := flexSpec("c1-b200-v1")
	other.Properties.Labels = map[string]string{"flexslurm-cluster": "c1", "flexslurm-pool": "b200"}
	if err := h.c.EnsureInstanceTemplate(h.ctx, other, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: "c1-b200", Template: "c1-b200-v1"}, ""); err != nil {
		t.Fatal(err)
	}
	// More VMs than one page (500) holds.
	var h200 []string
	for i := range 510 {
		h200 = append(h200, fmt.Sprintf("c1-h200-%03d", i))
	}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr", Instances: h200}, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-b200", gce.ResizeRequestSpec{Name: "rr", Instances: []string{"c1-b200-0", "c1-b200-1"}}, ""); err != nil {
		t.Fatal(err)
	}
	h.tick(0)
	h.tick(0)
	h.gets.Store(0)
	vms, err := h.c.ListInstances(h.ctx, zone, map[string]string{"flexslurm-pool": "h200", "flexslurm-cluster": "c1"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vms {
		names = append(names, v.Name)
	}
	if diff := cmp.Diff(h200, names); diff != "" {
		t.Errorf("h200 VMs (-want +got):\n%s", diff)
	}
	if n := h.gets.Load(); n != 2 {
		t.Errorf("%d list pages fetched, want 2", n)
	}
	b200, err := h.c.ListInstances(h.ctx, zone, map[string]string{"flexslurm-pool": "b200"})
	if err != nil || len(b200) != 2 || b200[0].MIG != "c1-b200" {
		t.Errorf("b200 VMs = %+v %v", b200, err)
	}
	none, err := h.c.ListInstances(h.ctx, zone, map[string]string{"flexslurm-pool": "a100"})
	if err != nil || len(none) != 0 {
		t.Errorf("a100 VMs = %+v %v", none, err)
	}
	all, err := h.c.ListInstances(h.ctx, zone, nil)
	if err != nil || len(all) != 512 {
		t.Errorf("all VMs = %d %v", len(all), err)
	}
}

// reservationVM creates VM name, reservation-bound A3 Ultra whose
// automaticRestart is false, outside any MIG (as an operator's
// reservation-bound node would be).
func (h *harness) reservationVM(name string) {
	h.t.Helper()
	ic, err := compute.NewInstancesRESTClient(h.ctx, option.WithEndpoint(h.url), option.WithoutAuthentication())
	if err != nil {
		h.t.Fatal(err)
	}
	defer ic.Close()
	op, err := ic.Insert(h.ctx, &computepb.InsertInstanceRequest{Project: project, Zone: zone, InstanceResource: &computepb.Instance{
		Name:        proto.String(name),
		MachineType: proto.String("zones/" + zone + "/machineTypes/a3-ultragpu-8g"),
		Disks: []*computepb.AttachedDisk{{Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
			InitializeParams: &computepb.AttachedDiskInitializeParams{SourceImage: proto.String(computesim.DebianFamily)}}},
		NetworkInterfaces: []*computepb.NetworkInterface{{Network: proto.String("global/networks/default")}},
		ReservationAffinity: &computepb.ReservationAffinity{ConsumeReservationType: proto.String("SPECIFIC_RESERVATION"),
			Key: proto.String("compute.googleapis.com/reservation-name"), Values: []string{"res-1"}},
		Scheduling: &computepb.Scheduling{ProvisioningModel: proto.String("RESERVATION_BOUND"),
			OnHostMaintenance: proto.String("TERMINATE"), AutomaticRestart: proto.Bool(false)},
	}})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := op.Wait(h.ctx); err != nil {
		h.t.Fatal(err)
	}
}

func TestReportHostAsFaulty(t *testing.T) {
	h := newHarness(t, computesim.Options{RepairDelay: 11 * time.Minute})
	h.pool()
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr", Instances: []string{"c1-h200-0"}}, ""); err != nil {
		t.Fatal(err)
	}
	h.tick(0)
	h.tick(0)
	if err := h.c.ReportHostAsFaulty(h.ctx, zone, "c1-h200-0", "BROKEN", "", ""); !errors.Is(err, gce.ErrInvalidSpec) {
		t.Errorf("unknown behavior: %v", err)
	}
	// A Flex-Start VM: refused, a permanent error (not "not ready").
	err := h.c.ReportHostAsFaulty(h.ctx, zone, "c1-h200-0", "UNRECOVERABLE_GPU_ERROR", "Xid 79", rid("repair c1-h200-0"))
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != 400 || len(ge.Errors) != 1 || ge.Errors[0].Reason != computesim.ErrHostRepairUnsupported ||
		gce.Classify(err) != gce.ClassPermanent || gce.IsNotReady(err) {
		t.Fatalf("host repair of a Flex-Start VM: %v (class %s), want a permanent INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED", err, gce.Classify(err))
	}

	h.reservationVM("rb-0")
	before := h.sim.Instances()
	// The call returns at once, while the repair's operation runs on
	// (the simulated clock does not move: a wait would never end).
	done := make(chan error, 1)
	go func() {
		done <- h.c.ReportHostAsFaulty(h.ctx, zone, "rb-0", "UNRECOVERABLE_GPU_ERROR", "Xid 79", rid("repair rb-0"))
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReportHostAsFaulty waits for the 11-minute operation")
	}
	vm, err := h.c.GetInstance(h.ctx, zone, "rb-0")
	if err != nil || vm.Status != "REPAIRING" {
		t.Fatalf("after report: %+v %v", vm, err)
	}
	started := vm.LastStart
	// The same request again is answered from Compute's request-id cache:
	// no second repair. Another request on a VM that is not RUNNING is
	// refused as not ready.
	if err := h.c.ReportHostAsFaulty(h.ctx, zone, "rb-0", "UNRECOVERABLE_GPU_ERROR", "Xid 79", rid("repair rb-0")); err != nil {
		t.Errorf("repeated request id: %v", err)
	}
	err = h.c.ReportHostAsFaulty(h.ctx, zone, "rb-0", "UNRECOVERABLE_GPU_ERROR", "Xid 79", rid("another"))
	if !gce.IsNotReady(err) || gce.Classify(err) != gce.ClassTransient {
		t.Errorf("report on a REPAIRING VM: %v (class %s), want not ready", err, gce.Classify(err))
	}
	if err := h.c.StartInstance(h.ctx, zone, "rb-0", rid("start rb-0")); !gce.IsNotReady(err) {
		t.Errorf("start of a REPAIRING VM: %v, want not ready", err)
	}
	h.tick(11 * time.Minute)
	vm, err = h.c.GetInstance(h.ctx, zone, "rb-0")
	if err != nil || vm.Status != "TERMINATED" {
		t.Fatalf("after repair (automaticRestart false): %+v %v, want TERMINATED", vm, err)
	}
	h.tick(time.Minute)
	if err := h.c.StartInstance(h.ctx, zone, "rb-0", rid("start rb-0 after repair")); err != nil {
		t.Fatalf("start: %v", err)
	}
	vm, err = h.c.GetInstance(h.ctx, zone, "rb-0")
	if err != nil || vm.Status != "RUNNING" || !vm.LastStart.After(started.Add(11*time.Minute)) {
		t.Fatalf("after start: %+v %v; want RUNNING, started after %s", vm, err, started.Add(11*time.Minute))
	}
	if gce.IsNotReady(nil) || gce.IsNotReady(errors.New("resourceNotReady")) {
		t.Error("IsNotReady matches an error without a Compute code")
	}
	for _, after := range h.sim.Instances() {
		for _, b := range before {
			if after.Name == "rb-0" && b.Name == "rb-0" && after.PhysicalHost == b.PhysicalHost {
				t.Error("the VM is back on the same host")
			}
		}
	}
	if err := h.c.ReportHostAsFaulty(h.ctx, zone, "ghost", "PERFORMANCE", "", ""); !gce.IsNotFound(err) {
		t.Errorf("missing VM: %v", err)
	}
	if err := h.c.StartInstance(h.ctx, zone, "ghost", ""); !gce.IsNotFound(err) {
		t.Errorf("start of a missing VM: %v", err)
	}
}

func TestNew(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := gce.New(ctx, "", option.WithoutAuthentication()); !errors.Is(err, gce.ErrInvalidSpec) {
		t.Errorf("empty project: %v", err)
	}
}

func TestResolveImage(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	got, err := h.c.ResolveImage(h.ctx, computesim.DebianFamily)
	if err != nil || got != computesim.DebianImage {
		t.Fatalf("family: %q, %v; want %s", got, err, computesim.DebianImage)
	}
	if got, err := h.c.ResolveImage(h.ctx, computesim.SlurmGPUImage); err != nil || got != computesim.SlurmGPUImage {
		t.Errorf("image: %q, %v", got, err)
	}
	// A newer image of the family is what the family names now.
	h.sim.AddImage("debian-cloud", "debian-12-bookworm-v20261201", "debian-12")
	if got, _ := h.c.ResolveImage(h.ctx, computesim.DebianFamily); got != "projects/debian-cloud/global/images/debian-12-bookworm-v20261201" {
		t.Errorf("family after a new image: %q", got)
	}
	if _, err := h.c.ResolveImage(h.ctx, "projects/debian-cloud/global/images/family/debian-99"); !gce.IsNotFound(err) {
		t.Errorf("unknown family: %v", err)
	}
	if _, err := h.c.ResolveImage(h.ctx, "debian-12"); !errors.Is(err, gce.ErrInvalidSpec) {
		t.Errorf("malformed reference: %v", err)
	}
}

// TestEnsureMIGNeverChangesItsTemplate: a MIG that exists is used as it
// is (one MIG per resize request: its template is the one its VMs were
// made from), with one insert and no setInstanceTemplate; a new MIG is
// created with targetSize 0 and DO_NOTHING (and updatePolicy
// OPPORTUNISTIC: the request gcloud's comparison shows, TestGcloudOutsideClient).
func TestEnsureMIGNeverChangesItsTemplate(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	h.pool()
	if err := h.c.EnsureInstanceTemplate(h.ctx, flexSpec("c1-h200-v2"), ""); err != nil {
		t.Fatal(err)
	}
	before := len(h.sim.Calls())
	if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: "c1-h200", Template: "c1-h200-v2"}, ""); err != nil {
		t.Fatal(err)
	}
	if calls := h.sim.Calls()[before:]; len(calls) != 1 {
		t.Errorf("existing MIG: %d mutating calls, want the insert alone: %+v", len(calls), calls)
	}
	if migs := h.sim.MIGs(); len(migs) != 1 || migs[0].Template != "c1-h200-v1" {
		t.Errorf("MIGs = %+v, want c1-h200 still on template c1-h200-v1", migs)
	}
	if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: "c1-h200-r2", Template: "c1-h200-v2"}, ""); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, m := range h.sim.MIGs() {
		if m.Name == "c1-h200-r2" {
			found = m.Template == "c1-h200-v2" && m.TargetSize == 0 && m.ActionOnFailure == "DO_NOTHING"
		}
	}
	if !found {
		t.Errorf("MIGs = %+v, want c1-h200-r2 on c1-h200-v2, target size 0, DO_NOTHING", h.sim.MIGs())
	}
}

// TestOperationWaitIsBounded: an operation that does not end (a host
// repair, which runs 10–12 minutes; the simulated clock does not move) is
// waited for at most the bound, then reported as a transient error that
// names it.
func TestOperationWaitIsBounded(t *testing.T) {
	defer gce.SetMaxOperationWait(300 * time.Millisecond)()
	h := newHarness(t, computesim.Options{RepairDelay: 11 * time.Minute})
	h.reservationVM("rb-0")
	ic, err := compute.NewInstancesRESTClient(h.ctx, option.WithEndpoint(h.url), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	op, err := ic.ReportHostAsFaulty(h.ctx, &computepb.ReportHostAsFaultyInstanceRequest{Project: project, Zone: zone, Instance: "rb-0",
		InstancesReportHostAsFaultyRequestResource: &computepb.InstancesReportHostAsFaultyRequest{
			DisruptionSchedule: proto.String("IMMEDIATE"),
			FaultReasons:       []*computepb.InstancesReportHostAsFaultyRequestFaultReason{{Behavior: proto.String("PERFORMANCE")}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = gce.WaitOp(h.ctx, op, nil)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the wait took %s, bound 300ms", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || gce.Classify(err) != gce.ClassTransient || !strings.Contains(err.Error(), op.Name()) {
		t.Errorf("unfinished operation: %v (class %s), want a transient deadline error naming %s", err, gce.Classify(err), op.Name())
	}
	if h.ctx.Err() != nil {
		t.Error("the caller's context ended: the bound must be the wait's own")
	}
}

// A queued request short of capacity reports the latest attempt's error in
// LastAttemptCode/LastAttemptMessage, not ErrorCode; both clear when it
// succeeds.
func TestResizeRequestLastAttempt(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	h.pool()
	h.sim.SetShortage(computesim.Shortage{Name: "stockout", Message: "no H200 here"})
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr-1", Instances: []string{"c1-h200-0"}}, ""); err != nil {
		t.Fatal(err)
	}
	h.tick(time.Minute)
	rrs, err := h.c.ListResizeRequests(h.ctx, zone, "c1-h200")
	if err != nil || len(rrs) != 1 {
		t.Fatalf("list = %+v %v", rrs, err)
	}
	got := rrs[0]
	if got.State != gce.StateAccepted || got.ErrorCode != "" || got.LastAttemptCode != "ZONE_RESOURCE_POOL_EXHAUSTED" || got.LastAttemptMessage != "no H200 here" {
		t.Errorf("queued request = %+v", got)
	}
	if c := gce.ClassifyCode(got.LastAttemptCode); c != gce.ClassCapacity {
		t.Errorf("class of %s = %v", got.LastAttemptCode, c)
	}
	h.sim.ClearShortage("stockout")
	h.tick(time.Hour)
	got, err = h.c.GetResizeRequest(h.ctx, zone, "c1-h200", "rr-1")
	if err != nil || got.State != gce.StateSucceeded || got.LastAttemptCode != "" || got.LastAttemptMessage != "" {
		t.Errorf("after the shortage = %+v %v", got, err)
	}
}
