package store

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
)

// Memory is an in-memory Store. Updates are serialised by one mutex, so they
// never conflict; otherwise it behaves as the Firestore adapter (the
// conformance suite checks both). It is safe for concurrent use.
//
// The states it hands out (Read, and Update's fn) share with the records
// it holds what is replaced, never edited in place: the Slurm view and
// the cluster record's Spec and Node.PoolImages (model.State.CloneEditable);
// a Slurm view a transaction stores is the one its fn put in the state,
// not a copy. It keeps a private copy of each and panics when one of them
// no longer matches it, that is when a caller edited one in place:
// checked after every transaction's fn (the Slurm view when the scope
// loads it, as fn cannot reach it otherwise), so a broken contract fails
// the test or the simulation that breaks it.
type Memory struct {
	mu       sync.Mutex
	clusters map[string]*model.State
	shared   map[string]*sharedCopy          // cluster → private copies of what clusters[cluster] shares
	events   map[string]map[string]eventMark // cluster → event id → marker
	now      func() time.Time
	log      memoryEvents // cluster events (clusterevents.go)

	// Counters, for tests and benchmarks: transactions committed and records written.
	Transactions, Writes int
}

var _ Store = (*Memory)(nil)

type eventMark struct {
	at   time.Time
	note []byte
}

// NewMemory returns an empty store. now stamps event markers; nil means time.Now.
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{clusters: map[string]*model.State{}, shared: map[string]*sharedCopy{},
		events: map[string]map[string]eventMark{}, now: now}
}

func (m *Memory) cluster(id string) (*model.State, *sharedCopy) {
	st, ok := m.clusters[id]
	if !ok {
		st = model.NewState()
		m.clusters[id] = st
		m.shared[id] = &sharedCopy{}
	}
	return st, m.shared[id]
}

// sharedCopy holds private copies of what a stored state shares with the
// states Memory hands out, to detect an edit in place.
type sharedCopy struct {
	slurm *model.SlurmView
	spec  []byte
	// poolImages is the cluster record's Node.PoolImages.
	poolImages map[string]string
}

// exactClone is SlurmView.Clone but for nil maps and slices, which stay
// nil (Clone makes them empty), so that the copy is reflect.DeepEqual to v.
func exactClone(v *model.SlurmView) *model.SlurmView {
	c := v.Clone()
	if v.Nodes == nil {
		c.Nodes = nil
	}
	if v.Jobs == nil {
		c.Jobs = nil
	}
	return c
}

// check panics when full's shared parts no longer match the private
// copies: the spec and pool images, and the Slurm view with slurm.
func (c *sharedCopy) check(cluster string, full *model.State, slurm bool) {
	if slurm && full.Slurm != nil && !slurmViewEqual(full.Slurm, c.slurm) {
		panic(fmt.Sprintf("store: the stored Slurm view of cluster %s was edited in place; a view is shared "+
			"with the states the store hands out and must be replaced, never edited (model.SlurmView)", cluster))
	}
	if full.Cluster != nil && (!sameBytes(full.Cluster.Spec, c.spec) || !sameMap(full.Cluster.Node.PoolImages, c.poolImages)) {
		panic(fmt.Sprintf("store: the stored spec or pool images of cluster %s were edited in place; they are shared "+
			"with the states the store hands out and must be replaced, never edited (model.Cluster)", cluster))
	}
}

// selectScope puts into out the part of full that scope selects. Its
// maps are out's own (nil when they select nothing: out is read, or
// copied, never added to) but its records are full's: the records a Memory
// stores are never edited in place (a write stores fresh copies,
// applyDiff), so a selection may share them as long as nothing it is
// handed to edits them. Read and Update hand out a copy of it
// (model.State.CloneEditable), View gives it empty maps.
func selectScope(full *model.State, scope Scope, out *model.State) {
	*out = model.State{Cluster: full.Cluster}
	inPool := map[string]bool{}
	for _, p := range scope.Pools {
		inPool[p] = true
	}
	want := func(pool string) bool { return scope.AllPools || inPool[pool] }
	// The maps are sized for what they will hold where it is known (every
	// pool and node under AllPools), instead of growing an entry at a time.
	pools, nodes := len(scope.Pools)+len(scope.PoolRecords), len(scope.Nodes)
	if scope.AllPools || scope.AllPoolRecords {
		pools = len(full.Pools)
	}
	if scope.AllPools {
		nodes = len(full.Nodes)
	}
	// A scope without whole pools (an event about a few named records)
	// selects no record by its pool: the scans of every record are skipped.
	whole := scope.AllPools || len(inPool) > 0
	if whole && !scope.AllPoolRecords {
		for id, p := range full.Pools {
			if want(id) {
				put(&out.Pools, pools, id, p)
			}
		}
	}
	if scope.AllPoolRecords {
		for id, p := range full.Pools {
			put(&out.Pools, pools, id, p)
		}
	}
	for _, id := range scope.PoolRecords {
		if p, ok := full.Pools[id]; ok {
			put(&out.Pools, pools, id, p)
		}
	}
	for _, name := range scope.Nodes {
		if n, ok := full.Nodes[name]; ok {
			put(&out.Nodes, nodes, name, n)
		}
	}
	if whole {
		for name, n := range full.Nodes {
			if want(n.Pool) {
				put(&out.Nodes, nodes, name, n)
			}
		}
		for id, j := range full.Jobs {
			if want(j.Pool) && j.State.Active() {
				put(&out.Jobs, len(scope.Jobs), id, j)
			}
		}
	}
	for _, id := range scope.Jobs {
		if j, ok := full.Jobs[id]; ok {
			put(&out.Jobs, len(scope.Jobs), id, j)
		}
	}
	if scope.JobsOfRequested {
		for _, id := range jobsOfRequested(out) {
			if j, ok := full.Jobs[id]; ok {
				put(&out.Jobs, 0, id, j)
			}
		}
	}
	if scope.Slurm {
		out.Slurm = full.Slurm
	}
}

// put sets (*m)[k] = v, making *m, sized for hint entries, if it is nil.
func put[T any](m *map[string]*T, hint int, k string, v *T) {
	if *m == nil {
		*m = make(map[string]*T, hint)
	}
	(*m)[k] = v
}

// Update implements Store.
func (m *Memory) Update(ctx context.Context, scope Scope, fn func(st *model.State) error) error {
	if scope.Cluster == "" {
		return fmt.Errorf("store update: scope has no cluster")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if scope.EventID != "" {
		if mark, seen := m.events[scope.Cluster][scope.EventID]; seen {
			return &DuplicateError{EventID: scope.EventID, Note: append([]byte(nil), mark.note...)}
		}
	}
	full, kept := m.cluster(scope.Cluster)
	var before model.State // the stored records, not to be edited
	selectScope(full, scope, &before)
	st := before.CloneEditable()
	err := fn(st)
	kept.check(scope.Cluster, full, scope.Slurm)
	if err != nil {
		return err
	}
	if len(st.EventNote) > MaxEventNoteBytes {
		return fmt.Errorf("store update: event note of %d bytes is above %d", len(st.EventNote), MaxEventNoteBytes)
	}
	m.Writes += applyDiff(full, kept, &before, st)
	if scope.EventID != "" {
		if m.events[scope.Cluster] == nil {
			m.events[scope.Cluster] = map[string]eventMark{}
		}
		m.events[scope.Cluster][scope.EventID] = eventMark{at: m.now(), note: append([]byte(nil), st.EventNote...)}
		m.Writes++
	}
	m.Transactions++
	return nil
}

// applyDiff writes into full what changed from before to after and returns
// the number of records written or deleted. It stores copies of after's
// records, so the caller may keep after and edit it once Update returns,
// except for what is never edited in place (model.State.CloneEditable):
// the Slurm view it stores is after's own, which stays the caller's to
// read and replace, not to edit. A record is changed when it is not
// reflect.DeepEqual to the one loaded, which the functions of equal.go
// decide without reflection; a Slurm view still the one loaded (the same
// pointer) is unchanged, since views are never edited in place. kept gets
// private copies of the Slurm view, spec and pool images stored.
func applyDiff(full *model.State, kept *sharedCopy, before, after *model.State) int {
	n := 0
	if after.Cluster != nil && (before.Cluster == nil || !clusterEqual(before.Cluster, after.Cluster)) {
		full.Cluster = after.Cluster.Clone()
		kept.spec = append([]byte(nil), after.Cluster.Spec...)
		kept.poolImages = maps.Clone(after.Cluster.Node.PoolImages)
		n++
	}
	if after.Slurm != nil && after.Slurm != before.Slurm && (before.Slurm == nil || !slurmViewEqual(before.Slurm, after.Slurm)) {
		full.Slurm = after.Slurm
		kept.slurm = exactClone(after.Slurm)
		n++
	}
	n += diffMap(full.Pools, before.Pools, after.Pools, (*model.Pool).Clone, poolEqual)
	n += diffMap(full.Nodes, before.Nodes, after.Nodes, (*model.Node).Clone, nodeEqual)
	n += diffMap(full.Jobs, before.Jobs, after.Jobs, (*model.Job).Clone, jobEqual)
	return n
}

func diffMap[T any](full, before, after map[string]*T, clone func(*T) *T, equal func(a, b *T) bool) int {
	n := 0
	for k, v := range after {
		if old, ok := before[k]; !ok || !samePtr(old, v, equal) {
			full[k] = clone(v)
			n++
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			delete(full, k)
			n++
		}
	}
	return n
}

// Read implements Store.
func (m *Memory) Read(ctx context.Context, scope Scope) (*model.State, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var sel model.State
	m.mu.Lock()
	full, ok := m.clusters[scope.Cluster]
	if ok {
		selectScope(full, scope, &sel)
	}
	m.mu.Unlock()
	if !ok {
		return model.NewState(), nil
	}
	// The selection's maps are its own and its records are never edited
	// in place, so it is copied outside the lock.
	return sel.CloneEditable(), nil
}

// View is Read without the copy, for a reader that only looks (a
// simulation's invariant checks): the maps are the caller's, the records
// are the ones the store holds and must not be edited. A view stays as it
// was taken: a later write replaces records, it never edits them.
func (m *Memory) View(ctx context.Context, scope Scope) (*model.State, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	full, ok := m.clusters[scope.Cluster]
	if !ok {
		return model.NewState(), nil
	}
	v := new(model.State)
	selectScope(full, scope, v)
	if v.Pools == nil {
		v.Pools = map[string]*model.Pool{}
	}
	if v.Nodes == nil {
		v.Nodes = map[string]*model.Node{}
	}
	if v.Jobs == nil {
		v.Jobs = map[string]*model.Job{}
	}
	return v, nil
}

// Clusters implements Store.
func (m *Memory) Clusters(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id, st := range m.clusters {
		if st.Cluster != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// ForgetEvents implements Store.
func (m *Memory) ForgetEvents(ctx context.Context, cluster string, before time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, mark := range m.events[cluster] {
		if mark.at.Before(before) {
			delete(m.events[cluster], id)
			n++
		}
	}
	return n, nil
}
