// Package api is flexslurm's REST front door: the modelDevelopmentClusters
// surface of Google's managed Slurm service ("training clusters"), for the
// clusters flexslurm manages, served by one HTTP function (entry point API,
// functions/api) and by `flexslurm local`.
//
// It serves, under /v1beta1/projects/P/locations/L:
//
//	POST   modelDevelopmentClusters?modelDevelopmentClusterId=ID   create (body: cluster_config.json)
//	GET    modelDevelopmentClusters?pageSize=N&pageToken=T          list
//	GET    modelDevelopmentClusters/ID                              get
//	PATCH  modelDevelopmentClusters/ID[?updateMask=…&updateMode=…]  update (the whole resource)
//	DELETE modelDevelopmentClusters/ID                              delete
//	POST   modelDevelopmentClusters/ID:reportFaultyNodes            repair the named nodes
//
// and operations.get under /v1 (as Google's pages poll it) and /v1beta1:
//
//	GET    /v1/projects/P/locations/L/operations/OP
//
// Every mutation returns a google.longrunning.Operation. Create and update
// publish the spec as `flexslurm apply` always has (a cluster.applied event
// on the cluster-spec topic, which ScaleUp applies); the operation is done
// once the cluster's record holds that spec. Delete publishes the cluster's
// spec without its Flex-Start pools, which ScaleUp marks removed: idle
// nodes are released at once, busy ones when their jobs end, and each
// pool's MIGs are deleted once empty; the operation is done when no node
// of the cluster holds a VM, after Deps.Teardown (flexslurm teardown's
// code) removed what is left. reportFaultyNodes starts flexslurm's health
// repair of each named node (shared/plan.Repair), as a failed health check
// does. Operations are stored in Firestore (store.APIState), so any
// instance answers operations.get; whether one is done is decided when it
// is read.
//
// Requests take field names in snake_case or lowerCamelCase; responses use
// lowerCamelCase; errors are google.rpc.Status in Google's HTTP mapping,
// INVALID_ARGUMENT naming every offending field in a google.rpc.BadRequest.
// docs/api.md cites the sources of every shape.
//
// The handler does not authenticate: deployed, Cloud Run admits only
// callers with the invoker role (deploy/); locally it is unauthenticated.
// Nothing it returns is read from the deployment's node settings, which
// name the munge key's secret.
package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/inputs"
	"github.com/flexslurm/flexslurm/shared/metrics"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Publisher publishes a Pub/Sub message (shared/pubsub).
type Publisher interface {
	Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) (string, error)
}

// FaultyNode is one node of a reportFaultyNodes request.
type FaultyNode struct {
	// Node is the Slurm node name, CLUSTER-POOL-INDEX.
	Node string
	// Host is true for a reportFaultyHost action; Reasons are its
	// faultReasons as "BEHAVIOR: description".
	Host    bool
	Reasons []string
}

// Deps are the server's dependencies.
type Deps struct {
	// Store holds the functions' records (read, never written here).
	Store store.Store
	// State holds the operations and the API's own cluster records.
	State store.APIState
	// Publisher publishes cluster.applied events to Topic.
	Publisher Publisher
	// Topic is the topic ScaleUp reads specs from; default
	// config.TopicClusterSpec.
	Topic string
	// Project is the project this deployment serves: a path naming
	// another is NOT_FOUND.
	Project string
	// NodeSettings returns the deployment's node settings for a spec,
	// images resolved (instancetemplate.Resolve), as `flexslurm apply`
	// sends them.
	NodeSettings func(ctx context.Context, c *spec.Cluster) (nodeconfig.Settings, error)
	// Repair starts the repair of one node (plan.Repair through the
	// runner); opID scopes its idempotency. An error wrapping
	// ErrRepairRefused is the decision's refusal (FAILED_PRECONDITION).
	Repair func(ctx context.Context, cluster string, n FaultyNode, opID string) error
	// Teardown, when set, removes what a deleted cluster left in Compute
	// (templates, empty MIGs) once no node holds a VM; nil: nothing
	// beyond what ScaleUp and the reconciler remove.
	Teardown func(ctx context.Context, cluster string) error
	// Now is the wall clock of operations; default time.Now.
	Now func() time.Time
	// StateNow is the clock of the functions' records (the local
	// system's runs faster), shown by the status page; default Now.
	StateNow func() time.Time
	// ApplyDeadline bounds how long a create or update may wait for
	// ScaleUp to apply its spec before the operation fails
	// (DEADLINE_EXCEEDED); default 15 minutes.
	ApplyDeadline time.Duration
	// Log receives one line per request; default slog.Default().
	Log *slog.Logger
	// Events lists the clusters' events; nil takes Store when it is a
	// store.EventLog (Firestore and Memory are).
	Events store.EventLog
	// Latencies, when set, returns the decision latencies the functions
	// logged, by cluster and flow, for /metrics (the local system's:
	// LogLatencies). Deployed, the log-based metric
	// flexslurm_decision_latency_seconds serves them.
	Latencies func() ([]metrics.Histogram, error)
	// DeadLetters, when set, measures the dead-letter subscriptions for
	// /metrics (the local system's: PeekDeadLetters). Deployed, Pub/Sub's
	// subscription/num_undelivered_messages serves them.
	DeadLetters func(ctx context.Context) ([]metrics.Backlog, error)
}

// ErrRepairRefused marks a repair the decision refused (the node has no VM
// to repair, or was replaced already).
var ErrRepairRefused = errors.New("repair refused")

// Server is the HTTP handler.
type Server struct {
	d Deps
}

// New returns a server.
func New(d Deps) *Server {
	if d.Topic == "" {
		d.Topic = config.TopicClusterSpec
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.StateNow == nil {
		d.StateNow = d.Now
	}
	if d.ApplyDeadline <= 0 {
		d.ApplyDeadline = 15 * time.Minute
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Events == nil {
		d.Events, _ = d.Store.(store.EventLog)
	}
	return &Server{d: d}
}

// Page sizes of list (AIP-158: a larger pageSize is coerced to the maximum).
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// Type URLs of the messages operations carry, as Google's create example
// shows the first (create-cluster page); the others are named after it.
const (
	typeCluster        = "type.googleapis.com/google.cloud.aiplatform.v1beta1.ModelDevelopmentCluster"
	typeCreateMetadata = "type.googleapis.com/google.cloud.aiplatform.v1beta1.CreateModelDevelopmentClusterOperationMetadata"
	typeUpdateMetadata = "type.googleapis.com/google.cloud.aiplatform.v1beta1.UpdateModelDevelopmentClusterOperationMetadata"
	typeDeleteMetadata = "type.googleapis.com/google.cloud.aiplatform.v1beta1.DeleteOperationMetadata"
	typeReportMetadata = "type.googleapis.com/google.cloud.aiplatform.v1beta1.ReportFaultyNodesOperationMetadata"
	typeEmpty          = "type.googleapis.com/google.protobuf.Empty"
)

// Operation kinds (store.Operation.Kind).
const (
	kindCreate = "create"
	kindUpdate = "update"
	kindDelete = "delete"
	kindReport = "reportFaultyNodes"
)

const collection = "modelDevelopmentClusters"

// route is a parsed request path.
type route struct {
	version, project, location string
	ops                        bool   // operations
	id                         string // cluster or operation id; "" for the collection
	verb                       string // custom method, e.g. reportFaultyNodes
	events                     bool   // the cluster's events collection (events.go)
}

func (r route) parent() string { return "projects/" + r.project + "/locations/" + r.location }
func (r route) clusterName(id string) string {
	return r.parent() + "/" + collection + "/" + id
}

func parseRoute(p string) (route, bool) {
	seg := strings.Split(strings.Trim(p, "/"), "/")
	var r route
	if len(seg) < 6 || seg[1] != "projects" || seg[3] != "locations" || seg[2] == "" || seg[4] == "" {
		return r, false
	}
	r.version, r.project, r.location = seg[0], seg[2], seg[4]
	if r.version != "v1" && r.version != "v1beta1" {
		return r, false
	}
	switch {
	case seg[5] == "operations" && len(seg) == 7 && seg[6] != "":
		r.ops, r.id = true, seg[6]
		return r, true
	case r.version != "v1beta1":
		// Google's pages serve the clusters on v1beta1 only.
		return r, false
	case seg[5] == collection && len(seg) == 6:
		return r, true
	case seg[5] == collection && len(seg) == 7 && seg[6] != "":
		r.id, r.verb, _ = strings.Cut(seg[6], ":")
		return r, r.id != ""
	case seg[5] == collection && len(seg) == 8 && seg[6] != "" && seg[7] == "events":
		r.id, r.events = seg[6], true
		return r, !strings.Contains(r.id, ":")
	case strings.HasPrefix(seg[5], collection+":"):
		return r, false
	}
	return r, false
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := s.d.Now()
	e := s.serve(w, req)
	if e != nil {
		writeError(w, e)
	}
	lvl := slog.LevelInfo
	code := "OK"
	if e != nil {
		code = e.Code.String()
		if e.Code == CodeInternal || e.Code == CodeUnavailable {
			lvl = slog.LevelError
		}
	}
	s.d.Log.Log(req.Context(), lvl, "api request", "flow", "flex.api", "method", req.Method, "path", req.URL.Path,
		"code", code, "elapsed", s.d.Now().Sub(start))
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request) *Error {
	// The raw path: a resource id with an escaped "/" must not pass for
	// two segments.
	path := req.URL.EscapedPath()
	if req.Method == http.MethodGet && (path == "/" || path == "/status" || path == "/status/clock") {
		return s.statusPage(w, req, path)
	}
	if req.Method == http.MethodGet && path == "/metrics" {
		return s.metricsPage(w, req)
	}
	if p, err := url.PathUnescape(path); err != nil || strings.Contains(p, "%") {
		return errorf(CodeNotFound, "the requested URL %s was not found", path)
	}
	r, ok := parseRoute(path)
	if !ok {
		return errorf(CodeNotFound, "the requested URL %s was not found on this server (it serves /v1beta1/projects/P/locations/L/%s and /v1/projects/P/locations/L/operations/OP)", path, collection)
	}
	if r.project != s.d.Project {
		return errorf(CodeNotFound, "location %s: this flexslurm deployment serves project %s only", r.parent(), s.d.Project)
	}
	if !inputs.Region.Match(r.location) {
		return errorf(CodeNotFound, "location %s: %q is not a region (%s)", r.parent(), r.location, inputs.Region.Allowed)
	}
	q, e := queryParams(req.URL.RawQuery)
	if e != nil {
		return e
	}
	ctx := req.Context()
	switch {
	case r.ops && req.Method == http.MethodGet:
		return s.getOperation(ctx, w, r, q)
	case r.ops:
		return methodNotFound(req.Method, path)
	case r.id == "" && req.Method == http.MethodPost:
		return s.create(ctx, w, req, r, q)
	case r.id == "" && req.Method == http.MethodGet:
		return s.list(ctx, w, r, q)
	case r.id == "":
		return methodNotFound(req.Method, path)
	case r.events && req.Method == http.MethodGet:
		return s.listEvents(ctx, w, r, q)
	case r.events:
		return methodNotFound(req.Method, path)
	case r.verb == "reportFaultyNodes" && req.Method == http.MethodPost:
		return s.reportFaultyNodes(ctx, w, req, r, q)
	case r.verb != "":
		return errorf(CodeNotFound, "%s: %q is not a method of %s (reportFaultyNodes is)", path, r.verb, collection)
	case req.Method == http.MethodGet:
		return s.get(ctx, w, r, q)
	case req.Method == http.MethodPatch:
		return s.update(ctx, w, req, r, q)
	case req.Method == http.MethodDelete:
		return s.delete(ctx, w, r, q)
	}
	return methodNotFound(req.Method, path)
}

func methodNotFound(method, path string) *Error {
	return errorf(CodeNotFound, "%s %s: no such method", method, path)
}

// query holds a request's query parameters by their JSON names (both
// modelDevelopmentClusterId and model_development_cluster_id are accepted).
type query map[string]string

// knownParams are the parameters each method takes, by JSON name, and the
// system parameters every Google API accepts
// (https://cloud.google.com/apis/docs/system-parameters) that change nothing
// here.
var knownParams = []string{"modelDevelopmentClusterId", "pageSize", "pageToken", "updateMask", "updateMode",
	"filter", "nodeId", "jobId", "type",
	"alt", "prettyPrint", "$alt", "$prettyPrint", "fields", "$fields"}

func queryParams(raw string) (query, *Error) {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, invalid(FieldViolation{Field: "query", Description: fmt.Sprintf("malformed query string: %v", err)})
	}
	q := query{}
	var vs []FieldViolation
	for k, v := range vals {
		name := toCamel(k)
		if !slices.Contains(knownParams, name) {
			vs = append(vs, FieldViolation{Field: k, Description: fmt.Sprintf("unknown query parameter %q", k)})
			continue
		}
		if _, dup := q[name]; dup || len(v) > 1 {
			vs = append(vs, FieldViolation{Field: name, Description: "given more than once"})
			continue
		}
		q[name] = v[0]
	}
	if len(vs) > 0 {
		slices.SortFunc(vs, func(a, b FieldViolation) int { return strings.Compare(a.Field, b.Field) })
		return nil, invalid(vs...)
	}
	return q, nil
}

// only refuses the parameters of other methods.
func (q query) only(names ...string) *Error {
	var vs []FieldViolation
	for k := range q {
		if strings.HasPrefix(k, "$") || k == "alt" || k == "prettyPrint" || k == "fields" {
			continue
		}
		if !slices.Contains(names, k) {
			vs = append(vs, FieldViolation{Field: k, Description: "not a parameter of this method"})
		}
	}
	if len(vs) > 0 {
		slices.SortFunc(vs, func(a, b FieldViolation) int { return strings.Compare(a.Field, b.Field) })
		return invalid(vs...)
	}
	return nil
}

func readBody(req *http.Request) ([]byte, *Error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, req.Body, spec.MaxSpecBytes+1))
	if err != nil || len(b) > spec.MaxSpecBytes {
		return nil, invalid(FieldViolation{Field: "body", Description: fmt.Sprintf("larger than the %d-byte limit", spec.MaxSpecBytes)})
	}
	return b, nil
}

// newOperationID is a random decimal id, as Google's operation ids are.
func newOperationID() string {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return fmt.Sprintf("%d", new(big.Int).Add(n, big.NewInt(1<<62)))
}

// clusterView is what the stores hold of one cluster.
type clusterView struct {
	st      *model.State     // the functions' records (nil Cluster: none)
	api     store.APICluster // the API's record
	hasAPI  bool             // api was found
	pending *store.Operation // the cluster's latest mutation, when not done
	spec    *spec.Cluster    // the spec it runs (or, created but not applied yet, the one asked for)
}

// exists reports whether the cluster is there for get, update and delete.
func (v *clusterView) exists() bool {
	if v.hasAPI && v.api.State == store.APIClusterDeleted {
		return false
	}
	return v.spec != nil
}

// load reads a cluster: its records, the API's record and its pending
// mutation (refreshed first, so a done one counts as done).
func (s *Server) load(ctx context.Context, r route, id string) (*clusterView, *Error) {
	v := &clusterView{}
	if !inputs.ClusterID.Match(id) {
		return v, nil
	}
	api, ok, err := s.d.State.APICluster(ctx, id)
	if err != nil {
		return nil, errorf(CodeUnavailable, "reading cluster %s: %v", id, err)
	}
	v.api, v.hasAPI = api, ok
	if ok && api.Operation != "" {
		op, err := s.d.State.Operation(ctx, api.Operation)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, errorf(CodeUnavailable, "reading operation %s: %v", api.Operation, err)
		}
		if err == nil {
			if op, e := s.refresh(ctx, op); e != nil {
				return nil, e
			} else if !op.Done {
				v.pending = &op
			}
		}
		// The refresh may have completed a delete.
		if api, ok, err = s.d.State.APICluster(ctx, id); err == nil && ok {
			v.api = api
		}
	}
	st, err := s.d.Store.Read(ctx, store.Scope{Cluster: id, AllPools: true})
	if err != nil {
		return nil, errorf(CodeUnavailable, "reading cluster %s: %v", id, err)
	}
	v.st = st
	switch {
	case st.Cluster != nil:
		c, err := spec.Parse(st.Cluster.Spec)
		if err != nil {
			return nil, errorf(CodeInternal, "cluster %s: its stored spec does not parse: %v", id, err)
		}
		v.spec = c
	case v.pending != nil && (v.pending.Kind == kindCreate || v.pending.Kind == kindUpdate) && len(v.pending.Spec) > 0:
		// Created, not applied yet (an update may have superseded the create).
		c, err := spec.Parse(v.pending.Spec)
		if err != nil {
			return nil, errorf(CodeInternal, "cluster %s: the spec of operation %s does not parse: %v", id, v.pending.ID, err)
		}
		v.spec = c
	}
	if v.spec != nil && (v.spec.Project != r.project || v.spec.Region != r.location) {
		v.spec = nil // another location's
	}
	return v, nil
}

func notFound(r route, id string) *Error {
	return errorf(CodeNotFound, "%s not found", r.clusterName(id))
}

// create handles POST …/modelDevelopmentClusters?modelDevelopmentClusterId=ID.
func (s *Server) create(ctx context.Context, w http.ResponseWriter, req *http.Request, r route, q query) *Error {
	if e := q.only("modelDevelopmentClusterId"); e != nil {
		return e
	}
	id, ok := q["modelDevelopmentClusterId"]
	switch {
	case !ok || id == "":
		return invalid(FieldViolation{Field: "modelDevelopmentClusterId", Description: "required: the cluster's id (the last segment of its name)"})
	case !inputs.ClusterID.Match(id):
		return invalid(FieldViolation{Field: "modelDevelopmentClusterId", Description: fmt.Sprintf("%q: a cluster with a slurm_spec has an id of %s", id, inputs.ClusterID.Allowed)})
	}
	body, e := readBody(req)
	if e != nil {
		return e
	}
	c, eff, e := parseCluster(body, r, id)
	if e != nil {
		return e
	}
	v, e := s.load(ctx, r, id)
	if e != nil {
		return e
	}
	if v.exists() || (v.st != nil && v.st.Cluster != nil && !(v.hasAPI && v.api.State == store.APIClusterDeleted)) {
		return errorf(CodeAlreadyExists, "%s already exists", r.clusterName(id))
	}
	return s.applySpec(ctx, w, r, kindCreate, c, eff, v)
}

// update handles PATCH …/modelDevelopmentClusters/ID.
func (s *Server) update(ctx context.Context, w http.ResponseWriter, req *http.Request, r route, q query) *Error {
	if e := q.only("updateMask", "updateMode"); e != nil {
		return e
	}
	if m, ok := q["updateMode"]; ok && !slices.Contains([]string{"UPDATE_MODE_UNSPECIFIED", "USER_ONLY", "USER_AND_SERVICE"}, m) {
		return invalid(FieldViolation{Field: "updateMode", Description: fmt.Sprintf("%q: want UPDATE_MODE_UNSPECIFIED, USER_ONLY or USER_AND_SERVICE", m)})
	}
	v, e := s.load(ctx, r, r.id)
	if e != nil {
		return e
	}
	if !v.exists() {
		return notFound(r, r.id)
	}
	if v.hasAPI && v.api.State == store.APIClusterDeleting {
		return errorf(CodeFailedPrecondition, "%s is being deleted (operation %s)", r.clusterName(r.id), v.api.Operation)
	}
	body, e := readBody(req)
	if e != nil {
		return e
	}
	if mask, ok := q["updateMask"]; ok && mask != "" {
		cur, err := v.spec.EffectiveJSON()
		if err != nil {
			return errorf(CodeInternal, "cluster %s: %v", r.id, err)
		}
		if body, e = applyMask(cur, body, mask); e != nil {
			return e
		}
	}
	c, eff, e := parseCluster(body, r, r.id)
	if e != nil {
		return e
	}
	if vs := immutable(v.spec, c); len(vs) > 0 {
		return invalid(vs...)
	}
	return s.applySpec(ctx, w, r, kindUpdate, c, eff, v)
}

// applySpec publishes a created or updated spec and returns its operation.
// startOperation names op under r's parent, ends the cluster's earlier
// operation (supersede), stores op and records the cluster in state with
// op as its current operation.
func (s *Server) startOperation(ctx context.Context, r route, v *clusterView, op *store.Operation, state string) *Error {
	op.Name = r.parent() + "/operations/" + op.ID
	if e := s.supersede(ctx, v, op.ID); e != nil {
		return e
	}
	if err := s.d.State.CreateOperation(ctx, *op); err != nil {
		return errorf(CodeUnavailable, "storing the operation: %v", err)
	}
	if err := s.d.State.PutAPICluster(ctx, store.APICluster{ID: op.Cluster, State: state, Operation: op.ID, UpdateTime: op.CreateTime}); err != nil {
		return errorf(CodeUnavailable, "storing cluster %s: %v", op.Cluster, err)
	}
	return nil
}

func (s *Server) applySpec(ctx context.Context, w http.ResponseWriter, r route, kind string, c *spec.Cluster, eff []byte, v *clusterView) *Error {
	node, err := s.d.NodeSettings(ctx, c)
	if err != nil {
		return errorf(CodeFailedPrecondition, "the deployment's node settings cannot serve this spec: %v", err)
	}
	now := s.d.Now()
	op := store.Operation{
		ID: newOperationID(), Kind: kind, Cluster: c.ID, Target: r.clusterName(c.ID),
		SpecSHA256: spec.EffectiveSHA256(eff), Spec: eff,
		Progress:   "published to " + s.d.Topic + "; waiting for ScaleUp to apply it",
		CreateTime: now, UpdateTime: now, ExpireAt: now.Add(store.OperationTTL),
	}
	if e := s.startOperation(ctx, r, v, &op, store.APIClusterActive); e != nil {
		return e
	}
	data, err := json.Marshal(event.Cluster{
		Header: event.Header{Version: event.SchemaVersion, Type: event.TypeClusterApply, Cluster: c.ID},
		Spec:   eff, Node: &node, AppliedAt: now.UTC(),
	})
	if err == nil {
		_, err = s.d.Publisher.Publish(ctx, s.d.Topic, data, map[string]string{"cluster": c.ID})
	}
	if err != nil {
		e := errorf(CodeUnavailable, "publishing the spec to %s: %v", s.d.Topic, err)
		s.finish(ctx, op.ID, e, "")
		return e
	}
	writeJSON(w, http.StatusOK, s.renderOperation(ctx, op))
	return nil
}

// supersede ends the cluster's pending mutation, which the new one
// replaces: its spec will never be the one the cluster runs.
func (s *Server) supersede(ctx context.Context, v *clusterView, by string) *Error {
	if v.pending == nil {
		return nil
	}
	s.finish(ctx, v.pending.ID, errorf(CodeAborted, "superseded by operation %s before it completed", by), "")
	return nil
}

// finish marks an operation done, with an error or not.
func (s *Server) finish(ctx context.Context, id string, e *Error, progress string) (store.Operation, error) {
	return s.d.State.UpdateOperation(ctx, id, func(op *store.Operation) error {
		if op.Done {
			return nil
		}
		op.Done, op.UpdateTime = true, s.d.Now()
		if e != nil {
			op.ErrorCode, op.ErrorMessage = int32(e.Code), e.Message
		}
		if progress != "" {
			op.Progress = progress
		}
		return nil
	})
}

// parseCluster reads a request body as a cluster spec for the cluster
// id under route r: JSON names become proto names, output-only fields are
// dropped (AIP-203: a service ignores them in a request), a name in the
// body must be the cluster's, and the spec is validated (shared/spec).
func parseCluster(body []byte, r route, id string) (*spec.Cluster, []byte, *Error) {
	name := r.clusterName(id)
	snake, err := rewriteKeys(body, toSnake)
	if err != nil {
		snake = body // spec.Parse reports where it is not JSON
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(snake, &top) == nil {
		for _, k := range []string{"cluster_status", "cluster_events", "create_time", "update_time", "start_time", "runtime"} {
			delete(top, k)
		}
		if raw, ok := top["name"]; ok {
			var got string
			if json.Unmarshal(raw, &got) != nil || (got != name && got != r.parent()+"/"+collection+"/") {
				return nil, nil, invalid(FieldViolation{Field: "name", Description: fmt.Sprintf("%s is not %s, the cluster this request names (or that name without its id)", raw, name)})
			}
		}
		top["name"], _ = json.Marshal(name)
		stripEffective(top)
		if b, err := json.Marshal(top); err == nil {
			snake = b
		}
	}
	c, err := spec.Parse(snake)
	if err != nil {
		var ve *spec.ValidationError
		if errors.As(err, &ve) {
			vs := make([]FieldViolation, 0, len(ve.Problems))
			for _, p := range ve.Problems {
				vs = append(vs, FieldViolation{Field: camelPath(p.Path), Description: p.Message})
			}
			return nil, nil, invalid(vs...)
		}
		return nil, nil, invalid(FieldViolation{Field: "body", Description: err.Error()})
	}
	eff, err := c.EffectiveJSON()
	if err != nil {
		return nil, nil, errorf(CodeInternal, "rendering the effective spec: %v", err)
	}
	return c, eff, nil
}

// stripEffective drops the output-only effective_flex_start_max_duration of
// each node pool (a resource read with get and sent back carries it).
func stripEffective(top map[string]json.RawMessage) {
	raw, ok := top["node_pools"]
	if !ok {
		return
	}
	var pools []map[string]json.RawMessage
	if json.Unmarshal(raw, &pools) != nil {
		return
	}
	for _, p := range pools {
		delete(p, "effective_flex_start_max_duration")
	}
	if b, err := json.Marshal(pools); err == nil {
		top["node_pools"] = b
	}
}

// immutable names the fields an update may not change: the network and the
// home directory storage, and a kept pool's machine and provisioning model
// (ModelDevelopmentCluster.yaml in magic-modules marks them immutable).
func immutable(old, c *spec.Cluster) []FieldViolation {
	var vs []FieldViolation
	if old.Network != c.Network {
		vs = append(vs, FieldViolation{Field: "network", Description: "immutable: a cluster's network cannot change"})
	}
	if old.Slurm.HomeDirectoryStorage != c.Slurm.HomeDirectoryStorage {
		vs = append(vs, FieldViolation{Field: "orchestratorSpec.slurmSpec.homeDirectoryStorage", Description: fmt.Sprintf("immutable: the cluster's is %s", old.Slurm.HomeDirectoryStorage)})
	}
	for i, p := range c.NodePools {
		op, ok := old.Pool(p.ID)
		if !ok {
			continue
		}
		if op.MachineSpec != p.MachineSpec {
			vs = append(vs, FieldViolation{Field: fmt.Sprintf("nodePools[%d].machineSpec", i), Description: fmt.Sprintf("immutable: pool %s's machine spec cannot change (add a pool under a new id)", p.ID)})
		}
		if op.ProvisioningModel != p.ProvisioningModel {
			vs = append(vs, FieldViolation{Field: fmt.Sprintf("nodePools[%d].provisioningModel", i), Description: fmt.Sprintf("immutable: pool %s is %s", p.ID, op.ProvisioningModel)})
		}
	}
	return vs
}

// maskable are the update mask paths Google's "Manage cluster" page and
// ModelDevelopmentCluster.yaml list, in proto names, that flexslurm's spec
// carries (the others name fields flexslurm does not support).
var maskable = []string{"node_pools", "orchestrator_spec.slurm_spec.partitions", "orchestrator_spec.slurm_spec.login_node_pool_id",
	"orchestrator_spec.slurm_spec.default_partition_id", "display_name"}

// applyMask returns the current spec with the masked fields taken from the
// request body (repeated fields are replaced whole, as Google's page says).
func applyMask(cur, body []byte, mask string) ([]byte, *Error) {
	var paths []string
	var vs []FieldViolation
	for _, p := range strings.Split(mask, ",") {
		p = strings.TrimSpace(p)
		sp := strings.Join(mapSlice(strings.Split(p, "."), toSnake), ".")
		if !slices.Contains(maskable, sp) {
			vs = append(vs, FieldViolation{Field: "updateMask", Description: fmt.Sprintf("%q cannot be updated (flexslurm updates %s)", p, strings.Join(maskable, ", "))})
			continue
		}
		paths = append(paths, sp)
	}
	if len(vs) > 0 {
		return nil, invalid(vs...)
	}
	snake, err := rewriteKeys(body, toSnake)
	if err != nil {
		return nil, invalid(FieldViolation{Field: "body", Description: "not a JSON object"})
	}
	var src, dst map[string]any
	if json.Unmarshal(snake, &src) != nil {
		return nil, invalid(FieldViolation{Field: "body", Description: "not a JSON object"})
	}
	if err := json.Unmarshal(cur, &dst); err != nil {
		return nil, errorf(CodeInternal, "current spec: %v", err)
	}
	for _, p := range paths {
		keys := strings.Split(p, ".")
		sv, ok := lookup(src, keys)
		if !ok {
			return nil, invalid(FieldViolation{Field: camelPath(p), Description: "named by updateMask but absent from the body"})
		}
		setPath(dst, keys, sv)
	}
	b, err := json.Marshal(dst)
	if err != nil {
		return nil, errorf(CodeInternal, "merging the update: %v", err)
	}
	return b, nil
}

func mapSlice(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

func lookup(m map[string]any, keys []string) (any, bool) {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func setPath(m map[string]any, keys []string, v any) {
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
}

// delete handles DELETE …/modelDevelopmentClusters/ID.
func (s *Server) delete(ctx context.Context, w http.ResponseWriter, r route, q query) *Error {
	if e := q.only(); e != nil {
		return e
	}
	v, e := s.load(ctx, r, r.id)
	if e != nil {
		return e
	}
	if !v.exists() {
		return notFound(r, r.id)
	}
	if v.hasAPI && v.api.State == store.APIClusterDeleting && v.pending != nil {
		// Deleting again follows the delete in progress.
		writeJSON(w, http.StatusOK, s.renderOperation(ctx, *v.pending))
		return nil
	}
	if v.st == nil || v.st.Cluster == nil {
		return errorf(CodeFailedPrecondition, "%s is still being created (operation %s): delete it once that is done", r.clusterName(r.id), v.api.Operation)
	}
	c := withoutFlexPools(v.spec)
	eff, err := c.EffectiveJSON()
	if err == nil {
		_, err = spec.Parse(eff)
	}
	if err != nil {
		return errorf(CodeInternal, "the spec without the Flex-Start pools of %s: %v", r.id, err)
	}
	now := s.d.Now()
	op := store.Operation{
		ID: newOperationID(), Kind: kindDelete, Cluster: r.id, Target: r.clusterName(r.id),
		Progress:   "published the spec without Flex-Start pools; waiting for every node's VM to be released",
		CreateTime: now, UpdateTime: now, ExpireAt: now.Add(store.OperationTTL),
	}
	if e := s.startOperation(ctx, r, v, &op, store.APIClusterDeleting); e != nil {
		return e
	}
	node := v.st.Cluster.Node // the settings it runs with, images resolved
	data, err := json.Marshal(event.Cluster{
		Header: event.Header{Version: event.SchemaVersion, Type: event.TypeClusterApply, Cluster: r.id},
		Spec:   eff, Node: &node, AppliedAt: now.UTC(),
	})
	if err == nil {
		_, err = s.d.Publisher.Publish(ctx, s.d.Topic, data, map[string]string{"cluster": r.id})
	}
	if err != nil {
		e := errorf(CodeUnavailable, "publishing the spec without Flex-Start pools to %s: %v", s.d.Topic, err)
		s.finish(ctx, op.ID, e, "")
		s.d.State.PutAPICluster(ctx, store.APICluster{ID: r.id, State: store.APIClusterActive, UpdateTime: now})
		return e
	}
	writeJSON(w, http.StatusOK, s.renderOperation(ctx, op))
	return nil
}

// withoutFlexPools is c without its Flex-Start pools and the partitions
// that name one: what ScaleUp, given it, removes (shared/plan.ClusterApplied:
// a pool dropped from the spec has its nodes released and its MIGs deleted).
func withoutFlexPools(c *spec.Cluster) *spec.Cluster {
	out := *c
	flex := map[string]bool{}
	for _, p := range c.FlexPools() {
		flex[p.ID] = true
	}
	out.NodePools = nil
	for _, p := range c.NodePools {
		if !flex[p.ID] {
			out.NodePools = append(out.NodePools, p)
		}
	}
	out.Slurm.Partitions = nil
	for _, part := range c.Slurm.Partitions {
		if !slices.ContainsFunc(part.NodePoolIDs, func(id string) bool { return flex[id] }) {
			out.Slurm.Partitions = append(out.Slurm.Partitions, part)
		}
	}
	if !slices.ContainsFunc(out.Slurm.Partitions, func(p spec.Partition) bool { return p.ID == out.Slurm.DefaultPartitionID }) {
		out.Slurm.DefaultPartitionID = ""
	}
	return &out
}

// get handles GET …/modelDevelopmentClusters/ID.
func (s *Server) get(ctx context.Context, w http.ResponseWriter, r route, q query) *Error {
	if e := q.only(); e != nil {
		return e
	}
	v, e := s.load(ctx, r, r.id)
	if e != nil {
		return e
	}
	if !v.exists() {
		return notFound(r, r.id)
	}
	res, e := s.render(r, v)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// list handles GET …/modelDevelopmentClusters.
func (s *Server) list(ctx context.Context, w http.ResponseWriter, r route, q query) *Error {
	if e := q.only("pageSize", "pageToken"); e != nil {
		return e
	}
	size := DefaultPageSize
	if ps, ok := q["pageSize"]; ok && ps != "" {
		n, err := parseInt32(ps)
		switch {
		case err != nil:
			return invalid(FieldViolation{Field: "pageSize", Description: fmt.Sprintf("%q is not an integer", ps)})
		case n < 0:
			return invalid(FieldViolation{Field: "pageSize", Description: fmt.Sprintf("%d: must not be negative", n)})
		case n > 0:
			size = min(int(n), MaxPageSize)
		}
	}
	after := ""
	if t := q["pageToken"]; t != "" {
		id, ok := decodePageToken(t, r)
		if !ok {
			return invalid(FieldViolation{Field: "pageToken", Description: "not a page token this list returned"})
		}
		after = id
	}
	ids, err := s.d.Store.Clusters(ctx)
	if err != nil {
		return errorf(CodeUnavailable, "listing clusters: %v", err)
	}
	out := []map[string]any{}
	next := ""
	for _, id := range ids { // sorted
		if id <= after {
			continue
		}
		v, e := s.load(ctx, r, id)
		if e != nil {
			return e
		}
		if !v.exists() {
			continue
		}
		if len(out) == size {
			next = encodePageToken(out[len(out)-1]["name"].(string), r)
			break
		}
		res, e := s.render(r, v)
		if e != nil {
			return e
		}
		out = append(out, res)
	}
	resp := map[string]any{collection: out}
	if next != "" {
		resp["nextPageToken"] = next
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func parseInt32(s string) (int32, error) {
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || fmt.Sprint(n) != s || n != int64(int32(n)) {
		return 0, fmt.Errorf("not an int32")
	}
	return int32(n), nil
}
