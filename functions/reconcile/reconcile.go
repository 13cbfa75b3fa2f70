// Package reconcile is the Reconcile function, run by Cloud Scheduler
// through the reconcile-tick topic: for each cluster it lists what Compute
// shows (VMs by this cluster's labels, resize requests per MIG) and converges
// the stored state with it and with the latest Slurm snapshot
// (shared/plan.Reconcile). It repairs whatever the events missed. It also
// stores the snapshots the Slurm agent publishes (slurm-snapshot topic),
// and takes the step of the health repairs a snapshot confirms drained
// (shared/plan.Snapshot).
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
	"github.com/flexslurm/flexslurm/shared/wire"
)

// Flow names this function in logs and metrics.
const Flow = "flex.reconcile"

// Handler handles reconcile ticks.
type Handler struct{ r *apply.Runner }

// New returns a handler over a runner.
func New(r *apply.Runner) *Handler { return &Handler{r: r} }

// Entry is the deployed entry point (registered as "Reconcile").
func Entry(ctx context.Context, e cloudevents.Event) error {
	r, err := wire.Runner(ctx)
	if err != nil {
		return err
	}
	return New(r).Handle(ctx, e)
}

// Handle processes one tick.
func (h *Handler) Handle(ctx context.Context, e cloudevents.Event) error {
	msg, log, err := h.r.Envelope(ctx, Flow, e)
	if err != nil {
		return nil
	}
	// A snapshot (slurm-snapshot topic) or else a tick.
	snap, tick, err := event.DecodeSnapshotOrTick(msg.Data)
	if err != nil {
		return apply.Outcome(log, err)
	}
	// A snapshot only from slurm-snapshot, a tick only from reconcile-tick.
	typ := event.TypeReconcileTick
	if snap != nil {
		typ = event.TypeSlurmSnapshot
	}
	if err := h.r.CheckOrigin(msg, config.EntryReconcile, typ); err != nil {
		return apply.Outcome(log, err)
	}
	if snap != nil {
		return apply.Outcome(log, h.snapshot(ctx, msg.ID, snap))
	}
	clusters := []string{tick.Cluster}
	if tick.Cluster == "" {
		if clusters, err = h.r.Deps().Store.Clusters(ctx); err != nil {
			return apply.Outcome(log, fmt.Errorf("listing clusters: %w", err))
		}
	}
	// One cluster's failure does not stop the others.
	var errs []error
	for _, c := range clusters {
		if err := h.Cluster(ctx, msg.ID, c); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", c, err))
		}
	}
	return apply.Outcome(log, errors.Join(errs...))
}

// snapshot stores the agent's latest Slurm snapshot; which snapshot is kept
// when they arrive out of order is plan.Snapshot's decision. A snapshot
// that shows nodes drained may confirm the drain a repair waits for: the
// pools of those nodes that await a drain (or whose step a snapshot took:
// plan.SnapshotLoadsPool, so that a redelivery replays it) are loaded with
// it, so that plan.Snapshot takes their repair step in this event rather
// than at the next reconcile pass (minutes later). Other snapshots load
// nothing more.
func (h *Handler) snapshot(ctx context.Context, eventID string, snap *event.SlurmSnapshot) error {
	scope := store.Scope{Cluster: snap.Cluster, Slurm: true}
	if drained := plan.SnapshotRepairNodes(snap); len(drained) > 0 {
		st, err := h.r.Deps().Store.Read(ctx, store.Scope{Cluster: snap.Cluster, Nodes: drained})
		if err != nil {
			return fmt.Errorf("%w: reading the records of the nodes the snapshot shows drained: %w", apply.ErrTransient, err)
		}
		pools, jobs := map[string]bool{}, map[string]bool{}
		for _, n := range st.Nodes {
			if plan.SnapshotLoadsPool(n) {
				if !pools[n.Pool] {
					pools[n.Pool] = true
					scope.Pools = append(scope.Pools, n.Pool)
				}
				if n.Repair == model.RepairAwaitDrain && n.RepairJob != "" && !jobs[n.RepairJob] {
					jobs[n.RepairJob] = true
					scope.Jobs = append(scope.Jobs, n.RepairJob)
				}
			}
		}
		slices.Sort(scope.Pools)
		slices.Sort(scope.Jobs)
	}
	_, err := h.r.Process(ctx, apply.Input{
		Flow: Flow, EventID: eventID, Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.Snapshot(st, snap, now, h.r.Deps().Policy)
		},
	})
	return err
}

// Cluster reconciles one cluster: observe, then decide and act.
func (h *Handler) Cluster(ctx context.Context, tickID, cluster string) error {
	// 1. Observe Compute for the pools the cluster has now: their records
	// and the Slurm view are all this reads, not the nodes and jobs the
	// transaction loads.
	st, err := h.r.Deps().Store.Read(ctx, store.Scope{Cluster: cluster, AllPoolRecords: true, Slurm: true})
	if err != nil {
		return fmt.Errorf("reading state: %w", err)
	}
	obs := h.r.Observe(ctx, cluster, st)
	scope := store.Scope{Cluster: cluster, AllPools: true, Slurm: true}
	// The records of the jobs the snapshot shows pending are loaded whatever
	// their state (a pass loads active jobs only): a job whose end flexslurm
	// recorded must not look unknown (plan.Observed.JobRecordsFor).
	scope.Jobs = plan.ReconcileJobs(st.Slurm)
	// And those of the nodes still waiting on capacity, whatever their
	// state: capacity still queued for a job that ended is cancelled.
	scope.JobsOfRequested = true
	if st.Slurm != nil {
		obs.JobRecordsFor = st.Slurm.TakenAt
	}
	// 2. Decide against the state as it is in the transaction, and act.
	_, err = h.r.Process(ctx, apply.Input{
		Flow: Flow, EventID: tickID + "/" + cluster, Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.Reconcile(st, obs, now, h.r.Deps().Policy), nil
		},
	})
	return err
}
