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
// message is handed to the caller's read function while the simulator
// holds its lock, without a copy: it is the simulator's own state (its VMs
// and resize requests), so read must not change it nor keep any part of it
// that can change (a message, a slice, a map) after it returns. Its
// methods have the signatures of gce.ListShortcut, whose Client consults
// it before each such list call and translates the response inside read
// (shared/gce, TestListShortcutDoesNotChangeOrKeepTheAnswer).
//
// It answers only a call that would succeed on its first page with no
// injected error: for anything else (a call ServeHTTP would refuse, an
// injection that matches it, a response with a next page, or a call Allow
// refuses) it answers nothing (ok false, read not called) and changes
// nothing, and the client makes the call over HTTP, where the failure
// happens as before. A chaos seed runs several times faster this way
// (docs/chaos.md).
type ListShortcut struct {
	Sim *Sim
	// Allow, if set, is asked first with the HTTP method and path of the
	// call the REST client would make; false leaves the call to HTTP (a
	// fault layer in front of the simulator that would act on the call).
	Allow func(method, path string) bool
	// Answered, if set, is told of each call answered here.
	Answered func(method, path string)
	// NoReuse evaluates every call afresh. Otherwise an answer is reused
	// while the simulator's state is the one it was computed from (Version)
	// and the call (path and query) is the same: the same message,
	// which read already must neither change nor keep.
	NoReuse bool
}

// readAs hands a list's response to read when it is a T, and reports
// whether it was.
func readAs[T proto.Message](read func(T)) func(proto.Message) bool {
	return func(m proto.Message) bool {
		out, ok := m.(T)
		if ok {
			read(out)
		}
		return ok
	}
}

// ListInstances answers instances.list: read gets the response.
func (l ListShortcut) ListInstances(ctx context.Context, req *computepb.ListInstancesRequest, read func(*computepb.InstanceList)) bool {
	// The paths are the ones the apiv1 REST clients build
	// (cloud.google.com/go/compute/apiv1, instancesRESTClient.List and
	// the like): /compute/v1/projects/{project}/zones/{zone}/….
	path := "/compute/v1/projects/" + req.GetProject() + "/zones/" + req.GetZone() + "/instances"
	return l.list(listCall{path, req.Filter, req.MaxResults, req.OrderBy, req.PageToken}, readAs(read))
}

// ListInstanceGroupManagers answers instanceGroupManagers.list: read gets
// the response.
func (l ListShortcut) ListInstanceGroupManagers(ctx context.Context, req *computepb.ListInstanceGroupManagersRequest, read func(*computepb.InstanceGroupManagerList)) bool {
	path := "/compute/v1/projects/" + req.GetProject() + "/zones/" + req.GetZone() + "/instanceGroupManagers"
	return l.list(listCall{path, req.Filter, req.MaxResults, req.OrderBy, req.PageToken}, readAs(read))
}

// ListResizeRequests answers instanceGroupManagerResizeRequests.list: read
// gets the response.
func (l ListShortcut) ListResizeRequests(ctx context.Context, req *computepb.ListInstanceGroupManagerResizeRequestsRequest, read func(*computepb.InstanceGroupManagerResizeRequestsListResponse)) bool {
	path := "/compute/v1/projects/" + req.GetProject() + "/zones/" + req.GetZone() +
		"/instanceGroupManagers/" + req.GetInstanceGroupManager() + "/resizeRequests"
	return l.list(listCall{path, req.Filter, req.MaxResults, req.OrderBy, req.PageToken}, readAs(read))
}

// listCall is a list call as the REST clients make it: the path and the
// request's optional list fields.
type listCall struct {
	path               string
	filter             *string
	maxResults         *uint32
	orderBy, pageToken *string
}

// query is the query the REST clients send for the call's optional
// fields.
func (c listCall) query() url.Values {
	q := url.Values{}
	if c.filter != nil {
		q.Set("filter", *c.filter)
	}
	if c.maxResults != nil {
		q.Set("maxResults", strconv.FormatUint(uint64(*c.maxResults), 10))
	}
	if c.orderBy != nil {
		q.Set("orderBy", *c.orderBy)
	}
	if c.pageToken != nil {
		q.Set("pageToken", *c.pageToken)
	}
	return q
}

// key identifies the call for the answers kept (Sim.lists), built
// without the query: the path, then each optional field the REST clients
// send as a query parameter, in a fixed order, with its length, so that
// no two calls share a key (TestListCallKeyTellsCallsApart).
func (c listCall) key() string {
	n := len(c.path) + 1
	for _, v := range [...]*string{c.filter, c.orderBy, c.pageToken} {
		if v != nil {
			n += len(*v) + 16
		}
	}
	if c.maxResults != nil {
		n += 32
	}
	b := make([]byte, 0, n)
	b = append(b, c.path...)
	b = append(b, '\x00')
	param := func(k, v string) {
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		b = append(b, v...)
	}
	if c.filter != nil {
		param("filter", *c.filter)
	}
	if c.maxResults != nil {
		param("maxResults", strconv.FormatUint(uint64(*c.maxResults), 10))
	}
	if c.orderBy != nil {
		param("orderBy", *c.orderBy)
	}
	if c.pageToken != nil {
		param("pageToken", *c.pageToken)
	}
	return string(b)
}

func (l ListShortcut) list(c listCall, read func(proto.Message) bool) bool {
	if l.Sim == nil || (l.Allow != nil && !l.Allow(http.MethodGet, c.path)) {
		return false
	}
	ok := l.Sim.directList(c, !l.NoReuse, read)
	if ok && l.Answered != nil {
		l.Answered(http.MethodGet, c.path)
	}
	return ok
}

// directList serves a GET list call as ServeHTTP does and hands its
// response to read under the lock (the items are live simulator state);
// it reports whether read took it. read is not called where ServeHTTP
// would answer an error, an injection matches the call, or the response
// has a next page. With reuse, an answer computed at the same state
// (Version) for the same path and query is handed over again: a list
// answer depends only on the state and the call, not on the clock (beyond
// the transitions advanceLocked applies), the caller or anything else a
// call leaves behind (the contract and zone memos hold for any state).
func (s *Sim) directList(c listCall, reuse bool, read func(proto.Message) bool) bool {
	// A kept answer was computed for a call listRoute accepted: the call
	// is routed (and its query built) only when none is kept.
	var key string
	if reuse {
		key = c.key()
	}
	var eff []func()
	ok := func() bool {
		s.lockQuiet()
		defer func() {
			eff = s.takeEffectsLocked()
			s.mu.Unlock()
		}()
		now := s.nowLocked()
		s.advanceQuietLocked(now)
		if s.listsAt != s.version {
			clear(s.lists)
			s.listsAt = s.version
		}
		var msg proto.Message
		if reuse {
			msg = s.lists[key]
		}
		if msg == nil {
			req, ok := listRoute(c.path)
			if !ok {
				return false
			}
			q := c.query()
			req.http = &http.Request{Method: http.MethodGet, URL: &url.URL{Path: c.path, RawQuery: q.Encode()},
				RemoteAddr: "127.0.0.1:1", Header: http.Header{}}
			req.query, req.direct, req.now = q, true, now
			var aerr *apiError
			if msg, aerr = s.serveLocked(req); aerr != nil || msg == nil {
				return false
			}
			if reuse {
				if s.lists == nil || len(s.lists) >= maxLists {
					s.lists = map[string]proto.Message{}
				}
				s.lists[key] = msg
			}
		}
		if pt, ok := msg.(interface{ GetNextPageToken() string }); ok && pt.GetNextPageToken() != "" {
			return false
		}
		return read(msg)
	}()
	runEffects(eff)
	return ok
}

// maxLists bounds the list answers kept: a reconcile pass makes a few
// calls per pool.
const maxLists = 256

// listRoute is route for a GET of path, when it is one of the list calls
// directList answers (ok false otherwise). The routes of such paths are
// remembered: route depends on the method and path alone.
func listRoute(path string) (*request, bool) {
	listRoutes.Lock()
	r, ok := listRoutes.m[path]
	listRoutes.Unlock()
	if ok {
		return &r, true
	}
	req, aerr := route(http.MethodGet, path)
	if aerr != nil {
		return nil, false
	}
	switch req.method {
	case "instances.list", "instanceGroupManagers.list", "instanceGroupManagerResizeRequests.list":
	default:
		return nil, false
	}
	listRoutes.Lock()
	if listRoutes.m == nil || len(listRoutes.m) >= maxContractPassed {
		listRoutes.m = map[string]request{}
	}
	listRoutes.m[path] = *req
	listRoutes.Unlock()
	return req, true
}

var listRoutes struct {
	sync.Mutex
	m map[string]request // by path; fields a call fills are zero
}

// checkContractOf is checkContract, remembering the calls without a body
// that pass it (list and get calls, direct or over HTTP): the outcome of
// such a call depends only on its method, path and query, and a reconcile
// pass repeats the same few.
func checkContractOf(req *request) *apiError {
	if len(req.body) > 0 {
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
