package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/shared/api"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

const (
	project = "flexslurm-demo" // examples/cluster_config.json's
	base    = "/v1beta1/projects/" + project + "/locations/us-central1/modelDevelopmentClusters"
)

// queue is Pub/Sub between the API and ScaleUp: what the API publishes
// waits until the test delivers it (as a push subscription would).
type queue struct {
	mu   sync.Mutex
	msgs []harness.Message
	fail error
}

func (q *queue) Publish(_ context.Context, topic string, data []byte, attrs map[string]string) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail != nil {
		return "", q.fail
	}
	q.msgs = append(q.msgs, harness.Message{Topic: topic, Data: append([]byte(nil), data...), Attrs: attrs})
	return "q", nil
}

type env struct {
	t     *testing.T
	ctx   context.Context
	h     *harness.Harness
	q     *queue
	state *store.MemoryAPIState
	srv   *api.Server
	now   time.Time
	// bodies holds every response body the API returned.
	bodies []string
}

// settings are node settings naming a munge-key secret, a service account
// and an NFS server: none of it may appear in a response.
func settings(c *spec.Cluster) nodeconfig.Settings {
	s := harness.NodeSettings(c)
	s.MungeKeySecret = "projects/" + c.Project + "/secrets/topsecret-munge/versions/latest"
	s.ServiceAccount = "hidden-node-sa@" + c.Project + ".iam.gserviceaccount.com"
	s.Home.Source = "10.9.8.7:/export/home"
	return s
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h, err := harness.New(ctx, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	e := &env{t: t, ctx: ctx, h: h, q: &queue{}, state: store.NewMemoryAPIState(), now: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	e.srv = api.New(api.Deps{
		Store: h.Store, State: e.state, Publisher: e.q, Project: project,
		NodeSettings: func(_ context.Context, c *spec.Cluster) (nodeconfig.Settings, error) { return settings(c), nil },
		Repair:       api.RunnerRepair(h.Runner),
		Now:          func() time.Time { return e.now },
		StateNow:     h.Clock.Now,
		Log:          slog.New(slog.DiscardHandler),
	})
	return e
}

func example(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type resp struct {
	code int
	body map[string]any
	raw  string
}

func (e *env) do(method, path string, body []byte) resp {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r).WithContext(e.ctx)
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, req)
	out := resp{code: w.Code, raw: w.Body.String()}
	e.bodies = append(e.bodies, out.raw)
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		e.t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out.body); err != nil {
		e.t.Fatalf("%s %s: response is not a JSON object: %v\n%s", method, path, err, out.raw)
	}
	return out
}

// deliver hands every queued spec to ScaleUp.
func (e *env) deliver() {
	e.t.Helper()
	e.q.mu.Lock()
	msgs := e.q.msgs
	e.q.msgs = nil
	e.q.mu.Unlock()
	for _, m := range msgs {
		if m.Topic != config.TopicClusterSpec {
			e.t.Fatalf("published to %s, want %s", m.Topic, config.TopicClusterSpec)
		}
		if err := e.h.Deliver(e.ctx, m.Topic, e.h.NewID(), m.Data); err != nil {
			e.t.Fatalf("ScaleUp: %v", err)
		}
	}
}

func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, k := range path {
		mm, _ := cur.(map[string]any)
		cur = mm[k]
	}
	s, _ := cur.(string)
	return s
}

// wantError checks Google's HTTP error shape: {"error": {code, message,
// status, details}}; it returns the field violations.
func wantError(t *testing.T, r resp, httpCode int, status string) []map[string]any {
	t.Helper()
	if r.code != httpCode {
		t.Fatalf("HTTP %d, want %d: %s", r.code, httpCode, r.raw)
	}
	e, ok := r.body["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object: %s", r.raw)
	}
	if e["status"] != status || e["code"] != float64(httpCode) || str(e, "message") == "" {
		t.Fatalf("error %v, want status %s code %d and a message", e, status, httpCode)
	}
	var vs []map[string]any
	for _, d := range asSlice(e["details"]) {
		dm := d.(map[string]any)
		if dm["@type"] != "type.googleapis.com/google.rpc.BadRequest" {
			t.Fatalf("detail @type %v", dm["@type"])
		}
		for _, v := range asSlice(dm["fieldViolations"]) {
			vs = append(vs, v.(map[string]any))
		}
	}
	return vs
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func fields(vs []map[string]any) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v["field"].(string))
	}
	return out
}

var opName = regexp.MustCompile(`^projects/flexslurm-demo/locations/us-central1/operations/[0-9]+$`)

// create creates the example cluster under id and returns its operation.
func (e *env) create(id string, body []byte) map[string]any {
	e.t.Helper()
	r := e.do("POST", base+"?model_development_cluster_id="+id, body)
	if r.code != 200 {
		e.t.Fatalf("create: HTTP %d: %s", r.code, r.raw)
	}
	return r.body
}

func (e *env) operation(op map[string]any) map[string]any {
	e.t.Helper()
	r := e.do("GET", "/v1/"+str(op, "name"), nil)
	if r.code != 200 {
		e.t.Fatalf("operations.get: HTTP %d: %s", r.code, r.raw)
	}
	return r.body
}

func TestCreateOperationGetList(t *testing.T) {
	e := newEnv(t)
	op := e.create("flexvm", example(t))
	if !opName.MatchString(str(op, "name")) || op["done"] != nil {
		t.Fatalf("create returned %v: want a pending operation named projects/P/locations/L/operations/N", op)
	}
	if got := str(op, "metadata", "@type"); got != "type.googleapis.com/google.cloud.aiplatform.v1beta1.CreateModelDevelopmentClusterOperationMetadata" {
		t.Fatalf("metadata @type %q", got)
	}
	// Before ScaleUp applies it: pending, and the cluster is PROVISIONING.
	if got := e.operation(op); got["done"] != nil {
		t.Fatalf("operation done before ScaleUp applied the spec: %v", got)
	}
	if g := e.do("GET", base+"/flexvm", nil); g.code != 200 || str(g.body, "clusterStatus", "state") != "PROVISIONING" {
		t.Fatalf("get before apply: HTTP %d %s", g.code, g.raw)
	}
	e.deliver()
	done := e.operation(op)
	if done["done"] != true || done["error"] != nil {
		t.Fatalf("operation after ScaleUp applied the spec: %v", done)
	}
	res := done["response"].(map[string]any)
	if res["@type"] != "type.googleapis.com/google.cloud.aiplatform.v1beta1.ModelDevelopmentCluster" ||
		res["name"] != "projects/flexslurm-demo/locations/us-central1/modelDevelopmentClusters/flexvm" {
		t.Fatalf("response %v", res)
	}
	g := e.do("GET", base+"/flexvm", nil)
	if g.code != 200 || str(g.body, "clusterStatus", "state") != "RUNNING" || str(g.body, "displayName") != "flexvm" {
		t.Fatalf("get: HTTP %d %s", g.code, g.raw)
	}
	pools := asSlice(g.body["nodePools"])
	if len(pools) != 2 || str(pools[1].(map[string]any), "flexStartMaxDuration") != "604800s" ||
		str(pools[1].(map[string]any), "effectiveFlexStartMaxDuration") != "604800s" {
		t.Fatalf("nodePools in JSON names: %v", pools)
	}
	if strings.Contains(g.raw, "node_pools") || strings.Contains(g.raw, "scaling_spec") {
		t.Fatalf("response uses proto names, want JSON names: %s", g.raw)
	}
	ns := asSlice(g.body["clusterStatus"].(map[string]any)["nodesStatus"])
	if len(ns) != 1 || str(ns[0].(map[string]any), "nodeId") != "flexvm-a3u-0" || str(ns[0].(map[string]any), "nodeState") != "PREPARING" {
		t.Fatalf("nodesStatus: want the static node preparing, got %v", ns)
	}
	l := e.do("GET", base, nil)
	if l.code != 200 || len(asSlice(l.body["modelDevelopmentClusters"])) != 1 || l.body["nextPageToken"] != nil {
		t.Fatalf("list: %s", l.raw)
	}
}

// camelCase rewrites every key of a JSON document to its JSON name.
func camelCase(t *testing.T, b []byte) []byte {
	t.Helper()
	re := regexp.MustCompile(`"([A-Za-z]+)_([a-z])([A-Za-z_]*)"(\s*):`)
	for re.Match(b) {
		b = re.ReplaceAllFunc(b, func(m []byte) []byte {
			s := re.FindSubmatch(m)
			return []byte(`"` + string(s[1]) + strings.ToUpper(string(s[2])) + string(s[3]) + `"` + string(s[4]) + `:`)
		})
	}
	return b
}

func TestCreateAcceptsBothCasings(t *testing.T) {
	e := newEnv(t)
	camel := camelCase(t, example(t))
	if bytes.Contains(camel, []byte("node_pools")) || !bytes.Contains(camel, []byte("nodePools")) || !bytes.Contains(camel, []byte("bootDiskSizeGb")) {
		t.Fatalf("camelCase: %s", camel)
	}
	e.create("flexvm", camel)
	e.create("second", example(t))
	e.deliver()
	a := e.do("GET", base+"/flexvm", nil)
	b := e.do("GET", base+"/second", nil)
	if a.code != 200 || b.code != 200 {
		t.Fatalf("get: %s / %s", a.raw, b.raw)
	}
	if !equalJSON(a.body["nodePools"], b.body["nodePools"]) || !equalJSON(a.body["orchestratorSpec"], b.body["orchestratorSpec"]) {
		t.Fatalf("the same spec in both casings gave different clusters:\n%s\n%s", a.raw, b.raw)
	}
	// Query parameters too.
	l := e.do("GET", base+"?page_size=1", nil)
	if l.code != 200 || len(asSlice(l.body["modelDevelopmentClusters"])) != 1 || l.body["nextPageToken"] == nil {
		t.Fatalf("page_size=1: %s", l.raw)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestCreateValidationNamesEveryField(t *testing.T) {
	e := newEnv(t)
	var c map[string]any
	if err := json.Unmarshal(example(t), &c); err != nil {
		t.Fatal(err)
	}
	pools := c["node_pools"].([]any)
	pools[1].(map[string]any)["scaling_spec"] = map[string]any{"min_node_count": 2, "max_node_count": 1}
	pools[1].(map[string]any)["flex_start_max_duration"] = "9999999s"
	c["nodePools"] = pools // camelCase: the same paths in violations
	delete(c, "node_pools")
	bad, _ := json.Marshal(c)
	vs := wantError(t, e.do("POST", base+"?modelDevelopmentClusterId=flexvm", bad), 400, "INVALID_ARGUMENT")
	got := strings.Join(fields(vs), " ")
	for _, want := range []string{"nodePools[1].flexStartMaxDuration", "nodePools[1].scalingSpec"} {
		if !strings.Contains(got, want) {
			t.Errorf("violations %q do not name %s", got, want)
		}
	}
	for _, v := range vs {
		if v["description"] == "" {
			t.Errorf("violation %v without a description", v)
		}
	}
	for _, tc := range []struct{ query, field string }{
		{"", "modelDevelopmentClusterId"},
		{"?modelDevelopmentClusterId=Flex-VM", "modelDevelopmentClusterId"},
		{"?modelDevelopmentClusterId=flexvm&bogus=1", "bogus"},
		{"?modelDevelopmentClusterId=flexvm&pageSize=3", "pageSize"},
	} {
		vs := wantError(t, e.do("POST", base+tc.query, example(t)), 400, "INVALID_ARGUMENT")
		if f := fields(vs); len(f) != 1 || f[0] != tc.field {
			t.Errorf("%s: violations %v, want %s", tc.query, f, tc.field)
		}
	}
	// A name in the body that is another cluster's.
	other := bytes.Replace(example(t), []byte("modelDevelopmentClusters/\""), []byte("modelDevelopmentClusters/other\""), 1)
	vs = wantError(t, e.do("POST", base+"?modelDevelopmentClusterId=flexvm", other), 400, "INVALID_ARGUMENT")
	if f := fields(vs); len(f) != 1 || f[0] != "name" {
		t.Errorf("violations %v, want name", f)
	}
	wantError(t, e.do("POST", base+"?modelDevelopmentClusterId=flexvm", []byte("{not json")), 400, "INVALID_ARGUMENT")
	if len(e.q.msgs) != 0 {
		t.Fatalf("an invalid request published %d spec(s)", len(e.q.msgs))
	}
}

func TestCreateExistingIsAlreadyExists(t *testing.T) {
	e := newEnv(t)
	e.create("flexvm", example(t))
	wantError(t, e.do("POST", base+"?modelDevelopmentClusterId=flexvm", example(t)), 409, "ALREADY_EXISTS")
	e.deliver()
	wantError(t, e.do("POST", base+"?modelDevelopmentClusterId=flexvm", example(t)), 409, "ALREADY_EXISTS")
}

func TestNotFound(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ method, path string }{
		{"GET", base + "/nosuch"},
		{"PATCH", base + "/nosuch"},
		{"DELETE", base + "/nosuch"},
		{"POST", base + "/nosuch:reportFaultyNodes"},
		{"GET", "/v1/projects/flexslurm-demo/locations/us-central1/operations/123"},
		{"GET", "/v1beta1/projects/another/locations/us-central1/modelDevelopmentClusters"},
		{"GET", "/v1beta1/projects/flexslurm-demo/locations/us-central1/somethingElse"},
		{"PUT", base + "/flexvm"},
		{"GET", base + "/flexvm:frobnicate"},
		{"GET", base + "/a%2Fb"},
	} {
		body := []byte(`{"nodeActions":[{"nodeId":"nosuch-a3u-0"}]}`)
		if tc.method == "PATCH" {
			body = example(t)
		}
		wantError(t, e.do(tc.method, tc.path, body), 404, "NOT_FOUND")
	}
	// A cluster of another location is not this location's.
	e.create("flexvm", example(t))
	e.deliver()
	wantError(t, e.do("GET", "/v1beta1/projects/flexslurm-demo/locations/europe-west4/modelDevelopmentClusters/flexvm", nil), 404, "NOT_FOUND")
}

func TestListPaging(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"c1", "c2", "c3"} {
		e.create(id, example(t))
	}
	e.deliver()
	var names []string
	token := ""
	for page := 0; ; page++ {
		if page > 3 {
			t.Fatal("paging does not end")
		}
		q := "?pageSize=2"
		if token != "" {
			q += "&pageToken=" + token
		}
		r := e.do("GET", base+q, nil)
		if r.code != 200 {
			t.Fatalf("list: %s", r.raw)
		}
		items := asSlice(r.body["modelDevelopmentClusters"])
		if len(items) > 2 {
			t.Fatalf("page of %d, pageSize 2", len(items))
		}
		for _, it := range items {
			names = append(names, str(it.(map[string]any), "name"))
		}
		token = str(r.body, "nextPageToken")
		if token == "" {
			break
		}
	}
	if len(names) != 3 || !strings.HasSuffix(names[0], "/c1") || !strings.HasSuffix(names[2], "/c3") {
		t.Fatalf("listed %v, want c1 c2 c3 once each", names)
	}
	for _, q := range []string{"?pageSize=-1", "?pageSize=x", "?pageToken=bm9wZQ", "?pageToken=%%%"} {
		r := e.do("GET", base+q, nil)
		if r.code != 400 {
			t.Errorf("%s: HTTP %d, want 400: %s", q, r.code, r.raw)
		}
	}
	// A page size beyond the maximum is coerced (AIP-158), not refused.
	if r := e.do("GET", base+"?pageSize=5000", nil); r.code != 200 || len(asSlice(r.body["modelDevelopmentClusters"])) != 3 {
		t.Fatalf("pageSize=5000: %s", r.raw)
	}
}

func TestUpdateWholeResourceAndMask(t *testing.T) {
	e := newEnv(t)
	e.create("flexvm", example(t))
	e.deliver()
	// The whole resource, as get returns it, with a new maximum.
	g := e.do("GET", base+"/flexvm", nil)
	pools := asSlice(g.body["nodePools"])
	pools[1].(map[string]any)["scalingSpec"] = map[string]any{"minNodeCount": 1, "maxNodeCount": 5}
	upd, _ := json.Marshal(g.body)
	r := e.do("PATCH", base+"/flexvm", upd)
	if r.code != 200 || !strings.HasSuffix(str(r.body, "metadata", "@type"), "UpdateModelDevelopmentClusterOperationMetadata") {
		t.Fatalf("update: %s", r.raw)
	}
	if got := e.do("GET", base+"/flexvm", nil); str(got.body, "clusterStatus", "state") != "UPDATING" {
		t.Fatalf("state while the update is pending: %s", got.raw)
	}
	e.deliver()
	if op := e.operation(r.body); op["done"] != true {
		t.Fatalf("update operation: %v", op)
	}
	st, err := e.h.Store.Read(e.ctx, store.Scope{Cluster: "flexvm", PoolRecords: []string{"a3u"}})
	if err != nil || st.Pools["a3u"] == nil || st.Pools["a3u"].MaxNodes != 5 {
		t.Fatalf("pool a3u after update: %+v %v", st.Pools["a3u"], err)
	}
	// An update mask: only node_pools is taken from the body.
	pools[1].(map[string]any)["scalingSpec"] = map[string]any{"minNodeCount": 1, "maxNodeCount": 4}
	maskBody, _ := json.Marshal(map[string]any{"nodePools": pools, "displayName": "ignored"})
	r = e.do("PATCH", base+"/flexvm?updateMask=nodePools&updateMode=USER_AND_SERVICE", maskBody)
	if r.code != 200 {
		t.Fatalf("masked update: %s", r.raw)
	}
	e.deliver()
	g = e.do("GET", base+"/flexvm", nil)
	if str(g.body, "displayName") != "flexvm" || asSlice(g.body["nodePools"])[1].(map[string]any)["scalingSpec"].(map[string]any)["maxNodeCount"] != float64(4) {
		t.Fatalf("after masked update: %s", g.raw)
	}
	// Immutable fields, masks and modes it does not take.
	net := bytes.Replace(example(t), []byte("networks/default"), []byte("networks/other"), 1)
	if f := fields(wantError(t, e.do("PATCH", base+"/flexvm", net), 400, "INVALID_ARGUMENT")); len(f) != 1 || f[0] != "network" {
		t.Errorf("network change: violations %v", f)
	}
	if f := fields(wantError(t, e.do("PATCH", base+"/flexvm?updateMask=orchestrator_spec.slurm_spec.prolog_bash_scripts", maskBody), 400, "INVALID_ARGUMENT")); len(f) != 1 || f[0] != "updateMask" {
		t.Errorf("unsupported mask: violations %v", f)
	}
	if f := fields(wantError(t, e.do("PATCH", base+"/flexvm?updateMode=SOMETIMES", example(t)), 400, "INVALID_ARGUMENT")); len(f) != 1 || f[0] != "updateMode" {
		t.Errorf("bad mode: violations %v", f)
	}
}

func TestUpdateSupersedesPending(t *testing.T) {
	e := newEnv(t)
	first := e.create("flexvm", example(t))
	e.deliver()
	e.operation(first)
	a := e.do("PATCH", base+"/flexvm", bytes.Replace(example(t), []byte(`"max_node_count": 3`), []byte(`"max_node_count": 4`), 1))
	b := e.do("PATCH", base+"/flexvm", bytes.Replace(example(t), []byte(`"max_node_count": 3`), []byte(`"max_node_count": 5`), 1))
	if a.code != 200 || b.code != 200 {
		t.Fatalf("updates: %s %s", a.raw, b.raw)
	}
	e.deliver()
	opA, opB := e.operation(a.body), e.operation(b.body)
	if opA["done"] != true || opA["error"].(map[string]any)["code"] != float64(10) {
		t.Fatalf("superseded update: want done with ABORTED (10), got %v", opA)
	}
	if opB["done"] != true || opB["error"] != nil {
		t.Fatalf("latest update: %v", opB)
	}
}

func TestOperationDeadlineIsAnError(t *testing.T) {
	e := newEnv(t)
	op := e.create("flexvm", example(t))
	e.q.msgs = nil // ScaleUp never sees it
	e.now = e.now.Add(16 * time.Minute)
	got := e.operation(op)
	er, _ := got["error"].(map[string]any)
	if got["done"] != true || er == nil || er["code"] != float64(4) || str(er, "message") == "" {
		t.Fatalf("operation past its deadline: %v", got)
	}
}

func TestPublishFailureIsUnavailable(t *testing.T) {
	e := newEnv(t)
	e.q.fail = io.ErrClosedPipe
	wantError(t, e.do("POST", base+"?modelDevelopmentClusterId=flexvm", example(t)), 503, "UNAVAILABLE")
	for _, op := range e.state.Operations() {
		if !op.Done || op.ErrorCode != 14 {
			t.Fatalf("operation of a failed publish: %+v", op)
		}
	}
}

// runStatic brings the example's static node up (its VM running).
func (e *env) runStatic() {
	e.t.Helper()
	e.create("flexvm", example(e.t))
	e.deliver()
	for i := 0; i < 20; i++ {
		st, err := e.h.Store.Read(e.ctx, store.Scope{Cluster: "flexvm", AllPools: true})
		if err != nil {
			e.t.Fatal(err)
		}
		if n := st.Nodes["flexvm-a3u-0"]; n != nil && n.Phase == model.PhaseRunning {
			return
		}
		if err := e.h.Advance(e.ctx, 10*time.Minute); err != nil {
			e.t.Fatal(err)
		}
		if err := e.h.Tick(e.ctx); err != nil {
			e.t.Fatal(err)
		}
	}
	e.t.Fatal("the static node never ran")
}

func TestReportFaultyNodesStartsRepair(tt *testing.T) {
	e := newEnv(tt)
	e.runStatic()
	e.h.Publisher.Take(config.TopicSlurmCommands)
	r := e.do("POST", base+"/flexvm:reportFaultyNodes", []byte(`{"nodeActions": [{"nodeId": "flexvm-a3u-0"}]}`))
	if r.code != 200 || r.body["done"] != true || r.body["error"] != nil {
		tt.Fatalf("reportFaultyNodes: %s", r.raw)
	}
	st, err := e.h.Store.Read(e.ctx, store.Scope{Cluster: "flexvm", AllPools: true})
	if err != nil {
		tt.Fatal(err)
	}
	if n := st.Nodes["flexvm-a3u-0"]; n.Repair == "" {
		tt.Fatalf("node after reportFaultyNodes: no repair under way: %+v", n)
	}
	if cmds := e.h.Publisher.Take(config.TopicSlurmCommands); len(cmds) == 0 || !bytes.Contains(cmds[0].Data, []byte("flexvm-a3u-0")) {
		tt.Fatalf("no Slurm command drains the node: %v", cmds)
	}
	g := e.do("GET", base+"/flexvm", nil)
	if ns := asSlice(g.body["clusterStatus"].(map[string]any)["nodesStatus"]); str(ns[0].(map[string]any), "nodeState") != "REPAIRING" {
		tt.Fatalf("nodesStatus after reportFaultyNodes: %v", ns)
	}
	// snake_case, reportFaultyHost reasons, and the errors.
	r = e.do("POST", base+"/flexvm:reportFaultyNodes", []byte(`{"node_actions": [{"node_id": "flexvm-a3u-0", "report_faulty_host": {"fault_reasons": [{"behavior": "OVERHEATING"}]}}]}`))
	if f := fields(wantError(tt, r, 400, "INVALID_ARGUMENT")); len(f) != 1 || f[0] != "nodeActions[0].reportFaultyHost.faultReasons[0].behavior" {
		tt.Fatalf("violations %v", f)
	}
	if f := fields(wantError(tt, e.do("POST", base+"/flexvm:reportFaultyNodes", []byte(`{"nodeActions": [{"nodeId": "other-a3u-0"}]}`)), 400, "INVALID_ARGUMENT")); len(f) != 1 || f[0] != "nodeActions[0].nodeId" {
		tt.Fatalf("violations %v", f)
	}
	wantError(tt, e.do("POST", base+"/flexvm:reportFaultyNodes", []byte(`{"nodeActions": []}`)), 400, "INVALID_ARGUMENT")
	wantError(tt, e.do("POST", base+"/flexvm:reportFaultyNodes", []byte(`{"nodeActions": [{"nodeId": "flexvm-a3u-2"}]}`)), 404, "NOT_FOUND")
}

func TestDeleteReleasesEveryNode(tt *testing.T) {
	e := newEnv(tt)
	e.runStatic()
	r := e.do("DELETE", base+"/flexvm", nil)
	if r.code != 200 || !strings.HasSuffix(str(r.body, "metadata", "@type"), "DeleteOperationMetadata") {
		tt.Fatalf("delete: %s", r.raw)
	}
	if g := e.do("GET", base+"/flexvm", nil); str(g.body, "clusterStatus", "state") != "STOPPING" {
		tt.Fatalf("state while deleting: %s", g.raw)
	}
	wantError(tt, e.do("PATCH", base+"/flexvm", example(tt)), 400, "FAILED_PRECONDITION")
	e.deliver()
	var op map[string]any
	for i := 0; ; i++ {
		op = e.operation(r.body)
		if op["done"] == true {
			break
		}
		if i == 20 {
			tt.Fatalf("delete never completed: %v", op)
		}
		if err := e.h.Advance(e.ctx, 10*time.Minute); err != nil {
			tt.Fatal(err)
		}
		if err := e.h.Tick(e.ctx); err != nil {
			tt.Fatal(err)
		}
	}
	if op["error"] != nil || str(op, "response", "@type") != "type.googleapis.com/google.protobuf.Empty" {
		tt.Fatalf("delete operation: %v", op)
	}
	if vms := e.h.VMs(); len(vms) != 0 {
		tt.Fatalf("VMs left after delete: %v", vms)
	}
	wantError(tt, e.do("GET", base+"/flexvm", nil), 404, "NOT_FOUND")
	if l := e.do("GET", base, nil); len(asSlice(l.body["modelDevelopmentClusters"])) != 0 {
		tt.Fatalf("list after delete: %s", l.raw)
	}
	// The id may be created again.
	e.create("flexvm", example(tt))
}

// TestResponsesCarryNoSecret runs every method and checks that no response
// names the munge key's secret, the node service account or the home NFS
// server of the deployment's node settings.
func TestResponsesCarryNoSecret(tt *testing.T) {
	e := newEnv(tt)
	e.runStatic()
	g := e.do("GET", base+"/flexvm", nil)
	upd, _ := json.Marshal(g.body)
	e.operation(e.do("PATCH", base+"/flexvm", upd).body)
	e.do("GET", base, nil)
	e.do("POST", base+"/flexvm:reportFaultyNodes", []byte(`{"nodeActions": [{"nodeId": "flexvm-a3u-0"}]}`))
	e.operation(e.do("DELETE", base+"/flexvm", nil).body)
	if len(e.bodies) < 8 {
		tt.Fatalf("only %d responses", len(e.bodies))
	}
	// The state holds them (the check can fail).
	st, _ := e.h.Store.Read(e.ctx, store.Scope{Cluster: "flexvm"})
	if !strings.Contains(st.Cluster.Node.MungeKeySecret, "topsecret-munge") {
		tt.Fatalf("the cluster record does not hold the node settings: %+v", st.Cluster.Node)
	}
	for _, b := range e.bodies {
		for _, secret := range []string{"topsecret-munge", "secrets/", "hidden-node-sa", "10.9.8.7", "munge"} {
			if strings.Contains(b, secret) {
				tt.Fatalf("a response contains %q:\n%s", secret, b)
			}
		}
	}
}

// An update sent before ScaleUp applied the create replaces it: the
// cluster stays visible (PROVISIONING), the create ends ABORTED, the
// update completes.
func TestUpdateBeforeCreateApplied(t *testing.T) {
	e := newEnv(t)
	create := e.create("flexvm", example(t))
	upd := e.do("PATCH", base+"/flexvm", bytes.Replace(example(t), []byte(`"max_node_count": 3`), []byte(`"max_node_count": 2`), 1))
	if upd.code != 200 {
		t.Fatalf("update: %s", upd.raw)
	}
	if g := e.do("GET", base+"/flexvm", nil); g.code != 200 || str(g.body, "clusterStatus", "state") != "PROVISIONING" {
		t.Fatalf("get between: %s", g.raw)
	}
	e.deliver()
	if op := e.operation(create); op["done"] != true || op["error"].(map[string]any)["code"] != float64(10) {
		t.Fatalf("create: %v", op)
	}
	if op := e.operation(upd.body); op["done"] != true || op["error"] != nil {
		t.Fatalf("update: %v", op)
	}
	g := e.do("GET", base+"/flexvm", nil)
	if asSlice(g.body["nodePools"])[1].(map[string]any)["scalingSpec"].(map[string]any)["maxNodeCount"] != float64(2) {
		t.Fatalf("after: %s", g.raw)
	}
}

// TestReportFaultyNodesRepairsANodeAtItsLimit: a node left drained for an
// operator at its repair limit shows ERROR and why; the operator's
// reportFaultyNodes repairs it (plan.RepairByOperator), which a node's own
// report would not.
func TestReportFaultyNodesRepairsANodeAtItsLimit(tt *testing.T) {
	e := newEnv(tt)
	e.runStatic()
	err := e.h.Store.Update(e.ctx, store.Scope{Cluster: "flexvm", AllPools: true}, func(st *model.State) error {
		n := st.Nodes["flexvm-a3u-0"]
		n.Repair, n.RepairSince, n.RepairReason = model.RepairLimit, time.Now(), "health check failed: GPU 3: 2 uncorrectable ECC errors"
		n.RepairCount, n.RepairCountSince = 3, time.Now().Add(-time.Hour)
		return nil
	})
	if err != nil {
		tt.Fatal(err)
	}
	g := e.do("GET", base+"/flexvm", nil)
	ns := asSlice(g.body["clusterStatus"].(map[string]any)["nodesStatus"])
	if n := ns[0].(map[string]any); str(n, "nodeState") != "ERROR" || !strings.Contains(str(n, "detail"), "repair limit reached (3 repairs since") {
		tt.Fatalf("nodesStatus of a node at its repair limit: %v", ns)
	}
	e.h.Publisher.Take(config.TopicSlurmCommands)
	r := e.do("POST", base+"/flexvm:reportFaultyNodes", []byte(`{"nodeActions": [{"nodeId": "flexvm-a3u-0"}]}`))
	if r.code != 200 || r.body["done"] != true || r.body["error"] != nil {
		tt.Fatalf("reportFaultyNodes: %s", r.raw)
	}
	st, err := e.h.Store.Read(e.ctx, store.Scope{Cluster: "flexvm", AllPools: true})
	if err != nil {
		tt.Fatal(err)
	}
	if n := st.Nodes["flexvm-a3u-0"]; n.Repair == model.RepairLimit || n.Repair == model.RepairNone {
		tt.Fatalf("node after the operator's report: repair %q, want one under way", n.Repair)
	}
}
