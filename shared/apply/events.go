package apply

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/logx"
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
			ExpireAt: e.Time.Add(store.ClusterEventTTL), Check: e.Check,
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
// carried out: its latency (from the event's arrival to
// its last action, on the wall clock) and, after a reconcile pass that saw
// every pool, the cluster's gauges (shared/metrics), once per pass.
func (r *Runner) observe(in Input, after *model.State, now time.Time, took time.Duration, err error, log *slog.Logger) {
	LogDecision(log, took, err != nil)
	if in.Scope.AllPools && strings.HasSuffix(in.Flow, ".reconcile") && after != nil {
		// LogGauges names the cluster of each sample itself.
		metrics.LogGauges(logx.Attrs(r.d.Log, "flow", in.Flow, "event_id", in.EventID), metrics.PoolGauges(after, now))
	}
}

// Samples of the distribution metrics, logged one per line as
// jsonPayload.sample = the name and jsonPayload.value = seconds.
const (
	SampleCapacityWait    = "capacity_wait_seconds"       // a VM_RUNNING's wait for capacity
	SampleDecisionLatency = metrics.SampleDecisionLatency // an event's arrival to its last action
)

// LogClusterEvent logs one cluster event: its message, with cluster_event
// (its type), pool, node, vm, generation, job and, for a failed health
// check, its hook (check); and for a VM_RUNNING
// whose wait is known, a capacity_wait_seconds sample.
func LogClusterEvent(log *slog.Logger, e plan.ClusterEvent) {
	args := []any{"cluster_event", e.Type, "pool", e.Pool, "node", e.Node, "vm", e.VM, "generation", e.Generation, "job", e.Job}
	if e.Check != "" {
		args = append(args, "check", e.Check)
	}
	log.Info(e.Message, args...)
	if e.Wait > 0 {
		log.Info("capacity wait", "sample", SampleCapacityWait, "value", e.Wait.Seconds(), "pool", e.Pool, "node", e.Node)
	}
}

// LogDecision logs a decision carried out: a decision_latency_seconds
// sample, and retry when the event is to be redelivered.
func LogDecision(log *slog.Logger, took time.Duration, retry bool) {
	log.Info("decision done", "sample", SampleDecisionLatency, "value", took.Seconds(), "retry", retry)
}
