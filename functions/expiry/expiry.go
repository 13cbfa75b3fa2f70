// Package expiry is the Expiry function: Compute Engine's audit-log entries
// about the cluster's VMs (a Logging sink routes them to the instance-expiry
// topic) tell it that a VM ended at its max run duration, was deleted, or was
// interrupted. A static node is recreated always; a dynamic node only if a
// job is pending for it (shared/plan.Expiry).
package expiry

import (
	"context"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
	"github.com/flexslurm/flexslurm/shared/wire"
)

// Flow names this function in logs and metrics.
const Flow = "flex.expiry"

// Handler handles audit-log events.
type Handler struct{ r *apply.Runner }

// New returns a handler over a runner.
func New(r *apply.Runner) *Handler { return &Handler{r: r} }

// Entry is the deployed entry point (registered as "Expiry").
func Entry(ctx context.Context, e cloudevents.Event) error {
	r, err := wire.Runner(ctx)
	if err != nil {
		return err
	}
	return New(r).Handle(ctx, e)
}

// Handle processes one audit LogEntry.
func (h *Handler) Handle(ctx context.Context, e cloudevents.Event) error {
	// 1. Decode the envelope and the LogEntry.
	msg, log, err := h.r.Envelope(ctx, Flow, e)
	if err != nil {
		return nil
	}
	// Only the expiry log sink's topic carries audit-log entries.
	if err := h.r.CheckOrigin(msg, config.EntryExpiry, event.TypeAuditLog); err != nil {
		return apply.Outcome(log, err)
	}
	a, err := event.DecodeAudit(msg.Data)
	if err != nil {
		return apply.Outcome(log, err)
	}
	log = logx.Attrs(log, "vm", a.Instance, "method", a.Method, "principal", a.Principal)
	// 2. Only VMs named like this system's are considered (labels are
	// checked again before any deletion).
	_, cluster, pool, _, ok := naming.ParseVMName(a.Instance)
	if !ok {
		log.Info("not a flexslurm VM: ignored")
		return nil
	}
	// 3. Compute, not the log entry, says whether the VM ended.
	log = log.With("cluster", cluster, "pool", pool)
	if err := h.r.CorroborateEnd(ctx, a); err != nil {
		return apply.Outcome(log, err)
	}
	// 4. Decide and act.
	_, err = h.r.Process(ctx, apply.Input{
		Flow: Flow, EventID: msg.ID,
		Scope: store.Scope{Cluster: cluster, Pools: []string{pool}},
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.Expiry(st, a, now, h.r.Deps().Policy)
		},
	})
	return apply.Outcome(log, err)
}
