package model

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/model/modeltest"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// TestSlurmViewUpgrade: a view stored before the facts were typed (no
// version: state, flags and reason only, flags in Slurm's order) is parsed
// again when read, so its reason owner and generation are known; a
// current one is left as stored.
func TestSlurmViewUpgrade(t *testing.T) {
	old := &SlurmView{
		Nodes: map[string]SlurmNode{
			"c-a-0": {State: "idle", Flags: slurmstate.NodeFlags{"DRAIN", "CLOUD"}, Reason: "flexslurm: GPU lost (c-a-0-g3)"},
			"c-a-1": {State: "allocated", Flags: slurmstate.NodeFlags{"CLOUD", "DRAIN"}, Reason: "bad dimm"},
		},
		Jobs: []SlurmJob{{ID: "7", State: "pending"}},
	}
	old.Upgrade()
	want := &SlurmView{
		Version: SlurmViewVersion,
		Nodes: map[string]SlurmNode{
			"c-a-0": {State: slurmstate.NodeIdle, Flags: slurmstate.NodeFlags{slurmstate.FlagCloud, slurmstate.FlagDrain},
				Reason: "flexslurm: GPU lost (c-a-0-g3)", Owner: slurmstate.OwnerFlexslurm, ReasonGeneration: 3},
			"c-a-1": {State: slurmstate.NodeAllocated, Flags: slurmstate.NodeFlags{slurmstate.FlagCloud, slurmstate.FlagDrain},
				Reason: "bad dimm", Owner: slurmstate.OwnerOther},
		},
		Jobs: []SlurmJob{{ID: "7", State: slurmstate.JobPending}},
	}
	if diff := cmp.Diff(want, old); diff != "" {
		t.Errorf("upgraded (-want +got):\n%s", diff)
	}
	cur := &SlurmView{Version: SlurmViewVersion, Nodes: map[string]SlurmNode{"c-a-0": {State: slurmstate.NodeIdle, Reason: "x"}}}
	cur.Upgrade()
	if n := cur.Nodes["c-a-0"]; n.Owner != slurmstate.OwnerNone {
		t.Errorf("a current view was parsed again: %+v", n)
	}
	var none *SlurmView
	none.Upgrade()
	// A view of version 1 has owners and generations, not whether
	// flexslurm's reason is a failed health check's: parsed again.
	v1 := &SlurmView{Version: 1, Nodes: map[string]SlurmNode{"c-a-0": {State: slurmstate.NodeIdle, Flags: slurmstate.NodeFlags{slurmstate.FlagDrain},
		Reason: "flexslurm: health check failed on c-a-0-g3: Xid 79", Owner: slurmstate.OwnerFlexslurm, ReasonGeneration: 3}}}
	v1.Upgrade()
	if n := v1.Nodes["c-a-0"]; !n.ReasonHealth || !n.OwnHealthDrainOf(3) || v1.Version != SlurmViewVersion {
		t.Errorf("a version 1 view upgraded to %d: %+v", v1.Version, n)
	}
}

// TestCloneSharesNothing: a clone of a state whose every field is set
// (every pointer, slice and map non-nil, by reflection, so a field added
// later is covered) equals it and shares no pointer, slice or map with
// it; so do the clones of each record. Stores hand out clones and keep
// their own records unshared (shared/store), which this guarantees.
func TestCloneSharesNothing(t *testing.T) {
	var st State
	modeltest.Fill(&st)
	pool, node, job := st.Pools[firstKey(st.Pools)], st.Nodes[firstKey(st.Nodes)], st.Jobs[firstKey(st.Jobs)]
	for name, c := range map[string]struct{ orig, clone any }{
		"State":     {&st, st.Clone()},
		"Cluster":   {st.Cluster, st.Cluster.Clone()},
		"Pool":      {pool, pool.Clone()},
		"Node":      {node, node.Clone()},
		"Job":       {job, job.Clone()},
		"SlurmView": {st.Slurm, st.Slurm.Clone()},
	} {
		if diff := cmp.Diff(c.orig, c.clone); diff != "" {
			t.Errorf("%s: clone differs (-orig +clone):\n%s", name, diff)
		}
		if shared := sharing(reflect.ValueOf(c.orig), reflect.ValueOf(c.clone), name); len(shared) > 0 {
			t.Errorf("%s: the clone shares %v with the original", name, shared)
		}
	}
	// An empty state clones to an empty one.
	if diff := cmp.Diff(NewState(), NewState().Clone()); diff != "" {
		t.Errorf("empty state's clone (-want +got):\n%s", diff)
	}
}

// TestCloneEditableSharesOnlyReplaced: CloneEditable of a state whose
// every field is set equals it and shares with it only what is replaced,
// never edited in place: the Slurm view (and everything in it) and the
// cluster record's Spec and Node.PoolImages. A field added to a record
// is covered, and is copied unless it is one of these.
func TestCloneEditableSharesOnlyReplaced(t *testing.T) {
	var st State
	modeltest.Fill(&st)
	c := st.CloneEditable()
	if diff := cmp.Diff(&st, c); diff != "" {
		t.Errorf("clone differs (-orig +clone):\n%s", diff)
	}
	replaced := []string{"State.Slurm", "State.Cluster.Spec", "State.Cluster.Node.PoolImages"}
	var got []string
	for _, p := range sharing(reflect.ValueOf(&st), reflect.ValueOf(c), "State") {
		if p == "State" {
			continue // the *State itself: reported when the two are one
		}
		if !slices.ContainsFunc(replaced, func(r string) bool { return p == r || strings.HasPrefix(p, r+".") || strings.HasPrefix(p, r+"[") }) {
			t.Errorf("the editable clone shares %s with the original", p)
		}
		got = append(got, p)
	}
	for _, r := range replaced {
		if !slices.Contains(got, r) {
			t.Errorf("the editable clone copies %s, which it is to share", r)
		}
	}
	if c == &st || c.Cluster == st.Cluster {
		t.Error("the editable clone shares the state or the cluster record")
	}
	if diff := cmp.Diff(NewState(), NewState().CloneEditable()); diff != "" {
		t.Errorf("empty state's editable clone (-want +got):\n%s", diff)
	}
}

func firstKey[T any](m map[string]T) string {
	for k := range m {
		return k
	}
	return ""
}

var timeType = reflect.TypeOf(time.Time{})

// sharing lists the paths at which a and b (of one type) share a pointer,
// a slice's array or a map.
func sharing(a, b reflect.Value, path string) []string {
	if a.Type() == timeType {
		return nil // its *Location is immutable
	}
	var out []string
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return nil
		}
		if a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		out = append(out, sharing(a.Elem(), b.Elem(), path)...)
	case reflect.Slice:
		if a.Cap() > 0 && b.Cap() > 0 && a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		for i := range min(a.Len(), b.Len()) {
			out = append(out, sharing(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case reflect.Map:
		if a.IsNil() || b.IsNil() {
			return nil
		}
		if a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		for _, k := range a.MapKeys() {
			if bv := b.MapIndex(k); bv.IsValid() {
				out = append(out, sharing(a.MapIndex(k), bv, fmt.Sprintf("%s[%v]", path, k))...)
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			out = append(out, sharing(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)...)
		}
	}
	return out
}

// TestCloneEditableLaysOutNodesInPoolOrder: the node records of a state
// the store hands out follow one another in memory pool by pool, in index
// order (the order a decision walks them), whatever the map's order; the
// clone keeps the map's keys.
func TestCloneEditableLaysOutNodesInPoolOrder(t *testing.T) {
	st := NewState()
	for _, p := range []string{"b", "a", "c"} {
		for _, i := range []int{12, 0, 7, 3, 100} {
			name := NodeName("flexvm", p, i)
			st.Nodes[name] = &Node{Name: name, Pool: p, Index: i}
		}
	}
	st.Nodes["odd-key"] = &Node{Name: "flexvm-a-5", Pool: "a", Index: 5}
	c := st.CloneEditable()
	recs := slices.Collect(maps.Values(c.Nodes))
	slices.SortFunc(recs, func(x, y *Node) int {
		if c := strings.Compare(x.Pool, y.Pool); c != 0 {
			return c
		}
		return x.Index - y.Index
	})
	for i := 1; i < len(recs); i++ {
		prev, cur := uintptr(unsafe.Pointer(recs[i-1])), uintptr(unsafe.Pointer(recs[i]))
		if cur != prev+unsafe.Sizeof(Node{}) {
			t.Fatalf("%s/%d is not laid out right after %s/%d", recs[i].Pool, recs[i].Index, recs[i-1].Pool, recs[i-1].Index)
		}
	}
	for k, v := range st.Nodes {
		if got, ok := c.Nodes[k]; !ok || *got != *v || got == v {
			t.Errorf("key %s: clone %v, want a copy of %v", k, got, v)
		}
	}
}
