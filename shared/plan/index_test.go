package plan

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/model"
)

// TestPoolNodesIndex: the builder's index answers as State.PoolNodes does,
// before and after a decision stores new and existing nodes.
func TestPoolNodesIndex(t *testing.T) {
	st := model.NewState()
	for _, p := range []string{"a", "b", "c"} {
		st.Pools[p] = &model.Pool{ID: p, MaxNodes: 20}
	}
	for _, i := range []int{7, 0, 12, 3} {
		for _, p := range []string{"a", "b"} {
			name := model.NodeName("flexvm", p, i)
			st.Nodes[name] = &model.Node{Name: name, Pool: p, Index: i, Phase: model.PhaseRunning}
		}
	}
	// Nodes beyond a pool's max_node_count (its window of the index grows
	// past it), a pool with max_node_count 0, and nodes of a pool with no
	// record.
	st.Pools["d"] = &model.Pool{ID: "d", MaxNodes: 2}
	st.Pools["e"] = &model.Pool{ID: "e"}
	for _, i := range []int{1, 4, 0, 3, 2} {
		for _, p := range []string{"d", "e", "gone"} {
			name := model.NodeName("flexvm", p, i)
			st.Nodes[name] = &model.Node{Name: name, Pool: p, Index: i, Phase: model.PhaseRunning}
		}
	}
	// A record stored under a key other than its name (never written so
	// by flexslurm): indexed under its key, in its index's place.
	st.Nodes["stray-key"] = &model.Node{Name: model.NodeName("flexvm", "b", 5), Pool: "b", Index: 5, Phase: model.PhaseRunning}
	b := newBuilder(st, t0, Policy{})
	b.cluster = "flexvm"
	_ = b.poolNodes("b")
	if got, want := b.byPool["b"], []string{"flexvm-b-0", "flexvm-b-3", "stray-key", "flexvm-b-7", "flexvm-b-12"}; !slices.Equal(got, want) {
		t.Errorf("pool b is indexed by keys %q, want %q", got, want)
	}
	check := func(when string) {
		t.Helper()
		for _, p := range []string{"a", "b", "c", "d", "e", "gone", "zz"} {
			if d := cmp.Diff(b.st.PoolNodes(p), b.poolNodes(p)); d != "" {
				t.Errorf("%s: pool %s (-PoolNodes +poolNodes):\n%s", when, p, d)
			}
		}
	}
	check("before any change")
	for _, i := range []int{5, 19, 0, 1} {
		n := b.node(b.st.Pools["a"], i)
		n.Phase = model.PhaseRequested
		b.putNode(n, fmt.Sprintf("slot %d", i))
	}
	n := b.node(b.st.Pools["c"], 2)
	b.putNode(n, "first node of pool c")
	for _, i := range []int{7, 5} {
		n := b.node(b.st.Pools["d"], i)
		n.Phase = model.PhaseRequested
		b.putNode(n, fmt.Sprintf("slot %d beyond max_node_count", i))
	}
	check("after storing new and existing nodes")
	for p, want := range map[string]int{"a": 7, "d": 7, "e": 5, "gone": 5} {
		if got := len(b.poolNodes(p)); got != want {
			t.Errorf("pool %s has %d nodes, want %d", p, got, want)
		}
	}
}

// TestPoolIndexSlotGoesToTheRecordOfItsName: of two records of the same
// pool and index, the one stored under its own name takes the index's
// place, whatever order the map hands them out in, and the other, stored
// under another key, follows it under that key.
func TestPoolIndexSlotGoesToTheRecordOfItsName(t *testing.T) {
	for range 500 { // the map's order differs from one walk to the next
		st := model.NewState()
		st.Pools["b"] = &model.Pool{ID: "b", MaxNodes: 10}
		for _, i := range []int{3, 7, 8} {
			name := model.NodeName("flexvm", "b", i)
			st.Nodes[name] = &model.Node{Name: name, Pool: "b", Index: i, Phase: model.PhaseRunning}
		}
		st.Nodes["stray-7"] = &model.Node{Name: model.NodeName("flexvm", "b", 7), Pool: "b", Index: 7, Phase: model.PhaseRequested}
		b := newBuilder(st, t0, Policy{})
		recs := b.poolNodes("b")
		if got, want := b.byPool["b"], []string{"flexvm-b-3", "flexvm-b-7", "stray-7", "flexvm-b-8"}; !slices.Equal(got, want) {
			t.Fatalf("pool b is indexed by keys %q, want %q", got, want)
		}
		if len(recs) != 4 || recs[1] != st.Nodes["flexvm-b-7"] || recs[2] != st.Nodes["stray-7"] {
			t.Fatalf("pool b's records do not follow its keys: %v", recs)
		}
	}
}
