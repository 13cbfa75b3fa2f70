package apply

import (
	"context"
	"log/slog"

	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
)

// recordEvents logs and stores the cluster events a committed decision
// derived (plan.Events). source names the decision (the processed event's
// id, or the follow-up's), so storing the same decision's events again
// writes the same documents. A store error is logged and the events are
// lost: an event never fails the decision it reports.
//
// Each event is also one log line (jsonPayload.cluster_event = its type)
// that the log-based metrics of deploy/metrics.tf count.
func (r *Runner) recordEvents(ctx context.Context, cluster, source string, evs []plan.ClusterEvent, log *slog.Logger) {
	if len(evs) == 0 {
		return
	}
	out := make([]store.ClusterEvent, 0, len(evs))
	for i, e := range evs {
		log.Info(e.Message, "cluster_event", e.Type, "pool", e.Pool, "node", e.Node, "vm", e.VM, "generation", e.Generation, "job", e.Job)
		out = append(out, store.ClusterEvent{
			ID: store.ClusterEventID(cluster, e.Time, source, i), Cluster: cluster, Type: e.Type, Time: e.Time,
			Pool: e.Pool, Node: e.Node, VM: e.VM, Generation: e.Generation, Job: e.Job, Message: e.Message,
			ExpireAt: e.Time.Add(store.ClusterEventTTL),
		})
	}
	if r.d.Events == nil {
		return
	}
	if err := r.d.Events.AddEvents(ctx, out); err != nil {
		log.Error("cluster events not stored", "events", len(out), "error", err.Error())
	}
}
