package computesim

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// ListShortcut answers the list calls of instances, instance group managers
// and resize requests without HTTP or JSON: the call is routed, validated
// against the API contract, filtered, ordered and paged by the same
// simulator code that serves it over HTTP (ServeHTTP), and the response
// message is handed over as a deep copy. Its methods have the signatures of
// gce.ListShortcut, whose Client consults it before each such list call.
//
// It answers only a call that would succeed on its first page with no
// injected error: for anything else (a call ServeHTTP would refuse, an
// injection that matches it, a response with a next page, or a call Allow
// refuses) it answers nothing (ok false) and changes nothing, and the
// client makes the call over HTTP, where the failure happens as before.
// A chaos seed runs several times faster this way (docs/chaos.md).
type ListShortcut struct {
	Sim *Sim
	// Allow, if set, is asked first with the HTTP method and path of the
	// call the REST client would make; false leaves the call to HTTP (a
	// fault layer in front of the simulator that would act on the call).
	Allow func(method, path string) bool
	// Answered, if set, is told of each call answered here.
	Answered func(method, path string)
}

// ListInstances answers instances.list.
func (l ListShortcut) ListInstances(ctx context.Context, req *computepb.ListInstancesRequest) (*computepb.InstanceList, bool) {
	// The paths are the ones the apiv1 REST clients build
	// (cloud.google.com/go/compute/apiv1, instancesRESTClient.List and
	// the like): /compute/v1/projects/{project}/zones/{zone}/….
	path := "/compute/v1/projects/" + req.GetProject() + "/zones/" + req.GetZone() + "/instances"
	out, ok := l.list(path, listQuery(req.Filter, req.MaxResults, req.OrderBy, req.PageToken))
	if !ok {
		return nil, false
	}
	m, ok := out.(*computepb.InstanceList)
	return m, ok
}

// ListInstanceGroupManagers answers instanceGroupManagers.list.
func (l ListShortcut) ListInstanceGroupManagers(ctx context.Context, req *computepb.ListInstanceGroupManagersRequest) (*computepb.InstanceGroupManagerList, bool) {
	path := "/compute/v1/projects/" + req.GetProject() + "/zones/" + req.GetZone() + "/instanceGroupManagers"
	out, ok := l.list(path, listQuery(req.Filter, req.MaxResults, req.OrderBy, req.PageToken))
	if !ok {
		return nil, false
	}
	m, ok := out.(*computepb.InstanceGroupManagerList)
	return m, ok
}

// ListResizeRequests answers instanceGroupManagerResizeRequests.list.
func (l ListShortcut) ListResizeRequests(ctx context.Context, req *computepb.ListInstanceGroupManagerResizeRequestsRequest) (*computepb.InstanceGroupManagerResizeRequestsListResponse, bool) {
	path := "/compute/v1/projects/" + req.GetProject() + "/zones/" + req.GetZone() +
		"/instanceGroupManagers/" + req.GetInstanceGroupManager() + "/resizeRequests"
	out, ok := l.list(path, listQuery(req.Filter, req.MaxResults, req.OrderBy, req.PageToken))
	if !ok {
		return nil, false
	}
	m, ok := out.(*computepb.InstanceGroupManagerResizeRequestsListResponse)
	return m, ok
}

// listQuery is the query the REST clients send for a list request's
// optional fields.
func listQuery(filter *string, maxResults *uint32, orderBy, pageToken *string) url.Values {
	q := url.Values{}
	if filter != nil {
		q.Set("filter", *filter)
	}
	if maxResults != nil {
		q.Set("maxResults", strconv.FormatUint(uint64(*maxResults), 10))
	}
	if orderBy != nil {
		q.Set("orderBy", *orderBy)
	}
	if pageToken != nil {
		q.Set("pageToken", *pageToken)
	}
	return q
}

func (l ListShortcut) list(path string, q url.Values) (proto.Message, bool) {
	if l.Sim == nil || (l.Allow != nil && !l.Allow(http.MethodGet, path)) {
		return nil, false
	}
	out, ok := l.Sim.directList(path, q)
	if ok && l.Answered != nil {
		l.Answered(http.MethodGet, path)
	}
	return out, ok
}

// directList serves a GET list call as ServeHTTP does and returns a deep
// copy of its response; ok is false where ServeHTTP would answer an error,
// an injection matches the call, or the response has a next page.
func (s *Sim) directList(path string, q url.Values) (proto.Message, bool) {
	req, aerr := route(http.MethodGet, path)
	if aerr != nil {
		return nil, false
	}
	switch req.method {
	case "instances.list", "instanceGroupManagers.list", "instanceGroupManagerResizeRequests.list":
	default:
		return nil, false
	}
	req.http = &http.Request{Method: http.MethodGet, URL: &url.URL{Path: path, RawQuery: q.Encode()},
		RemoteAddr: "127.0.0.1:1", Header: http.Header{}}
	req.query, req.direct = q, true

	s.lockForWrite()
	req.now = s.nowLocked()
	s.advanceLocked(req.now)
	msg, aerr := s.serveLocked(req)
	var out proto.Message
	if aerr == nil && msg != nil {
		if pt, ok := msg.(interface{ GetNextPageToken() string }); !ok || pt.GetNextPageToken() == "" {
			// Copy under the lock: the items are live simulator state.
			out = proto.Clone(msg)
		}
	}
	eff := s.takeEffectsLocked()
	s.mu.Unlock()
	runEffects(eff)
	return out, out != nil
}

// checkContractOf is checkContract, remembering the direct list calls that
// pass it: such a call has no body, so the outcome depends only on its
// method, path and query, and a reconcile pass repeats the same few.
func checkContractOf(req *request) *apiError {
	if !req.direct || len(req.body) > 0 {
		return checkContract(req)
	}
	key := req.method + " " + req.http.URL.Path + "?" + req.http.URL.RawQuery
	contractPassed.Lock()
	ok := contractPassed.m[key]
	contractPassed.Unlock()
	if ok {
		return nil
	}
	if aerr := checkContract(req); aerr != nil {
		return aerr
	}
	contractPassed.Lock()
	if contractPassed.m == nil {
		contractPassed.m = map[string]bool{}
	}
	if len(contractPassed.m) < maxContractPassed {
		contractPassed.m[key] = true
	}
	contractPassed.Unlock()
	return nil
}

var contractPassed struct {
	sync.Mutex
	m map[string]bool
}

const maxContractPassed = 4096
