// Package scaleup is the ScaleUp function: it keeps static pools at
// min_node_count when a cluster spec is applied (cluster-spec topic),
// provisions Flex-Start capacity for pending Slurm jobs (job-pending topic),
// never beyond max_node_count, and releases the VMs of nodes Slurm powers
// down (node.suspend, node.resume_failed on the same topic) or whose
// bootstrap failed (node.bootstrap_failed). Decisions live in shared/plan; this package
// only decodes, proves the sender (the controller's reports carry its
// instance identity token, a node's that of the VM it names; see
// shared/identity), scopes and hands over to shared/apply.
package scaleup

import (
	"context"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
	"github.com/flexslurm/flexslurm/shared/wire"
)

// Flow names this function in logs and metrics.
const Flow = "flex.scaleup"

// Handler handles ScaleUp events.
type Handler struct{ r *apply.Runner }

// New returns a handler over a runner.
func New(r *apply.Runner) *Handler { return &Handler{r: r} }

// Entry is the deployed entry point (registered as "ScaleUp").
func Entry(ctx context.Context, e cloudevents.Event) error {
	r, err := wire.Runner(ctx)
	if err != nil {
		return err
	}
	return New(r).Handle(ctx, e)
}

// Handle processes one job.* or cluster.applied event.
func (h *Handler) Handle(ctx context.Context, e cloudevents.Event) error {
	// 1. Decode the Pub/Sub envelope and the payload header.
	msg, log, err := h.r.Envelope(ctx, Flow, e)
	if err != nil {
		return nil
	}
	hdr, err := event.PeekHeader(msg.Data)
	if err != nil {
		return apply.Outcome(log, err)
	}
	log = logx.Attrs(log, "cluster", hdr.Cluster, "type", hdr.Type)
	// A type is accepted only from its own topic: a spec only from
	// cluster-spec, which only the operator may publish to; job and node
	// reports only from job-pending.
	if err := h.r.CheckOrigin(msg, config.EntryScaleUp, hdr.Type); err != nil {
		return apply.Outcome(log, err)
	}
	// 2. Decide and act.
	switch hdr.Type {
	case event.TypeClusterApply:
		err = h.cluster(ctx, msg)
	case event.TypeJobPending, event.TypeJobStarted, event.TypeJobFinished, event.TypeJobCancelled:
		// Only the cluster's Slurm controller reports jobs.
		if err = h.r.ProveController(ctx, msg, hdr.Cluster); err == nil {
			err = h.job(ctx, msg)
		}
	case event.TypeNodeSuspend, event.TypeResumeFailed:
		if err = h.r.ProveController(ctx, msg, hdr.Cluster); err == nil {
			err = h.power(ctx, msg)
		}
	case event.TypeBootstrapFail:
		err = h.bootstrap(ctx, msg)
	case event.TypeVersionMismatch:
		err = h.versionMismatch(ctx, msg)
	default:
		err = fmt.Errorf("%w: type %q is not handled by ScaleUp", event.ErrMalformed, hdr.Type)
	}
	return apply.Outcome(log, err)
}

func (h *Handler) cluster(ctx context.Context, msg *event.Message) error {
	ev, err := event.DecodeCluster(msg.Data)
	if err != nil {
		return err
	}
	c, err := spec.Parse(ev.Spec)
	if err != nil {
		return fmt.Errorf("%w: cluster.applied carries an invalid spec: %w", event.ErrMalformed, err)
	}
	if c.ID != ev.Cluster {
		return fmt.Errorf("%w: cluster.applied for %q carries the spec of %q", event.ErrMalformed, ev.Cluster, c.ID)
	}
	// Every pool's template, built once for this event: the event is valid
	// only if each can be built from its spec and settings (e.g. a
	// node_image resolved by flexslurm apply), and the decision records
	// what was built, for the executor to send as it is.
	templates, err := instancetemplate.BuildPools(c, *ev.Node)
	if err != nil {
		return fmt.Errorf("%w: cluster.applied for %q: %w", event.ErrMalformed, ev.Cluster, err)
	}
	effective, err := c.EffectiveJSON()
	if err != nil {
		return err
	}
	_, err = h.r.Process(ctx, apply.Input{
		Flow: Flow, EventID: msg.ID,
		Scope: store.Scope{Cluster: c.ID, AllPools: true},
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.ClusterApplied(st, c, *ev.Node, templates, effective, now, h.r.Deps().Policy), nil
		},
	})
	return err
}

func (h *Handler) job(ctx context.Context, msg *event.Message) error {
	ev, err := event.DecodeJob(msg.Data)
	if err != nil {
		return err
	}
	// A job.pending naming its nodes reads only its pool's record, its own
	// record and its nodes' (plan.JobScope): its cost does not grow with
	// the jobs waiting in the pool, and concurrent events of one pool touch
	// no common document for update. When the pool record does not allow
	// it (plan.JobNarrow), nothing was written and the whole pool decides.
	if narrow, ok := plan.JobScope(ev); ok {
		var wider error
		_, err := h.r.Process(ctx, apply.Input{
			Flow: Flow, EventID: msg.ID,
			Scope: store.Scope{Cluster: ev.Cluster, PoolRecords: []string{narrow.Pool}, Jobs: []string{ev.JobID}, Nodes: narrow.Nodes},
			Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
				wider = nil
				c, err := h.r.Spec(st)
				if err != nil {
					return nil, err
				}
				acts, err := plan.JobNarrow(st, c, ev, now, h.r.Deps().Policy)
				if errors.Is(err, plan.ErrWiderScope) {
					wider = err
				}
				return acts, err
			},
		})
		if wider == nil {
			return err
		}
		h.r.Deps().Log.Info("job event decided from the whole pool", "cluster", ev.Cluster, "job", ev.JobID, "event_id", msg.ID, "reason", wider.Error())
	}
	// The pools a job can touch: those of its nodes, else of its partition.
	head, err := h.r.Deps().Store.Read(ctx, store.Scope{Cluster: ev.Cluster})
	if err != nil {
		return fmt.Errorf("reading cluster %s: %w", ev.Cluster, err)
	}
	c, err := h.r.Spec(head)
	if err != nil {
		return err
	}
	scope := store.Scope{Cluster: c.ID, Jobs: []string{ev.JobID}}
	scope.Pools, scope.AllPools = plan.JobPools(c, ev)
	_, err = h.r.Process(ctx, apply.Input{
		Flow: Flow, EventID: msg.ID, Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.Job(st, c, ev, now, h.r.Deps().Policy)
		},
	})
	return err
}

func (h *Handler) power(ctx context.Context, msg *event.Message) error {
	ev, err := event.DecodeNode(msg.Data)
	if err != nil {
		return err
	}
	scope := store.Scope{Cluster: ev.Cluster}
	for _, n := range ev.Nodes {
		if _, p, _, ok := naming.ParseNodeName(n); ok {
			scope.Pools = appendOnce(scope.Pools, p)
		}
	}
	_, err = h.r.Process(ctx, apply.Input{
		Flow: Flow, EventID: msg.ID, Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.NodePower(st, ev, now, h.r.Deps().Policy)
		},
	})
	return err
}

func (h *Handler) bootstrap(ctx context.Context, msg *event.Message) error {
	ev, err := event.DecodeBootstrap(msg.Data)
	if err != nil {
		return err
	}
	// Only the VM the report names can report its own bootstrap failed.
	if _, err := h.r.ProveNode(ctx, msg, ev.Cluster, ev.Node, ev.VMName); err != nil {
		return err
	}
	scope := store.Scope{Cluster: ev.Cluster}
	if _, p, _, ok := naming.ParseNodeName(ev.Node); ok {
		scope.Pools = []string{p}
	}
	_, err = h.r.Process(ctx, apply.Input{
		Flow: Flow, EventID: msg.ID, Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.NodeBootstrapFailed(st, ev, now, h.r.Deps().Policy)
		},
	})
	return err
}

// versionMismatch records a VM's report that its flexslurm binary is not
// the version of the functions that built its template, for status.
func (h *Handler) versionMismatch(ctx context.Context, msg *event.Message) error {
	ev, err := event.DecodeVersionMismatch(msg.Data)
	if err != nil {
		return err
	}
	// Only the VM the report names can report its own version.
	if _, err := h.r.ProveNode(ctx, msg, ev.Cluster, ev.Node, ev.VMName); err != nil {
		return err
	}
	h.r.Deps().Log.Warn("a node runs another flexslurm version than the functions", "cluster", ev.Cluster, "node", ev.Node, "vm", ev.VMName,
		"node_version", ev.NodeVersion, "functions_version", ev.FunctionsVersion)
	scope := store.Scope{Cluster: ev.Cluster}
	if _, p, _, ok := naming.ParseNodeName(ev.Node); ok {
		scope.Pools = []string{p}
	}
	_, err = h.r.Process(ctx, apply.Input{
		Flow: Flow, EventID: msg.ID, Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.NodeVersionMismatch(st, ev, now, h.r.Deps().Policy)
		},
	})
	return err
}

func appendOnce(xs []string, x string) []string {
	for _, v := range xs {
		if v == x {
			return xs
		}
	}
	return append(xs, x)
}
