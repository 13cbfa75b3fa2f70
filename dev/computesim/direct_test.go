package computesim

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// TestVersion: Version changes with every call that may change the
// simulator's state (API calls, Ticks and direct lists that apply a
// transition, out-of-band changes) and not with the read-only
// introspection calls, nor with a Tick or direct list that applies none.
func TestVersion(t *testing.T) {
	e := newEnv(t, Options{AcceptDelay: time.Minute})
	e.setup()
	v := e.sim.Version()
	e.sim.Instances()
	e.sim.ResizeRequests()
	e.sim.MIGs()
	e.sim.NextDue()
	e.sim.Calls()
	if got := e.sim.Version(); got != v {
		t.Errorf("introspection changed Version from %d to %d", v, got)
	}
	l := ListShortcut{Sim: e.sim}
	list := func() {
		if !l.ListInstances(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone}, func(*computepb.InstanceList) {}) {
			t.Fatal("the direct list was not answered")
		}
	}
	steps := []struct {
		name    string
		do      func()
		changes bool
	}{
		{"resize request inserted", func() {
			if err := e.insertRR("pool", namedRR("rr", 3600, "vm-1"), ""); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"tick: accepted and provisioned", func() { e.sim.Tick(e.clk.Advance(time.Minute)) }, true},
		{"direct list, nothing due", func() { e.clk.Advance(time.Second); list() }, false},
		{"tick, nothing due", func() { e.sim.Tick(e.clk.Advance(time.Second)) }, false},
		{"direct list: the run duration ends", func() { e.clk.Advance(time.Hour); list() }, true},
		{"out-of-band VM", func() {
			if _, err := e.sim.AddInstance(testProject, testZone, "foreign", nil); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"injection", func() { e.sim.InjectError(Match{Method: http.MethodGet}, 503, "backendError", "", 1) }, true},
	}
	for _, s := range steps {
		s.do()
		got := e.sim.Version()
		if changed := got != v; changed != s.changes {
			t.Errorf("%s: Version %d before, %d after, want a change %t", s.name, v, got, s.changes)
		}
		v = got
	}
}

// TestDirectListReadsUnderLock: a direct list hands its answer to read
// once, while the simulator is locked (the items are its live state, so no
// call can change them while read looks), and the answer is what the REST
// client gets for the same call; a call left to HTTP (a next page, an
// unknown MIG) never reaches read.
func TestDirectListReadsUnderLock(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	if err := e.insertRR("pool", namedRR("rr", 3600, "vm-1", "vm-2"), ""); err != nil {
		t.Fatal(err)
	}
	e.sim.Tick(e.clk.Advance(time.Minute))
	l := ListShortcut{Sim: e.sim}
	req := &computepb.ListInstancesRequest{Project: testProject, Zone: testZone}
	var got []*computepb.InstanceList
	ok := l.ListInstances(e.ctx, req, func(m *computepb.InstanceList) {
		if e.sim.mu.TryLock() {
			e.sim.mu.Unlock()
			t.Error("read ran without the simulator's lock")
		}
		got = append(got, proto.Clone(m).(*computepb.InstanceList))
	})
	if !ok || len(got) != 1 || len(got[0].GetItems()) != 2 {
		t.Fatalf("answered %t, read %d times: %v", ok, len(got), got)
	}
	var rest []*computepb.Instance
	it := e.inst.List(e.ctx, req)
	for {
		in, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, in)
	}
	if d := cmp.Diff(rest, got[0].GetItems(), protocmp.Transform()); d != "" {
		t.Errorf("direct answer differs from REST (-REST +direct):\n%s", d)
	}

	unanswered := []func(read func()) bool{
		func(read func()) bool {
			return l.ListInstances(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone, MaxResults: proto.Uint32(1)},
				func(*computepb.InstanceList) { read() })
		},
		func(read func()) bool {
			return l.ListResizeRequests(e.ctx, &computepb.ListInstanceGroupManagerResizeRequestsRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "nope"},
				func(*computepb.InstanceGroupManagerResizeRequestsListResponse) { read() })
		},
	}
	for i, call := range unanswered {
		read := false
		if call(func() { read = true }) || read {
			t.Errorf("call %d: answered directly (read called: %t), want it left to HTTP", i, read)
		}
	}
}

// TestMIGListFiltersLikeViews: a MIG list gives what filtering the views
// of every MIG gives (its answer before it filtered the stored MIGs when
// the filter names no field a view computes), for filters on names, on
// the computed status and actions, and on fields they do not reach.
func TestMIGListFiltersLikeViews(t *testing.T) {
	e := newEnv(t, Options{DeleteDelay: time.Hour})
	e.setup()
	for _, name := range []string{"pool-b", "other"} {
		if err := e.insertMIG(name, "tpl", ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.insertRR("pool", namedRR("rr", 3600, "vm-1", "vm-2"), ""); err != nil {
		t.Fatal(err)
	}
	e.sim.Tick(e.clk.Advance(time.Minute))
	if err := do(e.igm.DeleteInstances(e.ctx, &computepb.DeleteInstancesInstanceGroupManagerRequest{Project: testProject, Zone: testZone,
		InstanceGroupManager: "pool", InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{
			Instances: []string{"zones/" + testZone + "/instances/vm-1"}}})); err != nil {
		t.Fatal(err)
	}
	filters := []string{"", `name eq "pool.*"`, `name eq "other"`, `status.isStable = true`, `status.isStable = false`,
		`currentActions.deleting > 0`, `(name = "pool") (status.isStable = false)`, `(name eq "pool.*") (status.isStable = true)`, `targetSize > 1`, `NOT name:*`}
	kept := 0
	for _, f := range filters {
		q := url.Values{}
		if f != "" {
			q.Set("filter", f)
		}
		req, aerr := route(http.MethodGet, "/compute/v1/projects/"+testProject+"/zones/"+testZone+"/instanceGroupManagers")
		if aerr != nil {
			t.Fatal(aerr)
		}
		req.query = q
		e.sim.mu.Lock()
		got, aerr := e.sim.migListLocked(req)
		var views []*computepb.InstanceGroupManager
		for _, k := range slices.Sorted(maps.Keys(e.sim.migs)) {
			views = append(views, e.sim.migViewLocked(e.sim.migs[k]))
		}
		want, _, werr := paginate(views, q, true)
		e.sim.mu.Unlock()
		if aerr != nil || werr != nil {
			if fmt.Sprint(aerr) != fmt.Sprint(werr) {
				t.Errorf("filter %q: error %v, filtering views: %v", f, aerr, werr)
			}
			continue
		}
		if d := cmp.Diff(want, got.(*computepb.InstanceGroupManagerList).GetItems(), protocmp.Transform()); d != "" {
			t.Errorf("filter %q (-views +list):\n%s", f, d)
		}
		kept += len(want)
		t.Logf("%q: %d of 3", f, len(want))
	}
	if kept == 0 || kept == 3*len(filters) {
		t.Errorf("the filters kept %d MIGs in all: nothing to tell apart", kept)
	}
}

// TestResizeRequestsShareUnchangingSlices: the requested and provisioned
// names ResizeRequests and ResizeRequestHistory return are shared with the
// simulator, which never changes them in place: an earlier answer stays
// as it was while the requests go on.
func TestResizeRequestsShareUnchangingSlices(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	if err := e.insertRR("pool", namedRR("rr", 3600, "vm-1", "vm-2"), ""); err != nil {
		t.Fatal(err)
	}
	copyOf := func(rrs []ResizeRequest) []ResizeRequest {
		out := slices.Clone(rrs)
		for i := range out {
			out[i].Instances, out[i].Provisioned = slices.Clone(out[i].Instances), slices.Clone(out[i].Provisioned)
		}
		return out
	}
	var answers, copies [][]ResizeRequest
	keep := func() {
		for _, rrs := range [][]ResizeRequest{e.sim.ResizeRequests(), e.sim.ResizeRequestHistory()} {
			answers, copies = append(answers, rrs), append(copies, copyOf(rrs))
		}
	}
	keep()
	e.sim.Tick(e.clk.Advance(time.Minute)) // provisioned
	keep()
	if err := e.insertRR("pool", namedRR("rr2", 3600, "vm-3"), ""); err != nil {
		t.Fatal(err)
	}
	e.sim.Tick(e.clk.Advance(time.Minute))
	keep()
	if err := do(e.rrs.Delete(e.ctx, &computepb.DeleteInstanceGroupManagerResizeRequestRequest{Project: testProject, Zone: testZone,
		InstanceGroupManager: "pool", ResizeRequest: "rr"})); err != nil {
		t.Fatal(err)
	}
	e.sim.Tick(e.clk.Advance(2 * time.Hour)) // expired
	keep()
	for i := range answers {
		if d := cmp.Diff(copies[i], answers[i]); d != "" {
			t.Errorf("answer %d changed afterwards (-then +now):\n%s", i, d)
		}
	}
	if got := answers[2][0].Provisioned; len(got) != 2 {
		t.Errorf("provisioned %v, want vm-1 and vm-2", got)
	}
}

// TestListReuseMatchesFresh: a direct list answer reused while the state
// stays the same is exactly what a fresh evaluation gives, after every
// kind of call that changes the state (API calls, Ticks, transitions the
// list call itself brings due, out-of-band changes, injections,
// shortages), and it is reused (the same message) when nothing changed;
// so is the next transition NextDue remembers.
func TestListReuseMatchesFresh(t *testing.T) {
	e := newEnv(t, Options{DeleteDelay: time.Minute, AcceptDelay: time.Minute})
	e.setup()
	if err := e.insertMIG("other", "tpl", "DO_NOTHING"); err != nil {
		t.Fatal(err)
	}
	str := proto.String
	instReqs := []*computepb.ListInstancesRequest{
		{Project: testProject, Zone: testZone},
		{Project: testProject, Zone: testZone, Filter: str(`name = "vm-*"`)},
		{Project: testProject, Zone: testZone, Filter: str(`labels.role = "x"`), OrderBy: str("creationTimestamp desc")},
	}
	migReqs := []*computepb.ListInstanceGroupManagersRequest{
		{Project: testProject, Zone: testZone},
		{Project: testProject, Zone: testZone, Filter: str(`name = "pool"`)},
		{Project: testProject, Zone: testZone, Filter: str(`status.isStable = false`)},
	}
	rrReqs := []*computepb.ListInstanceGroupManagerResizeRequestsRequest{
		{Project: testProject, Zone: testZone, InstanceGroupManager: "pool"},
		{Project: testProject, Zone: testZone, InstanceGroupManager: "other"},
	}
	// lists answers every call, with or without reuse: a clone of each
	// answer and the message read got (nil when not answered).
	lists := func(noReuse bool) (clones, seen []proto.Message) {
		l := ListShortcut{Sim: e.sim, NoReuse: noReuse}
		add := func(ok bool, m proto.Message) {
			if !ok {
				clones, seen = append(clones, nil), append(seen, nil)
				return
			}
			clones, seen = append(clones, proto.Clone(m)), append(seen, m)
		}
		for _, r := range instReqs {
			var got proto.Message
			add(l.ListInstances(e.ctx, r, func(m *computepb.InstanceList) { got = m }), got)
		}
		for _, r := range migReqs {
			var got proto.Message
			add(l.ListInstanceGroupManagers(e.ctx, r, func(m *computepb.InstanceGroupManagerList) { got = m }), got)
		}
		for _, r := range rrReqs {
			var got proto.Message
			add(l.ListResizeRequests(e.ctx, r, func(m *computepb.InstanceGroupManagerResizeRequestsListResponse) { got = m }), got)
		}
		return clones, seen
	}
	vmCount := func() int { return len(e.sim.Instances()) }
	steps := []struct {
		name string
		do   func()
	}{
		{"nothing", func() {}},
		{"resize request inserted", func() {
			if err := e.insertRR("pool", namedRR("rr-1", 3600, "vm-1", "vm-2"), ""); err != nil {
				t.Fatal(err)
			}
		}},
		{"accepted and provisioned by Ticks", func() { e.advance(time.Minute); e.advance(time.Second) }},
		{"tick with nothing due", func() { e.advance(time.Second) }},
		{"second request inserted", func() {
			if err := e.insertRR("other", namedRR("rr-2", 3600, "vm-3"), ""); err != nil {
				t.Fatal(err)
			}
		}},
		{"clock only: the list call brings the acceptance due", func() { e.clk.Advance(2 * time.Minute) }},
		{"out-of-band VM", func() {
			if _, err := e.sim.AddInstance(testProject, testZone, "foreign-1", map[string]string{"role": "x"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"VM expired now (STOPPING)", func() {
			if err := e.sim.ExpireNow(testZone, "vm-1"); err != nil {
				t.Fatal(err)
			}
		}},
		{"clock only: the list call finishes the deletion", func() { e.clk.Advance(2 * time.Minute) }},
		{"VM deleted over REST", func() {
			if err := do(e.inst.Delete(e.ctx, &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: "foreign-1"})); err != nil {
				t.Fatal(err)
			}
		}},
		{"injection on instance lists", func() {
			e.sim.InjectError(Match{Method: http.MethodGet, Path: `/instances$`}, http.StatusServiceUnavailable, "backendError", "", 1)
		}},
		{"injections cleared", func() { e.sim.ClearInjections() }},
		{"shortage set", func() {
			e.sim.SetShortage(Shortage{Name: "s", Zone: testZone, Code: "ZONE_RESOURCE_POOL_EXHAUSTED", Message: "no"})
		}},
		{"expiry at the end of the run", func() { e.advance(2 * time.Hour) }},
	}
	// NextDue remembers the next transition per Version: it must be what
	// looking through every record gives.
	checkNext := func(when string) {
		t.Helper()
		at, ok := e.sim.NextDue()
		e.sim.mu.Lock()
		d, fresh := e.sim.nextDueLocked()
		want := d.at
		if fresh && want.Before(e.sim.watermark) {
			want = e.sim.watermark
		}
		e.sim.mu.Unlock()
		if ok != fresh || (ok && !at.Equal(want)) {
			t.Errorf("%s: NextDue %v %t, looking through the records %v %t", when, at, ok, want, fresh)
		}
	}
	reusedAny := false
	for _, s := range steps {
		before := vmCount()
		s.do()
		checkNext(s.name)
		first, firstSeen := lists(false)
		checkNext(s.name + ", listed")
		// A list call brings the state to now: nothing is left due.
		if at, ok := e.sim.NextDue(); ok && !at.After(e.clk.Now()) {
			t.Errorf("%s: a transition at %v is still due after the list calls at %v", s.name, at, e.clk.Now())
		}
		again, againSeen := lists(false)
		fresh, _ := lists(true)
		if d := cmp.Diff(fresh, first, protocmp.Transform()); d != "" {
			t.Errorf("%s: reused answers differ from fresh ones (-fresh +reused):\n%s", s.name, d)
		}
		if d := cmp.Diff(fresh, again, protocmp.Transform()); d != "" {
			t.Errorf("%s: answers given again differ from fresh ones (-fresh +again):\n%s", s.name, d)
		}
		for i := range firstSeen {
			if firstSeen[i] != nil && firstSeen[i] != againSeen[i] {
				t.Errorf("%s: call %d was evaluated again with nothing changed in between", s.name, i)
			}
			reusedAny = reusedAny || firstSeen[i] != nil
		}
		t.Logf("%s: %d VMs before, %d after", s.name, before, vmCount())
	}
	if !reusedAny {
		t.Error("no answer was given")
	}
}

// TestListCallKeyTellsCallsApart: two list calls share a key for the
// answers kept exactly when their path and the query the REST client
// sends for them are the same.
func TestListCallKeyTellsCallsApart(t *testing.T) {
	paths := []string{"/compute/v1/projects/p/zones/z/instances", "/compute/v1/projects/p/zones/z/instanceGroupManagers"}
	strs := []*string{nil, proto.String(""), proto.String("a"), proto.String("a:"), proto.String("1"), proto.String("orderBy=b"),
		proto.String("a\x00b"), proto.String("b"), proto.String("aorderBy=b"), proto.String("aorderBy=0:b"),
		proto.String(`(labels.a = "b") (labels.c = "d")`), proto.String("x=1:y")}
	nums := []*uint32{nil, proto.Uint32(0), proto.Uint32(1), proto.Uint32(500)}
	byKey := map[string]string{}
	keyOf := map[string]string{}
	for _, path := range paths {
		for _, f := range strs {
			for _, m := range nums {
				for _, o := range strs {
					for _, p := range strs {
						c := listCall{path, f, m, o, p}
						call := path + "?" + c.query().Encode()
						k := c.key()
						if other, ok := byKey[k]; ok && other != call {
							t.Errorf("calls %q and %q share key %q", other, call, k)
						}
						if other, ok := keyOf[call]; ok && other != k {
							t.Errorf("call %q has two keys, %q and %q", call, other, k)
						}
						byKey[k], keyOf[call] = call, k
					}
				}
			}
		}
	}
	if len(byKey) < 1000 {
		t.Errorf("only %d keys", len(byKey))
	}
}

// TestContractMemoFollowsTheCall: a call without a body that passed the
// contract check is remembered by method, path and query, direct or over
// HTTP; another query, or one that fails, is checked again.
func TestContractMemoFollowsTheCall(t *testing.T) {
	call := func(method, path, rawQuery string, direct bool) *apiError {
		t.Helper()
		req, aerr := route(method, path)
		if aerr != nil {
			t.Fatalf("route %s %s: %v", method, path, aerr.message)
		}
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			t.Fatal(err)
		}
		req.http = &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: rawQuery}}
		req.query, req.direct = q, direct
		return checkContractOf(req)
	}
	get := "/compute/v1/projects/p/zones/us-central1-a/instances/vm-memo-1"
	list := "/compute/v1/projects/p/zones/us-central1-a/instances"
	for i := 0; i < 2; i++ {
		for _, direct := range []bool{false, true} {
			if aerr := call(http.MethodGet, get, "", direct); aerr != nil {
				t.Errorf("get %d (direct %t): %s", i, direct, aerr.message)
			}
			if aerr := call(http.MethodGet, list, "maxResults=10", direct); aerr != nil {
				t.Errorf("list %d (direct %t): %s", i, direct, aerr.message)
			}
			if aerr := call(http.MethodGet, list, "bogus=1", direct); aerr == nil {
				t.Errorf("list with an unknown parameter %d (direct %t) passed", i, direct)
			}
			if aerr := call(http.MethodGet, list, "maxResults=10&maxResults=11", direct); aerr == nil {
				t.Errorf("list with maxResults twice %d (direct %t) passed", i, direct)
			}
			if aerr := call(http.MethodGet, "/compute/v1/projects/p/zones/us-central1-a/instances/Bad_Name", "", direct); aerr == nil {
				t.Errorf("get of an invalid name %d (direct %t) passed", i, direct)
			}
		}
	}
}
