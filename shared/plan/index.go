package plan

import (
	"slices"
	"sort"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// index holds what one decision looks up again and again: the state's
// nodes by pool, the VMs listed for the pool being reconciled, and the
// decision table's last answer. It is built on first use and kept current
// as the builder stores records (putNode). Nothing in it is a decision.
type index struct {
	// byPool indexes the names of the state's nodes by pool, sorted by
	// index, built on first use (poolNodes) and kept current by putNode.
	byPool map[string][]string
	// poolRecords holds, per pool, the records poolNodes last returned;
	// putNode drops the pool's entry, since it replaces a record.
	poolRecords map[string][]*model.Node
	// nodeWrites counts the node records putNode stored: a caller holding
	// records it read knows they are all current while it is unchanged.
	nodeWrites int
	// vmAt is the map of the VM index of the pool being reconciled
	// (indexVMs).
	vmAt map[string]int
	// decided is the table's last answer (decide).
	decided lastDecision
}

// poolNodes is index.poolNodes on the builder's state.
func (b *builder) poolNodes(pool string) []*model.Node { return b.index.poolNodes(b.st, pool) }

// indexNode is index.indexNode on the builder's state.
func (b *builder) indexNode(n model.Node) { b.index.indexNode(b.st, n) }

// poolNodes returns the pool's nodes sorted by index, as
// st.PoolNodes(pool) does, from an index built once per decision rather
// than a scan of every node of the cluster per call (a reconcile pass asks
// for every pool's nodes several times). The slice is shared between calls
// until putNode replaces one of the pool's records (which drops it rather
// than editing it, so a caller ranging over it sees the records as they
// were when it asked): callers read it and must never reorder, edit or
// append to it.
func (x *index) poolNodes(st *model.State, pool string) []*model.Node {
	if x.byPool == nil {
		x.indexPools(st)
	}
	if recs, ok := x.poolRecords[pool]; ok {
		return recs
	}
	names := x.byPool[pool]
	if len(names) == 0 {
		return nil
	}
	out := make([]*model.Node, 0, len(names))
	for _, name := range names {
		if n, ok := st.Nodes[name]; ok && n.Pool == pool {
			out = append(out, n)
		}
	}
	if x.poolRecords == nil {
		x.poolRecords = make(map[string][]*model.Node, len(x.byPool))
	}
	x.poolRecords[pool] = out[:len(out):len(out)]
	return x.poolRecords[pool]
}

// indexPools builds x.byPool, the names of b.st's nodes by pool, each
// pool's sorted by index, and x.poolRecords, their records in the same
// order. A node goes straight to its slot below its pool's
// max_node_count, so there is nothing to sort but the few nodes without
// one (beyond max_node_count, or of a pool with no record), and the index
// costs the same per node whatever the size of the pools. It allocates a
// fixed handful of slices whatever the number of nodes.
//
// A slot holds the record alone (its index is its place, its key its
// name): the map hands records out in no order, so the slots are written
// in no order either, and the smaller the slot array the more of it stays
// in cache (8-byte slots: 80 kB at 10,000 nodes; the gain is in
// BENCHMARKS.md, "Reconcile decision: memory layout"). A record stored
// under a key other than its name goes with the nodes without a slot,
// under its key.
func (x *index) indexPools(st *model.State) {
	type entry struct {
		index int
		name  string // the node's key in st.Nodes
		node  *model.Node
	}
	type window struct {
		byIndex []*model.Node // slot i: the node of index i, keyed by its name (nil: none)
		other   []entry       // the pool's nodes without a slot of their own
	}
	room := 0
	for _, p := range st.Pools {
		room += max(p.MaxNodes, 0)
	}
	backing := make([]*model.Node, room)
	ws := make([]window, 0, len(st.Pools))
	windows := make(map[string]*window, len(st.Pools))
	at := 0
	for id, p := range st.Pools {
		size := max(p.MaxNodes, 0)
		ws = append(ws, window{byIndex: backing[at : at+size : at+size]})
		windows[id] = &ws[len(ws)-1]
		at += size
	}
	for name, n := range st.Nodes {
		w, ok := windows[n.Pool]
		if !ok {
			w = new(window)
			windows[n.Pool] = w
		}
		if n.Index >= 0 && n.Index < len(w.byIndex) && w.byIndex[n.Index] == nil && name == n.Name {
			w.byIndex[n.Index] = n
			continue
		}
		w.other = append(w.other, entry{n.Index, name, n})
	}
	names := make([]string, len(st.Nodes))
	recs := make([]*model.Node, len(st.Nodes))
	x.byPool = make(map[string][]string, len(windows))
	x.poolRecords = make(map[string][]*model.Node, len(windows))
	at = 0
	for p, w := range windows {
		slices.SortFunc(w.other, func(x, y entry) int { return x.index - y.index })
		start, o := at, 0
		for i, n := range w.byIndex {
			if n == nil {
				continue
			}
			for ; o < len(w.other) && w.other[o].index < i; o++ {
				names[at], recs[at] = w.other[o].name, w.other[o].node
				at++
			}
			names[at], recs[at] = n.Name, n
			at++
		}
		for ; o < len(w.other); o++ {
			names[at], recs[at] = w.other[o].name, w.other[o].node
			at++
		}
		if at == start {
			continue
		}
		// Capped: indexNode's insert copies, never reaches a neighbour.
		x.byPool[p], x.poolRecords[p] = names[start:at:at], recs[start:at:at]
	}
}

// indexNode adds a node new to b.st (or to its pool) to the pool index,
// in index order.
func (x *index) indexNode(st *model.State, n model.Node) {
	if x.byPool == nil {
		return
	}
	names := x.byPool[n.Pool]
	i := sort.Search(len(names), func(i int) bool { return x.nodeIndex(st, names[i]) >= n.Index })
	if i < len(names) && names[i] == n.Name {
		return
	}
	x.byPool[n.Pool] = slices.Insert(names, i, n.Name)
}

func (x *index) nodeIndex(st *model.State, name string) int {
	if n, ok := st.Nodes[name]; ok {
		return n.Index
	}
	_, _, idx, _ := naming.ParseNodeName(name)
	return idx
}

// decide is Decide, remembering the last combination it was asked about:
// most nodes of a pool are in the same combination as the node before
// them, and comparing one is cheaper than scanning the table for it.
func (x *index) decide(c Combo) (Rule, bool) {
	if x.decided.valid && x.decided.combo == c {
		return x.decided.rule, x.decided.ok
	}
	rule, ok := Decide(c)
	x.decided = lastDecision{valid: true, combo: c, rule: rule, ok: ok}
	return rule, ok
}

// lastDecision is the table's answer for one combination.
type lastDecision struct {
	valid bool // false until decide is first asked
	combo Combo
	rule  Rule
	ok    bool
}

// vmIndex finds a pool's listed VMs by name: the position in the list of
// the last VM of each name. It holds positions rather than copies of the
// VMs, so a pass allocates a few bytes per VM for it.
type vmIndex struct {
	list []VM
	at   map[string]int
}

// indexVMs indexes one pool's list. The index lives while that pool is
// reconciled: its map is the builder's, emptied and refilled for the next
// pool, so that a pass over a hundred pools does not allocate a hundred
// maps.
func (x *index) indexVMs(list []VM) vmIndex {
	if x.vmAt == nil {
		x.vmAt = make(map[string]int, len(list))
	} else {
		clear(x.vmAt)
	}
	for i, vm := range list {
		x.vmAt[vm.Name] = i
	}
	// A VM its MIG named from a generation's base name (a request that
	// could not name its VMs: naming.ParseVMName) is found under the base
	// too, which is what the records name; a VM of the base's own name
	// comes first.
	for i, vm := range list {
		if base := naming.BaseVMName(vm.Name); base != vm.Name {
			if _, taken := x.vmAt[base]; !taken {
				x.vmAt[base] = i
			}
		}
	}
	return vmIndex{list: list, at: x.vmAt}
}

// get returns the VM listed under name.
func (x vmIndex) get(name string) (VM, bool) {
	i, ok := x.at[name]
	if !ok {
		return VM{}, false
	}
	return x.list[i], true
}

// has reports whether a VM of that name is listed.
func (x vmIndex) has(name string) bool {
	_, ok := x.at[name]
	return ok
}
