package computefault

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/shared/clock"
)

var t0 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

const listPath = "/compute/v1/projects/p/zones/us-central1-a/instances"

func newLayer(t *testing.T) (*Layer, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(t0)
	l := New()
	l.Attach(clk.Now, computesim.New(computesim.Options{Seed: 1}, clk))
	return l, clk
}

func get(l *Layer, path string) int {
	w := httptest.NewRecorder()
	l.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w.Code
}

// TestErrorFaultCountsAndWindows: a fault fails the next matching calls
// (one by default), or every matching call within its window, and the call
// log names it.
func TestErrorFaultCountsAndWindows(t *testing.T) {
	l, clk := newLayer(t)
	l.AddError(0, lang.ComputeErrorStep{Method: "get", Path: "/instances$", Times: 2}, t0, t0)
	var got []int
	for range 3 {
		got = append(got, get(l, listPath))
	}
	if d := cmp.Diff([]int{500, 500, 200}, got); d != "" {
		t.Errorf("statuses with times: 2 (-want +got):\n%s", d)
	}
	l.AddError(1, lang.ComputeErrorStep{Name: "outage", Path: "/instances$", Status: 502, For: lang.Duration(time.Hour)}, t0, t0)
	got = nil
	for _, at := range []time.Duration{0, 59 * time.Minute, time.Hour} {
		clk.Set(t0.Add(at))
		got = append(got, get(l, listPath))
	}
	if d := cmp.Diff([]int{502, 502, 200}, got); d != "" {
		t.Errorf("statuses within and after a 1h window (-want +got):\n%s", d)
	}
	var injected []string
	for _, c := range l.Calls() {
		injected = append(injected, c.Injected)
	}
	if d := cmp.Diff([]string{"compute-error-0", "compute-error-0", "", "outage", "outage", ""}, injected); d != "" {
		t.Errorf("faults named in the call log (-want +got):\n%s", d)
	}
	if n := l.InjectedErrors(); n != 4 {
		t.Errorf("InjectedErrors = %d, want 4", n)
	}
	if calls := l.Since(4); len(calls) != 2 || calls[0].Injected != "outage" || calls[1].Failed() {
		t.Errorf("Since(4) = %+v, want the last outage call and the call after it", calls)
	}
}

// TestGetsAreNotFailedWithRetriedStatuses: the apiv1 client retries a GET
// answered 503 or 504 with real sleeps, so such faults skip GETs.
func TestGetsAreNotFailedWithRetriedStatuses(t *testing.T) {
	l, _ := newLayer(t)
	l.AddError(0, lang.ComputeErrorStep{Path: "/instances$", Code: "ZONE_RESOURCE_POOL_EXHAUSTED"}, t0, t0)
	if code := get(l, listPath); code != http.StatusOK {
		t.Errorf("GET under a 503 fault = %d, want 200", code)
	}
}

// TestErrorDefaults: a fault's status follows its code.
func TestErrorDefaults(t *testing.T) {
	for _, tc := range []struct {
		step   lang.ComputeErrorStep
		status int
		reason string
	}{
		{lang.ComputeErrorStep{}, 500, "backendError"},
		{lang.ComputeErrorStep{Code: "QUOTA_EXCEEDED"}, 403, ""},
		{lang.ComputeErrorStep{Code: "ZONE_RESOURCE_POOL_EXHAUSTED"}, 503, ""},
		{lang.ComputeErrorStep{Status: 429, Reason: "rateLimitExceeded"}, 429, "rateLimitExceeded"},
	} {
		l := New()
		l.AddError(3, tc.step, t0, t0)
		f := l.faults[0]
		if f.status != tc.status || f.reason != tc.reason || f.name != "compute-error-3" || f.remaining != 1 {
			t.Errorf("%+v: status %d, reason %q, name %q, remaining %d; want %d, %q, compute-error-3, 1", tc.step, f.status, f.reason, f.name, f.remaining, tc.status, tc.reason)
		}
	}
}

// TestBlockedUntil: the end of a window, the last call a counted fault
// failed, or a shortage's end, whichever is latest, for the calls a fault
// can fail.
func TestBlockedUntil(t *testing.T) {
	l := New()
	if b := l.BlockedUntil(AnyPath); !b.IsZero() {
		t.Errorf("no fault: blocked until %s", b)
	}
	l.AddError(0, lang.ComputeErrorStep{Method: "POST", Path: "/resizeRequests$", For: lang.Duration(2 * time.Hour)}, t0, t0)
	l.AddError(1, lang.ComputeErrorStep{Method: "DELETE", For: lang.Duration(5 * time.Hour)}, t0, t0)
	if b := l.BlockedUntil(PathResizeRequests); !b.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("blocked until %s, want the POST window's end", b)
	}
	if b := l.BlockedUntil("/compute/v1/projects/p/global/instanceTemplates"); !b.IsZero() {
		t.Errorf("a path no POST fault matches: blocked until %s", b)
	}
	l.AddShortage(t0.Add(3 * time.Hour))
	if b := l.BlockedUntil(PathResizeRequests); !b.Equal(t0.Add(3 * time.Hour)) {
		t.Errorf("blocked until %s, want the shortage's end", b)
	}
	l.AddShortage(time.Time{})
	if b := l.BlockedUntil(AnyPath); b.Year() != 9999 {
		t.Errorf("a shortage until the end: blocked until %s", b)
	}
}

// TestListOmit: a listing leaves out the matching VMs, or one field of
// them, in each listing method's shape; other calls are not listings.
func TestListOmit(t *testing.T) {
	list := `{"items":[{"name":"flexvm-a3u-0-g1","status":"RUNNING"},{"name":"other","status":"RUNNING"}]}`
	agg := `{"items":{"zones/us-central1-a":{"instances":[{"name":"flexvm-a3u-0-g1","status":"RUNNING"}]}}}`
	mig := `{"managedInstances":[{"instance":"https://compute.googleapis.com/compute/v1/projects/p/zones/z/instances/flexvm-a3u-0-g1","instanceStatus":"RUNNING"}]}`
	for _, tc := range []struct {
		name, field, body, want string
	}{
		{"a VM from instances.list", "", list, `{"items":[{"name":"other","status":"RUNNING"}]}`},
		{"a field from instances.list", "status", list, `{"items":[{"name":"flexvm-a3u-0-g1"},{"name":"other","status":"RUNNING"}]}`},
		{"a VM from aggregatedList", "", agg, `{"items":{"zones/us-central1-a":{"instances":[]}}}`},
		{"a VM from listManagedInstances", "", mig, `{"managedInstances":[]}`},
		{"nothing matches", "", `{"items":[{"name":"other"}]}`, `{"items":[{"name":"other"}]}`},
	} {
		o := &listOmit{vm: regexp.MustCompile("^flexvm-a3u-0-"), remaining: 1}
		if tc.field != "" {
			o.field = []string{tc.field}
		}
		out, did := o.omit([]byte(tc.body))
		var got, want any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_ = json.Unmarshal([]byte(tc.want), &want)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
		if did != (tc.want != tc.body) {
			t.Errorf("%s: omitted = %t", tc.name, did)
		}
	}
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"GET", listPath, true},
		{"GET", "/compute/v1/projects/p/aggregated/instances", true},
		{"POST", "/compute/v1/projects/p/zones/z/instanceGroupManagers/m/listManagedInstances", true},
		{"GET", listPath + "/flexvm-a3u-0-g1", false},
		{"POST", listPath, false},
	} {
		if got := listingOfVMs(tc.method, tc.path); got != tc.want {
			t.Errorf("listingOfVMs(%s %s) = %t, want %t", tc.method, tc.path, got, tc.want)
		}
	}
}

// TestListOmitWindow: a list_omit step acts on Times listings, or on every
// listing until its window ends, and describes itself for the trace.
func TestListOmitWindow(t *testing.T) {
	l := New()
	desc := l.AddListOmit(2, lang.ListOmitStep{VM: "^x$", Field: "creationTimestamp", For: lang.Duration(time.Hour)}, t0, t0.Add(time.Hour))
	if want := "list_omit list-omit-2: listings leave out field creationTimestamp of VMs ^x$ (until 2h)"; desc != want {
		t.Errorf("description = %q, want %q", desc, want)
	}
	o := l.omits[0]
	if !o.active(t0.Add(time.Hour)) || o.active(t0.Add(2*time.Hour)) || o.remaining != -1 {
		t.Errorf("window: active at 1h %t, at 2h %t, remaining %d", o.active(t0.Add(time.Hour)), o.active(t0.Add(2*time.Hour)), o.remaining)
	}
	l.AddListOmit(3, lang.ListOmitStep{VM: "^y$"}, t0, t0)
	if o := l.omits[1]; o.remaining != 1 || !o.until.IsZero() {
		t.Errorf("a list_omit without times or window acts on %d listings until %s, want 1 and no window", o.remaining, o.until)
	}
}
