// Package repair is the Repair function: a node-side health check (Slurm
// prolog, epilog or HealthCheckProgram) published a health.failure event
// with its verdict (shared/plan.Repair; docs/design/repair.md, "Health repair").
//
// On FAIL the node is drained in Slurm and, once Slurm has drained it (a
// Slurm snapshot taken after the drain was asked for shows it drained; the
// hook's own drained flag is logged, never trusted), repaired: a
// Flex-Start VM is deleted and replaced (a static node, or a dynamic node
// whose job is pending or was requeued, at once), since Compute Engine
// repairs hosts only of reservation-bound A4X Max, A4X, A4, A3 Ultra, A3
// Mega and A3 High (8 GPUs) VMs (plan.HostRepairSupported). For such a VM the function starts the host
// repair (instances.reportHostAsFaulty, IMMEDIATE) and returns without
// waiting for its 10–12 minute operation; the reconciler follows it, and
// the VM is deleted and replaced when the repair is refused or times out. A dynamic
// node no job waits for is deleted, not replaced. Repairs beyond the
// pool's repair budget are blocked (logged, alerted, counted) and started
// by the reconciler as others finish. On INCONCLUSIVE the verdict is
// counted; repeated ones drain the node for diagnosis.
//
// The report must carry the instance identity token of the VM it names
// (shared/identity): one that does not is refused, never acted on.
//
// The function reads the pool's records, the job the event names and the
// latest Slurm snapshot, and uses the runner's plan.Policy.
package repair

import (
	"context"
	"fmt"
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

// Function is Repair's part of the skeleton every function shares
// (apply.NewHandler runs it over a runner; the root package registers
// apply.Entry(wire.Runner, Function) as the entry point Repair).
var Function = apply.Function[event.Header]{Flow: "flex.repair", Entry: config.EntryRepair, Peek: apply.PeekHeader, Route: route}

// route decodes one health.failure event (verdict FAIL or INCONCLUSIVE),
// accepted only from health-failure, and proves that the VM it names sent
// it.
func route(ctx context.Context, r *apply.Runner, e *apply.Event, _ event.Header) ([]apply.Step, error) {
	ev, err := event.DecodeHealth(e.Msg.Data)
	if err != nil {
		return nil, err
	}
	// drained_claim is the hook's word that the node is drained: logged for
	// diagnosis, never acted on (plan.Repair waits for Slurm's snapshot).
	e.Log = logx.Attrs(e.Log, "node", ev.Node, "generation", ev.Generation, "verdict", ev.Verdict,
		"drained_claim", ev.Drained, "job_id", ev.JobID, "job_state_claim", ev.JobState)
	_, pool, _, ok := naming.ParseNodeName(ev.Node)
	if !ok {
		return nil, plan.ErrRejected
	}
	// The report must come from the VM it names (or, naming none, from a
	// VM of its node, which then names it): its identity token decides.
	vm := ev.VMName
	if ev.Generation > 0 {
		g := fmt.Sprintf("%s-g%d", ev.Node, ev.Generation)
		if vm != "" && vm != g {
			return nil, fmt.Errorf("%w: vm_name %s is not generation %d of %s", event.ErrMalformed, vm, ev.Generation, ev.Node)
		}
		vm = g
	}
	proven, err := r.ProveNode(ctx, e.Msg, ev.Cluster, ev.Node, vm)
	if err != nil {
		return nil, err
	}
	ev.VMName = proven
	// The snapshot tells whether Slurm has drained the node already (for a
	// node awaiting its drain) and whether the job the event names waits.
	scope := store.Scope{Cluster: ev.Cluster, Pools: []string{pool}, Slurm: true}
	if ev.JobID != "" {
		scope.Jobs = []string{ev.JobID}
	}
	return apply.Steps(apply.Input{
		Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.Repair(st, ev, now, r.Deps().Policy)
		},
	}), nil
}
