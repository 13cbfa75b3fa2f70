package gce_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/gce"
)

// regionalCall is one call a recordingCompute served.
type regionalCall struct {
	Method, Path string
	Body         map[string]any
}

// recordingCompute answers every mutation with a DONE operation and every
// list with the canned answer for its path suffix, and records what it was
// sent: the request bodies and paths the regional calls make, compared
// with the names of the Compute v1 discovery document.
type recordingCompute struct {
	mu    sync.Mutex
	calls []regionalCall
	lists map[string]string // "METHOD path-suffix" → JSON answer
}

func (rc *recordingCompute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := regionalCall{Method: r.Method, Path: r.URL.Path}
	if len(body) > 0 {
		_ = json.Unmarshal(body, &rec.Body)
	}
	w.Header().Set("Content-Type", "application/json")
	if strings.Contains(r.URL.Path, "/operations/") {
		// The Go client polls each operation, in its region.
		if !strings.HasPrefix(r.URL.Path, "/compute/v1/projects/proj/regions/us-central1/operations/") {
			http.Error(w, "operation polled outside its region: "+r.URL.Path, http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, `{"name":"op-1","status":"DONE","kind":"compute#operation"}`)
		return
	}
	rc.mu.Lock()
	rc.calls = append(rc.calls, rec)
	rc.mu.Unlock()
	for key, answer := range rc.lists {
		method, suffix, _ := strings.Cut(key, " ")
		if r.Method == method && strings.HasSuffix(r.URL.Path, suffix) {
			_, _ = io.WriteString(w, answer)
			return
		}
	}
	_, _ = io.WriteString(w, `{"name":"op-1","status":"DONE","kind":"compute#operation"}`)
}

func newRecording(t *testing.T, lists map[string]string) (*gce.Client, *recordingCompute) {
	t.Helper()
	rc := &recordingCompute{lists: lists}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := gce.New(ctx, "proj", option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rc
}

// TestRegionalMIGInsertBody: a MIG spec located in a region is inserted
// through regionInstanceGroupManagers.insert with distributionPolicy
// {targetShape: ANY_SINGLE_ZONE, zones[].zone} over exactly the given
// zones and updatePolicy.instanceRedistributionType NONE, besides the
// settings every resize-request MIG has.
func TestRegionalMIGInsertBody(t *testing.T) {
	c, rc := newRecording(t, nil)
	err := c.EnsureMIG(context.Background(), gce.MIGSpec{
		Zone: "us-central1", Zones: []string{"us-central1-a", "us-central1-b"},
		Name: "fs-c-p-r1", Template: "tpl", BaseInstanceName: "c-p-0-g1", Description: "d",
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.calls) != 1 {
		t.Fatalf("calls = %+v, want one insert", rc.calls)
	}
	got := rc.calls[0]
	if got.Method != http.MethodPost || got.Path != "/compute/v1/projects/proj/regions/us-central1/instanceGroupManagers" {
		t.Errorf("insert went to %s %s, want POST …/projects/proj/regions/us-central1/instanceGroupManagers", got.Method, got.Path)
	}
	want := map[string]any{
		"name": "fs-c-p-r1", "baseInstanceName": "c-p-0-g1", "description": "d",
		"instanceTemplate": "projects/proj/global/instanceTemplates/tpl", "targetSize": float64(0),
		"instanceLifecyclePolicy": map[string]any{"defaultActionOnFailure": "DO_NOTHING"},
		"updatePolicy":            map[string]any{"type": "OPPORTUNISTIC", "instanceRedistributionType": "NONE"},
		"distributionPolicy": map[string]any{
			"targetShape": "ANY_SINGLE_ZONE",
			"zones": []any{
				map[string]any{"zone": "projects/proj/zones/us-central1-a"},
				map[string]any{"zone": "projects/proj/zones/us-central1-b"},
			},
		},
	}
	if diff := cmp.Diff(want, got.Body); diff != "" {
		t.Errorf("regional MIG body (-want +got):\n%s", diff)
	}
}

// TestRegionalMIGRefusedLocally: zones outside the MIG's region, a zone
// listed twice, no zones, or zones for a zonal MIG never reach Compute.
func TestRegionalMIGRefusedLocally(t *testing.T) {
	c, rc := newRecording(t, nil)
	for name, m := range map[string]gce.MIGSpec{
		"other region": {Zone: "us-central1", Zones: []string{"us-central1-a", "us-east1-b"}},
		"twice":        {Zone: "us-central1", Zones: []string{"us-central1-a", "us-central1-a"}},
		"no zones":     {Zone: "us-central1"},
		"zonal":        {Zone: "us-central1-a", Zones: []string{"us-central1-a", "us-central1-b"}},
	} {
		m.Name, m.Template = "fs-c-p-r1", "tpl"
		if err := c.EnsureMIG(context.Background(), m, ""); !errors.Is(err, gce.ErrInvalidSpec) {
			t.Errorf("%s: EnsureMIG = %v, want ErrInvalidSpec", name, err)
		}
	}
	if len(rc.calls) != 0 {
		t.Errorf("refused specs reached Compute: %+v", rc.calls)
	}
}

// TestRegionalResizeRequestCalls: resize requests of a MIG located in a
// region go to regionInstanceGroupManagerResizeRequests (insert, get,
// list, cancel, delete at the discovery document's paths) with the same
// body as a zonal request.
func TestRegionalResizeRequestCalls(t *testing.T) {
	c, rc := newRecording(t, map[string]string{
		"GET /resizeRequests":     `{"items":[{"name":"rr1","state":"ACCEPTED","region":"https://x/compute/v1/projects/proj/regions/us-central1"}]}`,
		"GET /resizeRequests/rr1": `{"name":"rr1","state":"SUCCEEDED"}`,
	})
	ctx := context.Background()
	if err := c.CreateResizeRequest(ctx, "us-central1", "fs-c-p-r1", gce.ResizeRequestSpec{Name: "rr1", Instances: []string{"c-p-0-g1"}, RunDuration: time.Hour}, "rid-1"); err != nil {
		t.Fatal(err)
	}
	rrs, err := c.ListResizeRequests(ctx, "us-central1", "fs-c-p-r1")
	if err != nil || len(rrs) != 1 || rrs[0].Name != "rr1" || rrs[0].State != "ACCEPTED" || rrs[0].Zone != "us-central1" {
		t.Fatalf("ListResizeRequests = %+v, %v (calls %+v)", rrs, err, rc.calls)
	}
	if rr, err := c.GetResizeRequest(ctx, "us-central1", "fs-c-p-r1", "rr1"); err != nil || rr.State != "SUCCEEDED" {
		t.Fatalf("GetResizeRequest = %+v, %v", rr, err)
	}
	if err := c.CancelResizeRequest(ctx, "us-central1", "fs-c-p-r1", "rr1", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteResizeRequest(ctx, "us-central1", "fs-c-p-r1", "rr1", ""); err != nil {
		t.Fatal(err)
	}
	base := "/compute/v1/projects/proj/regions/us-central1/instanceGroupManagers/fs-c-p-r1/resizeRequests"
	wantCalls := []string{
		"POST " + base,
		"GET " + base,
		"GET " + base + "/rr1",
		"POST " + base + "/rr1/cancel",
		"DELETE " + base + "/rr1",
	}
	var gotCalls []string
	for _, call := range rc.calls {
		gotCalls = append(gotCalls, call.Method+" "+call.Path)
	}
	if diff := cmp.Diff(wantCalls, gotCalls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	wantBody := map[string]any{"name": "rr1", "instances": []any{map[string]any{"name": "c-p-0-g1"}},
		"requestedRunDuration": map[string]any{"seconds": "3600"}}
	if diff := cmp.Diff(wantBody, rc.calls[0].Body); diff != "" {
		t.Errorf("regional resize request body (-want +got):\n%s", diff)
	}
}

// TestRegionalDeleteInstancesByZone: deleting VMs of a regional MIG names
// each VM by the zone Compute placed it in, read from the MIG's
// listManagedInstances; a name the MIG does not hold is skipped, and with
// none left nothing is deleted.
func TestRegionalDeleteInstancesByZone(t *testing.T) {
	c, rc := newRecording(t, map[string]string{
		"POST /listManagedInstances": `{"managedInstances":[
			{"instance":"https://compute.googleapis.com/compute/v1/projects/proj/zones/us-central1-b/instances/c-p-0-g1"},
			{"instance":"https://compute.googleapis.com/compute/v1/projects/proj/zones/us-central1-b/instances/c-p-1-g1"}]}`,
	})
	ctx := context.Background()
	if err := c.DeleteInstances(ctx, "us-central1", "fs-c-p-r1", []string{"c-p-0-g1", "c-p-9-g1"}, ""); err != nil {
		t.Fatal(err)
	}
	if len(rc.calls) != 2 {
		t.Fatalf("calls = %+v, want listManagedInstances then deleteInstances", rc.calls)
	}
	del := rc.calls[1]
	if del.Path != "/compute/v1/projects/proj/regions/us-central1/instanceGroupManagers/fs-c-p-r1/deleteInstances" {
		t.Errorf("delete went to %s", del.Path)
	}
	want := map[string]any{"instances": []any{"projects/proj/zones/us-central1-b/instances/c-p-0-g1"}, "skipInstancesOnValidationError": true}
	if diff := cmp.Diff(want, del.Body); diff != "" {
		t.Errorf("deleteInstances body (-want +got):\n%s", diff)
	}
	rc.calls = nil
	if err := c.DeleteInstances(ctx, "us-central1", "fs-c-p-r1", []string{"c-p-9-g1"}, ""); err != nil {
		t.Fatal(err)
	}
	if len(rc.calls) != 1 {
		t.Errorf("a VM the MIG does not hold was deleted: %+v", rc.calls)
	}
}

// TestRegionalRequestLandsInOneZoneWithCapacity runs a multi-zone pool's
// request against the simulator: zone a is stocked out, so the regional
// MIG's request stays ACCEPTED while every zone is short (the first zone's
// error in lastAttempt), then lands, with all its VMs, in zone b once b
// has capacity; the VMs are listed in b, deleted by their zone, and the
// MIG and request answer under regions/us-central1.
func TestRegionalRequestLandsInOneZoneWithCapacity(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	const region, mig = "us-central1", "c1-h200-r1"
	zones := []string{"us-central1-a", "us-central1-b"}
	if err := h.c.EnsureInstanceTemplate(h.ctx, flexSpec("c1-h200-v1"), rid("tpl")); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: region, Zones: zones, Name: mig, Template: "c1-h200-v1", BaseInstanceName: "c1-h200"}, rid("mig")); err != nil {
		t.Fatal(err)
	}
	migs, err := h.c.ListMIGs(h.ctx, region, "c1-h200")
	if err != nil || len(migs) != 1 || migs[0].TargetShape != "ANY_SINGLE_ZONE" || !slices.Equal(migs[0].Zones, zones) {
		t.Fatalf("ListMIGs(region) = %+v, %v; want the regional MIG with ANY_SINGLE_ZONE over %q", migs, err, zones)
	}
	h.sim.SetShortage(computesim.Shortage{Name: "a-out", Zone: "us-central1-a"})
	h.sim.SetShortage(computesim.Shortage{Name: "b-out", Zone: "us-central1-b"})
	spec := gce.ResizeRequestSpec{Name: "rr-1", Instances: []string{"c1-h200-0-g1", "c1-h200-1-g1"}, RunDuration: time.Hour}
	if err := h.c.CreateResizeRequest(h.ctx, region, mig, spec, rid("rr")); err != nil {
		t.Fatal(err)
	}
	h.tick(time.Minute)
	rr, err := h.c.GetResizeRequest(h.ctx, region, mig, "rr-1")
	if err != nil || rr.State != gce.StateAccepted || rr.LastAttemptCode != "ZONE_RESOURCE_POOL_EXHAUSTED" || !strings.Contains(rr.LastAttemptMessage, "us-central1-a") {
		t.Fatalf("while both zones are short: %+v, %v; want ACCEPTED with zone a's stock-out", rr, err)
	}
	h.sim.ClearShortage("b-out")
	h.tick(computesim.DefaultAttemptInterval)
	if rr, err = h.c.GetResizeRequest(h.ctx, region, mig, "rr-1"); err != nil || rr.State != gce.StateSucceeded {
		t.Fatalf("once zone b has capacity: %+v, %v; want SUCCEEDED", rr, err)
	}
	labels := map[string]string{"flexslurm-pool": "h200"}
	inA, err := h.c.ListInstances(h.ctx, "us-central1-a", labels)
	if err != nil || len(inA) != 0 {
		t.Fatalf("VMs in stocked-out zone a: %+v, %v", inA, err)
	}
	vms, err := h.c.ListInstancesInZones(h.ctx, zones, labels)
	if err != nil || len(vms) != 2 {
		t.Fatalf("VMs of the request: %+v, %v", vms, err)
	}
	for _, vm := range vms {
		if vm.Zone != "us-central1-b" || vm.MIG != mig {
			t.Errorf("VM %s: zone %q, MIG %q; want us-central1-b and %s", vm.Name, vm.Zone, vm.MIG, mig)
		}
	}
	if err := h.c.DeleteInstances(h.ctx, region, mig, []string{"c1-h200-0-g1"}, rid("del")); err != nil {
		t.Fatal(err)
	}
	h.tick(time.Minute)
	if _, err := h.c.GetInstance(h.ctx, "us-central1-b", "c1-h200-0-g1"); !gce.IsNotFound(err) {
		t.Errorf("deleted VM still there: %v", err)
	}
	if err := h.c.DeleteMIG(h.ctx, region, mig, rid("del mig")); err != nil {
		t.Fatal(err)
	}
	if migs, err := h.c.ListMIGs(h.ctx, region, "c1-h200"); err != nil || len(migs) != 0 {
		t.Errorf("after DeleteMIG: %+v, %v", migs, err)
	}
}

// TestSimRefusesRegionalMIGs: the simulator refuses, as Compute does, a
// regional MIG with a zone outside its region, an unknown targetShape,
// ANY_SINGLE_ZONE with proactive redistribution, and (its fail-safe
// reading) a resize request in a regional MIG of another shape.
func TestSimRefusesRegionalMIGs(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	if err := h.c.EnsureInstanceTemplate(h.ctx, flexSpec("c1-h200-v1"), rid("tpl")); err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) (int, string) {
		resp, err := http.Post(h.url+"/compute/v1/projects/proj/regions/us-central1/"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const tpl = `"instanceTemplate":"projects/proj/global/instanceTemplates/c1-h200-v1","targetSize":0`
	for _, tc := range []struct{ name, body, want string }{
		{"zone of another region", `{"name":"m1",` + tpl + `,"updatePolicy":{"instanceRedistributionType":"NONE"},"distributionPolicy":{"targetShape":"ANY_SINGLE_ZONE","zones":[{"zone":"zones/us-east1-b"}]}}`, "region where the managed instance group is located"},
		{"unknown shape", `{"name":"m2",` + tpl + `,"distributionPolicy":{"targetShape":"SINGLE_ZONE"}}`, "targetShape"},
		{"proactive redistribution", `{"name":"m3",` + tpl + `,"distributionPolicy":{"targetShape":"ANY_SINGLE_ZONE"}}`, "instanceRedistributionType"},
	} {
		if code, body := post("instanceGroupManagers", tc.body); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s; want 400 naming %s", tc.name, code, body, tc.want)
		}
	}
	if code, body := post("instanceGroupManagers", `{"name":"even",`+tpl+`,"instanceLifecyclePolicy":{"defaultActionOnFailure":"DO_NOTHING"},"distributionPolicy":{"zones":[{"zone":"zones/us-central1-a"},{"zone":"zones/us-central1-b"}]}}`); code != http.StatusOK {
		t.Fatalf("EVEN regional MIG: %d %s", code, body)
	}
	if code, body := post("instanceGroupManagers/even/resizeRequests", `{"name":"rr","resizeBy":1}`); code != http.StatusBadRequest || !strings.Contains(body, "ANY_SINGLE_ZONE") {
		t.Errorf("resize request in an EVEN regional MIG: %d %s; want 400 naming ANY_SINGLE_ZONE", code, body)
	}
}
