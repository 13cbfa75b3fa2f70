// Package storetest is the conformance suite of store.Store: every
// implementation (the Firestore adapter, the in-memory store) runs the same
// Run against a fresh, empty store per subtest, so both keep one contract.
//
// Records in the suite use times at microsecond precision (Firestore's) and
// compare with go-cmp, where time.Time values compare with Equal (the instant,
// not the location) and nil and empty slices are equal.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Option configures Run.
type Option func(*config)

type config struct {
	writes func(store.Store) int64
}

// WithWriteCounter lets Run check that Update writes only what changed.
// count returns the number of records (event markers included) the store
// has written or deleted in committed Updates so far. Without it, that
// subtest only checks values.
func WithWriteCounter(count func(store.Store) int64) Option {
	return func(c *config) { c.writes = count }
}

// Cluster is the cluster id most subtests use.
const Cluster = "c1"

// T0 is the suite's base time, at microsecond precision.
var T0 = time.Date(2026, 3, 1, 12, 30, 45, 123456000, time.UTC)

// Subtest timeouts. The emulator's pessimistic locking makes contended
// transactions slow.
const (
	timeout           = 30 * time.Second
	contentionTimeout = 90 * time.Second
)

// Run runs the conformance suite. newStore must return a new, empty store
// for each call; it is called once per subtest, with that subtest's t.
func Run(t *testing.T, newStore func(t *testing.T) store.Store, opts ...Option) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store, config)
	}{
		{"RoundTrip", testRoundTrip},
		{"ReadUnknownCluster", testReadUnknownCluster},
		{"UpdateRequiresCluster", testUpdateRequiresCluster},
		{"FnSeesCommittedState", testFnSeesCommittedState},
		{"WritesOnlyChanges", testWritesOnlyChanges},
		{"RemoveDeletes", testRemoveDeletes},
		{"ScopePools", testScopePools},
		{"ScopeAllPools", testScopeAllPools},
		{"ScopeExplicitJobs", testScopeExplicitJobs},
		{"ScopeJobsOfRequested", testScopeJobsOfRequested},
		{"ScopeManyPools", testScopeManyPools},
		{"ScopeNodesAndPoolRecords", testScopeNodesAndPoolRecords},
		{"DuplicateEvent", testDuplicateEvent},
		{"EventNote", testEventNote},
		{"SlurmView", testSlurmView},
		{"EventsPerCluster", testEventsPerCluster},
		{"FnErrorWritesNothing", testFnErrorWritesNothing},
		{"NoAliasing", testNoAliasing},
		{"NoAliasingDeep", testNoAliasingDeep},
		{"SharedPartsReplaced", testSharedPartsReplaced},
		{"Contention", testContention},
		{"ConcurrentSameEvent", testConcurrentSameEvent},
		{"Clusters", testClusters},
		{"ForgetEvents", testForgetEvents},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			tc.fn(t, s, cfg)
		})
	}
}

// cmpOpts compare records that went through a store.
var cmpOpts = cmp.Options{cmpopts.EquateEmpty()}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// Sample records. Every field is set, times are at microsecond precision and
// some carry a non-UTC location.

var east = time.FixedZone("UTC+5:30", 5*3600+1800)

func sampleCluster(id string) *model.Cluster {
	return &model.Cluster{
		ID:          id,
		Spec:        []byte(`{"name":"` + id + `","pools":[{"id":"a"}],"bin":"\u0000\u00ff"}`),
		SpecVersion: 3,
		SpecSHA256:  "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Project:     "flexslurm-test",
		Node: nodeconfig.Settings{
			Image:          "projects/debian-cloud/global/images/debian-12-bookworm-v20251111",
			PoolImages:     map[string]string{"a": "projects/p/global/images/custom-1"},
			ServiceAccount: "flexslurm-node@flexslurm-test.iam.gserviceaccount.com",
			ConfServer:     id + "-controller",
			MungeKeySecret: "projects/flexslurm-test/secrets/" + id + "-munge-key/versions/latest",
			Home:           nodeconfig.Mount{Storage: "projects/p/locations/us-central1-a/instances/home", Type: nodeconfig.MountNFS, Source: "10.0.0.2:/home", Dir: "/home"},
			Topics:         nodeconfig.Topics{Jobs: "job-pending", Health: "health-failure"},
		},
		UpdatedAt: T0.In(east),
	}
}

// sampleTemplateBody is an instance template body as a pool record keeps
// it: a few KB of JSON (metadata values escaped, a startup script's
// newlines and shell), the size Firestore must store in a pool document.
func sampleTemplateBody(pool string) string {
	script := strings.Repeat(`#!/bin/bash\nset -euo pipefail\ncurl -fsS \"http://metadata/x?a=1&b=2\" > /tmp/s && exec /tmp/s <&- # ü\n`, 40)
	return `{"description":"flexslurm node pool ` + pool + `","properties":{"machineType":"a3-ultragpu-8g",` +
		`"metadata":{"items":[{"key":"startup-script","value":"` + script + `"}]}}}`
}

func samplePool(id string) *model.Pool {
	return &model.Pool{
		ID:             id,
		Zone:           "us-central1-a",
		MIG:            "mig-" + id,
		Template:       "tpl-" + id,
		TemplateBody:   sampleTemplateBody(id),
		MinNodes:       1,
		MaxNodes:       4,
		MaxRunDuration: 7*24*time.Hour - time.Nanosecond,
		RunDuration:    6*time.Hour + 123456789*time.Nanosecond,
		UseJobDuration: true,
		Ready:          true,
		UpdatedAt:      T0.Add(time.Second),
	}
}

func sampleNode(pool string, i int) *model.Node {
	name := model.NodeName(Cluster, pool, i)
	kind := model.NodeDynamic
	if i == 0 {
		kind = model.NodeStatic
	}
	return &model.Node{
		Name:              name,
		Pool:              pool,
		Index:             i,
		Kind:              kind,
		Generation:        2,
		Phase:             model.PhaseRunning,
		VMName:            model.VMName(name, 2),
		VMID:              "1234567890123456789",
		ResizeRequest:     "rr-" + name + "-2",
		JobID:             "17",
		RequestedAt:       T0.Add(-time.Hour),
		RunningAt:         T0.Add(-30 * time.Minute).In(east),
		RunDuration:       2*time.Hour + 15*time.Minute,
		TerminationTime:   T0.Add(6 * time.Hour),
		Repair:            model.RepairHost,
		RepairSince:       T0.Add(-5 * time.Minute).In(east),
		RepairReason:      "health check failed: GPU 3: Xid 79",
		RepairJob:         "17",
		HostRepaired:      1,
		InconclusiveCount: 1,
		InconclusiveSince: T0.Add(-2 * time.Hour),
		LastEnd:           model.EndExpired,
		Reason:            "capacity granted",
		UpdatedAt:         T0,
	}
}

func sampleJob(id, pool string, state model.JobState) *model.Job {
	return &model.Job{
		ID:            id,
		Partition:     "gpu",
		Pool:          pool,
		State:         state,
		NodesWanted:   2,
		Nodes:         []string{model.NodeName(Cluster, pool, 1), model.NodeName(Cluster, pool, 2)},
		Generation:    1,
		ResizeRequest: "rr-job-" + id + "-1",
		Requeues:      1,
		SubmittedAt:   T0.Add(-2 * time.Hour),
		UpdatedAt:     T0.Add(-time.Minute),
		Reason:        "waiting for capacity",
	}
}

// fixture is the state seed writes: pools a and b, three nodes, and jobs in
// every state.
func fixture() *model.State {
	st := model.NewState()
	st.Cluster = sampleCluster(Cluster)
	for _, p := range []string{"a", "b"} {
		st.Pools[p] = samplePool(p)
	}
	for _, n := range []*model.Node{sampleNode("a", 0), sampleNode("a", 1), sampleNode("b", 0)} {
		st.Nodes[n.Name] = n
	}
	for _, j := range []*model.Job{
		sampleJob("10", "a", model.JobPending),
		sampleJob("11", "a", model.JobRunning),
		sampleJob("12", "a", model.JobFinished),
		sampleJob("13", "a", model.JobCancelled),
		sampleJob("20", "b", model.JobPending),
		sampleJob("21", "b", model.JobFinished),
	} {
		st.Jobs[j.ID] = j
	}
	return st
}

// seed writes fixture() to cluster Cluster and returns it.
func seed(t *testing.T, ctx context.Context, s store.Store) *model.State {
	t.Helper()
	want := fixture()
	src := want.Clone()
	if err := s.Update(ctx, store.Scope{Cluster: Cluster, AllPools: true}, func(st *model.State) error {
		st.Cluster = src.Cluster
		for k, v := range src.Pools {
			st.Pools[k] = v
		}
		for k, v := range src.Nodes {
			st.Nodes[k] = v
		}
		for k, v := range src.Jobs {
			st.Jobs[k] = v
		}
		return nil
	}); err != nil {
		t.Fatalf("seeding: %v", err)
	}
	return want
}

// pick returns the part of full a scope of pools and explicit jobs selects,
// computed independently of any store.
func pick(full *model.State, pools []string, jobs []string) *model.State {
	out := full.Clone()
	keep := func(p string) bool { return slices.Contains(pools, p) }
	for id := range out.Pools {
		if !keep(id) {
			delete(out.Pools, id)
		}
	}
	for name, n := range out.Nodes {
		if !keep(n.Pool) {
			delete(out.Nodes, name)
		}
	}
	for id, j := range out.Jobs {
		if !(keep(j.Pool) && j.State.Active()) && !slices.Contains(jobs, id) {
			delete(out.Jobs, id)
		}
	}
	return out
}

func read(t *testing.T, ctx context.Context, s store.Store, scope store.Scope) *model.State {
	t.Helper()
	st, err := s.Read(ctx, scope)
	if err != nil {
		t.Fatalf("Read(%+v): %v", scope, err)
	}
	return st
}

func checkState(t *testing.T, what string, got, want *model.State) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("%s: state mismatch (-want +got):\n%s", what, diff)
	}
}

func update(t *testing.T, ctx context.Context, s store.Store, scope store.Scope, fn func(st *model.State) error) {
	t.Helper()
	if err := s.Update(ctx, scope, fn); err != nil {
		t.Fatalf("Update(%+v): %v", scope, err)
	}
}

func node(t *testing.T, ctx context.Context, s store.Store, name, pool string) *model.Node {
	t.Helper()
	n, ok := read(t, ctx, s, store.Scope{Cluster: Cluster, Pools: []string{pool}}).Nodes[name]
	if !ok {
		t.Fatalf("node %s of pool %s not found", name, pool)
	}
	return n
}

func testRoundTrip(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	want := seed(t, ctx, s)
	all := []string{"a", "b"}
	ids := []string{"10", "11", "12", "13", "20", "21"}
	checkState(t, "Read after seed", read(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true, Jobs: ids}), want)

	// Zero values round-trip too: zero times, nil slices, empty strings.
	update(t, ctx, s, store.Scope{Cluster: Cluster}, func(st *model.State) error {
		st.Nodes["bare"] = &model.Node{Name: "bare", Pool: "a"}
		st.Jobs["bare"] = &model.Job{ID: "bare", Pool: "a", State: model.JobPending}
		st.Pools["bare"] = &model.Pool{ID: "bare"}
		return nil
	})
	want.Nodes["bare"] = &model.Node{Name: "bare", Pool: "a"}
	want.Jobs["bare"] = &model.Job{ID: "bare", Pool: "a", State: model.JobPending}
	want.Pools["bare"] = &model.Pool{ID: "bare"}
	checkState(t, "Read after zero records", read(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true, Jobs: ids}), want)

	// fn sees the same state Read returns.
	update(t, ctx, s, store.Scope{Cluster: Cluster, Pools: all, Jobs: ids}, func(st *model.State) error {
		checkState(t, "state given to fn", st, pick(want, all, ids))
		return nil
	})

	// Spec bytes stay bytes, durations stay exact.
	got := read(t, ctx, s, store.Scope{Cluster: Cluster, Pools: []string{"a"}})
	if string(got.Cluster.Spec) != string(want.Cluster.Spec) {
		t.Errorf("Spec = %q, want %q", got.Cluster.Spec, want.Cluster.Spec)
	}
	if d := got.Pools["a"].RunDuration; d != want.Pools["a"].RunDuration {
		t.Errorf("RunDuration = %v (%d ns), want %v", d, int64(d), want.Pools["a"].RunDuration)
	}
}

func testReadUnknownCluster(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	got := read(t, ctx, s, store.Scope{Cluster: "never", AllPools: true, Jobs: []string{"1"}})
	checkState(t, "unknown cluster", got, model.NewState())
	if got.Pools == nil || got.Nodes == nil || got.Jobs == nil {
		t.Errorf("Read returned nil maps: %+v", got)
	}
}

func testUpdateRequiresCluster(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	called := false
	err := s.Update(ctx, store.Scope{AllPools: true}, func(*model.State) error { called = true; return nil })
	if err == nil {
		t.Error("Update without a cluster succeeded")
	}
	if called {
		t.Error("Update without a cluster called fn")
	}
}

func testFnSeesCommittedState(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	scope := store.Scope{Cluster: Cluster, Pools: []string{"a"}}
	update(t, ctx, s, scope, func(st *model.State) error {
		if st.Cluster != nil || len(st.Pools)+len(st.Nodes)+len(st.Jobs) != 0 {
			t.Errorf("first Update: state not empty: %+v", st)
		}
		if st.Pools == nil || st.Nodes == nil || st.Jobs == nil {
			t.Fatalf("first Update: nil maps: %+v", st)
		}
		st.Pools["a"] = samplePool("a")
		return nil
	})
	for i := range 3 {
		update(t, ctx, s, scope, func(st *model.State) error {
			p, ok := st.Pools["a"]
			if !ok {
				return errors.New("pool a missing")
			}
			if p.MaxNodes != 4+i {
				t.Errorf("Update %d: MaxNodes = %d, want %d", i, p.MaxNodes, 4+i)
			}
			p.MaxNodes++
			return nil
		})
	}
	if got := read(t, ctx, s, scope).Pools["a"].MaxNodes; got != 7 {
		t.Errorf("MaxNodes = %d, want 7", got)
	}
}

func testWritesOnlyChanges(t *testing.T, s store.Store, cfg config) {
	ctx := ctxFor(t, timeout)
	want := seed(t, ctx, s)
	count := func() int64 { return 0 }
	if cfg.writes != nil {
		count = func() int64 { return cfg.writes(s) }
	}
	wrote := func(what string, wantN int64, do func()) {
		t.Helper()
		before := count()
		do()
		if got := count() - before; cfg.writes != nil && got != wantN {
			t.Errorf("%s: wrote %d records, want %d", what, got, wantN)
		}
	}
	all := store.Scope{Cluster: Cluster, AllPools: true, Jobs: []string{"12", "13", "21"}}
	wrote("unchanged", 0, func() {
		update(t, ctx, s, all, func(st *model.State) error { return nil })
	})
	wrote("unchanged with event", 1, func() {
		s2 := all
		s2.EventID = "noop-event"
		update(t, ctx, s, s2, func(st *model.State) error { return nil })
	})
	n := model.NodeName(Cluster, "a", 1)
	wrote("one node changed", 1, func() {
		update(t, ctx, s, all, func(st *model.State) error {
			st.Nodes[n].Phase = model.PhaseDeleting
			st.Nodes[n].Reason = "idle"
			return nil
		})
	})
	want.Nodes[n].Phase, want.Nodes[n].Reason = model.PhaseDeleting, "idle"
	wrote("cluster, pool and job changed, one job added", 4, func() {
		update(t, ctx, s, all, func(st *model.State) error {
			st.Cluster.SpecVersion++
			st.Pools["a"].Ready = false
			st.Jobs["10"].State = model.JobRunning
			st.Jobs["30"] = sampleJob("30", "b", model.JobPending)
			return nil
		})
	})
	want.Cluster.SpecVersion++
	want.Pools["a"].Ready = false
	want.Jobs["10"].State = model.JobRunning
	want.Jobs["30"] = sampleJob("30", "b", model.JobPending)
	wrote("same values assigned again", 0, func() {
		update(t, ctx, s, all, func(st *model.State) error {
			c := *st.Cluster
			st.Cluster = &c
			st.Nodes[n] = new(*st.Nodes[n])
			st.Jobs["30"] = sampleJob("30", "b", model.JobPending)
			return nil
		})
	})
	all.Jobs = append(all.Jobs, "30")
	checkState(t, "Read", read(t, ctx, s, all), pick(want, []string{"a", "b"}, all.Jobs))
}

func testRemoveDeletes(t *testing.T, s store.Store, cfg config) {
	ctx := ctxFor(t, timeout)
	want := seed(t, ctx, s)
	a1 := model.NodeName(Cluster, "a", 1)
	var before int64
	if cfg.writes != nil {
		before = cfg.writes(s)
	}
	update(t, ctx, s, store.Scope{Cluster: Cluster, Pools: []string{"a"}, Jobs: []string{"12"}}, func(st *model.State) error {
		delete(st.Nodes, a1)
		delete(st.Jobs, "10")
		delete(st.Jobs, "12") // finished, loaded by id
		return nil
	})
	if cfg.writes != nil {
		if got := cfg.writes(s) - before; got != 3 {
			t.Errorf("deleting 3 records wrote %d", got)
		}
	}
	delete(want.Nodes, a1)
	delete(want.Jobs, "10")
	delete(want.Jobs, "12")
	ids := []string{"10", "11", "12", "13", "20", "21"}
	checkState(t, "after deleting a node and two jobs", read(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true, Jobs: ids}), want)

	update(t, ctx, s, store.Scope{Cluster: Cluster, Pools: []string{"b"}}, func(st *model.State) error {
		delete(st.Pools, "b")
		for name := range st.Nodes {
			delete(st.Nodes, name)
		}
		return nil
	})
	delete(want.Pools, "b")
	delete(want.Nodes, model.NodeName(Cluster, "b", 0))
	checkState(t, "after deleting pool b and its nodes", read(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true, Jobs: ids}), want)

	// A deleted record can be created again.
	update(t, ctx, s, store.Scope{Cluster: Cluster, Pools: []string{"a"}}, func(st *model.State) error {
		if _, ok := st.Nodes[a1]; ok {
			t.Errorf("deleted node %s still loaded", a1)
		}
		st.Nodes[a1] = sampleNode("a", 1)
		return nil
	})
	want.Nodes[a1] = sampleNode("a", 1)
	checkState(t, "after re-creating a node", read(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true, Jobs: ids}), want)
}

func testScopePools(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	full := seed(t, ctx, s)
	for _, tc := range []struct {
		name  string
		pools []string
		want  []string
	}{
		{"none", nil, nil},
		{"a", []string{"a"}, []string{"a"}},
		{"b", []string{"b"}, []string{"b"}},
		{"a and b", []string{"b", "a"}, []string{"a", "b"}},
		{"duplicates and unknown", []string{"a", "zz", "a"}, []string{"a"}},
	} {
		scope := store.Scope{Cluster: Cluster, Pools: tc.pools}
		want := pick(full, tc.want, nil)
		checkState(t, "Read pools "+tc.name, read(t, ctx, s, scope), want)
		update(t, ctx, s, scope, func(st *model.State) error {
			checkState(t, "Update pools "+tc.name, st, want)
			return nil
		})
	}
	// An Update scoped to pool a leaves pool b's records alone.
	update(t, ctx, s, store.Scope{Cluster: Cluster, Pools: []string{"a"}}, func(st *model.State) error {
		st.Nodes[model.NodeName(Cluster, "a", 0)].Reason = "touched"
		return nil
	})
	full.Nodes[model.NodeName(Cluster, "a", 0)].Reason = "touched"
	checkState(t, "after a scoped Update", read(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true, Jobs: []string{"12", "13", "21"}}), full)
}

func testScopeAllPools(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	full := seed(t, ctx, s)
	want := pick(full, []string{"a", "b"}, nil)
	scope := store.Scope{Cluster: Cluster, AllPools: true, Pools: []string{"ignored"}}
	checkState(t, "Read AllPools", read(t, ctx, s, scope), want)
	update(t, ctx, s, scope, func(st *model.State) error {
		checkState(t, "Update AllPools", st, want)
		return nil
	})
	// A job leaving the active states leaves the pool scope.
	update(t, ctx, s, scope, func(st *model.State) error {
		st.Jobs["20"].State = model.JobFinished
		return nil
	})
	got := read(t, ctx, s, scope)
	if _, ok := got.Jobs["20"]; ok {
		t.Error("finished job 20 still in the AllPools scope")
	}
	if j := read(t, ctx, s, store.Scope{Cluster: Cluster, Jobs: []string{"20"}}).Jobs["20"]; j == nil || j.State != model.JobFinished {
		t.Errorf("job 20 by id = %+v, want finished", j)
	}
}

func testScopeExplicitJobs(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	full := seed(t, ctx, s)
	jobs := []string{"12", "21", "20", "missing", "12"}
	for _, tc := range []struct {
		name  string
		pools []string
	}{
		{"no pools", nil},
		{"pool a", []string{"a"}},
	} {
		scope := store.Scope{Cluster: Cluster, Pools: tc.pools, Jobs: jobs}
		want := pick(full, tc.pools, jobs)
		checkState(t, "Read jobs with "+tc.name, read(t, ctx, s, scope), want)
		update(t, ctx, s, scope, func(st *model.State) error {
			checkState(t, "Update jobs with "+tc.name, st, want)
			return nil
		})
	}
	// A job seen for the first time has no pool; loading it by id finds it.
	update(t, ctx, s, store.Scope{Cluster: Cluster, Jobs: []string{"99"}}, func(st *model.State) error {
		if _, ok := st.Jobs["99"]; ok {
			t.Error("job 99 exists before it was created")
		}
		st.Jobs["99"] = &model.Job{ID: "99", State: model.JobPending, NodesWanted: 1, SubmittedAt: T0}
		return nil
	})
	got := read(t, ctx, s, store.Scope{Cluster: Cluster, Jobs: []string{"99"}})
	if diff := cmp.Diff(&model.Job{ID: "99", State: model.JobPending, NodesWanted: 1, SubmittedAt: T0}, got.Jobs["99"], cmpOpts); diff != "" {
		t.Errorf("job 99 (-want +got):\n%s", diff)
	}
}

// testScopeJobsOfRequested loads, beside a scope's active jobs, the job
// of every loaded node still waiting on capacity, whatever the job's
// state: what a reconcile pass needs to stop buying capacity for a job
// that ended.
func testScopeJobsOfRequested(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	seed(t, ctx, s)
	// a-1 waits on capacity for finished job 12, b-0 for finished job 21
	// (pool b, out of a pool-a scope), a-0 runs for job 13 (cancelled).
	update(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true}, func(st *model.State) error {
		for name, job := range map[string]string{model.NodeName(Cluster, "a", 1): "12", model.NodeName(Cluster, "b", 0): "21"} {
			st.Nodes[name].Phase, st.Nodes[name].JobID = model.PhaseRequested, job
		}
		st.Nodes[model.NodeName(Cluster, "a", 0)].JobID = "13"
		return nil
	})
	full := read(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true, Jobs: []string{"12", "13", "21"}})
	for _, tc := range []struct {
		name  string
		scope store.Scope
		want  *model.State
	}{
		{"all pools", store.Scope{Cluster: Cluster, AllPools: true, JobsOfRequested: true}, pick(full, []string{"a", "b"}, []string{"12", "21"})},
		{"pool a", store.Scope{Cluster: Cluster, Pools: []string{"a"}, JobsOfRequested: true}, pick(full, []string{"a"}, []string{"12"})},
		{"without it", store.Scope{Cluster: Cluster, AllPools: true}, pick(full, []string{"a", "b"}, nil)},
	} {
		checkState(t, "Read "+tc.name, read(t, ctx, s, tc.scope), tc.want)
		update(t, ctx, s, tc.scope, func(st *model.State) error {
			checkState(t, "Update "+tc.name, st, tc.want)
			return nil
		})
	}
}

// testScopeNodesAndPoolRecords loads nodes by name and pool records
// without their nodes and jobs: the scope of a job event that names its
// nodes.
func testScopeNodesAndPoolRecords(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	full := seed(t, ctx, s)
	a0, a1, b0 := model.NodeName(Cluster, "a", 0), model.NodeName(Cluster, "a", 1), model.NodeName(Cluster, "b", 0)
	a3 := model.NodeName(Cluster, "a", 3) // no record
	narrow := func(pools, nodes, jobs []string) *model.State {
		out := model.NewState()
		out.Cluster = full.Clone().Cluster
		c := full.Clone()
		for _, p := range pools {
			if v, ok := c.Pools[p]; ok {
				out.Pools[p] = v
			}
		}
		for _, n := range nodes {
			if v, ok := c.Nodes[n]; ok {
				out.Nodes[n] = v
			}
		}
		for _, j := range jobs {
			if v, ok := c.Jobs[j]; ok {
				out.Jobs[j] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		scope store.Scope
		want  *model.State
	}{
		{"pool record only", store.Scope{Cluster: Cluster, PoolRecords: []string{"a"}}, narrow([]string{"a"}, nil, nil)},
		{"unknown pool record", store.Scope{Cluster: Cluster, PoolRecords: []string{"zz"}}, narrow(nil, nil, nil)},
		{"nodes by name", store.Scope{Cluster: Cluster, Nodes: []string{a1, b0, a3, a1}}, narrow(nil, []string{a1, b0}, nil)},
		{"a job's records", store.Scope{Cluster: Cluster, PoolRecords: []string{"a", "a"}, Nodes: []string{a1}, Jobs: []string{"10"}},
			narrow([]string{"a"}, []string{a1}, []string{"10"})},
		{"every pool record", store.Scope{Cluster: Cluster, AllPoolRecords: true}, narrow([]string{"a", "b"}, nil, nil)},
		{"every pool record, a pool whole, nodes and a job", store.Scope{Cluster: Cluster, AllPoolRecords: true, Pools: []string{"b"}, PoolRecords: []string{"a"}, Nodes: []string{a1}, Jobs: []string{"10"}},
			func() *model.State {
				w := pick(full, []string{"b"}, []string{"10"})
				w.Pools["a"] = full.Clone().Pools["a"]
				w.Nodes[a1] = full.Clone().Nodes[a1]
				return w
			}()},
		{"record of a pool also loaded whole", store.Scope{Cluster: Cluster, Pools: []string{"b"}, PoolRecords: []string{"b", "a"}, Nodes: []string{a0}},
			func() *model.State {
				w := pick(full, []string{"b"}, nil)
				w.Pools["a"] = full.Clone().Pools["a"]
				w.Nodes[a0] = full.Clone().Nodes[a0]
				return w
			}()},
	} {
		checkState(t, "Read "+tc.name, read(t, ctx, s, tc.scope), tc.want)
		update(t, ctx, s, tc.scope, func(st *model.State) error {
			checkState(t, "Update "+tc.name, st, tc.want)
			return nil
		})
	}
	// An Update of that scope writes the nodes it loaded or created and
	// leaves every other record of the pool alone.
	scope := store.Scope{Cluster: Cluster, PoolRecords: []string{"a"}, Nodes: []string{a1, a3}, Jobs: []string{"10"}}
	update(t, ctx, s, scope, func(st *model.State) error {
		if _, ok := st.Nodes[a0]; ok {
			t.Errorf("node %s loaded, not in the scope", a0)
		}
		st.Nodes[a1].Reason = "touched"
		n := sampleNode("a", 3)
		st.Nodes[a3] = n
		st.Jobs["10"].Nodes = []string{a1, a3}
		return nil
	})
	full.Nodes[a1].Reason = "touched"
	full.Nodes[a3] = sampleNode("a", 3)
	full.Jobs["10"].Nodes = []string{a1, a3}
	checkState(t, "after an Update by node names", read(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true, Jobs: []string{"12", "13", "21"}}), full)
}

// testScopeManyPools crosses Firestore's 30-value `in` limit.
func testScopeManyPools(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	const n = 35
	full := model.NewState()
	var pools []string
	for i := range n {
		p := fmt.Sprintf("p%02d", i)
		pools = append(pools, p)
		full.Pools[p] = samplePool(p)
		nd := sampleNode(p, 0)
		full.Nodes[nd.Name] = nd
		j := sampleJob(fmt.Sprint(1000+i), p, model.JobRunning)
		full.Jobs[j.ID] = j
		done := sampleJob(fmt.Sprint(2000+i), p, model.JobFinished)
		full.Jobs[done.ID] = done
	}
	src := full.Clone()
	update(t, ctx, s, store.Scope{Cluster: Cluster}, func(st *model.State) error {
		st.Pools, st.Nodes, st.Jobs = src.Pools, src.Nodes, src.Jobs
		return nil
	})
	scope := store.Scope{Cluster: Cluster, Pools: pools[1:]}
	want := pick(full, pools[1:], nil)
	if len(want.Nodes) != n-1 || len(want.Jobs) != n-1 {
		t.Fatalf("fixture: %d nodes, %d jobs", len(want.Nodes), len(want.Jobs))
	}
	checkState(t, "Read 34 pools", read(t, ctx, s, scope), want)
	update(t, ctx, s, scope, func(st *model.State) error {
		checkState(t, "Update 34 pools", st, want)
		return nil
	})
}

func testDuplicateEvent(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	seed(t, ctx, s)
	a0 := model.NodeName(Cluster, "a", 0)
	scope := store.Scope{Cluster: Cluster, Pools: []string{"a"}, EventID: "projects/p/subscriptions/s/messages/42", EventKind: "vm.running"}
	inc := func(st *model.State) error { st.Nodes[a0].Generation++; return nil }
	update(t, ctx, s, scope, inc)
	calls := 0
	err := s.Update(ctx, scope, func(st *model.State) error { calls++; return inc(st) })
	if !errors.Is(err, store.ErrDuplicateEvent) {
		t.Errorf("second Update with event %q: err = %v, want ErrDuplicateEvent", scope.EventID, err)
	}
	if calls != 0 {
		t.Errorf("second Update called fn %d times", calls)
	}
	if g := node(t, ctx, s, a0, "a").Generation; g != 3 {
		t.Errorf("Generation = %d, want 3 (applied once)", g)
	}
	// Another id applies; the kind does not matter for deduplication.
	other := scope
	other.EventID, other.EventKind = "projects/p/subscriptions/s/messages/43", ""
	update(t, ctx, s, other, inc)
	if g := node(t, ctx, s, a0, "a").Generation; g != 4 {
		t.Errorf("Generation = %d, want 4", g)
	}
	other.EventKind = "something.else"
	if err := s.Update(ctx, other, inc); !errors.Is(err, store.ErrDuplicateEvent) {
		t.Errorf("same id with another kind: err = %v, want ErrDuplicateEvent", err)
	}
}

// testEventNote: the note a decision stores with the event marker comes
// back with the duplicate error, and is not stored as a record.
func testEventNote(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	seed(t, ctx, s)
	a0 := model.NodeName(Cluster, "a", 0)
	scope := store.Scope{Cluster: Cluster, Pools: []string{"a"}, EventID: "note-1"}
	note := []byte(`[{"kind":"create_resize_request","name":"rr-1"}]`)
	update(t, ctx, s, scope, func(st *model.State) error {
		st.Nodes[a0].Generation++
		st.EventNote = note
		return nil
	})
	err := s.Update(ctx, scope, func(st *model.State) error { return nil })
	var dup *store.DuplicateError
	if !errors.As(err, &dup) {
		t.Fatalf("second Update: err = %v (%T), want *store.DuplicateError", err, err)
	}
	if !bytes.Equal(dup.Note, note) {
		t.Errorf("note = %q, want %q", dup.Note, note)
	}
	st, err := s.Read(ctx, store.Scope{Cluster: Cluster, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.EventNote) != 0 {
		t.Errorf("Read returned an event note %q; notes live only with markers", st.EventNote)
	}
	// A note above the limit is refused and nothing is written.
	big := store.Scope{Cluster: Cluster, Pools: []string{"a"}, EventID: "note-2"}
	err = s.Update(ctx, big, func(st *model.State) error {
		st.Nodes[a0].Generation = 99
		st.EventNote = make([]byte, store.MaxEventNoteBytes+1)
		return nil
	})
	if err == nil {
		t.Fatal("an oversized note was accepted")
	}
	if g := node(t, ctx, s, a0, "a").Generation; g == 99 {
		t.Error("the update with an oversized note was written")
	}
}

// testSlurmView: the latest Slurm snapshot round-trips, and is loaded only
// when the scope asks for it.
func testSlurmView(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	seed(t, ctx, s)
	at := time.Date(2026, 11, 30, 10, 0, 0, 123000, time.UTC)
	n0, n1, n2 := model.NodeName(Cluster, "a", 0), model.NodeName(Cluster, "a", 1), model.NodeName(Cluster, "a", 2)
	view := &model.SlurmView{
		Version: model.SlurmViewVersion,
		TakenAt: at, ReceivedAt: at.Add(time.Second),
		Nodes: map[string]model.SlurmNode{
			n0: slurmstate.ParseNode(n0, []string{"IDLE", "CLOUD", "POWERED_DOWN", "NOT_RESPONDING"}, ""),
			n1: slurmstate.ParseNode(n1, []string{"allocated", "CLOUD"}, "x"),
			n2: slurmstate.ParseNode(n2, []string{"idle", "DRAIN"}, "flexslurm: health check failed ("+model.VMName(n2, 3)+")"),
		},
		Jobs: []model.SlurmJob{{ID: "12", State: "PENDING", Reason: "Resources", Partition: "a", Nodes: []string{model.NodeName(Cluster, "a", 1)}, NodeCount: 1}},
	}
	update(t, ctx, s, store.Scope{Cluster: Cluster, Slurm: true}, func(st *model.State) error {
		st.Slurm = view
		return nil
	})
	got, err := s.Read(ctx, store.Scope{Cluster: Cluster, Slurm: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(view, got.Slurm); d != "" {
		t.Errorf("Slurm view (-want +got):\n%s", d)
	}
	without, err := s.Read(ctx, store.Scope{Cluster: Cluster, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if without.Slurm != nil {
		t.Error("the Slurm view was loaded by a scope that did not ask for it")
	}
}

func testEventsPerCluster(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	for _, c := range []string{"c1", "c2"} {
		update(t, ctx, s, store.Scope{Cluster: c, EventID: "shared-id"}, func(st *model.State) error {
			st.Cluster = sampleCluster(c)
			return nil
		})
	}
	for _, c := range []string{"c1", "c2"} {
		if err := s.Update(ctx, store.Scope{Cluster: c, EventID: "shared-id"}, func(*model.State) error { return nil }); !errors.Is(err, store.ErrDuplicateEvent) {
			t.Errorf("cluster %s: err = %v, want ErrDuplicateEvent", c, err)
		}
	}
}

func testFnErrorWritesNothing(t *testing.T, s store.Store, cfg config) {
	ctx := ctxFor(t, timeout)
	want := seed(t, ctx, s)
	ids := []string{"10", "11", "12", "13", "20", "21"}
	scope := store.Scope{Cluster: Cluster, AllPools: true, Jobs: ids, EventID: "evt-1", EventKind: "job.pending"}
	var before int64
	if cfg.writes != nil {
		before = cfg.writes(s)
	}
	boom := errors.New("boom")
	err := s.Update(ctx, scope, func(st *model.State) error {
		st.Cluster.SpecVersion = 99
		st.Nodes[model.NodeName(Cluster, "a", 0)].Phase = model.PhaseReleased
		delete(st.Nodes, model.NodeName(Cluster, "b", 0))
		delete(st.Jobs, "12")
		st.Jobs["50"] = sampleJob("50", "a", model.JobPending)
		return boom
	})
	if err != boom { // the contract is "returned unchanged", not merely wrapped
		t.Errorf("Update returned %v (%T), want fn's error unchanged", err, err)
	}
	if cfg.writes != nil {
		if got := cfg.writes(s) - before; got != 0 {
			t.Errorf("failed Update wrote %d records", got)
		}
	}
	checkState(t, "after failed Update", read(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true, Jobs: append(ids, "50")}), want)

	// The event was not recorded: a retry applies it.
	called := false
	update(t, ctx, s, scope, func(st *model.State) error {
		called = true
		st.Jobs["50"] = sampleJob("50", "a", model.JobPending)
		return nil
	})
	if !called {
		t.Error("retry of the failed event did not call fn")
	}
	want.Jobs["50"] = sampleJob("50", "a", model.JobPending)
	checkState(t, "after retry", read(t, ctx, s, store.Scope{Cluster: Cluster, AllPools: true, Jobs: append(ids, "50")}), want)
}

// testNoAliasing: records fn handed to the store, and records Read returned,
// do not share memory with what the store keeps. The Slurm view and the
// cluster record's Spec and Node.PoolImages may be shared, as they are
// replaced, never edited in place (model.State.CloneEditable): the edits
// here replace them (testSharedPartsReplaced).
func testNoAliasing(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	want := seed(t, ctx, s)
	scope := store.Scope{Cluster: Cluster, AllPools: true, Jobs: []string{"12", "13", "21"}}
	var kept *model.State
	update(t, ctx, s, scope, func(st *model.State) error {
		st.Jobs["10"].Nodes = []string{"x", "y"}
		st.Cluster.Spec = []byte(`{"v":2}`)
		kept = st
		return nil
	})
	want.Jobs["10"].Nodes = []string{"x", "y"}
	want.Cluster.Spec = []byte(`{"v":2}`)
	kept.Jobs["10"].Nodes[0] = "mutated"
	kept.Cluster.Spec = []byte("!")
	kept.Cluster.SpecVersion++
	kept.Nodes[model.NodeName(Cluster, "a", 0)].Reason = "mutated"
	got := read(t, ctx, s, scope)
	checkState(t, "after mutating fn's state", got, pick(want, []string{"a", "b"}, scope.Jobs))
	got.Jobs["10"].Nodes[1] = "mutated"
	got.Cluster.Spec = []byte("!")
	got.Cluster.Node.PoolImages = map[string]string{"a": "mutated"}
	got.Cluster.Node.Image = "mutated"
	checkState(t, "after mutating Read's state", read(t, ctx, s, scope), pick(want, []string{"a", "b"}, scope.Jobs))
}

// testNoAliasingDeep: editing every field reachable from a state Read
// returned, from the state an Update's fn kept, or from the state of an
// Update whose fn edits and then fails, in place (through every pointer,
// slice element and map entry), changes nothing stored. What a store may
// share, since it is replaced and never edited in place (the Slurm view,
// the cluster record's Spec and Node.PoolImages: model.State.CloneEditable),
// is first replaced by a copy of its own, which is then edited too
// (ownShared): every other part must be the caller's alone.
func testNoAliasingDeep(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	seed(t, ctx, s)
	n0, n1 := model.NodeName(Cluster, "a", 0), model.NodeName(Cluster, "a", 1)
	scope := store.Scope{Cluster: Cluster, AllPools: true, Jobs: []string{"12", "13", "21"}, Slurm: true}
	update(t, ctx, s, scope, func(st *model.State) error {
		st.Pools["a"].CapacityWaits = []int64{60, 3600}
		st.Pools["a"].Shortage = &model.Shortage{Class: "stockout", Code: "ZONE_RESOURCE_POOL_EXHAUSTED", Message: "no capacity", Request: "rr-1", Since: T0}
		st.Slurm = &model.SlurmView{
			Version: model.SlurmViewVersion, TakenAt: T0, ReceivedAt: T0.Add(time.Second),
			Nodes: map[string]model.SlurmNode{
				n0: slurmstate.ParseNode(n0, []string{"IDLE", "CLOUD", "DRAIN"}, "flexslurm: health check failed ("+model.VMName(n0, 2)+")"),
				n1: slurmstate.ParseNode(n1, []string{"allocated", "CLOUD"}, "x"),
			},
			Jobs:   []model.SlurmJob{{ID: "11", State: "RUNNING", Partition: "a", Nodes: []string{n0, n1}, NodeCount: 2}},
			Config: &model.SlurmConfigCheck{SpecSHA256: "abc", Divergences: []model.SlurmDivergence{{Problem: "p", Fix: "f"}}},
		}
		return nil
	})
	// A deep copy (model's TestCloneSharesNothing), so that want is not
	// what the edits below reach if the store shares records.
	want := read(t, ctx, s, scope).Clone()
	if want.Pools["a"].Shortage == nil || want.Slurm == nil || want.Slurm.Config == nil || len(want.Slurm.Nodes[n0].Flags) == 0 {
		t.Fatalf("the records to edit were not stored: %+v", want)
	}

	got := read(t, ctx, s, scope)
	ownShared(got)
	scramble(reflect.ValueOf(got).Elem())
	if cmp.Equal(want, got, cmpOpts) {
		t.Fatal("scramble changed nothing")
	}
	checkState(t, "after editing Read's state", read(t, ctx, s, scope), want)

	var kept *model.State
	update(t, ctx, s, scope, func(st *model.State) error {
		kept = st
		return nil
	})
	ownShared(kept)
	scramble(reflect.ValueOf(kept).Elem())
	checkState(t, "after editing the state fn kept", read(t, ctx, s, scope), want)

	boom := errors.New("boom")
	if err := s.Update(ctx, scope, func(st *model.State) error {
		ownShared(st)
		scramble(reflect.ValueOf(st).Elem())
		return boom
	}); err != boom {
		t.Fatalf("Update returned %v, want fn's error", err)
	}
	checkState(t, "after a failed Update edited its state", read(t, ctx, s, scope), want)
}

// ownShared replaces what a store may share with the states it hands out
// (model.State.CloneEditable) by copies of st's own, as a caller that
// wants to edit them must.
func ownShared(st *model.State) {
	if st.Cluster != nil {
		st.Cluster.Spec = bytes.Clone(st.Cluster.Spec)
		st.Cluster.Node.PoolImages = maps.Clone(st.Cluster.Node.PoolImages)
	}
	if st.Slurm != nil {
		st.Slurm = st.Slurm.Clone()
	}
}

// testSharedPartsReplaced: the Slurm view, spec and pool images a
// transaction replaces are stored, and what a reader got before stays as
// it was (a store that shares them replaces them, it never writes into
// the ones it handed out); replacing them with equal copies writes
// nothing.
func testSharedPartsReplaced(t *testing.T, s store.Store, cfg config) {
	ctx := ctxFor(t, timeout)
	seed(t, ctx, s)
	n0 := model.NodeName(Cluster, "a", 0)
	scope := store.Scope{Cluster: Cluster, Slurm: true}
	update(t, ctx, s, scope, func(st *model.State) error {
		st.Slurm = &model.SlurmView{
			Version: model.SlurmViewVersion, TakenAt: T0, ReceivedAt: T0.Add(time.Second),
			Nodes:  map[string]model.SlurmNode{n0: slurmstate.ParseNode(n0, []string{"IDLE", "CLOUD"}, "")},
			Jobs:   []model.SlurmJob{{ID: "11", State: "RUNNING", Partition: "a", Nodes: []string{n0}, NodeCount: 1}},
			Config: &model.SlurmConfigCheck{SpecSHA256: "abc", Divergences: []model.SlurmDivergence{{Problem: "p", Fix: "f"}}},
		}
		return nil
	})
	old := read(t, ctx, s, scope)
	want := old.Clone()

	var writes int64
	if cfg.writes != nil {
		writes = cfg.writes(s)
	}
	update(t, ctx, s, scope, func(st *model.State) error {
		ownShared(st) // equal copies: nothing to write
		return nil
	})
	if cfg.writes != nil {
		if n := cfg.writes(s) - writes; n != 0 {
			t.Errorf("replacing the Slurm view, spec and pool images by equal copies wrote %d records, want 0", n)
		}
	}

	update(t, ctx, s, scope, func(st *model.State) error {
		v := st.Slurm.Clone()
		v.TakenAt = T0.Add(time.Minute)
		v.Nodes[n0] = slurmstate.ParseNode(n0, []string{"IDLE", "CLOUD", "DRAIN"}, "x")
		v.Jobs[0].Nodes = nil
		v.Config.Divergences = nil
		st.Slurm = v
		st.Cluster.Spec = []byte(`{"name":"` + Cluster + `","v":2}`)
		st.Cluster.Node.PoolImages = map[string]string{"a": "projects/p/global/images/custom-2"}
		return nil
	})
	got := read(t, ctx, s, scope)
	if got.Slurm.TakenAt.Equal(T0) || got.Slurm.Nodes[n0].Reason != "x" || len(got.Slurm.Jobs[0].Nodes) != 0 ||
		string(got.Cluster.Spec) != `{"name":"`+Cluster+`","v":2}` || got.Cluster.Node.PoolImages["a"] != "projects/p/global/images/custom-2" {
		t.Errorf("the replaced Slurm view, spec and pool images were not stored: %+v %s %v", got.Slurm, got.Cluster.Spec, got.Cluster.Node.PoolImages)
	}
	checkState(t, "a state read before the replacement", old, want)
}

var timeType = reflect.TypeOf(time.Time{})

// scramble changes, in place, every settable value reachable from v:
// strings, numbers, booleans and times, through pointers, slice elements
// and map entries.
func scramble(v reflect.Value) {
	if v.Type() == timeType {
		if v.CanSet() {
			v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Second)))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(v.String() + "~")
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.CanSet() {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.CanSet() {
			v.SetUint(v.Uint() ^ 1)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			scramble(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			scramble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			scramble(e)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			scramble(v.Field(i))
		}
	}
}

func testContention(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, contentionTimeout)
	seed(t, ctx, s)
	const workers, increments = 4, 10
	a0 := model.NodeName(Cluster, "a", 0)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers*increments)
	for w := range workers {
		wg.Go(func() {
			for i := range increments {
				scope := store.Scope{Cluster: Cluster, Pools: []string{"a"}, EventID: fmt.Sprintf("inc-%d-%d", w, i), EventKind: "test.increment"}
				if err := s.Update(ctx, scope, func(st *model.State) error {
					n, ok := st.Nodes[a0]
					if !ok {
						return fmt.Errorf("node %s missing", a0)
					}
					n.Generation++
					n.UpdatedAt = T0.Add(time.Duration(n.Generation) * time.Microsecond)
					return nil
				}); err != nil {
					errs <- fmt.Errorf("worker %d increment %d: %w", w, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d×%d contended Updates took %v", workers, increments, time.Since(start).Round(time.Millisecond))
	if g := node(t, ctx, s, a0, "a").Generation; g != 2+workers*increments {
		t.Errorf("Generation = %d, want %d (lost updates)", g, 2+workers*increments)
	}
}

func testConcurrentSameEvent(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, contentionTimeout)
	seed(t, ctx, s)
	const workers = 4
	a0 := model.NodeName(Cluster, "a", 0)
	scope := store.Scope{Cluster: Cluster, Pools: []string{"a"}, EventID: "same-event", EventKind: "test.same"}
	var wg sync.WaitGroup
	results := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			results[w] = s.Update(ctx, scope, func(st *model.State) error {
				st.Nodes[a0].Generation++
				return nil
			})
		})
	}
	wg.Wait()
	applied := 0
	for w, err := range results {
		switch {
		case err == nil:
			applied++
		case errors.Is(err, store.ErrDuplicateEvent):
		default:
			t.Errorf("worker %d: %v", w, err)
		}
	}
	if applied != 1 {
		t.Errorf("%d Updates applied event %q, want exactly 1", applied, scope.EventID)
	}
	if g := node(t, ctx, s, a0, "a").Generation; g != 3 {
		t.Errorf("Generation = %d, want 3", g)
	}
}

func testClusters(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	ids, err := s.Clusters(ctx)
	if err != nil {
		t.Fatalf("Clusters on an empty store: %v", err)
	}
	if len(ids) != 0 {
		t.Errorf("Clusters on an empty store = %q", ids)
	}
	for _, c := range []string{"zeta", "alpha", "mid"} {
		update(t, ctx, s, store.Scope{Cluster: c}, func(st *model.State) error {
			st.Cluster = sampleCluster(c)
			return nil
		})
	}
	// A cluster with records but no cluster record was never applied.
	update(t, ctx, s, store.Scope{Cluster: "orphan", Pools: []string{"a"}}, func(st *model.State) error {
		st.Pools["a"] = samplePool("a")
		return nil
	})
	// An Update that fails or only reads creates nothing.
	_ = s.Update(ctx, store.Scope{Cluster: "failed"}, func(st *model.State) error {
		st.Cluster = sampleCluster("failed")
		return errors.New("no")
	})
	update(t, ctx, s, store.Scope{Cluster: "readonly"}, func(*model.State) error { return nil })
	ids, err = s.Clusters(ctx)
	if err != nil {
		t.Fatalf("Clusters: %v", err)
	}
	if diff := cmp.Diff([]string{"alpha", "mid", "zeta"}, ids); diff != "" {
		t.Errorf("Clusters (-want +got):\n%s", diff)
	}
}

func testForgetEvents(t *testing.T, s store.Store, _ config) {
	ctx := ctxFor(t, timeout)
	noop := func(*model.State) error { return nil }
	start := time.Now()
	for _, e := range []struct{ cluster, id string }{{"c1", "e1"}, {"c1", "e2"}, {"c2", "e3"}} {
		update(t, ctx, s, store.Scope{Cluster: e.cluster, EventID: e.id}, noop)
	}
	if n, err := s.ForgetEvents(ctx, "c1", start.Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("ForgetEvents(c1, an hour before) = %d, %v; want 0, nil", n, err)
	}
	if err := s.Update(ctx, store.Scope{Cluster: "c1", EventID: "e1"}, noop); !errors.Is(err, store.ErrDuplicateEvent) {
		t.Errorf("e1 after forgetting nothing: err = %v, want ErrDuplicateEvent", err)
	}
	if n, err := s.ForgetEvents(ctx, "c1", time.Now().Add(time.Minute)); err != nil || n != 2 {
		t.Errorf("ForgetEvents(c1, in a minute) = %d, %v; want 2, nil", n, err)
	}
	if n, err := s.ForgetEvents(ctx, "c1", time.Now().Add(time.Minute)); err != nil || n != 0 {
		t.Errorf("ForgetEvents(c1) again = %d, %v; want 0, nil", n, err)
	}
	called := false
	update(t, ctx, s, store.Scope{Cluster: "c1", EventID: "e1"}, func(*model.State) error { called = true; return nil })
	if !called {
		t.Error("forgotten event e1 did not apply again")
	}
	if err := s.Update(ctx, store.Scope{Cluster: "c2", EventID: "e3"}, noop); !errors.Is(err, store.ErrDuplicateEvent) {
		t.Errorf("e3 of c2 after forgetting c1: err = %v, want ErrDuplicateEvent", err)
	}
	if n, err := s.ForgetEvents(ctx, "never", time.Now().Add(time.Minute)); err != nil || n != 0 {
		t.Errorf("ForgetEvents(unknown cluster) = %d, %v; want 0, nil", n, err)
	}
}
