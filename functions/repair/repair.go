// Package repair is the Repair function: a node-side health check (Slurm
// prolog, epilog or HealthCheckProgram) found a hardware fault and published
// a health-failure event. The node is drained, its VM deleted, and a
// replacement requested at once when its job is pending or was requeued
// (shared/plan.Repair).
package repair

import (
	"context"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
	"github.com/flexslurm/flexslurm/shared/wire"
)

// Flow names this function in logs and metrics.
const Flow = "flex.repair"

// Handler handles health-failure events.
type Handler struct{ r *apply.Runner }

// New returns a handler over a runner.
func New(r *apply.Runner) *Handler { return &Handler{r: r} }

// Entry is the deployed entry point (registered as "Repair").
func Entry(ctx context.Context, e cloudevents.Event) error {
	r, err := wire.Runner(ctx)
	if err != nil {
		return err
	}
	return New(r).Handle(ctx, e)
}

// Handle processes one health.failure event.
func (h *Handler) Handle(ctx context.Context, e cloudevents.Event) error {
	// 1. Decode.
	msg, log, err := h.r.Envelope(ctx, Flow, e)
	if err != nil {
		return nil
	}
	ev, err := event.DecodeHealth(msg.Data)
	if err != nil {
		return apply.Outcome(log, err)
	}
	log = log.With("cluster", ev.Cluster, "node", ev.Node, "generation", ev.Generation)
	_, pool, _, ok := naming.ParseNodeName(ev.Node)
	if !ok {
		return apply.Outcome(log, plan.ErrRejected)
	}
	scope := store.Scope{Cluster: ev.Cluster, Pools: []string{pool}}
	if ev.JobID != "" {
		scope.Jobs = []string{ev.JobID}
	}
	// 2. Decide and act.
	_, err = h.r.Process(ctx, apply.Input{
		Flow: Flow, EventID: msg.ID, Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.Repair(st, ev, now)
		},
	})
	return apply.Outcome(log, err)
}
