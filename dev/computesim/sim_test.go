package computesim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"
)

func TestTemplateCRUD(t *testing.T) {
	e := newEnv(t, Options{})
	if err := e.insertTemplate(flexTemplate("tpl", 3600)); err != nil {
		t.Fatal(err)
	}
	got, err := e.tmpl.Get(e.ctx, &computepb.GetInstanceTemplateRequest{Project: testProject, InstanceTemplate: "tpl"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetId() == 0 || got.GetCreationTimestamp() == "" || got.GetKind() != "compute#instanceTemplate" {
		t.Errorf("output fields not set: %v", got)
	}
	if d := got.GetProperties().GetScheduling().GetMaxRunDuration().GetSeconds(); d != 3600 {
		t.Errorf("maxRunDuration = %d, want 3600", d)
	}
	if !strings.HasSuffix(got.GetSelfLink(), "/projects/proj/global/instanceTemplates/tpl") {
		t.Errorf("selfLink = %q", got.GetSelfLink())
	}

	wantHTTP(t, e.insertTemplate(flexTemplate("tpl", 3600)), 409, "alreadyExists")

	it := e.tmpl.List(e.ctx, &computepb.ListInstanceTemplatesRequest{Project: testProject})
	var names []string
	for {
		tp, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tp.GetName())
	}
	if diff := cmp.Diff([]string{"tpl"}, names); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}

	if err := e.insertMIG("pool", "tpl", "DO_NOTHING"); err != nil {
		t.Fatal(err)
	}
	wantHTTP(t, do(e.tmpl.Delete(e.ctx, &computepb.DeleteInstanceTemplateRequest{Project: testProject, InstanceTemplate: "tpl"})), 400, "resourceInUseByAnotherResource")
	if err := do(e.igm.Delete(e.ctx, &computepb.DeleteInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool"})); err != nil {
		t.Fatal(err)
	}
	if err := do(e.tmpl.Delete(e.ctx, &computepb.DeleteInstanceTemplateRequest{Project: testProject, InstanceTemplate: "tpl"})); err != nil {
		t.Fatal(err)
	}
	_, err = e.tmpl.Get(e.ctx, &computepb.GetInstanceTemplateRequest{Project: testProject, InstanceTemplate: "tpl"})
	wantHTTP(t, err, 404, "notFound")
}

func TestTemplateValidation(t *testing.T) {
	e := newEnv(t, Options{})
	tests := []struct {
		name   string
		mutate func(*computepb.InstanceTemplate)
	}{
		{"uppercase name", func(tp *computepb.InstanceTemplate) { tp.Name = proto.String("Tpl") }},
		{"name too long", func(tp *computepb.InstanceTemplate) { tp.Name = proto.String("a" + strings.Repeat("b", 63)) }},
		{"trailing hyphen", func(tp *computepb.InstanceTemplate) { tp.Name = proto.String("tpl-") }},
		{"maxRunDuration 599 s", func(tp *computepb.InstanceTemplate) {
			tp.Properties.Scheduling.MaxRunDuration.Seconds = proto.Int64(599)
		}},
		{"maxRunDuration 604801 s", func(tp *computepb.InstanceTemplate) {
			tp.Properties.Scheduling.MaxRunDuration.Seconds = proto.Int64(604801)
		}},
		{"flex without termination action", func(tp *computepb.InstanceTemplate) {
			tp.Properties.Scheduling.InstanceTerminationAction = nil
		}},
		{"flex with MIGRATE", func(tp *computepb.InstanceTemplate) {
			tp.Properties.Scheduling.OnHostMaintenance = proto.String("MIGRATE")
		}},
		{"machine type URL", func(tp *computepb.InstanceTemplate) {
			tp.Properties.MachineType = proto.String("zones/us-central1-a/machineTypes/a3-ultragpu-8g")
		}},
		{"uppercase label", func(tp *computepb.InstanceTemplate) { tp.Properties.Labels["Pool"] = "x" }},
		{"no machine type", func(tp *computepb.InstanceTemplate) { tp.Properties.MachineType = nil }},
		{"boot disk without image", func(tp *computepb.InstanceTemplate) { tp.Properties.Disks[0].InitializeParams.SourceImage = nil }},
		{"unknown image", func(tp *computepb.InstanceTemplate) {
			tp.Properties.Disks[0].InitializeParams.SourceImage = proto.String("projects/debian-cloud/global/images/debian-13-nope")
		}},
		{"unknown family", func(tp *computepb.InstanceTemplate) {
			tp.Properties.Disks[0].InitializeParams.SourceImage = proto.String("projects/debian-cloud/global/images/family/debian-99")
		}},
		{"malformed image", func(tp *computepb.InstanceTemplate) {
			tp.Properties.Disks[0].InitializeParams.SourceImage = proto.String("debian-12")
		}},
		{"no disks", func(tp *computepb.InstanceTemplate) { tp.Properties.Disks = nil }},
		{"accelerator-optimized with other GPUs", func(tp *computepb.InstanceTemplate) {
			tp.Properties.GuestAccelerators[0].AcceleratorType = proto.String("nvidia-h100-80gb")
		}},
		{"accelerator-optimized with another count", func(tp *computepb.InstanceTemplate) {
			tp.Properties.GuestAccelerators[0].AcceleratorCount = proto.Int32(4)
		}},
		{"GPUs that would live-migrate", func(tp *computepb.InstanceTemplate) {
			tp.Properties.MachineType = proto.String("n1-standard-8")
			tp.Properties.GuestAccelerators[0] = &computepb.AcceleratorConfig{AcceleratorType: proto.String("nvidia-tesla-t4"), AcceleratorCount: proto.Int32(1)}
			tp.Properties.Scheduling = &computepb.Scheduling{ProvisioningModel: proto.String("STANDARD")}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := flexTemplate("tpl", 3600)
			tc.mutate(tp)
			wantHTTP(t, e.insertTemplate(tp), 400, "")
		})
	}
	// The boundaries themselves are accepted.
	for _, sec := range []int64{600, 604800} {
		if err := e.insertTemplate(flexTemplate("tpl-"+strings.Repeat("x", int(sec%7)+1), sec)); err != nil {
			t.Errorf("maxRunDuration %d s: %v", sec, err)
		}
	}
	if n := len(e.sim.Calls()); n != len(tests)+2 {
		t.Errorf("calls = %d, want %d", n, len(tests)+2)
	}
}

// TestWireFormat checks the raw JSON: int64 as strings in responses, numbers
// and strings both accepted on input, unknown fields rejected, the error body
// shape, and the RUNNING-then-DONE operation.
func TestWireFormat(t *testing.T) {
	e := newEnv(t, Options{})
	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(e.srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return resp.StatusCode, m
	}
	base := "/compute/v1/projects/proj/global/instanceTemplates"
	tpl := func(name, seconds string) string {
		return `{"name":"` + name + `","properties":{"machineType":"n2-standard-4",` +
			`"disks":[{"boot":true,"initializeParams":{"sourceImage":"` + DebianImage + `"}}],"scheduling":{"provisioningModel":"FLEX_START",` +
			`"instanceTerminationAction":"DELETE","onHostMaintenance":"TERMINATE","maxRunDuration":{"seconds":` + seconds + `}}}}`
	}
	code, op := post(base, tpl("num", "3600"))
	if code != 200 || op["status"] != "RUNNING" {
		t.Fatalf("insert: %d %v", code, op)
	}
	if _, ok := op["id"].(string); !ok {
		t.Errorf("operation id is %T, want a string", op["id"])
	}
	code, _ = post(base, tpl("str", `"3600"`))
	if code != 200 {
		t.Fatalf("seconds as string: HTTP %d", code)
	}
	// The operation is pollable and DONE.
	resp, err := http.Get(e.srv.URL + "/compute/v1/projects/proj/global/operations/" + op["name"].(string))
	if err != nil {
		t.Fatal(err)
	}
	var polled map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&polled)
	resp.Body.Close()
	if polled["status"] != "DONE" || polled["progress"] != float64(100) {
		t.Errorf("polled operation = %v", polled)
	}
	// Template resource: seconds encoded as a string.
	resp, err = http.Get(e.srv.URL + base + "/num")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if v := field(got, "properties", "scheduling", "maxRunDuration", "seconds"); v != "3600" {
		t.Errorf("maxRunDuration.seconds = %#v, want \"3600\"", v)
	}
	// Unknown field and the error body shape.
	code, body := post(base, `{"name":"x","bogus":1}`)
	if code != 400 {
		t.Fatalf("unknown field: HTTP %d", code)
	}
	errs, _ := field(body, "error", "errors").([]any)
	if field(body, "error", "code") != float64(400) || len(errs) != 1 || field(body, "error", "status") != "INVALID_ARGUMENT" {
		t.Errorf("error body = %v", body)
	}
	if item, _ := errs[0].(map[string]any); item["domain"] != "global" || item["reason"] != "invalid" || item["message"] == "" {
		t.Errorf("errors[0] = %v", errs[0])
	}
	// Duplicate → 409 alreadyExists, no status field (Compute's own errors).
	code, body = post(base, tpl("num", "3600"))
	if code != 409 || field(body, "error", "errors") == nil || field(body, "error", "status") != nil {
		t.Errorf("duplicate: %d %v", code, body)
	}
	// Unsimulated path → 501.
	code, _ = post("/compute/v1/projects/proj/zones/us-central1-a/instances/x/stop", "")
	if code != 501 {
		t.Errorf("unsimulated path: HTTP %d, want 501", code)
	}
}

func TestMIGInsertValidation(t *testing.T) {
	e := newEnv(t, Options{})
	if err := e.insertTemplate(flexTemplate("tpl", 3600)); err != nil {
		t.Fatal(err)
	}
	wantHTTP(t, e.insertMIG("pool", "missing", "DO_NOTHING"), 404, "notFound")
	bare := &computepb.InstanceGroupManager{Name: proto.String("pool"), BaseInstanceName: proto.String("pool"), InstanceTemplate: proto.String("tpl"), TargetSize: proto.Int32(0)}
	wantHTTP(t, do(e.igm.Insert(e.ctx, &computepb.InsertInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManagerResource: bare})), 400, "invalid")
	if err := e.insertMIG("pool", "tpl", ""); err != nil {
		t.Fatal(err)
	}
	wantHTTP(t, e.insertMIG("pool", "tpl", ""), 409, "alreadyExists")
	m := e.getMIG("pool")
	if m.GetInstanceLifecyclePolicy().GetDefaultActionOnFailure() != "REPAIR" || m.GetTargetSize() != 0 {
		t.Errorf("defaults: %v", m)
	}
	// Repairs on: resize requests are refused.
	wantHTTP(t, e.insertRR("pool", namedRR("rr", 3600, "vm-1"), ""), 400, "invalid")
	// Bad zone.
	_, err := e.igm.Get(e.ctx, &computepb.GetInstanceGroupManagerRequest{Project: testProject, Zone: "nowhere", InstanceGroupManager: "pool"})
	wantHTTP(t, err, 400, "invalid")
	// Another project.
	_, err = e.igm.Get(e.ctx, &computepb.GetInstanceGroupManagerRequest{Project: "other", Zone: testZone, InstanceGroupManager: "pool"})
	wantHTTP(t, err, 404, "notFound")
}

func TestResizeRequestValidation(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	both := namedRR("both", 3600, "vm-1")
	both.ResizeBy = proto.Int32(1)
	tests := []struct {
		name string
		rr   *computepb.InstanceGroupManagerResizeRequest
		code int
	}{
		{"neither", namedRR("none", 3600), 400},
		{"both", both, 400},
		{"negative resizeBy", &computepb.InstanceGroupManagerResizeRequest{Name: proto.String("neg"), ResizeBy: proto.Int32(-1)}, 400},
		{"run 599 s", namedRR("short", 599, "vm-1"), 400},
		{"run 604801 s", namedRR("long", 604801, "vm-1"), 400},
		{"bad instance name", namedRR("badvm", 3600, "VM_1"), 400},
		{"duplicate instance", namedRR("dupvm", 3600, "vm-1", "vm-1"), 400},
		{"bad name", namedRR("RR", 3600, "vm-1"), 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantHTTP(t, e.insertRR("pool", tc.rr, ""), tc.code, "")
		})
	}
	wantHTTP(t, e.insertRR("nope", namedRR("rr", 3600, "vm-1"), ""), 404, "notFound")
	if err := e.insertRR("pool", namedRR("rr", 3600, "vm-1"), ""); err != nil {
		t.Fatal(err)
	}
	wantHTTP(t, e.insertRR("pool", namedRR("rr", 3600, "vm-2"), ""), 409, "alreadyExists")
	if got := e.getMIG("pool").GetTargetSize(); got != 1 {
		t.Errorf("targetSize = %d, want 1", got)
	}
}

// TestResizeRequestLifecycle drives CREATING → ACCEPTED → SUCCEEDED → expiry
// with a manual clock.
func TestResizeRequestLifecycle(t *testing.T) {
	e := newEnv(t, Options{
		CapacityDelay: func(zone, machineType string) time.Duration {
			if zone != testZone || machineType != "a3-ultragpu-8g" {
				t.Errorf("CapacityDelay(%q, %q)", zone, machineType)
			}
			return 30 * time.Minute
		},
	})
	e.setup()
	if err := e.insertRR("pool", namedRR("rr", 3600, "pool-1", "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	// The first read happens at the same instant: acceptance is due then.
	if st := e.getRR("pool", "rr").GetState(); st != "ACCEPTED" {
		t.Fatalf("state = %s, want ACCEPTED", st)
	}
	if at, ok := e.sim.NextDue(); !ok || !at.Equal(t0.Add(30*time.Minute)) {
		t.Fatalf("NextDue = %v %v", at, ok)
	}
	e.advance(29 * time.Minute)
	if st := e.getRR("pool", "rr").GetState(); st != "ACCEPTED" {
		t.Fatalf("after 29 min: state = %s", st)
	}
	if _, err := e.getInstance("pool-0"); err == nil {
		t.Fatal("VM exists before capacity")
	}
	e.advance(time.Minute)
	if st := e.getRR("pool", "rr").GetState(); st != "SUCCEEDED" {
		t.Fatalf("after 30 min: state = %s", st)
	}
	created := t0.Add(30 * time.Minute)
	vm, err := e.getInstance("pool-0")
	if err != nil {
		t.Fatal(err)
	}
	if vm.GetStatus() != "RUNNING" || vm.GetId() == 0 {
		t.Errorf("vm = %v", vm)
	}
	term, err := time.Parse(time.RFC3339, vm.GetResourceStatus().GetScheduling().GetTerminationTimestamp())
	if err != nil || !term.Equal(created.Add(time.Hour)) {
		t.Errorf("terminationTimestamp = %q (%v), want %v (requestedRunDuration wins over the template's 2 h)", vm.GetResourceStatus().GetScheduling().GetTerminationTimestamp(), err, created.Add(time.Hour))
	}
	if got := vm.GetLabels()["flexslurm-pool"]; got != "h200" {
		t.Errorf("labels = %v", vm.GetLabels())
	}
	var createdBy string
	for _, it := range vm.GetMetadata().GetItems() {
		if it.GetKey() == "created-by" {
			createdBy = it.GetValue()
		}
	}
	if createdBy != "projects/123456789012/zones/us-central1-a/instanceGroupManagers/pool" {
		t.Errorf("created-by = %q", createdBy)
	}
	if !strings.HasSuffix(vm.GetMachineType(), "/zones/us-central1-a/machineTypes/a3-ultragpu-8g") {
		t.Errorf("machineType = %q", vm.GetMachineType())
	}
	if m := e.getMIG("pool"); m.GetTargetSize() != 2 || m.GetCurrentActions().GetNone() != 2 {
		t.Errorf("MIG = size %d actions %v", m.GetTargetSize(), m.GetCurrentActions())
	}
	it := e.igm.ListManagedInstances(e.ctx, &computepb.ListManagedInstancesInstanceGroupManagersRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool"})
	var managed []string
	for {
		mi, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if mi.GetInstanceStatus() != "RUNNING" || mi.GetCurrentAction() != "NONE" || mi.GetScheduling().GetTerminationTimestamp() == "" {
			t.Errorf("managed instance = %v", mi)
		}
		managed = append(managed, mi.GetName())
	}
	if diff := cmp.Diff([]string{"pool-0", "pool-1"}, managed); diff != "" {
		t.Errorf("managed instances (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"pool-1", "pool-0"}, e.running); diff != "" {
		t.Errorf("OnInstanceRunning (-want +got):\n%s", diff)
	}

	// Expiry: one deferredDelete system event per VM.
	e.clk.Set(created.Add(time.Hour))
	e.sim.Tick(e.clk.Now())
	if _, err := e.getInstance("pool-0"); err == nil {
		t.Error("VM still exists after its termination time")
	}
	if got := e.getMIG("pool").GetTargetSize(); got != 0 {
		t.Errorf("targetSize after expiry = %d", got)
	}
	entries := e.sunkEntries()
	if len(entries) != 2 {
		t.Fatalf("audit entries = %d, want 2", len(entries))
	}
	for _, s := range entries {
		if field(s.entry, "protoPayload", "methodName") != "compute.instances.deferredDelete" ||
			field(s.entry, "protoPayload", "authenticationInfo", "principalEmail") != "system@google.com" ||
			field(s.entry, "logName") != "projects/proj/logs/cloudaudit.googleapis.com%2Fsystem_event" ||
			field(s.entry, "operation", "first") != true || field(s.entry, "operation", "last") != true ||
			field(s.entry, "resource", "labels", "zone") != testZone ||
			field(s.entry, "resource", "labels", "project_id") != testProject ||
			field(s.entry, "timestamp") != created.Add(time.Hour).Format(time.RFC3339Nano) ||
			s.attrs[AuditTimestampAttr] != created.Add(time.Hour).Format(time.RFC3339Nano) {
			t.Errorf("entry = %s attrs %v", s.raw, s.attrs)
		}
	}
	if field(entries[0].entry, "insertId") == field(entries[1].entry, "insertId") {
		t.Error("insertIds not unique")
	}
	if diff := cmp.Diff([]string{"pool-1", "pool-0"}, e.deleted); diff != "" {
		t.Errorf("OnInstanceDeleted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"pool-0", "pool-1"}, e.stopping, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("OnInstanceStopping (-want +got):\n%s", diff)
	}
	if _, ok := e.sim.NextDue(); ok {
		t.Error("NextDue reports work after everything ended")
	}
}

// TestExpiryMIGDeleteStyle checks the two activity entries of the migDelete
// style and the STOPPING window of DeleteDelay.
func TestExpiryMIGDeleteStyle(t *testing.T) {
	e := newEnv(t, Options{ExpiryLogStyle: ExpiryLogMIGDelete, DeleteDelay: 45 * time.Second, ProjectNumber: "42"})
	e.setup()
	if err := e.insertRR("pool", namedRR("rr", 600, "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(0)
	e.advance(10 * time.Minute)
	vm, err := e.getInstance("pool-0")
	if err != nil || vm.GetStatus() != "STOPPING" {
		t.Fatalf("at termination: %v %v", vm.GetStatus(), err)
	}
	if got := len(e.sunkEntries()); got != 1 {
		t.Fatalf("entries while stopping = %d, want 1", got)
	}
	e.advance(45 * time.Second)
	if _, err := e.getInstance("pool-0"); err == nil {
		t.Fatal("VM still exists after the delete delay")
	}
	entries := e.sunkEntries()
	if len(entries) != 2 {
		t.Fatalf("entries = %d, want 2", len(entries))
	}
	for i, s := range entries {
		if field(s.entry, "protoPayload", "methodName") != "v1.compute.instances.delete" ||
			field(s.entry, "protoPayload", "authenticationInfo", "principalEmail") != "42@cloudservices.gserviceaccount.com" ||
			field(s.entry, "logName") != "projects/proj/logs/cloudaudit.googleapis.com%2Factivity" ||
			field(s.entry, "protoPayload", "resourceName") != "projects/proj/zones/us-central1-a/instances/pool-0" ||
			field(s.entry, "resource", "labels", "instance_id") != strconv.FormatUint(vm.GetId(), 10) {
			t.Errorf("entry %d = %s", i, s.raw)
		}
	}
	if field(entries[0].entry, "operation", "first") != true || field(entries[0].entry, "operation", "last") != nil ||
		field(entries[1].entry, "operation", "last") != true || field(entries[1].entry, "operation", "first") != nil {
		t.Errorf("first/last flags: %s / %s", entries[0].raw, entries[1].raw)
	}
	if field(entries[0].entry, "operation", "id") != field(entries[1].entry, "operation", "id") {
		t.Error("the two entries carry different operation ids")
	}
	if field(entries[0].entry, "timestamp") != t0.Add(10*time.Minute).Format(time.RFC3339Nano) ||
		field(entries[1].entry, "timestamp") != t0.Add(10*time.Minute+45*time.Second).Format(time.RFC3339Nano) {
		t.Errorf("timestamps %v %v", field(entries[0].entry, "timestamp"), field(entries[1].entry, "timestamp"))
	}
}

// TestNamedRequestWaitsForName: a resize request naming a VM that is still
// being deleted stays ACCEPTED until the name is free.
func TestNamedRequestWaitsForName(t *testing.T) {
	e := newEnv(t, Options{DeleteDelay: 2 * time.Minute})
	e.setup()
	if err := e.insertRR("pool", namedRR("rr-1", 600, "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(0)
	e.advance(10 * time.Minute) // expires; STOPPING for 2 min
	if err := e.insertRR("pool", namedRR("rr-2", 600, "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Minute)
	if st := e.getRR("pool", "rr-2").GetState(); st != "ACCEPTED" {
		t.Fatalf("while the old VM is stopping: %s", st)
	}
	at, ok := e.sim.NextDue()
	if !ok || !at.Equal(t0.Add(12*time.Minute)) {
		t.Fatalf("NextDue = %v %v, want the end of the deletion", at, ok)
	}
	e.clk.Set(at)
	e.sim.Tick(at)
	if st := e.getRR("pool", "rr-2").GetState(); st != "SUCCEEDED" {
		t.Fatalf("after the name is free: %s", st)
	}
	vm, err := e.getInstance("pool-0")
	if err != nil || vm.GetStatus() != "RUNNING" || vm.GetCreationTimestamp() != formatTime(t0.Add(12*time.Minute)) {
		t.Fatalf("new VM: %v %v", vm, err)
	}
}

func TestRequestIDIdempotency(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	const rid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
	req := &computepb.InsertInstanceGroupManagerResizeRequestRequest{
		Project: testProject, Zone: testZone, InstanceGroupManager: "pool",
		InstanceGroupManagerResizeRequestResource: namedRR("rr", 3600, "pool-0"), RequestId: proto.String(rid),
	}
	op1, err := e.rrs.Insert(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	op2, err := e.rrs.Insert(e.ctx, req)
	if err != nil {
		t.Fatalf("retry with the same requestId: %v", err)
	}
	if op1.Name() != op2.Name() {
		t.Errorf("operations %s and %s differ", op1.Name(), op2.Name())
	}
	if got := e.getMIG("pool").GetTargetSize(); got != 1 {
		t.Errorf("targetSize = %d, want 1 (acted once)", got)
	}
	// After 60 minutes the ID is forgotten: the retry acts again (here: 409).
	e.advance(61 * time.Minute)
	wantHTTP(t, do(e.rrs.Insert(e.ctx, req)), 409, "alreadyExists")
	// Not a UUID.
	bad := proto.CloneOf(req)
	bad.RequestId = proto.String("not-a-uuid")
	bad.InstanceGroupManagerResizeRequestResource.Name = proto.String("rr-2")
	wantHTTP(t, do(e.rrs.Insert(e.ctx, bad)), 400, "invalid")
	bad.RequestId = proto.String("00000000-0000-0000-0000-000000000000")
	wantHTTP(t, do(e.rrs.Insert(e.ctx, bad)), 400, "invalid")
}

func TestCancelAndDeleteResizeRequest(t *testing.T) {
	e := newEnv(t, Options{AcceptDelay: time.Second, CapacityDelay: func(string, string) time.Duration { return time.Hour }})
	e.setup()
	rrReq := func(name string) (*computepb.CancelInstanceGroupManagerResizeRequestRequest, *computepb.DeleteInstanceGroupManagerResizeRequestRequest) {
		return &computepb.CancelInstanceGroupManagerResizeRequestRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool", ResizeRequest: name},
			&computepb.DeleteInstanceGroupManagerResizeRequestRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool", ResizeRequest: name}
	}
	if err := e.insertRR("pool", &computepb.InstanceGroupManagerResizeRequest{Name: proto.String("rr"), ResizeBy: proto.Int32(3)}, ""); err != nil {
		t.Fatal(err)
	}
	cancel, del := rrReq("rr")
	// CREATING cannot be cancelled.
	wantHTTP(t, do(e.rrs.Cancel(e.ctx, cancel)), 400, "invalid")
	e.advance(time.Second)
	// ACCEPTED cannot be deleted.
	wantHTTP(t, do(e.rrs.Delete(e.ctx, del)), 400, "invalid")
	if got := e.getMIG("pool").GetTargetSize(); got != 3 {
		t.Fatalf("targetSize = %d", got)
	}
	if err := do(e.rrs.Cancel(e.ctx, cancel)); err != nil {
		t.Fatal(err)
	}
	if st := e.getRR("pool", "rr").GetState(); st != "CANCELLED" {
		t.Errorf("state = %s", st)
	}
	if got := e.getMIG("pool").GetTargetSize(); got != 0 {
		t.Errorf("targetSize after cancel = %d", got)
	}
	wantHTTP(t, do(e.rrs.Cancel(e.ctx, cancel)), 400, "invalid")
	e.advance(2 * time.Hour)
	if n := len(e.sim.Instances()); n != 0 {
		t.Errorf("a cancelled request created %d VMs", n)
	}
	if err := do(e.rrs.Delete(e.ctx, del)); err != nil {
		t.Fatal(err)
	}
	_, err := e.rrs.Get(e.ctx, &computepb.GetInstanceGroupManagerResizeRequestRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool", ResizeRequest: "rr"})
	wantHTTP(t, err, 404, "notFound")

	// resizeBy names: baseInstanceName-xxxx.
	if err := e.insertRR("pool", &computepb.InstanceGroupManagerResizeRequest{Name: proto.String("rr2"), ResizeBy: proto.Int32(2)}, ""); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	e.advance(time.Hour)
	for _, in := range e.sim.Instances() {
		if !strings.HasPrefix(in.Name, "pool-") || len(in.Name) != len("pool-xxxx") || in.ResizeRequest != "rr2" {
			t.Errorf("generated VM %+v", in)
		}
	}
	if n := len(e.sim.Instances()); n != 2 {
		t.Errorf("VMs = %d, want 2", n)
	}
}

func TestDeleteInstances(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	if err := e.insertRR("pool", namedRR("rr", 3600, "pool-0", "pool-1", "pool-2"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(0)
	e.advance(0)
	delReq := func(skip bool, refs ...string) *computepb.DeleteInstancesInstanceGroupManagerRequest {
		return &computepb.DeleteInstancesInstanceGroupManagerRequest{
			Project: testProject, Zone: testZone, InstanceGroupManager: "pool",
			InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{
				Instances: refs, SkipInstancesOnValidationError: proto.Bool(skip),
			},
		}
	}
	// Malformed URL fails even with skip.
	wantHTTP(t, do(e.igm.DeleteInstances(e.ctx, delReq(true, "pool-0"))), 400, "invalid")
	// Non-member fails without skip.
	wantHTTP(t, do(e.igm.DeleteInstances(e.ctx, delReq(false, "zones/us-central1-a/instances/ghost"))), 400, "invalid")
	// With skip: the ghost is skipped, both forms of URL work.
	err := do(e.igm.DeleteInstances(e.ctx, delReq(true,
		"zones/us-central1-a/instances/ghost",
		"zones/us-central1-a/instances/pool-0",
		"https://www.googleapis.com/compute/v1/projects/proj/zones/us-central1-a/instances/pool-1")))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, in := range e.sim.Instances() {
		left = append(left, in.Name)
	}
	if diff := cmp.Diff([]string{"pool-2"}, left); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
	if got := e.getMIG("pool").GetTargetSize(); got != 1 {
		t.Errorf("targetSize = %d", got)
	}
	entries := e.sunkEntries()
	if len(entries) != 4 {
		t.Fatalf("audit entries = %d, want 4 (first+last per VM)", len(entries))
	}
	for _, s := range entries {
		if field(s.entry, "protoPayload", "methodName") != "v1.compute.instances.delete" ||
			field(s.entry, "protoPayload", "authenticationInfo", "principalEmail") != "123456789012@cloudservices.gserviceaccount.com" {
			t.Errorf("entry = %s", s.raw)
		}
	}
	// A direct instances.delete is logged with the caller's principal.
	if err := do(e.inst.Delete(e.ctx, &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: "pool-2"})); err != nil {
		t.Fatal(err)
	}
	entries = e.sunkEntries()
	if len(entries) != 6 {
		t.Fatalf("audit entries = %d, want 6", len(entries))
	}
	if p := field(entries[4].entry, "protoPayload", "authenticationInfo", "principalEmail"); p != "flexslurm@proj.iam.gserviceaccount.com" {
		t.Errorf("principal = %v", p)
	}
	if ua, _ := field(entries[4].entry, "protoPayload", "requestMetadata", "callerSuppliedUserAgent").(string); ua == "" {
		t.Errorf("no user agent in %s", entries[4].raw)
	}
	_, err = e.getInstance("pool-2")
	wantHTTP(t, err, 404, "notFound")
}

func TestListFilterAndPaging(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	other := flexTemplate("tpl-b", 3600)
	other.Properties.Labels = map[string]string{"flexslurm-pool": "b200", "cluster": "c1"}
	if err := e.insertTemplate(other); err != nil {
		t.Fatal(err)
	}
	if err := e.insertMIG("pool-b", "tpl-b", "DO_NOTHING"); err != nil {
		t.Fatal(err)
	}
	var a, b []string
	for i := range 7 {
		a = append(a, "a-"+string(rune('0'+i)))
	}
	for i := range 3 {
		b = append(b, "b-"+string(rune('0'+i)))
	}
	if err := e.insertRR("pool", namedRR("rr", 0, a...), ""); err != nil {
		t.Fatal(err)
	}
	if err := e.insertRR("pool-b", namedRR("rr", 0, b...), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(0)
	e.advance(0)
	list := func(filter string, pageSize uint32) ([]string, int) {
		t.Helper()
		req := &computepb.ListInstancesRequest{Project: testProject, Zone: testZone}
		if filter != "" {
			req.Filter = proto.String(filter)
		}
		if pageSize > 0 {
			req.MaxResults = proto.Uint32(pageSize)
		}
		var names []string
		pages := 0
		size := int(pageSize)
		if size == 0 {
			size = 500
		}
		pager := iterator.NewPager(e.inst.List(e.ctx, req), size, "")
		for {
			var items []*computepb.Instance
			tok, err := pager.NextPage(&items)
			if err != nil {
				t.Fatalf("filter %q: %v", filter, err)
			}
			pages++
			for _, in := range items {
				names = append(names, in.GetName())
			}
			if tok == "" {
				break
			}
		}
		return names, pages
	}
	tests := []struct {
		filter string
		want   []string
	}{
		{``, append(append([]string{}, a...), b...)},
		{`labels.flexslurm-pool = "b200"`, b},
		{`(labels.flexslurm-pool = "b200") AND (name = "b-1")`, []string{"b-1"}},
		{`(labels.cluster = "c1") (name = "a-3")`, []string{"a-3"}},
		{`(labels.flexslurm-pool="h200") (name != "a-0")`, a[1:]},
		{`name eq "b-[12]"`, []string{"b-1", "b-2"}},
		{`(name eq "b-[12]") (labels.cluster eq c.)`, []string{"b-1", "b-2"}},
		{`(name = "a-0") OR (name = "b-0")`, []string{"a-0", "b-0"}},
		{`labels.nope:*`, nil},
		{`labels.cluster:*`, append(append([]string{}, a...), b...)},
		{`NOT labels.flexslurm-pool = "h200"`, b},
		{`(status = RUNNING) (labels.flexslurm-pool = "b200")`, b},
	}
	for _, tc := range tests {
		got, _ := list(tc.filter, 0)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("filter %q (-want +got):\n%s", tc.filter, diff)
		}
	}
	got, pages := list(`labels.flexslurm-pool = "h200"`, 3)
	if diff := cmp.Diff(a, got); diff != "" || pages != 3 {
		t.Errorf("paged: %d pages (-want +got):\n%s", pages, diff)
	}
	// The ordinary iterator follows nextPageToken too.
	it := e.inst.List(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone, MaxResults: proto.Uint32(2)})
	n := 0
	for {
		_, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 10 {
		t.Errorf("iterator saw %d instances, want 10", n)
	}
	// Malformed, several bare expressions (the discovery document's filter
	// text: "provide each separate expression within parentheses"), or
	// regular expressions mixed with AIP-160 operators.
	for _, bad := range []string{
		`labels.x = `,
		`labels.flexslurm-pool = "b200" AND name = "b-1"`,
		`labels.flexslurm-pool="h200" name != "a-0"`,
		`name = "a-0" OR name = "b-0"`,
		`(labels.cluster = "c1") name = "a-3"`,
		`(name eq "b-1") (labels.cluster = "c1")`,
	} {
		_, err := e.inst.List(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone, Filter: proto.String(bad)}).Next()
		wantHTTP(t, err, 400, "invalid")
	}
	_, err := e.inst.List(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone, Filter: proto.String(`labels.x = `)}).Next()
	wantHTTP(t, err, 400, "invalid")
	_, err = e.inst.List(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone, PageToken: proto.String("garbage!")}).Next()
	wantHTTP(t, err, 400, "invalid")
}

func TestFilterParser(t *testing.T) {
	obj := map[string]any{
		"name":   "vm-1",
		"status": "RUNNING",
		"labels": map[string]any{"pool": "a", "team": "x"},
		"networkInterfaces": []any{
			map[string]any{"networkIP": "10.0.0.1"},
			map[string]any{"networkIP": "10.0.0.2"},
		},
		"scheduling": map[string]any{"automaticRestart": false},
		"cpus":       float64(8),
	}
	tests := []struct {
		filter string
		want   bool
	}{
		{`name = "vm-1"`, true},
		{`name = vm-1`, true},
		{`name = 'vm-1'`, true},
		{`name != "vm-1"`, false},
		{`labels.pool = "a" labels.team = "x"`, true},
		{`labels.pool = "a" AND labels.team = "y"`, false},
		{`labels.pool = "b" OR labels.team = "x"`, true},
		{`labels.pool = "a" labels.team = "y" OR labels.team = "x"`, true},
		{`(labels.pool = "b") OR (labels.team = "x")`, true},
		{`NOT (labels.pool = "a")`, false},
		{`networkInterfaces.networkIP = "10.0.0.2"`, true},
		{`scheduling.automaticRestart = false`, true},
		{`cpus > 4`, true},
		{`cpus < 4`, false},
		{`cpus >= 8`, true},
		{`cpus <= 4`, false},
		{`name eq vm-.*`, true},
		{`name eq "vm"`, false},
		{`name ne "vm-[0-9]"`, false},
		{`labels.missing = "a"`, false},
		{`labels.missing != "a"`, true},
		{`labels.pool:*`, true},
		{`labels.missing:*`, false},
	}
	for _, tc := range tests {
		f, err := parseFilter(tc.filter)
		if err != nil {
			t.Errorf("%q: %v", tc.filter, err)
			continue
		}
		if got := f.eval(obj); got != tc.want {
			t.Errorf("%q = %v, want %v", tc.filter, got, tc.want)
		}
	}
	for _, bad := range []string{`name =`, `(name = "x"`, `name "x"`, `= "x"`, `name = "x`, `name eq "("`} {
		if _, err := parseFilter(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestErrorInjection(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	// An operation that ends DONE with errors: op.Wait reports the HTTP error
	// status, the proto carries the code; nothing changes.
	e.sim.InjectError(Match{Method: "POST", Path: `/resizeRequests$`}, 503, "", "ZONE_RESOURCE_POOL_EXHAUSTED", 1)
	op, err := e.rrs.Insert(e.ctx, &computepb.InsertInstanceGroupManagerResizeRequestRequest{
		Project: testProject, Zone: testZone, InstanceGroupManager: "pool", InstanceGroupManagerResizeRequestResource: namedRR("rr", 3600, "pool-0"),
	})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	if err := op.Wait(e.ctx); err == nil {
		t.Fatal("Wait returned nil for an operation with httpErrorStatusCode 503")
	}
	if errs := op.Proto().GetError().GetErrors(); len(errs) != 1 || errs[0].GetCode() != "ZONE_RESOURCE_POOL_EXHAUSTED" || op.Proto().GetHttpErrorStatusCode() != 503 {
		t.Errorf("operation = %v", op.Proto())
	}
	if got := e.getMIG("pool").GetTargetSize(); got != 0 {
		t.Errorf("targetSize = %d after a failed insert", got)
	}
	calls := e.sim.Calls()
	if last := calls[len(calls)-1]; last.OpError != "ZONE_RESOURCE_POOL_EXHAUSTED" || last.Status != 200 {
		t.Errorf("last call = %+v", last)
	}
	// Consumed: the next call succeeds.
	if err := e.insertRR("pool", namedRR("rr", 3600, "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	// HTTP errors, twice.
	e.sim.InjectError(Match{Method: "GET", Path: `/resizeRequests/rr$`}, 429, "rateLimitExceeded", "", 2)
	for range 2 {
		_, err := e.rrs.Get(e.ctx, &computepb.GetInstanceGroupManagerResizeRequestRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool", ResizeRequest: "rr"})
		wantHTTP(t, err, 429, "rateLimitExceeded")
	}
	e.getRR("pool", "rr")
	// Forever until cleared.
	e.sim.InjectError(Match{Path: `/instances$`}, 403, "forbidden", "", 0)
	for range 3 {
		_, err := e.inst.List(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone}).Next()
		wantHTTP(t, err, 403, "forbidden")
	}
	e.sim.ClearInjections()
	if _, err := e.inst.List(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone}).Next(); err != nil && err != iterator.Done {
		t.Errorf("after ClearInjections: %v", err)
	}
}

// reservationTemplate is a reservation-bound template of machineType,
// whose VMs stay stopped after host maintenance (automaticRestart false)
// unless restart is set.
func reservationTemplate(name, machineType string, restart bool) *computepb.InstanceTemplate {
	t := flexTemplate(name, 0)
	p := t.Properties
	p.MachineType = proto.String(machineType)
	p.ReservationAffinity = &computepb.ReservationAffinity{ConsumeReservationType: proto.String("SPECIFIC_RESERVATION"),
		Key: proto.String("compute.googleapis.com/reservation-name"), Values: []string{"res-1"}}
	p.Scheduling = &computepb.Scheduling{ProvisioningModel: proto.String("RESERVATION_BOUND"),
		OnHostMaintenance: proto.String("TERMINATE"), AutomaticRestart: proto.Bool(restart)}
	if machineType != "a3-ultragpu-8g" {
		p.GuestAccelerators = nil
	}
	return t
}

func TestReportHostAsFaulty(t *testing.T) {
	e := newEnv(t, Options{RepairDelay: 11 * time.Minute})
	e.setup()
	if err := e.insertRR("pool", namedRR("rr", 7200, "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(0)
	e.advance(0)
	report := func(vm, schedule, behavior, rid string) (*compute.Operation, error) {
		req := &computepb.ReportHostAsFaultyInstanceRequest{
			Project: testProject, Zone: testZone, Instance: vm,
			InstancesReportHostAsFaultyRequestResource: &computepb.InstancesReportHostAsFaultyRequest{
				DisruptionSchedule: proto.String(schedule),
				FaultReasons:       []*computepb.InstancesReportHostAsFaultyRequestFaultReason{{Behavior: proto.String(behavior), Description: proto.String("xid 79")}},
			},
		}
		if rid != "" {
			req.RequestId = proto.String(rid)
		}
		return e.inst.ReportHostAsFaulty(e.ctx, req)
	}
	_, err := report("pool-0", "SOON", "PERFORMANCE", "")
	wantHTTP(t, err, 400, "invalid")
	_, err = report("pool-0", "IMMEDIATE", "BROKEN", "")
	wantHTTP(t, err, 400, "invalid")
	// A Flex-Start VM: refused, and left running.
	_, err = report("pool-0", "IMMEDIATE", "UNRECOVERABLE_GPU_ERROR", "")
	wantHTTP(t, err, 400, ErrHostRepairUnsupported)
	if vm, _ := e.getInstance("pool-0"); vm.GetStatus() != "RUNNING" {
		t.Fatalf("refused Flex-Start VM: status %s", vm.GetStatus())
	}

	// Reservation-bound VMs: A3 Ultra stays stopped after its repair; A3
	// High with 4 GPUs is not an eligible machine type (A3 High with 8 is).
	for _, tp := range []*computepb.InstanceTemplate{
		reservationTemplate("rb", "a3-ultragpu-8g", false),
		reservationTemplate("rb-restart", "a4-highgpu-8g", true),
		reservationTemplate("rb-high4", "a3-highgpu-4g", false),
	} {
		if err := e.insertTemplate(tp); err != nil {
			t.Fatalf("template %s: %v", tp.GetName(), err)
		}
		if err := do(e.inst.Insert(e.ctx, &computepb.InsertInstanceRequest{Project: testProject, Zone: testZone,
			SourceInstanceTemplate: proto.String("global/instanceTemplates/" + tp.GetName()),
			InstanceResource:       &computepb.Instance{Name: proto.String(tp.GetName() + "-0")}})); err != nil {
			t.Fatalf("VM from %s: %v", tp.GetName(), err)
		}
	}
	_, err = report("rb-high4-0", "IMMEDIATE", "UNRECOVERABLE_GPU_ERROR", "")
	wantHTTP(t, err, 400, ErrHostRepairUnsupported)

	host := func(name string) string {
		for _, in := range e.sim.Instances() {
			if in.Name == name {
				return in.PhysicalHost
			}
		}
		t.Fatalf("no VM %s", name)
		return ""
	}
	before := host("rb-0")
	_, err = e.inst.Start(e.ctx, &computepb.StartInstanceRequest{Project: testProject, Zone: testZone, Instance: "rb-0"})
	wantHTTP(t, err, 400, "resourceNotReady") // running: nothing to start
	rid := "8b5e3f0a-8f6f-4a55-9d7c-7a7b1c2d3e4f"
	op, err := report("rb-0", "IMMEDIATE", "UNRECOVERABLE_GPU_ERROR", rid)
	if err != nil {
		t.Fatal(err)
	}
	if op.Done() {
		t.Fatal("the host-repair operation is DONE at once; Compute takes 10–12 minutes")
	}
	if _, err := report("rb-restart-0", "IMMEDIATE", "CHIP_ERROR", ""); err != nil {
		t.Fatal(err)
	}
	vm, _ := e.getInstance("rb-0")
	if vm.GetStatus() != "REPAIRING" {
		t.Fatalf("status = %s", vm.GetStatus())
	}
	_, err = report("rb-0", "IMMEDIATE", "PERFORMANCE", "")
	wantHTTP(t, err, 400, "resourceNotReady")
	poll := func() *computepb.Operation {
		t.Helper()
		got, err := e.zops.Get(e.ctx, &computepb.GetZoneOperationRequest{Project: testProject, Zone: testZone, Operation: op.Name()})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	e.advance(10 * time.Minute)
	if got := poll(); got.GetStatus() != computepb.Operation_RUNNING || got.GetEndTime() != "" {
		t.Fatalf("after 10 minutes the operation is %s (end %q), want RUNNING", got.GetStatus(), got.GetEndTime())
	}
	if vm, _ := e.getInstance("rb-0"); vm.GetStatus() != "REPAIRING" {
		t.Fatalf("after 10 minutes: %s", vm.GetStatus())
	}
	// The same request id answers with the same, still running, operation.
	again, err := report("rb-0", "IMMEDIATE", "UNRECOVERABLE_GPU_ERROR", rid)
	if err != nil || again.Name() != op.Name() {
		t.Fatalf("repeated request id: %v, operation %s, want %s", err, again.Name(), op.Name())
	}
	e.advance(time.Minute)
	if got := poll(); got.GetStatus() != computepb.Operation_DONE || got.GetError() != nil {
		t.Fatalf("after 11 minutes the operation is %s, error %v", got.GetStatus(), got.GetError())
	}
	vm, _ = e.getInstance("rb-0")
	if vm.GetStatus() != "TERMINATED" || vm.GetLastStopTimestamp() == "" {
		t.Fatalf("automaticRestart=false: after the repair status %s, lastStop %q; want TERMINATED (stopped)", vm.GetStatus(), vm.GetLastStopTimestamp())
	}
	if host("rb-0") == before {
		t.Error("the VM is on the same host after its repair")
	}
	if vm, _ := e.getInstance("rb-restart-0"); vm.GetStatus() != "RUNNING" {
		t.Errorf("automaticRestart=true: after the repair status %s, want RUNNING", vm.GetStatus())
	}
	e.advance(time.Minute)
	if err := do(e.inst.Start(e.ctx, &computepb.StartInstanceRequest{Project: testProject, Zone: testZone, Instance: "rb-0",
		RequestId: proto.String("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9")})); err != nil {
		t.Fatalf("start: %v", err)
	}
	vm, _ = e.getInstance("rb-0")
	if vm.GetStatus() != "RUNNING" || vm.GetLastStartTimestamp() != formatTime(e.clk.Now()) {
		t.Errorf("started: status %s lastStart %s, want RUNNING at %s", vm.GetStatus(), vm.GetLastStartTimestamp(), formatTime(e.clk.Now()))
	}
	if diff := cmp.Diff([]string{"rb-0", "rb-restart-0"}, e.repairin); diff != "" {
		t.Errorf("OnInstanceRepairing (-want +got):\n%s", diff)
	}
	_, err = e.inst.Start(e.ctx, &computepb.StartInstanceRequest{Project: testProject, Zone: testZone, Instance: "ghost"})
	wantHTTP(t, err, 404, "notFound")
}

func TestOperationsAndExpireNow(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	if err := e.insertRR("pool", namedRR("rr", 7200, "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(0)
	e.advance(0)
	_, err := e.zops.Get(e.ctx, &computepb.GetZoneOperationRequest{Project: testProject, Zone: testZone, Operation: "operation-missing"})
	wantHTTP(t, err, 404, "notFound")
	op, err := e.inst.Delete(e.ctx, &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: "nope"})
	wantHTTP(t, err, 404, "notFound")
	_ = op
	if err := e.sim.ExpireNow(testZone, "nope"); err == nil {
		t.Error("ExpireNow of a missing VM returned nil")
	}
	if err := e.sim.ExpireNow(testZone, "pool-0"); err != nil {
		t.Fatal(err)
	}
	if n := len(e.sim.Instances()); n != 0 {
		t.Errorf("%d VMs after ExpireNow", n)
	}
	if n := len(e.sunkEntries()); n != 1 {
		t.Errorf("%d audit entries, want 1", n)
	}
	// Wait endpoint.
	calls := e.sim.Calls()
	resp, err := http.Post(e.srv.URL+"/compute/v1/projects/proj/zones/us-central1-a/operations/x/wait", "application/json", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("wait on a missing operation: %d", resp.StatusCode)
	}
	wop, err := e.zops.Wait(e.ctx, &computepb.WaitZoneOperationRequest{Project: testProject, Zone: testZone, Operation: opNameOfLastRRInsert(t, e)})
	if err != nil || wop.GetStatus() != computepb.Operation_DONE {
		t.Errorf("wait: %v %v", wop, err)
	}
	if len(e.sim.Calls()) != len(calls) {
		t.Error("operations wait was recorded as a mutation")
	}
}

func opNameOfLastRRInsert(t *testing.T, e *env) string {
	t.Helper()
	e.sim.mu.Lock()
	defer e.sim.mu.Unlock()
	for k, op := range e.sim.ops {
		if op.GetOperationType() == "compute.instanceGroupManagerResizeRequests.insert" && strings.Contains(k, "/zones/") {
			return op.GetName()
		}
	}
	t.Fatal("no resize request insert operation")
	return ""
}

// TestDeterminism: the same seed and calls give the same IDs and names.
func TestDeterminism(t *testing.T) {
	run := func() []Instance {
		e := newEnv(t, Options{Seed: 7})
		e.setup()
		if err := e.insertRR("pool", &computepb.InstanceGroupManagerResizeRequest{Name: proto.String("rr"), ResizeBy: proto.Int32(3)}, ""); err != nil {
			t.Fatal(err)
		}
		e.advance(0)
		e.advance(0)
		return e.sim.Instances()
	}
	a, b := run(), run()
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("runs differ (-a +b):\n%s", diff)
	}
	if len(a) != 3 {
		t.Errorf("%d VMs", len(a))
	}
}

func TestMIGResizeAndDelete(t *testing.T) {
	e := newEnv(t, Options{DeleteDelay: time.Minute})
	std := flexTemplate("std", 0)
	std.Properties.Scheduling = &computepb.Scheduling{ProvisioningModel: proto.String("STANDARD"), OnHostMaintenance: proto.String("TERMINATE")}
	if err := e.insertTemplate(std); err != nil {
		t.Fatal(err)
	}
	if err := e.insertMIG("ctl", "std", "DO_NOTHING"); err != nil {
		t.Fatal(err)
	}
	resize := func(n int32) error {
		return do(e.igm.Resize(e.ctx, &computepb.ResizeInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "ctl", Size: n}))
	}
	if err := resize(3); err != nil {
		t.Fatal(err)
	}
	if n := len(e.sim.Instances()); n != 3 {
		t.Fatalf("%d VMs after resize 3", n)
	}
	if err := resize(1); err != nil {
		t.Fatal(err)
	}
	m := e.getMIG("ctl")
	if m.GetTargetSize() != 1 || m.GetCurrentActions().GetDeleting() != 2 || m.GetStatus().GetIsStable() {
		t.Errorf("MIG after shrink: %v", m)
	}
	e.advance(time.Minute)
	if n := len(e.sim.Instances()); n != 1 {
		t.Fatalf("%d VMs after the delete delay", n)
	}
	if !e.getMIG("ctl").GetStatus().GetIsStable() {
		t.Error("MIG not stable")
	}
	if err := do(e.igm.Delete(e.ctx, &computepb.DeleteInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "ctl"})); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Minute)
	if n := len(e.sim.Instances()); n != 0 {
		t.Errorf("%d VMs after MIG delete", n)
	}
	if n := len(e.sim.MIGs()); n != 0 {
		t.Errorf("%d MIGs after delete", n)
	}
}
