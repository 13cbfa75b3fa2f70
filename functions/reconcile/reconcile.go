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
	"fmt"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Function is Reconcile's part of the skeleton every function shares
// (apply.NewHandler runs it over a runner; the root package registers
// apply.Entry(wire.Runner, Function) as the entry point Reconcile).
var Function = apply.Function[payload]{Flow: "flex.reconcile", Entry: config.EntryReconcile, Peek: peek, Route: route}

// payload is a snapshot (slurm-snapshot topic) or else a tick.
type payload struct {
	snap *event.SlurmSnapshot
	tick *event.Tick
}

// peek decodes the payload, whose type only decoding tells: a snapshot is
// accepted only from slurm-snapshot, a tick only from reconcile-tick.
func peek(data []byte) (apply.Peeked[payload], error) {
	snap, tick, err := event.DecodeSnapshotOrTick(data)
	if err != nil {
		return apply.Peeked[payload]{}, err
	}
	typ := event.TypeReconcileTick
	if snap != nil {
		typ = event.TypeSlurmSnapshot
	}
	return apply.Peeked[payload]{Payload: payload{snap: snap, tick: tick}, Type: typ}, nil
}

// route stores a snapshot, or reconciles the cluster a tick names (every
// cluster when it names none): one step per cluster, so that one
// cluster's failure does not stop the others.
func route(ctx context.Context, r *apply.Runner, ev *apply.Event, p payload) ([]apply.Step, error) {
	return (&handler{r: r}).route(ctx, ev, p)
}

type handler struct{ r *apply.Runner }

func (h *handler) route(ctx context.Context, ev *apply.Event, p payload) ([]apply.Step, error) {
	if p.snap != nil {
		return []apply.Step{func(ctx context.Context) (apply.Input, error) { return h.snapshot(ctx, p.snap) }}, nil
	}
	clusters := []string{p.tick.Cluster}
	if p.tick.Cluster == "" {
		var err error
		if clusters, err = h.r.Deps().Store.Clusters(ctx); err != nil {
			return nil, fmt.Errorf("listing clusters: %w", err)
		}
	}
	steps := make([]apply.Step, 0, len(clusters))
	for _, c := range clusters {
		steps = append(steps, func(ctx context.Context) (apply.Input, error) {
			in, err := h.cluster(ctx, c)
			if err != nil {
				return in, fmt.Errorf("cluster %s: %w", c, err)
			}
			in.EventID = ev.Msg.ID + "/" + c
			return in, nil
		})
	}
	return steps, nil
}

// snapshot stores the agent's latest Slurm snapshot; which snapshot is kept
// when they arrive out of order is plan.Snapshot's decision. A snapshot
// that shows nodes drained may confirm the drain a repair waits for: the
// pools of those nodes that await a drain (or whose step a snapshot took:
// plan.SnapshotLoadsPool, so that a redelivery replays it) are loaded with
// it, so that plan.Snapshot takes their repair step in this event rather
// than at the next reconcile pass (minutes later). Other snapshots load
// nothing more.
func (h *handler) snapshot(ctx context.Context, snap *event.SlurmSnapshot) (apply.Input, error) {
	scope := store.Scope{Cluster: snap.Cluster, Slurm: true}
	if drained := plan.SnapshotRepairNodes(snap); len(drained) > 0 {
		st, err := h.r.Deps().Store.Read(ctx, store.Scope{Cluster: snap.Cluster, Nodes: drained})
		if err != nil {
			return apply.Input{}, fmt.Errorf("%w: reading the records of the nodes the snapshot shows drained: %w", apply.ErrTransient, err)
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
	return apply.Input{
		Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.Snapshot(st, snap, now, h.r.Deps().Policy)
		},
	}, nil
}

// cluster observes one cluster and returns its reconcile decision.
func (h *handler) cluster(ctx context.Context, cluster string) (apply.Input, error) {
	// 1. Observe Compute for the pools the cluster has now: their records
	// and the Slurm view are all this reads, not the nodes and jobs the
	// transaction loads.
	st, err := h.r.Deps().Store.Read(ctx, store.Scope{Cluster: cluster, AllPoolRecords: true, Slurm: true})
	if err != nil {
		return apply.Input{}, fmt.Errorf("reading state: %w", err)
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
	return apply.Input{
		Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.Reconcile(st, obs, now, h.r.Deps().Policy), nil
		},
	}, nil
}
