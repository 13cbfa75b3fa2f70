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
	"fmt"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Function is ScaleUp's part of the skeleton every function shares
// (apply.NewHandler runs it over a runner; the root package registers
// apply.Entry(wire.Runner, Function) as the entry point ScaleUp).
var Function = apply.Function[event.Header]{Flow: "flex.scaleup", Entry: config.EntryScaleUp, Peek: apply.PeekHeader, Route: route}

// route decodes one job.*, node.* or cluster.applied event (its type came
// from its own topic: a spec only from cluster-spec, which only the
// operator may publish to; job and node reports only from job-pending)
// and proves its sender.
func route(ctx context.Context, r *apply.Runner, ev *apply.Event, hdr event.Header) ([]apply.Step, error) {
	return (&handler{r: r}).route(ctx, ev, hdr)
}

type handler struct{ r *apply.Runner }

func (h *handler) route(ctx context.Context, ev *apply.Event, hdr event.Header) ([]apply.Step, error) {
	msg := ev.Msg
	switch hdr.Type {
	case event.TypeClusterApply:
		return h.cluster(msg)
	case event.TypeJobPending, event.TypeJobStarted, event.TypeJobFinished, event.TypeJobCancelled:
		// Only the cluster's Slurm controller reports jobs.
		if err := h.r.ProveController(ctx, msg, hdr.Cluster); err != nil {
			return nil, err
		}
		return h.job(msg)
	case event.TypeNodeSuspend, event.TypeResumeFailed:
		if err := h.r.ProveController(ctx, msg, hdr.Cluster); err != nil {
			return nil, err
		}
		return h.power(msg)
	case event.TypeBootstrapFail:
		return h.bootstrap(ctx, msg)
	case event.TypeVersionMismatch:
		return h.versionMismatch(ctx, msg)
	default:
		return nil, fmt.Errorf("%w: type %q is not handled by ScaleUp", event.ErrMalformed, hdr.Type)
	}
}

func (h *handler) cluster(msg *event.Message) ([]apply.Step, error) {
	ev, err := event.DecodeCluster(msg.Data)
	if err != nil {
		return nil, err
	}
	c, err := spec.Parse(ev.Spec)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster.applied carries an invalid spec: %w", event.ErrMalformed, err)
	}
	if c.ID != ev.Cluster {
		return nil, fmt.Errorf("%w: cluster.applied for %q carries the spec of %q", event.ErrMalformed, ev.Cluster, c.ID)
	}
	// Every pool's template, built once for this event: the event is valid
	// only if each can be built from its spec and settings (e.g. a
	// node_image resolved by flexslurm apply), and the decision records
	// what was built, for the executor to send as it is.
	templates, err := instancetemplate.BuildPools(c, *ev.Node)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster.applied for %q: %w", event.ErrMalformed, ev.Cluster, err)
	}
	effective, err := c.EffectiveJSON()
	if err != nil {
		return nil, err
	}
	return apply.Steps(apply.Input{
		Scope: store.Scope{Cluster: c.ID, AllPools: true},
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.ClusterApplied(st, c, *ev.Node, templates, effective, now, h.r.Deps().Policy), nil
		},
	}), nil
}

func (h *handler) job(msg *event.Message) ([]apply.Step, error) {
	ev, err := event.DecodeJob(msg.Data)
	if err != nil {
		return nil, err
	}
	// The pools a job can touch: those of its nodes, else of its partition.
	wide := func(ctx context.Context) (apply.Input, error) {
		head, err := h.r.Deps().Store.Read(ctx, store.Scope{Cluster: ev.Cluster})
		if err != nil {
			return apply.Input{}, fmt.Errorf("reading cluster %s: %w", ev.Cluster, err)
		}
		c, err := h.r.Spec(head)
		if err != nil {
			return apply.Input{}, err
		}
		scope := store.Scope{Cluster: c.ID, Jobs: []string{ev.JobID}}
		scope.Pools, scope.AllPools = plan.JobPools(c, ev)
		return apply.Input{
			Scope: scope,
			Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
				return plan.Job(st, c, ev, now, h.r.Deps().Policy)
			},
		}, nil
	}
	// A job.pending naming its nodes reads only its pool's record, its own
	// record and its nodes' (plan.JobScope): its cost does not grow with
	// the jobs waiting in the pool, and concurrent events of one pool touch
	// no common document for update. When the pool record does not allow
	// it (plan.JobNarrow), nothing was written and the whole pool decides.
	narrow, ok := plan.JobScope(ev)
	if !ok {
		return []apply.Step{wide}, nil
	}
	return apply.Steps(apply.Input{
		Scope: store.Scope{Cluster: ev.Cluster, PoolRecords: []string{narrow.Pool}, Jobs: []string{ev.JobID}, Nodes: narrow.Nodes},
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			c, err := h.r.Spec(st)
			if err != nil {
				return nil, err
			}
			return plan.JobNarrow(st, c, ev, now, h.r.Deps().Policy)
		},
		Wider: wide,
	}), nil
}

func (h *handler) power(msg *event.Message) ([]apply.Step, error) {
	ev, err := event.DecodeNode(msg.Data)
	if err != nil {
		return nil, err
	}
	scope := store.Scope{Cluster: ev.Cluster}
	for _, n := range ev.Nodes {
		if _, p, _, ok := naming.ParseNodeName(n); ok && !slices.Contains(scope.Pools, p) {
			scope.Pools = append(scope.Pools, p)
		}
	}
	return apply.Steps(apply.Input{
		Scope: scope,
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			return plan.NodePower(st, ev, now, h.r.Deps().Policy)
		},
	}), nil
}

// nodeReport proves that a node's report (node.bootstrap_failed,
// node.version_mismatch) comes from the VM it names, and returns the step
// deciding it over the node's pool.
func (h *handler) nodeReport(ctx context.Context, msg *event.Message, cluster, node, vm string, decide func(st *model.State, now time.Time) ([]plan.Action, error)) ([]apply.Step, error) {
	if _, err := h.r.ProveNode(ctx, msg, cluster, node, vm); err != nil {
		return nil, err
	}
	scope := store.Scope{Cluster: cluster}
	if _, p, _, ok := naming.ParseNodeName(node); ok {
		scope.Pools = []string{p}
	}
	return apply.Steps(apply.Input{Scope: scope, Decide: decide}), nil
}

func (h *handler) bootstrap(ctx context.Context, msg *event.Message) ([]apply.Step, error) {
	ev, err := event.DecodeBootstrap(msg.Data)
	if err != nil {
		return nil, err
	}
	// Only the VM the report names can report its own bootstrap failed.
	return h.nodeReport(ctx, msg, ev.Cluster, ev.Node, ev.VMName, func(st *model.State, now time.Time) ([]plan.Action, error) {
		return plan.NodeBootstrapFailed(st, ev, now, h.r.Deps().Policy)
	})
}

// versionMismatch records a VM's report that its flexslurm binary is not
// the version of the functions that built its template, for status.
func (h *handler) versionMismatch(ctx context.Context, msg *event.Message) ([]apply.Step, error) {
	ev, err := event.DecodeVersionMismatch(msg.Data)
	if err != nil {
		return nil, err
	}
	// Only the VM the report names can report its own version.
	steps, err := h.nodeReport(ctx, msg, ev.Cluster, ev.Node, ev.VMName, func(st *model.State, now time.Time) ([]plan.Action, error) {
		return plan.NodeVersionMismatch(st, ev, now, h.r.Deps().Policy)
	})
	if err == nil {
		h.r.Deps().Log.Warn("a node runs another flexslurm version than the functions", "cluster", ev.Cluster, "node", ev.Node, "vm", ev.VMName,
			"node_version", ev.NodeVersion, "functions_version", ev.FunctionsVersion)
	}
	return steps, err
}
