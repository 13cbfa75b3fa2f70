package api_test

import (
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/store"
)

// TestListEvents: a cluster's events are listed oldest first with Google's
// field names, filtered by nodeId, jobId and type (parameters or an
// AIP-160 filter), paged by nextPageToken; a bad filter is
// INVALID_ARGUMENT naming it, an unknown cluster NOT_FOUND.
func TestListEvents(t *testing.T) {
	e := newEnv(t)
	e.create("flexvm", example(t))
	e.deliver()
	log := e.h.Store.(store.EventLog)
	at := e.h.Clock.Now().Add(time.Minute)
	more := []store.ClusterEvent{
		{Type: "VM_RUNNING", Node: "flexvm-a3u-0", VM: "flexvm-a3u-0-g1", Generation: 1, Pool: "a3u", Message: "runs"},
		{Type: "JOB_REFUSED", Job: "7", Pool: "a3u", Message: "job 7 refused"},
	}
	for i := range more {
		more[i].Cluster, more[i].Time = "flexvm", at
		more[i].ID = store.ClusterEventID("flexvm", at, "t", i)
	}
	if err := log.AddEvents(e.ctx, more); err != nil {
		t.Fatal(err)
	}
	list := func(query string) ([]map[string]any, resp) {
		t.Helper()
		r := e.do("GET", base+"/flexvm/events"+query, nil)
		if r.code != 200 {
			t.Fatalf("list events %s: HTTP %d %s", query, r.code, r.raw)
		}
		var out []map[string]any
		for _, v := range asSlice(r.body["events"]) {
			out = append(out, v.(map[string]any))
		}
		return out, r
	}
	typesOf := func(evs []map[string]any) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, str(ev, "type"))
		}
		return out
	}
	all, _ := list("")
	if got := typesOf(all); !slices.Equal(got, []string{"VM_REQUESTED", "VM_RUNNING", "JOB_REFUSED"}) {
		t.Fatalf("events: %q", got)
	}
	ev := all[1]
	if !strings.HasPrefix(str(ev, "name"), "projects/flexslurm-demo/locations/us-central1/modelDevelopmentClusters/flexvm/events/flexvm-") ||
		str(ev, "nodeId") != "flexvm-a3u-0" || str(ev, "instanceName") != "flexvm-a3u-0-g1" || str(ev, "nodePoolId") != "a3u" ||
		str(ev, "generation") != "1" || str(ev, "eventTime") == "" || str(ev, "message") != "runs" {
		t.Errorf("event fields: %v", ev)
	}
	for q, want := range map[string][]string{
		"?nodeId=flexvm-a3u-0": {"VM_REQUESTED", "VM_RUNNING"},
		"?job_id=7":            {"JOB_REFUSED"},
		"?type=VM_RUNNING":     {"VM_RUNNING"},
		"?filter=" + url.QueryEscape(`nodeId="flexvm-a3u-0" AND type="VM_REQUESTED"`): {"VM_REQUESTED"},
		"?filter=" + url.QueryEscape(`job_id = "7"`):                                  {"JOB_REFUSED"},
	} {
		got, _ := list(q)
		if !slices.Equal(typesOf(got), want) {
			t.Errorf("%s: %q, want %q", q, typesOf(got), want)
		}
	}
	// Paging: two pages of one and two.
	p1, r1 := list("?pageSize=1")
	tok := str(r1.body, "nextPageToken")
	if len(p1) != 1 || tok == "" {
		t.Fatalf("first page: %s", r1.raw)
	}
	p2, r2 := list("?pageSize=2&pageToken=" + tok)
	if !slices.Equal(typesOf(p2), []string{"VM_RUNNING", "JOB_REFUSED"}) {
		t.Fatalf("second page: %s", r2.raw)
	}
	p3, r3 := list("?pageSize=2&pageToken=" + str(r2.body, "nextPageToken"))
	if len(p3) != 0 || r3.body["nextPageToken"] != nil {
		t.Fatalf("past the end: %s", r3.raw)
	}
	// Refusals.
	for q, field := range map[string]string{
		"?type=VM_EXPLODED": "type",
		"?filter=" + url.QueryEscape(`zone="us-central1-a"`): "filter",
		"?filter=" + url.QueryEscape(`nodeId ~ "x"`):         "filter",
		"?nodeId=a&filter=" + url.QueryEscape(`nodeId="b"`):  "filter",
		"?pageToken=bm9wZQ": "pageToken",
		"?node=x":           "node",
	} {
		r := e.do("GET", base+"/flexvm/events"+q, nil)
		vs := wantError(t, r, 400, "INVALID_ARGUMENT")
		if !slices.Contains(fields(vs), field) {
			t.Errorf("%s: violations %v, want one on %s", q, fields(vs), field)
		}
	}
	wantError(t, e.do("GET", base+"/nosuch/events", nil), 404, "NOT_FOUND")
	wantError(t, e.do("POST", base+"/flexvm/events", nil), 404, "NOT_FOUND")
}

// TestMetricsEndpoint: /metrics serves the example cluster's gauges and
// event counts in the Prometheus text format, under the names the
// log-based metrics carry.
func TestMetricsEndpoint(t *testing.T) {
	e := newEnv(t)
	e.create("flexvm", example(t))
	e.deliver()
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil).WithContext(e.ctx))
	out := w.Body.String()
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("GET /metrics: HTTP %d %q\n%s", w.Code, w.Header().Get("Content-Type"), out)
	}
	for _, want := range []string{
		`flexslurm_nodes{cluster="flexvm",pool="a3u",state="requested"} 1`,
		`flexslurm_static_shortfall{cluster="flexvm",pool="a3u"} 1`,
		`flexslurm_queued_requests{cluster="flexvm",pool="a3u"} 1`,
		`flexslurm_cluster_events_total{cluster="flexvm",pool="a3u",type="VM_REQUESTED"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// TestListEventsHealthCheckHook: a failed check's hook is served as
// healthCheckHook; an event without one has no such field.
func TestListEventsHealthCheckHook(t *testing.T) {
	e := newEnv(t)
	e.create("flexvm", example(t))
	e.deliver()
	at := e.h.Clock.Now().Add(time.Minute)
	failed := store.ClusterEvent{ID: store.ClusterEventID("flexvm", at, "t", 0), Cluster: "flexvm", Time: at, Type: "HEALTH_CHECK_FAILED",
		Node: "flexvm-a3u-0", Pool: "a3u", Message: "prolog health check failed on flexvm-a3u-0-g1: Xid 79", Check: "prolog"}
	if err := e.h.Store.(store.EventLog).AddEvents(e.ctx, []store.ClusterEvent{failed}); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/v1beta1/projects/flexslurm-demo/locations/us-central1/modelDevelopmentClusters/flexvm/events", nil)
	evs := asSlice(r.body["events"])
	if r.code != 200 || len(evs) != 2 {
		t.Fatalf("HTTP %d %s", r.code, r.raw)
	}
	requested, hc := evs[0].(map[string]any), evs[1].(map[string]any)
	if str(hc, "type") != "HEALTH_CHECK_FAILED" || str(hc, "healthCheckHook") != "prolog" || requested["healthCheckHook"] != nil {
		t.Errorf("events %v", evs)
	}
}
