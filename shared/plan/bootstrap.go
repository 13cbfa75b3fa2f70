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
	pool, idx, err := reportedPool(st, ev.Node)
	if err != nil {
		return nil, err
	}
	poolID := pool.ID
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

// NodeVersionMismatch records a VM's report that its flexslurm binary is
// not the version of the functions that built its instance template
// (node.version_mismatch) on its node, for `flexslurm status` to warn
// about. Nothing else changes: the node serves as it is. A report about a
// VM that is not the node's current one, or one already recorded, changes
// nothing.
func NodeVersionMismatch(st *model.State, ev *event.VersionMismatch, now time.Time, pol Policy) ([]Action, error) {
	pool, idx, err := reportedPool(st, ev.Node)
	if err != nil {
		return nil, err
	}
	b := newBuilder(st, now, pol)
	n := b.node(pool, idx)
	what := fmt.Sprintf("VM %s runs flexslurm %s; the functions that built its instance template run %s", ev.VMName, ev.NodeVersion, ev.FunctionsVersion)
	if !naming.SameVM(n.VMName, ev.VMName) || (n.VersionMismatchVM == ev.VMName && n.VersionMismatch == what) {
		return nil, nil
	}
	n.VersionMismatch, n.VersionMismatchVM = what, ev.VMName
	b.putNode(n, what)
	return b.out, nil
}

// reportedPool returns the pool record and slot of the node a VM's report
// names, or rejects a node that is not a node of a pool of the cluster.
func reportedPool(st *model.State, node string) (*model.Pool, int, error) {
	if st.Cluster == nil {
		return nil, 0, rejectf("no cluster record")
	}
	cl, poolID, idx, ok := naming.ParseNodeName(node)
	if !ok || cl != st.Cluster.ID {
		return nil, 0, rejectf("node %s is not a node of cluster %s", node, st.Cluster.ID)
	}
	pool, ok := st.Pools[poolID]
	if !ok {
		return nil, 0, rejectf("node %s: pool %s is not a flex-start pool of cluster %s", node, poolID, cl)
	}
	return pool, idx, nil
}
