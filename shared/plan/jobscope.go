package plan

import (
	"errors"
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// ErrWiderScope is returned by JobNarrow when the records it was given do
// not suffice to decide the event as Job would from the whole pool: the
// caller decides again with every node and active job of the pool loaded.
// Nothing was decided.
var ErrWiderScope = errors.New("the decision needs every node and active job of the pool")

// NarrowJob is the narrow scope of a job event: the pool's record (read,
// not written, on the usual path), the job's own record and the records of
// the nodes the event names.
type NarrowJob struct {
	Pool  string
	Nodes []string
}

// JobScope says whether a job event can be decided from a narrow scope, from
// the event alone: a job.pending naming its nodes (as ResumeProgram reports
// every job it powers nodes up for), each named once, all of one pool of the
// event's cluster. Slurm allocates only configured nodes, and each node is
// backed by at most one VM per generation, so provisioning such a job needs
// only those nodes, its record and the pool's record — not the pool's other
// nodes and active jobs, whose number grows with the jobs waiting. Whether
// the pool record allows it is checked inside the transaction (JobNarrow).
// Any other job event (no nodes: a pool and slots are chosen from the whole
// pool; started, finished, cancelled) takes the whole pool.
func JobScope(ev *event.Job) (NarrowJob, bool) {
	if ev.Type != event.TypeJobPending || len(ev.Nodes) == 0 {
		return NarrowJob{}, false
	}
	seen := make(map[string]bool, len(ev.Nodes))
	pool := ""
	for _, name := range ev.Nodes {
		cl, p, _, ok := naming.ParseNodeName(name)
		if !ok || cl != ev.Cluster || seen[name] || (pool != "" && p != pool) {
			return NarrowJob{}, false
		}
		seen[name] = true
		pool = p
	}
	return NarrowJob{Pool: pool, Nodes: append([]string(nil), ev.Nodes...)}, true
}

// JobNarrow decides a job event from the narrow scope JobScope returned
// (the cluster record, the pool record, the job and the named nodes), and
// decides exactly what Job decides from the whole pool. It returns an error
// wrapping ErrWiderScope, deciding nothing, unless every named node is a
// slot below max_node_count of a flex-start pool of the spec whose record
// says no node at or beyond max_node_count serves (model.Pool.NodesBeyondMax
// false; not removed), and no named node's next generation would re-issue
// the deletion of its old VM from a request's MIG (supersede: whether the
// MIG goes whole or by deleteInstances depends on the MIG's other nodes,
// which the narrow scope does not hold). Then the nodes serving in the pool are distinct slots
// below max_node_count, so the job's missing VMs can never take the pool
// past it: Job's pool-wide count (vmCount) cannot refuse, and nothing else
// Job does for a pending job with nodes reads beyond its nodes, its record
// and the pool record. An event JobNarrow refuses is decided (or rejected)
// by Job from the whole pool.
func JobNarrow(st *model.State, c *spec.Cluster, ev *event.Job, now time.Time, pol Policy) ([]Action, error) {
	if why := narrowRefusal(st, c, ev); why != "" {
		return nil, fmt.Errorf("%w: %s", ErrWiderScope, why)
	}
	return Job(st, c, ev, now, pol)
}

// narrowRefusal says why a job event cannot be decided narrowly ("" when it
// can).
func narrowRefusal(st *model.State, c *spec.Cluster, ev *event.Job) string {
	scope, ok := JobScope(ev)
	if !ok {
		return fmt.Sprintf("job %s's %s does not name its nodes in one pool", ev.JobID, ev.Type)
	}
	if ev.Cluster != c.ID {
		return fmt.Sprintf("event of cluster %s, spec of %s", ev.Cluster, c.ID)
	}
	sp, ok := c.Pool(scope.Pool)
	if !ok || !sp.IsFlexStart() {
		return fmt.Sprintf("pool %s is not a flex-start pool of the spec", scope.Pool)
	}
	pool, ok := st.Pools[scope.Pool]
	switch {
	case !ok:
		return fmt.Sprintf("pool %s has no record", scope.Pool)
	case pool.Removed:
		return fmt.Sprintf("pool %s was removed", scope.Pool)
	case pool.NodesBeyondMax:
		return fmt.Sprintf("pool %s may have nodes serving beyond max_node_count %d", scope.Pool, pool.MaxNodes)
	}
	if n, ok := leftBehindOutside(st.Jobs[ev.JobID], scope.Nodes); ok {
		// Placed elsewhere: capacity requested for the job on a node
		// the event does not name is released (placed.go).
		return fmt.Sprintf("job %s's record names node %s, which the event does not", ev.JobID, n)
	}
	for _, name := range scope.Nodes {
		_, _, idx, _ := naming.ParseNodeName(name)
		if idx >= sp.MaxNodeCount || idx >= pool.MaxNodes {
			return fmt.Sprintf("node %s is beyond max_node_count of pool %s", name, scope.Pool)
		}
		if n, ok := st.Nodes[name]; ok && n.Pool != scope.Pool {
			return fmt.Sprintf("node %s's record names pool %s", name, n.Pool)
		}
		if n, ok := st.Nodes[name]; ok && n.MIG != "" && supersedes(n) && !requestMayBeActive(n) {
			// Its next generation re-issues the deletion of its old VM
			// (supersede), by deleting its request's MIG only when no
			// other node serves from it: the other nodes of that request
			// are not in the narrow scope.
			return fmt.Sprintf("node %s's next generation re-issues the deletion of its old VM from its request's MIG %s, which other nodes may serve from", name, n.MIG)
		}
	}
	return ""
}

// noteBeyondMax records on the pool that a node at or beyond its
// max_node_count serves, when n is such a node (see
// model.Pool.NodesBeyondMax).
func (b *builder) noteBeyondMax(n model.Node) {
	pool, ok := b.st.Pools[n.Pool]
	if !ok || pool.NodesBeyondMax || n.Index < pool.MaxNodes || !n.Phase.Serving() {
		return
	}
	p := *pool
	p.NodesBeyondMax = true
	b.putPool(p, fmt.Sprintf("pool %s: node %s serves beyond max_node_count %d", p.ID, n.Name, p.MaxNodes))
}

// syncBeyondMax sets or clears every pool's NodesBeyondMax from the nodes
// that serve. Only a decision that holds every node of every pool (cluster
// applied, reconcile) may call it.
func (b *builder) syncBeyondMax() {
	// A pool's nodes come sorted by index: only its last ones can be at or
	// beyond max_node_count.
	beyond := make(map[string]bool, len(b.st.Pools))
	for id, p := range b.st.Pools {
		nodes := b.poolNodes(id)
		for i := len(nodes) - 1; i >= 0 && nodes[i].Index >= p.MaxNodes; i-- {
			if nodes[i].Phase.Serving() {
				beyond[id] = true
				break
			}
		}
	}
	for _, pool := range b.st.SortedPools() {
		if pool.NodesBeyondMax == beyond[pool.ID] {
			continue
		}
		p := *pool
		p.NodesBeyondMax = beyond[pool.ID]
		why := fmt.Sprintf("pool %s: no node serves beyond max_node_count %d any more", p.ID, p.MaxNodes)
		if p.NodesBeyondMax {
			why = fmt.Sprintf("pool %s: nodes serve beyond max_node_count %d", p.ID, p.MaxNodes)
		}
		b.putPool(p, why)
	}
}
