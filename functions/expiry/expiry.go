// Package expiry is the Expiry function: Compute Engine's audit-log entries
// about the cluster's VMs (a Logging sink routes them to the instance-expiry
// topic) tell it that a VM ended at its max run duration, was deleted, or was
// interrupted. A static node is recreated always; a dynamic node only if a
// job is pending for it (shared/plan.Expiry).
package expiry

import (
	"context"
	"time"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Function is Expiry's part of the skeleton every function shares
// (apply.NewHandler runs it over a runner; the root package registers
// apply.Entry(wire.Runner, Function) as the entry point Expiry).
var Function = apply.Function[struct{}]{Flow: "flex.expiry", Entry: config.EntryExpiry, Peek: peek, Route: route}

// peek: a LogEntry carries no flexslurm header; only the expiry log
// sink's topic may carry audit-log entries.
func peek([]byte) (apply.Peeked[struct{}], error) {
	return apply.Peeked[struct{}]{Type: event.TypeAuditLog}, nil
}

// route decodes one audit LogEntry.
func route(ctx context.Context, r *apply.Runner, ev *apply.Event, _ struct{}) ([]apply.Step, error) {
	a, err := event.DecodeAudit(ev.Msg.Data)
	if err != nil {
		return nil, err
	}
	ev.Log = logx.Attrs(ev.Log, "vm", a.Instance, "method", a.Method, "principal", a.Principal)
	// Only VMs named like this system's are considered (labels are
	// checked again before any deletion).
	_, cluster, pool, _, ok := naming.ParseVMName(a.Instance)
	if !ok {
		ev.Log.Info("not a flexslurm VM: ignored")
		return nil, nil
	}
	// Compute, not the log entry, says whether the VM ended.
	ev.Log = ev.Log.With("cluster", cluster, "pool", pool)
	if err := r.CorroborateEnd(ctx, a); err != nil {
		return nil, err
	}
	return apply.Steps(apply.Input{
		Scope: store.Scope{Cluster: cluster, Pools: []string{pool}},
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.Expiry(st, a, now, r.Deps().Policy)
		},
	}), nil
}
