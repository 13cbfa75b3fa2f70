package plan

import (
	"fmt"

	"github.com/flexslurm/flexslurm/shared/model"
)

// ensureStatic keeps min_node_count static nodes serving: static nodes
// without a VM get one (lowest index first), then, if still short, free
// slots become static. Static-ness belongs to the node record, so it can
// move to a successor's slot (make-before-break).
func (b *builder) ensureStatic(pool *model.Pool, why string) {
	if cur, ok := b.st.Pools[pool.ID]; ok {
		pool = cur
	}
	short := pool.MinNodes - b.staticServing(pool.ID)
	if short <= 0 {
		return
	}
	var candidates []model.Node
	for i := 0; i < pool.MaxNodes; i++ {
		n := b.node(pool, i)
		if n.Kind == model.NodeStatic && !n.Phase.Serving() && n.Successor == "" {
			candidates = append(candidates, n)
		}
	}
	for i := 0; i < pool.MaxNodes && len(candidates) < short; i++ {
		n := b.node(pool, i)
		if n.Kind != model.NodeStatic && !n.Phase.Serving() && !b.claimed(n.Name) {
			n.Kind = model.NodeStatic
			candidates = append(candidates, n)
		}
	}
	for i, n := range candidates {
		if i >= short {
			break
		}
		b.provisionNode(pool, n, "", fmt.Sprintf("static node: pool %s has %d of min_node_count %d: %s", pool.ID, pool.MinNodes-short+i, pool.MinNodes, why))
	}
}

// staticMinimumPass requests a VM for every static node without one.
type staticMinimumPass struct{}

func (staticMinimumPass) apply(b *builder, pc *poolContext) {
	b.ensureStatic(pc.pool, "reconciler: static pool below min_node_count")
}
