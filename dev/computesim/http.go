package computesim

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// request is one parsed API call.
type request struct {
	http    *http.Request
	method  string // Compute method id, e.g. "instanceGroupManagers.deleteInstances"
	project string
	zone    string // "" for global resources
	region  string // the region of a regional resource (resource policies)
	name    string // template, MIG, instance or operation name
	rr      string // resize request name
	query   url.Values
	body    []byte
	now     time.Time
	// api is the API version of the path: "v1", or "beta" for the calls
	// served under /compute/beta/ (betaMethods).
	api string
	// direct: a call answered without HTTP (ListShortcut); an injection
	// matching it is left for the HTTP call that follows, not consumed.
	direct bool
}

// mutating reports whether the call changes state and returns an Operation.
func (r *request) mutating() bool {
	switch baseMethod(r.method) {
	case "instanceTemplates.insert", "instanceTemplates.delete",
		"instanceGroupManagers.insert", "instanceGroupManagers.delete",
		"instanceGroupManagers.deleteInstances", "instanceGroupManagers.resize",
		"instanceGroupManagers.setInstanceTemplate",
		"instanceGroupManagerResizeRequests.insert", "instanceGroupManagerResizeRequests.cancel",
		"instanceGroupManagerResizeRequests.delete",
		"instances.delete", "instances.reportHostAsFaulty", "instances.insert", "instances.start",
		"resourcePolicies.insert", "resourcePolicies.delete":
		return true
	}
	return false
}

// opScope is where the call's operations live: "regions/R" for a regional
// resource, the zone for a zonal one, "" for a global one (opKey).
func (r *request) opScope() string {
	if r.region != "" {
		return "regions/" + r.region
	}
	return r.zone
}

// ServeHTTP serves the Compute REST API subset described in the package doc.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == CertsPath && r.Method == http.MethodGet {
		s.serveCerts(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
	if err != nil {
		(&apiError{code: 400, reason: "invalid", message: "reading request body: " + err.Error()}).write(w)
		return
	}
	req, aerr := route(r.Method, r.URL.Path)
	if aerr != nil {
		aerr.write(w)
		return
	}
	req.http, req.query, req.body = r, r.URL.Query(), body

	s.lockForWrite()
	req.now = s.nowLocked()
	s.advanceLocked(req.now)
	msg, aerr := s.serveLocked(req)
	if req.mutating() {
		c := Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, RequestID: req.query.Get("requestId"), Time: req.now, Status: http.StatusOK}
		if aerr != nil {
			c.Status = aerr.code
		} else if op, ok := msg.(*computepb.Operation); ok {
			if errs := s.ops[opKey(req.project, req.opScope(), op.GetName())].GetError().GetErrors(); len(errs) > 0 {
				c.OpError = errs[0].GetCode()
			}
		}
		s.calls = append(s.calls, c)
	}
	var out []byte
	if aerr == nil {
		// Encode under the lock: msg may be live simulator state.
		if out, err = protojson.Marshal(msg); err != nil {
			aerr = &apiError{code: 500, reason: "internalError", message: err.Error(), status: "INTERNAL"}
		}
	}
	eff := s.takeEffectsLocked()
	s.mu.Unlock()
	runEffects(eff)

	if aerr != nil {
		aerr.write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(out)
}

// route maps an HTTP method and path onto a Compute method.
func route(method, path string) (*request, *apiError) {
	api := "v1"
	rest, ok := strings.CutPrefix(path, "/compute/v1/projects/")
	if !ok {
		if rest, ok = strings.CutPrefix(path, "/compute/beta/projects/"); !ok {
			return nil, unsupported(method, path)
		}
		api = "beta"
	}
	seg := strings.Split(rest, "/")
	req := &request{project: seg[0], api: api}
	seg = seg[1:]
	get, post, del := method == http.MethodGet, method == http.MethodPost, method == http.MethodDelete
	n := len(seg)
	switch {
	case n >= 2 && seg[0] == "global" && seg[1] == "instanceTemplates":
		switch {
		case n == 2 && post:
			req.method = "instanceTemplates.insert"
		case n == 2 && get:
			req.method = "instanceTemplates.list"
		case n == 3 && get:
			req.method, req.name = "instanceTemplates.get", seg[2]
		case n == 3 && del:
			req.method, req.name = "instanceTemplates.delete", seg[2]
		}
	case n >= 3 && seg[0] == "global" && seg[1] == "images" && get:
		switch {
		case n == 3:
			req.method, req.name = "images.get", seg[2]
		case n == 4 && seg[2] == "family":
			req.method, req.name = "images.getFromFamily", seg[3]
		}
	case n >= 3 && seg[0] == "global" && seg[1] == "operations":
		req.name = seg[2]
		switch {
		case n == 3 && get:
			req.method = "globalOperations.get"
		case n == 4 && post && seg[3] == "wait":
			req.method = "globalOperations.wait"
		}
	case n == 0 && get:
		req.method = "projects.get"
	case n == 2 && seg[0] == "regions" && get:
		req.method, req.name = "regions.get", seg[1]
	case n >= 3 && seg[0] == "regions" && seg[2] == "resourcePolicies":
		req.region = seg[1]
		switch {
		case n == 3 && post:
			req.method = "resourcePolicies.insert"
		case n == 4 && get:
			req.method, req.name = "resourcePolicies.get", seg[3]
		case n == 4 && del:
			req.method, req.name = "resourcePolicies.delete", seg[3]
		}
	case n == 2 && seg[0] == "zones" && get:
		req.method, req.zone = "zones.get", seg[1]
	case n >= 3 && seg[0] == "zones":
		req.zone = seg[1]
		req.method = zonalMethod(method, seg[2:], req)
	case n >= 3 && seg[0] == "regions":
		// Regional MIGs, their resize requests and region operations
		// (regional.go): served by the zonal handlers with the region
		// in req.zone.
		req.zone = seg[1]
		req.method = regionalMethod(zonalMethod(method, seg[2:], req))
	case n == 2 && seg[0] == "aggregated" && get:
		switch seg[1] {
		case "instances":
			req.method = "instances.aggregatedList"
		case "instanceGroupManagers":
			req.method = "instanceGroupManagers.aggregatedList"
		case "resourcePolicies":
			req.method = "resourcePolicies.aggregatedList"
		}
	}
	if req.method == "" || (api == "beta" && !betaMethods[req.method]) {
		return nil, unsupported(method, path)
	}
	return req, nil
}

// betaMethods are the calls served under /compute/beta/ as well as
// /compute/v1/: resize requests, whose named form (instances[]) Google's
// own code sends through beta (Cluster Toolkit's mig_flex.py), and the zone
// operations the beta client polls their operations with
// (cloud.google.com/go/compute/apiv1beta builds
// /compute/beta/projects/P/zones/Z/operations/NAME). They behave as under
// v1, except Readings.RefuseNamedRequestsOnV1, and are checked against the
// v1 contract: the methods' parameters and the resize-request fields
// flexslurm uses are the same in both discovery documents.
var betaMethods = map[string]bool{
	"instanceGroupManagerResizeRequests.insert": true,
	"instanceGroupManagerResizeRequests.get":    true,
	"instanceGroupManagerResizeRequests.list":   true,
	"instanceGroupManagerResizeRequests.cancel": true,
	"instanceGroupManagerResizeRequests.delete": true,
	"zoneOperations.get":                        true,
	"zoneOperations.wait":                       true,
	// A multi-zone pool's named requests (regional.go), and the region
	// operations the beta client polls them with.
	"regionInstanceGroupManagerResizeRequests.insert": true,
	"regionOperations.get":                            true,
	"regionOperations.wait":                           true,
}

func zonalMethod(method string, seg []string, req *request) string {
	get, post, del := method == http.MethodGet, method == http.MethodPost, method == http.MethodDelete
	n := len(seg)
	switch seg[0] {
	case "operations":
		if n >= 2 {
			req.name = seg[1]
		}
		switch {
		case n == 2 && get:
			return "zoneOperations.get"
		case n == 3 && post && seg[2] == "wait":
			return "zoneOperations.wait"
		}
	case "instances":
		if n >= 2 {
			req.name = seg[1]
		}
		switch {
		case n == 1 && get:
			return "instances.list"
		case n == 1 && post:
			return "instances.insert"
		case n == 2 && get:
			return "instances.get"
		case n == 2 && del:
			return "instances.delete"
		case n == 3 && post && seg[2] == "reportHostAsFaulty":
			return "instances.reportHostAsFaulty"
		case n == 3 && post && seg[2] == "start":
			return "instances.start"
		}
	case "instanceGroups":
		if n == 1 && get {
			return "instanceGroups.list"
		}
	case "autoscalers":
		if n == 1 && get {
			return "autoscalers.list"
		}
	case "instanceGroupManagers":
		if n >= 2 {
			req.name = seg[1]
		}
		switch {
		case n == 1 && post:
			return "instanceGroupManagers.insert"
		case n == 1 && get:
			return "instanceGroupManagers.list"
		case n == 2 && get:
			return "instanceGroupManagers.get"
		case n == 2 && del:
			return "instanceGroupManagers.delete"
		case n == 3 && post && seg[2] == "listManagedInstances":
			return "instanceGroupManagers.listManagedInstances"
		case n == 3 && post && seg[2] == "deleteInstances":
			return "instanceGroupManagers.deleteInstances"
		case n == 3 && post && seg[2] == "resize":
			return "instanceGroupManagers.resize"
		case n == 3 && post && seg[2] == "setInstanceTemplate":
			return "instanceGroupManagers.setInstanceTemplate"
		case n >= 3 && seg[2] == "resizeRequests":
			if n >= 4 {
				req.rr = seg[3]
			}
			switch {
			case n == 3 && post:
				return "instanceGroupManagerResizeRequests.insert"
			case n == 3 && get:
				return "instanceGroupManagerResizeRequests.list"
			case n == 4 && get:
				return "instanceGroupManagerResizeRequests.get"
			case n == 4 && del:
				return "instanceGroupManagerResizeRequests.delete"
			case n == 5 && post && seg[4] == "cancel":
				return "instanceGroupManagerResizeRequests.cancel"
			}
		}
	}
	return ""
}

// unsupported answers calls the simulator does not implement with 501, so a
// missing feature surfaces as an error instead of a misleading 404.
func unsupported(method, path string) *apiError {
	return &apiError{code: 501, reason: "notImplemented", status: "UNIMPLEMENTED",
		message: "computesim does not simulate " + method + " " + path}
}

// serveLocked validates the common parts of a call, applies request-ID
// idempotency and error injection, and dispatches it.
func (s *Sim) serveLocked(req *request) (proto.Message, *apiError) {
	if aerr := checkContractOf(req); aerr != nil {
		return nil, aerr
	}
	if s.opts.Readings.IgnoreLabelFilter && req.query.Has("filter") {
		req.query[ignoreLabelsParam] = []string{"1"}
	}
	// Images are read across projects (public images live in their
	// publishers' projects).
	if s.opts.Project != "" && req.project != s.opts.Project && !strings.HasPrefix(req.method, "images.") {
		return nil, errNotFound("projects/" + req.project)
	}
	if req.zone != "" && !s.zonesOK[req.zone] {
		if isRegional(req.method) {
			if !regionName.MatchString(req.zone) {
				return nil, errInvalidField("region", req.zone, "Unknown region.")
			}
		} else if !zoneName.MatchString(req.zone) {
			return nil, errInvalidField("zone", req.zone, "Unknown zone.")
		}
		if s.zonesOK == nil {
			s.zonesOK = map[string]bool{}
		}
		if len(s.zonesOK) < 64 {
			s.zonesOK[req.zone] = true
		}
	}
	// Request IDs are remembered per project and operation scope (zone or
	// global), so the operation a retry gets back can always be polled where
	// the client looks for it. Within a scope a reused ID returns the
	// original operation even for a different call, as a deduplication
	// token does: a collision in the caller's ID derivation silently skips
	// the second action, in tests as in production.
	rid := req.query.Get("requestId")
	var ridKey string
	if rid != "" {
		ridKey = req.project + "|" + req.opScope() + "|" + rid
	}
	if req.mutating() && rid != "" {
		if aerr := checkRequestID(rid); aerr != nil {
			return nil, aerr
		}
		if rec, ok := s.reqIDs[ridKey]; ok && req.now.Sub(rec.at) < requestIDWindow {
			if op := s.ops[rec.opKey]; op != nil {
				if rec.method != req.http.Method || rec.path != req.http.URL.Path {
					s.opts.Logger.Warn("computesim: requestId reused for a different call; returning the original operation",
						"requestId", rid, "original", rec.method+" "+rec.path, "now", req.http.Method+" "+req.http.URL.Path)
				}
				return op, nil
			}
		}
	}
	if req.direct {
		if s.injectionMatchesLocked(req.http.Method, req.http.URL.Path) {
			return nil, errLeftToHTTP
		}
	} else if inj := s.takeInjectionLocked(req.http.Method, req.http.URL.Path); inj != nil {
		msg, aerr := s.injectedLocked(req, inj)
		if op, ok := msg.(*computepb.Operation); ok {
			s.rememberRequestLocked(req, rid, ridKey, op)
			return runningView(op), nil
		}
		return msg, aerr
	}
	msg, aerr := s.dispatchLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	if op, ok := msg.(*computepb.Operation); ok && req.mutating() {
		s.rememberRequestLocked(req, rid, ridKey, op)
		return runningView(op), nil
	}
	return msg, nil
}

func (s *Sim) rememberRequestLocked(req *request, rid, ridKey string, op *computepb.Operation) {
	if rid == "" {
		return
	}
	s.reqIDs[ridKey] = requestRec{
		opKey:  opKey(req.project, req.opScope(), op.GetName()),
		at:     req.now,
		method: req.http.Method,
		path:   req.http.URL.Path,
	}
}

func (s *Sim) dispatchLocked(req *request) (proto.Message, *apiError) {
	switch baseMethod(req.method) {
	case "instanceTemplates.insert":
		return s.templateInsertLocked(req)
	case "instanceTemplates.get":
		return s.templateGetLocked(req)
	case "instanceTemplates.list":
		return s.templateListLocked(req)
	case "instanceTemplates.delete":
		return s.templateDeleteLocked(req)
	case "instances.insert":
		return s.instanceInsertLocked(req)
	case "instanceGroupManagers.setInstanceTemplate":
		return s.migSetTemplateLocked(req)
	case "images.get":
		return s.imageGetLocked(req)
	case "images.getFromFamily":
		return s.imageFromFamilyLocked(req)
	case "instanceGroupManagers.insert":
		return s.migInsertLocked(req)
	case "instanceGroupManagers.get":
		return s.migGetLocked(req)
	case "instanceGroupManagers.list":
		return s.migListLocked(req)
	case "instanceGroups.list":
		return s.instanceGroupListLocked(req)
	case "autoscalers.list":
		return s.autoscalerListLocked(req)
	case "instanceGroupManagers.delete":
		return s.migDeleteLocked(req)
	case "instanceGroupManagers.listManagedInstances":
		return s.migListManagedLocked(req)
	case "instanceGroupManagers.deleteInstances":
		return s.migDeleteInstancesLocked(req)
	case "instanceGroupManagers.resize":
		return s.migResizeLocked(req)
	case "instanceGroupManagerResizeRequests.insert":
		return s.rrInsertLocked(req)
	case "instanceGroupManagerResizeRequests.get":
		return s.rrGetLocked(req)
	case "instanceGroupManagerResizeRequests.list":
		return s.rrListLocked(req)
	case "instanceGroupManagerResizeRequests.cancel":
		return s.rrCancelLocked(req)
	case "instanceGroupManagerResizeRequests.delete":
		return s.rrDeleteLocked(req)
	case "instances.aggregatedList":
		return s.instanceAggregatedListLocked(req)
	case "instanceGroupManagers.aggregatedList":
		return s.migAggregatedListLocked(req)
	case "instances.get":
		return s.instanceGetLocked(req)
	case "instances.list":
		return s.instanceListLocked(req)
	case "instances.delete":
		return s.instanceDeleteLocked(req)
	case "instances.reportHostAsFaulty":
		return s.instanceReportHostAsFaultyLocked(req)
	case "instances.start":
		return s.instanceStartLocked(req)
	case "zones.get":
		return s.zoneGetLocked(req)
	case "regions.get":
		return s.regionGetLocked(req)
	case "projects.get":
		return s.projectGetLocked(req)
	case "resourcePolicies.insert":
		return s.policyInsertLocked(req)
	case "resourcePolicies.get":
		return s.policyGetLocked(req)
	case "resourcePolicies.aggregatedList":
		return s.policyAggregatedListLocked(req)
	case "resourcePolicies.delete":
		return s.policyDeleteLocked(req)
	case "zoneOperations.get", "zoneOperations.wait", "globalOperations.get", "globalOperations.wait",
		"regionOperations.get", "regionOperations.wait":
		return s.operationGetLocked(req)
	}
	return nil, unsupported(req.http.Method, req.http.URL.Path)
}

// decodeBody parses a proto-JSON request body strictly: unknown fields are
// rejected, as the real API does. 64-bit integers are accepted as strings or
// numbers.
func decodeBody(req *request, m proto.Message) *apiError {
	if len(req.body) == 0 {
		return nil
	}
	if err := protojson.Unmarshal(req.body, m); err != nil {
		return errParse(err)
	}
	return nil
}
