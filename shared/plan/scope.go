package plan

import (
	"slices"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// What a decision reads. The transaction of an event loads only the records
// its decision may use; which ones follows from the event and the spec.

// JobPools returns the pools whose records a job event decided from the
// whole pool (Job) must read: the pools of the nodes it names, then those
// of its partition, each once, in that order. all is true when it names
// neither (job.started, finished or cancelled may omit both): every pool
// is read.
func JobPools(c *spec.Cluster, ev *event.Job) (pools []string, all bool) {
	add := func(id string) {
		if !slices.Contains(pools, id) {
			pools = append(pools, id)
		}
	}
	for _, n := range ev.Nodes {
		if _, p, _, ok := naming.ParseNodeName(n); ok {
			add(p)
		}
	}
	for _, p := range c.Slurm.Partitions {
		if p.ID == ev.Partition {
			for _, id := range p.NodePoolIDs {
				add(id)
			}
		}
	}
	return pools, len(pools) == 0
}

// ReconcileJobs returns the jobs whose records a reconcile pass loads
// beside the active ones: those the Slurm snapshot v shows waiting to
// start on nodes it names (PENDING or CONFIGURING), whatever their
// recorded state, so that a job whose end flexslurm recorded does not look
// unknown to Reconcile (Observed.JobRecordsFor is then v.TakenAt). None
// without a snapshot.
func ReconcileJobs(v *model.SlurmView) []string {
	if v == nil {
		return nil
	}
	var out []string
	for _, j := range v.Jobs {
		if j.State.Unstarted() && len(j.Nodes) > 0 {
			out = append(out, j.ID)
		}
	}
	return out
}
