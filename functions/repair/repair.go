// Package repair is the Repair function: a node-side health check (Slurm
// prolog, epilog or HealthCheckProgram) published a health.failure event
// with its verdict (shared/plan.Repair; docs/design.md, "Health repair").
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

// Handle processes one health.failure event (verdict FAIL or INCONCLUSIVE).
func (h *Handler) Handle(ctx context.Context, e cloudevents.Event) error {
	// 1. Decode.
	msg, log, err := h.r.Envelope(ctx, Flow, e)
	if err != nil {
		return nil
	}
	hdr, err := event.PeekHeader(msg.Data)
	if err != nil {
		return apply.Outcome(log, err)
	}
	// Health reports are accepted only from health-failure.
	if err := h.r.CheckOrigin(msg, config.EntryRepair, hdr.Type); err != nil {
		return apply.Outcome(logx.Attrs(log, "cluster", hdr.Cluster, "type", hdr.Type), err)
	}
	ev, err := event.DecodeHealth(msg.Data)
	if err != nil {
		return apply.Outcome(log, err)
	}
	// drained_claim is the hook's word that the node is drained: logged for
	// diagnosis, never acted on (plan.Repair waits for Slurm's snapshot).
	log = logx.Attrs(log, "cluster", ev.Cluster, "node", ev.Node, "generation", ev.Generation, "verdict", ev.Verdict,
		"drained_claim", ev.Drained, "job_id", ev.JobID, "job_state_claim", ev.JobState)
	_, pool, _, ok := naming.ParseNodeName(ev.Node)
	if !ok {
		return apply.Outcome(log, plan.ErrRejected)
	}
	// The report must come from the VM it names (or, naming none, from a
	// VM of its node, which then names it): its identity token decides.
	vm := ev.VMName
	if ev.Generation > 0 {
		g := fmt.Sprintf("%s-g%d", ev.Node, ev.Generation)
		if vm != "" && vm != g {
			return apply.Outcome(log, fmt.Errorf("%w: vm_name %s is not generation %d of %s", event.ErrMalformed, vm, ev.Generation, ev.Node))
		}
		vm = g
	}
	proven, err := h.r.ProveNode(ctx, msg, ev.Cluster, ev.Node, vm)
	if err != nil {
		return apply.Outcome(log, err)
	}
	ev.VMName = proven
	// The snapshot tells whether Slurm has drained the node already (for a
	// node awaiting its drain) and whether the job the event names waits.
	scope := store.Scope{Cluster: ev.Cluster, Pools: []string{pool}, Slurm: true}
	if ev.JobID != "" {
		scope.Jobs = []string{ev.JobID}
	}
	// 2. Decide and act.
	_, err = h.r.Process(ctx, apply.Input{
		Flow: Flow, EventID: msg.ID, Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.Repair(st, ev, now, h.r.Deps().Policy)
		},
	})
	return apply.Outcome(log, err)
}
