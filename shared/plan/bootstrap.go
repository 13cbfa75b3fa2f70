package plan

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// NodeBootstrapFailed decides what a VM's report of its own failed
// bootstrap (node.bootstrap_failed) requires: the same as the reconciler's
// finding that a running VM's node never registered, without waiting for
// it — one more bootstrap failure for the pool's breaker, and the VM
// replaced (a static node gets a new generation, a dynamic node is powered
// down so that its job asks again).
//
// A report about a VM that is not the node's current one, a node that has
// registered or one already being replaced is acknowledged with no action:
// redelivered and late reports change nothing.
func NodeBootstrapFailed(st *model.State, ev *event.Bootstrap, now time.Time, pol Policy) ([]Action, error) {
	if st.Cluster == nil {
		return nil, rejectf("no cluster record")
	}
	cl, poolID, idx, ok := naming.ParseNodeName(ev.Node)
	if !ok || cl != st.Cluster.ID {
		return nil, rejectf("node %s is not a node of cluster %s", ev.Node, st.Cluster.ID)
	}
	pool, ok := st.Pools[poolID]
	if !ok {
		return nil, rejectf("node %s: pool %s is not a flex-start pool of cluster %s", ev.Node, poolID, cl)
	}
	b := newBuilder(st, now, pol)
	n := b.node(pool, idx)
	if !naming.SameVM(n.VMName, ev.VMName) || n.Registered || (n.Phase != model.PhaseRunning && n.Phase != model.PhaseRequested) {
		return nil, nil
	}
	what := fmt.Sprintf("VM %s failed its bootstrap at step %s: %s", ev.VMName, ev.Step, ev.Error)
	b.bootstrapFailed(pool, n, what)
	b.replaceLost(b.st.Pools[poolID], *b.st.Nodes[n.Name], what, "bootstrap of "+ev.VMName+" failed ("+ev.Step+")")
	return b.out, nil
}
