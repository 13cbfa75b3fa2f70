package plan

import (
	"fmt"
	"slices"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// A pool shrunk (max_node_count lowered) or removed from the spec while
// some of its nodes power up for pending jobs. In the pass that sees the
// new spec (ClusterApplied, then every reconcile pass):
//
//   - a node at or beyond the new max_node_count is released unless a job
//     runs on it: a pending job does not count as using a node, since the
//     capacity it waits for would be a VM beyond the maximum;
//   - its queued resize request is cancelled (with it, the other nodes the
//     same request named end their generation: a request still naming
//     them could create the VM beyond the maximum), and any VM it made
//     meanwhile deleted by name; a static node never shares a job's
//     request (provisionJob), and one that did (an older request) is
//     requested again in its own request once that request has ended
//     (ensureStatic, previous.go);
//   - every node whose generation so ended is powered down in Slurm
//     (power_down_force), so Slurm requeues the job now, instead of
//     waiting out ResumeTimeout for a VM that will never come;
//   - the job is provisioned again only once Slurm places it within the
//     new maximum (JobFit refuses nodes beyond it).
//
// No VM is created beyond the new maximum: the only requests that could
// create one are cancelled in the same transaction, and a request that
// succeeded meanwhile has its VMs deleted by name.

// runningJobOn returns the job running on n, if any: one flexslurm holds
// running there, unless a Slurm snapshot newer than its record shows it
// otherwise (requeued and pending again, or gone) — the newest source
// decides (sources.go).
func (b *builder) runningJobOn(n model.Node) (string, bool) {
	for _, j := range b.st.SortedJobs() {
		if j.State != model.JobRunning || (j.ID != n.JobID && !slices.Contains(j.Nodes, n.Name)) {
			continue
		}
		if sj, found, newer := slurmJobFact(b.view, j, j.ID); newer && (!found || !sj.State.OnNodes()) {
			continue
		}
		return j.ID, true
	}
	return "", false
}

// releaseBeyondMax releases a node at or beyond its pool's max_node_count
// (or of a removed pool) that no job runs on, and powers down in Slurm
// every node whose generation ends with it.
func (b *builder) releaseBeyondMax(pool *model.Pool, node model.Node) {
	why := fmt.Sprintf("node %s is beyond pool %s's max_node_count %d and no job runs on it: released", node.Name, pool.ID, pool.MaxNodes)
	if pool.Removed {
		why = fmt.Sprintf("pool %s was removed from the cluster spec and no job runs on node %s: released", pool.ID, node.Name)
	}
	ended := map[string]string{} // node → VM of the generation that ends
	if node.Phase == model.PhaseRequested {
		ended[node.Name] = node.VMName
		if node.ResizeRequest != "" {
			for _, o := range b.poolNodes(pool.ID) {
				if o.ResizeRequest == node.ResizeRequest && o.Phase == model.PhaseRequested {
					ended[o.Name] = o.VMName
				}
			}
		}
	}
	b.releaseNode(pool, node, why)
	if len(ended) == 0 {
		return // a running node: releaseNode powered it down in Slurm
	}
	var nodes, vms []string
	for _, o := range b.st.SortedNodes() {
		if vm, ok := ended[o.Name]; ok {
			nodes = append(nodes, o.Name)
			vms = append(vms, vm)
		}
	}
	b.slurm(event.SlurmPowerDownForce, nodes, "", why, vms...)
}

// releaseShrunk releases, on a reconcile pass, the nodes a shrunk pool still holds
// beyond its max_node_count (kept for a job that ran on them, or missed by
// the apply's own pass).
func (b *builder) releaseShrunk(pool *model.Pool) {
	if cur, ok := b.st.Pools[pool.ID]; ok {
		pool = cur
	}
	for _, n := range b.poolNodes(pool.ID) {
		if n.Index >= pool.MaxNodes && n.Phase.HasVM() && n.Phase != model.PhaseDeleting {
			b.releaseSurplus(pool)
			return
		}
	}
}

// shrinkPass releases nodes at or beyond a lowered max_node_count.
type shrinkPass struct{}

func (shrinkPass) apply(b *builder, pc *poolContext) {
	if !pc.pool.Removed {
		b.releaseShrunk(pc.pool)
	}
}
