package computesim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	computebeta "cloud.google.com/go/compute/apiv1beta"
	computebetapb "cloud.google.com/go/compute/apiv1beta/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"
)

func TestParseReadings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Readings
	}{
		{"", LenientReadings()},
		{"lenient", LenientReadings()},
		{"STRICT", StrictReadings()},
		{"strict,-IgnoreLabelFilter", func() Readings { r := StrictReadings(); r.IgnoreLabelFilter = false; return r }()},
		{"lenient,RefuseNamedRequestsOnV1,RunEndAudit=migDelete", Readings{RefuseNamedRequestsOnV1: true, RunEndAudit: RunEndMIGDelete}},
		{"KeepTargetSizeAtRunEnd", Readings{KeepTargetSizeAtRunEnd: true}},
		{"RunEndAudit=DEFERREDDELETE", Readings{RunEndAudit: RunEndDeferredDelete}},
		{"strict, refusetargetsizewhileaccepted=false", func() Readings { r := StrictReadings(); r.RefuseTargetSizeWhileAccepted = false; return r }()},
	} {
		got, err := ParseReadings(tc.in)
		if err != nil {
			t.Errorf("ParseReadings(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseReadings(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		// String round-trips.
		back, err := ParseReadings(got.String())
		if err != nil || back != got {
			t.Errorf("ParseReadings(%q.String() = %q) = %+v, %v", tc.in, got.String(), back, err)
		}
	}
	for _, tc := range []struct{ in, word string }{
		{"strick", `"strick"`},
		{"strict,IgnoreLabelFilters", `"IgnoreLabelFilters"`},
		{"RunEndAudit", "needs a value"},
		{"RunEndAudit=delete", `not "delete"`},
		{"IgnoreLabelFilter=yes", `not "yes"`},
		{"strict,,lenient", "empty word"},
	} {
		_, err := ParseReadings(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.word) {
			t.Errorf("ParseReadings(%q) error = %v, want one containing %s", tc.in, err, tc.word)
		}
	}
	if s := StrictReadings(); !s.RefuseTargetSizeWhileAccepted || !s.RefuseNamedRequestsOnV1 || !s.IgnoreLabelFilter || !s.KeepTargetSizeAtRunEnd || s.RunEndAudit != RunEndMIGDelete {
		t.Errorf("StrictReadings() = %+v: want every switch on its strict side", s)
	}
}

func TestReadingsOptionDefaults(t *testing.T) {
	if got := (Options{}).withDefaults().Readings; got != LenientReadings() {
		t.Errorf("default readings = %+v, want lenient", got)
	}
	if got := (Options{}).withDefaults().ExpiryLogStyle; got != ExpiryLogDeferredDelete {
		t.Errorf("default run-end audit = %q, want deferredDelete", got)
	}
	o := Options{ExpiryLogStyle: ExpiryLogMIGDelete}.withDefaults()
	if o.ExpiryLogStyle != ExpiryLogMIGDelete {
		t.Errorf("lenient readings override ExpiryLogStyle migDelete: %q", o.ExpiryLogStyle)
	}
	o = Options{ExpiryLogStyle: ExpiryLogDeferredDelete, Readings: StrictReadings()}.withDefaults()
	if o.ExpiryLogStyle != ExpiryLogMIGDelete {
		t.Errorf("Readings.RunEndAudit does not win over ExpiryLogStyle: %q", o.ExpiryLogStyle)
	}
}

// bothReadings runs f once with the switch off (lenient) and once on.
func bothReadings(t *testing.T, set func(*Readings), f func(t *testing.T, e *env, on bool)) {
	for _, on := range []bool{false, true} {
		t.Run(map[bool]string{false: "lenient", true: "strict"}[on], func(t *testing.T) {
			r := LenientReadings()
			if on {
				set(&r)
			}
			e := newEnv(t, Options{Readings: r, CapacityDelay: func(string, string) time.Duration { return time.Hour }})
			e.setup()
			f(t, e, on)
		})
	}
}

func TestReadingRefuseTargetSizeWhileAccepted(t *testing.T) {
	bothReadings(t, func(r *Readings) { r.RefuseTargetSizeWhileAccepted = true }, func(t *testing.T, e *env, on bool) {
		if err := e.insertRR("pool", namedRR("rr-1", 3600, "pool-0"), ""); err != nil {
			t.Fatal(err)
		}
		e.advance(0)
		e.advance(time.Hour) // rr-1 SUCCEEDED, pool-0 RUNNING
		if err := e.insertRR("pool", namedRR("rr-2", 3600, "pool-1"), ""); err != nil {
			t.Fatal(err)
		}
		e.advance(0)
		if st := e.getRR("pool", "rr-2").GetState(); st != "ACCEPTED" {
			t.Fatalf("rr-2 is %s, want ACCEPTED", st)
		}
		del := func() error {
			return do(e.igm.DeleteInstances(e.ctx, &computepb.DeleteInstancesInstanceGroupManagerRequest{
				Project: testProject, Zone: testZone, InstanceGroupManager: "pool",
				InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{
					Instances: []string{"zones/" + testZone + "/instances/pool-0"},
				},
			}))
		}
		err := del()
		if !on {
			if err != nil {
				t.Fatalf("lenient: deleteInstances with a request ACCEPTED: %v", err)
			}
			return
		}
		wantHTTP(t, err, 400, "invalid")
		if !strings.Contains(err.Error(), "active resize request") {
			t.Errorf("refusal does not say why: %v", err)
		}
		if vm, err := e.getInstance("pool-0"); err != nil || vm.GetStatus() != "RUNNING" {
			t.Errorf("after the refusal pool-0 is %v (%v), want RUNNING", vm.GetStatus(), err)
		}
		// Once the other request is final, the same call is accepted.
		if err := do(e.rrs.Cancel(e.ctx, &computepb.CancelInstanceGroupManagerResizeRequestRequest{
			Project: testProject, Zone: testZone, InstanceGroupManager: "pool", ResizeRequest: "rr-2"})); err != nil {
			t.Fatal(err)
		}
		if err := del(); err != nil {
			t.Fatalf("deleteInstances with no request active: %v", err)
		}
	})
}

func TestReadingIgnoreLabelFilter(t *testing.T) {
	bothReadings(t, func(r *Readings) { r.IgnoreLabelFilter = true }, func(t *testing.T, e *env, on bool) {
		if err := e.insertRR("pool", namedRR("rr-1", 3600, "pool-0", "pool-1"), ""); err != nil {
			t.Fatal(err)
		}
		e.advance(0)
		e.advance(time.Hour)
		list := func(filter string) []string {
			t.Helper()
			var names []string
			it := e.inst.List(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone, Filter: proto.String(filter)})
			for {
				vm, err := it.Next()
				if err == iterator.Done {
					break
				}
				if err != nil {
					t.Fatalf("list %q: %v", filter, err)
				}
				names = append(names, vm.GetName())
			}
			return names
		}
		other := `(labels.cluster = "other")`
		gotOther := list(other)
		gotName := list(`(labels.cluster = "other") (name = "pool-1")`)
		gotOr := list(`(labels.cluster = "other") OR (name = "nobody")`)
		if !on {
			if len(gotOther) != 0 || len(gotName) != 0 || len(gotOr) != 0 {
				t.Errorf("lenient: label filters not applied: %v %v %v", gotOther, gotName, gotOr)
			}
		} else {
			if !slices.Equal(gotOther, []string{"pool-0", "pool-1"}) {
				t.Errorf("strict: %s = %v, want every VM of the zone", other, gotOther)
			}
			if !slices.Equal(gotName, []string{"pool-1"}) {
				t.Errorf("strict: the name term is still applied: got %v, want [pool-1]", gotName)
			}
			if !slices.Equal(gotOr, []string{"pool-0", "pool-1"}) {
				t.Errorf("strict: an OR with an ignored label term matches all: got %v", gotOr)
			}
		}
		// A malformed filter is refused either way.
		_, err := e.inst.List(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone, Filter: proto.String(`labels.cluster = "a" name = "b"`)}).Next()
		wantHTTP(t, err, 400, "invalid")
		// Through the direct list shortcut too.
		var direct []string
		if !(ListShortcut{Sim: e.sim}).ListInstances(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone, Filter: proto.String(other)},
			func(l *computepb.InstanceList) {
				for _, vm := range l.GetItems() {
					direct = append(direct, vm.GetName())
				}
			}) {
			t.Fatal("direct list not answered")
		}
		if want := map[bool]int{false: 0, true: 2}[on]; len(direct) != want {
			t.Errorf("direct list %s = %v, want %d VMs", other, direct, want)
		}
	})
}

func TestReadingKeepTargetSizeAtRunEnd(t *testing.T) {
	bothReadings(t, func(r *Readings) { r.KeepTargetSizeAtRunEnd = true }, func(t *testing.T, e *env, on bool) {
		if err := e.insertRR("pool", namedRR("rr-1", 600, "pool-0", "pool-1"), ""); err != nil {
			t.Fatal(err)
		}
		e.advance(0)
		e.advance(time.Hour) // provisioned
		if got := e.getMIG("pool").GetTargetSize(); got != 2 {
			t.Fatalf("targetSize after provisioning = %d, want 2", got)
		}
		e.advance(10 * time.Minute) // both runs end
		if _, err := e.getInstance("pool-0"); err == nil {
			t.Fatal("pool-0 still exists after its run duration")
		}
		want := map[bool]int32{false: 0, true: 2}[on]
		if got := e.getMIG("pool").GetTargetSize(); got != want {
			t.Errorf("targetSize after the run ended = %d, want %d", got, want)
		}
	})
}

func TestReadingRunEndAudit(t *testing.T) {
	for _, style := range []string{RunEndDeferredDelete, RunEndMIGDelete} {
		t.Run(style, func(t *testing.T) {
			r := LenientReadings()
			r.RunEndAudit = style
			e := newEnv(t, Options{Readings: r})
			e.setup()
			if err := e.insertRR("pool", namedRR("rr", 600, "pool-0"), ""); err != nil {
				t.Fatal(err)
			}
			e.advance(0)
			e.advance(10 * time.Minute)
			var methods []string
			for _, s := range e.sunkEntries() {
				methods = append(methods, field(s.entry, "protoPayload", "methodName").(string))
			}
			want := map[string][]string{
				RunEndDeferredDelete: {"compute.instances.deferredDelete"},
				RunEndMIGDelete:      {"v1.compute.instances.delete", "v1.compute.instances.delete"},
			}[style]
			if !slices.Equal(methods, want) {
				t.Errorf("audit entries at the run end = %v, want %v", methods, want)
			}
		})
	}
}

func TestReadingRefuseNamedRequestsOnV1(t *testing.T) {
	bothReadings(t, func(r *Readings) { r.RefuseNamedRequestsOnV1 = true }, func(t *testing.T, e *env, on bool) {
		beta, err := computebeta.NewInstanceGroupManagerResizeRequestsRESTClient(e.ctx, option.WithEndpoint(e.srv.URL), option.WithoutAuthentication())
		if err != nil {
			t.Fatal(err)
		}
		defer beta.Close()
		// v1, named.
		err = e.insertRR("pool", namedRR("rr-v1", 3600, "pool-0"), "")
		if on {
			wantHTTP(t, err, 400, "invalid")
			if !strings.Contains(err.Error(), "resource.instances") {
				t.Errorf("refusal does not name the field: %v", err)
			}
		} else if err != nil {
			t.Fatalf("lenient: named request on v1: %v", err)
		}
		// v1, by count: accepted either way.
		if err := e.insertRR("pool", &computepb.InstanceGroupManagerResizeRequest{Name: proto.String("rr-count"), ResizeBy: proto.Int32(1)}, ""); err != nil {
			t.Fatalf("resizeBy on v1: %v", err)
		}
		// beta, named: accepted either way, and served like v1.
		op, err := beta.Insert(e.ctx, &computebetapb.InsertInstanceGroupManagerResizeRequestRequest{
			Project: testProject, Zone: testZone, InstanceGroupManager: "pool",
			InstanceGroupManagerResizeRequestResource: &computebetapb.InstanceGroupManagerResizeRequest{
				Name:                 proto.String("rr-beta"),
				Instances:            []*computebetapb.PerInstanceConfig{{Name: proto.String("pool-9")}},
				RequestedRunDuration: &computebetapb.Duration{Seconds: proto.Int64(3600)},
			},
		})
		if err != nil {
			t.Fatalf("named request on beta: %v", err)
		}
		if err := op.Wait(e.ctx); err != nil {
			t.Fatalf("waiting for the beta insert through beta zone operations: %v", err)
		}
		e.advance(0)
		got, err := beta.Get(e.ctx, &computebetapb.GetInstanceGroupManagerResizeRequestRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool", ResizeRequest: "rr-beta"})
		if err != nil || got.GetState() != "ACCEPTED" || len(got.GetInstances()) != 1 {
			t.Fatalf("beta get: %v %v", got, err)
		}
		if v1 := e.getRR("pool", "rr-beta"); v1.GetId() != got.GetId() {
			t.Errorf("beta and v1 disagree on the request: %d vs %d", got.GetId(), v1.GetId())
		}
		n := 0
		for it := beta.List(e.ctx, &computebetapb.ListInstanceGroupManagerResizeRequestsRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool"}); ; n++ {
			if _, err := it.Next(); err == iterator.Done {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if want := map[bool]int{false: 3, true: 2}[on]; n != want {
			t.Errorf("beta list: %d requests, want %d", n, want)
		}
		if op, err := beta.Cancel(e.ctx, &computebetapb.CancelInstanceGroupManagerResizeRequestRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool", ResizeRequest: "rr-beta"}); err != nil || op.Wait(e.ctx) != nil {
			t.Fatalf("beta cancel: %v", err)
		}
		if op, err := beta.Delete(e.ctx, &computebetapb.DeleteInstanceGroupManagerResizeRequestRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool", ResizeRequest: "rr-beta"}); err != nil || op.Wait(e.ctx) != nil {
			t.Fatalf("beta delete: %v", err)
		}
	})
}

// TestBetaServesOnlyResizeRequests: beta is served for resize requests and
// their operations only.
func TestBetaServesOnlyResizeRequests(t *testing.T) {
	for _, path := range []string{
		"/compute/beta/projects/proj/zones/us-central1-a/instances",
		"/compute/beta/projects/proj/zones/us-central1-a/instanceGroupManagers",
		"/compute/beta/projects/proj/global/instanceTemplates",
	} {
		if _, aerr := route("GET", path); aerr == nil || aerr.code != 501 {
			t.Errorf("GET %s: %v, want 501", path, aerr)
		}
	}
	req, aerr := route("GET", "/compute/beta/projects/proj/zones/us-central1-a/instanceGroupManagers/m/resizeRequests/r")
	if aerr != nil || req.api != "beta" || req.method != "instanceGroupManagerResizeRequests.get" {
		t.Errorf("beta resize-request get: %+v %v", req, aerr)
	}
}

// TestMIGWithoutBaseInstanceName: Compute accepts a MIG without
// baseInstanceName (gcloud sends none by default) and names its VMs from a
// prefix of the MIG's name.
func TestMIGWithoutBaseInstanceName(t *testing.T) {
	e := newEnv(t, Options{})
	if err := e.insertTemplate(flexTemplate("tpl", 7200)); err != nil {
		t.Fatal(err)
	}
	long := "a-managed-instance-group-with-a-name-longer-than-fifty-four-ch"
	for _, name := range []string{"short", long} {
		m := &computepb.InstanceGroupManager{
			Name:                    proto.String(name),
			InstanceTemplate:        proto.String("global/instanceTemplates/tpl"),
			TargetSize:              proto.Int32(0),
			InstanceLifecyclePolicy: &computepb.InstanceGroupManagerInstanceLifecyclePolicy{DefaultActionOnFailure: proto.String("DO_NOTHING")},
		}
		if err := do(e.igm.Insert(e.ctx, &computepb.InsertInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManagerResource: m})); err != nil {
			t.Fatalf("MIG %s without baseInstanceName: %v", name, err)
		}
		want := name
		if len(want) > 54 {
			want = want[:54]
		}
		if got := e.getMIG(name).GetBaseInstanceName(); got != want {
			t.Errorf("MIG %s: baseInstanceName %q, want %q", name, got, want)
		}
		if err := e.insertRR(name, &computepb.InstanceGroupManagerResizeRequest{Name: proto.String("rr"), ResizeBy: proto.Int32(1)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	e.advance(0)
	e.advance(0)
	for _, in := range e.sim.Instances() {
		if !strings.HasPrefix(in.Name, deducedBaseInstanceName(in.MIG)+"-") {
			t.Errorf("VM %s of MIG %s is not named from the deduced base", in.Name, in.MIG)
		}
	}
	// A base given explicitly is still checked.
	bad := &computepb.InstanceGroupManager{Name: proto.String("bad"), BaseInstanceName: proto.String("Bad"), InstanceTemplate: proto.String("global/instanceTemplates/tpl"), TargetSize: proto.Int32(0)}
	wantHTTP(t, do(e.igm.Insert(e.ctx, &computepb.InsertInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManagerResource: bad})), 400, "invalid")
}
