package apply

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/metrics"
	"github.com/flexslurm/flexslurm/shared/model"
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
		LogClusterEvent(log, e)
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

// observe logs what the metrics of deploy/metrics.tf read of a decision
// carried out: its latency (decision_latency_s: from the event's arrival to
// its last action, on the wall clock) and, after a reconcile pass that saw
// every pool, the cluster's gauges (shared/metrics), once per pass.
func (r *Runner) observe(in Input, after *model.State, now time.Time, took time.Duration, err error, log *slog.Logger) {
	LogDecision(log, took, err != nil)
	if in.Scope.AllPools && strings.HasSuffix(in.Flow, ".reconcile") && after != nil {
		metrics.LogGauges(log, metrics.PoolGauges(after, now))
	}
}

// LogClusterEvent logs one cluster event: its message, with cluster_event
// (its type), pool, node, vm, generation, job and, for VM_RUNNING,
// capacity_wait_s.
func LogClusterEvent(log *slog.Logger, e plan.ClusterEvent) {
	args := []any{"cluster_event", e.Type, "pool", e.Pool, "node", e.Node, "vm", e.VM, "generation", e.Generation, "job", e.Job}
	if e.Wait > 0 {
		args = append(args, "capacity_wait_s", e.Wait.Seconds())
	}
	log.Info(e.Message, args...)
}

// LogDecision logs a decision carried out: decision_latency_s, and retry
// when the event is to be redelivered.
func LogDecision(log *slog.Logger, took time.Duration, retry bool) {
	log.Info("decision done", "decision_latency_s", took.Seconds(), "retry", retry)
}
