package plan

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// NodePower decides what a Slurm power report requires.
//
//   - node.suspend (SuspendProgram): Slurm powered idle nodes down. Their
//     VMs are released (deleted, or the queued request cancelled); Slurm
//     already knows, so no command is sent back. Static nodes are never
//     released: Slurm should not suspend them (SuspendExcNodes), and an
//     alert says so.
//   - node.resume_failed (ResumeFailProgram): Slurm gave up waiting for
//     nodes (ResumeTimeout) and requeued their jobs, which will be reported
//     pending again. The node's VM or queued request is released, the node
//     resumed in Slurm (down~ to idle~) at once, its job waits for Slurm's
//     next allocation, and a static node gets a new generation
//     (resumetimeout.go).
//
// Nodes of other clusters or of unknown pools are rejected as a whole.
func NodePower(st *model.State, ev *event.Node, now time.Time, pol Policy) ([]Action, error) {
	if st.Cluster == nil {
		return nil, rejectf("no cluster record")
	}
	for _, name := range ev.Nodes {
		cl, pool, _, ok := naming.ParseNodeName(name)
		if !ok || cl != st.Cluster.ID {
			return nil, rejectf("node %s is not a node of cluster %s", name, st.Cluster.ID)
		}
		if _, ok := st.Pools[pool]; !ok {
			return nil, rejectf("node %s: pool %s is not a flex-start pool of cluster %s", name, pool, cl)
		}
	}
	b := newBuilder(st, now, pol)
	for _, name := range ev.Nodes {
		_, poolID, idx, _ := naming.ParseNodeName(name)
		pool := b.st.Pools[poolID]
		n := b.node(pool, idx)
		if !ev.ReportedAt.IsZero() && n.Phase.Serving() && !ev.ReportedAt.After(n.RequestedAt) {
			// A late report about an earlier generation: this one was
			// requested after Slurm powered the node down, or at the same
			// instant (ties go to the record, sources.go: the decision
			// that powered the node down may be the one that requested
			// its next VM for a pending job).
			continue
		}
		static := n.Kind == model.NodeStatic
		switch {
		case ev.Type == event.TypeNodeSuspend && static:
			b.add(Alert{Pool: poolID, Node: name, Reason: fmt.Sprintf("Slurm powered down static node %s: static nodes should be in SuspendExcNodes; its VM is kept", name)})
		case ev.Type == event.TypeNodeSuspend && !ev.ReportedAt.IsZero() && startedSince(n, ev.ReportedAt):
			// A job.started recorded after Slurm reported the node
			// powered down: a job runs there now (started.go).
			b.add(Alert{Pool: poolID, Node: name, Reason: fmt.Sprintf("node.suspend for %s reported at %s, before job %s was reported started there: its VM is kept", name, ev.ReportedAt.Format(time.RFC3339), n.StartedJob)})
		case ev.Type == event.TypeNodeSuspend:
			if n.Phase.Serving() {
				b.releaseQuietly(pool, n, fmt.Sprintf("Slurm powered down idle node %s (SuspendProgram): VM released", name))
			}
		case ev.Type == event.TypeResumeFailed:
			at := ev.ReportedAt
			if at.IsZero() {
				at = now
			}
			b.resumeFailed(pool, n, at, fmt.Sprintf("Slurm gave up resuming %s (ResumeFailProgram)", name))
		}
	}
	return b.out, nil
}
