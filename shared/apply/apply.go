// Package apply executes flexslurm's decisions and decides nothing itself:
// for one event it opens the Firestore transaction (store.Update) in which
// the pure decision (shared/plan) reads the snapshot and its record changes
// are written together with the processed-event marker, and after the
// commit it carries out the external actions — Compute Engine calls with
// deterministic names and request ids, and Slurm commands published for
// the agent.
//
// Ordering is what makes a crash safe: intents are committed first, then
// acted on. A crash after the commit leaves a node Requested (or Deleting)
// whose action may not have happened; the redelivered event finds its marker
// and re-drives what plan.Replay returns (from the actions plan.ReplayNote
// stored with the marker), and the reconciler does the same after a grace
// period. Since every name and request id derives from (cluster, pool, node
// or job, generation), repeating an action repeats nothing.
//
// What this package does on its own is the executor's part only: it
// classifies a failed action at the adapter edge (Compute error codes
// through shared/gce's table, into a plan.FailureClass) and carries out
// what plan.Respond decides about it; it refuses to act on a VM or MIG not
// named and labelled as the cluster's and pool's (a guard against a
// decision built from bad input, never a choice between outcomes); it
// treats what Compute no longer has as done (idempotence); and it drops
// the events plan.EventTooOld finds older than the Policy's MaxEventAge,
// measured on the wall clock.
//
// The package declares the ports it consumes (Compute, Publisher) and uses
// shared/store, shared/plan, shared/spec, shared/gce value types, shared/event.
package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/googleapis/gax-go/v2/apierror"

	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
	"github.com/flexslurm/flexslurm/shared/text"
)

// Compute is the part of Compute Engine flexslurm acts on (shared/gce.Client).
// Every mutation is idempotent for a given name and request id: creating
// what exists returns nil, deleting what is gone returns nil.
type Compute interface {
	EnsureInstanceTemplate(ctx context.Context, t instancetemplate.Template, requestID string) error
	EnsureMIG(ctx context.Context, m gce.MIGSpec, requestID string) error
	CreateResizeRequest(ctx context.Context, zone, mig string, rr gce.ResizeRequestSpec, requestID string) error
	CancelResizeRequest(ctx context.Context, zone, mig, name, requestID string) error
	// DeleteResizeRequest deletes an inactive (SUCCEEDED, FAILED,
	// CANCELLED) resize request; one already gone is done (nil).
	DeleteResizeRequest(ctx context.Context, zone, mig, name, requestID string) error
	DeleteInstances(ctx context.Context, zone, mig string, names []string, requestID string) error
	ListInstances(ctx context.Context, zone string, labels map[string]string) ([]gce.Instance, error)
	ListResizeRequests(ctx context.Context, zone, mig string) ([]gce.ResizeRequest, error)
	ListMIGs(ctx context.Context, zone, namePrefix string) ([]gce.MIG, error)
	GetInstance(ctx context.Context, zone, name string) (gce.Instance, error)
	DeleteMIG(ctx context.Context, zone, name, requestID string) error
	// ReportHostAsFaulty asks Compute Engine to restart a VM on a healthy
	// host (disruption schedule IMMEDIATE; https://cloud.google.com/compute/docs/reference/rest/v1/instances/reportHostAsFaulty).
	ReportHostAsFaulty(ctx context.Context, zone, name, behavior, description, requestID string) error
	// StartInstance starts a stopped VM (a host-repaired VM whose
	// automaticRestart is false stays stopped).
	StartInstance(ctx context.Context, zone, name, requestID string) error
	// EnsureWorkloadPolicy creates a pool's workload policy (compact
	// placement); one that exists is done only when it is that policy.
	EnsureWorkloadPolicy(ctx context.Context, w gce.WorkloadPolicySpec, requestID string) error
}

// Publisher publishes one message and waits for the server's ack.
type Publisher interface {
	Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) (string, error)
}

// Deps are the runner's dependencies.
type Deps struct {
	Store     store.Store
	Compute   Compute
	Publisher Publisher
	Clock     clock.Clock
	Log       *slog.Logger
	// Policy is handed to every decision, and its MaxEventAge bounds the
	// age of the events acted on (Envelope).
	Policy plan.Policy
	// SlurmTopic is the topic Slurm commands are published to (the agent's).
	SlurmTopic string
	// Project is the Google Cloud project of the Compute resources.
	Project string
	// Identity proves which VM sent a report (ProveNode, ProveController);
	// nil refuses every report.
	Identity identity.Verifier
	// ControllerVM is the Slurm controller VM whose reports are accepted
	// (config.ControllerVM's form); "" refuses them.
	ControllerVM string
	// Fault, when set, is called at each side-effect boundary of Process:
	// point "commit" after the transaction committed and before any
	// external action, and point "action" before each external action (a
	// is that action). A non-nil return stops Process there, as if the
	// function crashed, and is returned wrapped in ErrTransient so the event
	// is redelivered. For scenario and chaos runs; nil in production.
	Fault func(point string, a plan.Action) error
	// Events stores the cluster events each decision derives
	// (plan.Events) after its commit; nil takes Store when it is a
	// store.EventLog (Firestore and Memory are), else none are kept.
	Events store.EventLog
}

// Runner processes events. It is safe for concurrent use.
type Runner struct {
	d Deps

	mu    sync.Mutex
	specs map[string]*spec.Cluster // by spec sha256
}

// New returns a runner.
func New(d Deps) *Runner {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Events == nil {
		d.Events, _ = d.Store.(store.EventLog)
	}
	return &Runner{d: d, specs: map[string]*spec.Cluster{}}
}

// Deps returns the runner's dependencies.
func (r *Runner) Deps() Deps { return r.d }

// Decision is one event's decision, run inside the transaction.
type Decision func(st *model.State, now time.Time) ([]plan.Action, error)

// Input is one event to process.
type Input struct {
	Flow    string // "flex.scaleup", "flex.expiry", "flex.repair", "flex.reconcile"
	EventID string
	Scope   store.Scope
	Decide  Decision
	// Wider, when set, builds the input a Handler processes instead when
	// Decide returns plan.ErrWiderScope (it then decided and wrote
	// nothing): a narrow scope first, the whole pool when it is not enough.
	Wider func(ctx context.Context) (Input, error)
	// Arrived is when the event arrived (wall clock); the decision latency
	// is measured from it, or from Process's start when zero.
	Arrived time.Time
}

// Result reports what an event did.
type Result struct {
	Duplicate bool          // the event was applied before; in-flight intents were re-driven
	Rejected  error         // the decision rejected the event (logged, acknowledged)
	Actions   []plan.Action // every action decided (record and external)
	Failed    []ActionError // external actions that failed
}

// ActionError is an external action that failed.
type ActionError struct {
	Action plan.Action
	Class  plan.FailureClass // classify's
	Code   string            // the Compute error code (errorCode)
	Err    error
}

// Failure is the failure as the decisions see it (plan.Respond).
func (e ActionError) Failure() plan.Failure {
	return plan.Failure{Action: e.Action, Class: e.Class, Code: e.Code}
}

// Quota describes the quota the error names (metric, region, limit: what
// Compute gave in errorDetails.quotaInfo or the message), for the pool's
// status line; "" when none.
func (e ActionError) Quota() string {
	q, _ := gce.QuotaOf(e.Err)
	return q.String()
}

// ErrTransient wraps a failure worth retrying the event for.
var ErrTransient = errors.New("transient failure")

// errNotOurs marks a refusal to act on a resource not labelled as ours.
var errNotOurs = errors.New("not flexslurm's")

// errWorkloadPolicyRefused marks a MIG insert Compute refused with a 400
// while it referenced the pool's workload policy (plan.FailWorkloadPolicy).
var errWorkloadPolicyRefused = errors.New("workload policy refused")

// errCrash marks a fault injected by Deps.Fault.
var errCrash = errors.New("injected crash")

// Process runs one event: decide and record in one transaction, then act.
// It returns nil when the event is done (including duplicates and rejected
// events) and an error wrapping ErrTransient when it should be redelivered.
func (r *Runner) Process(ctx context.Context, in Input) (Result, error) {
	var res Result
	started := in.Arrived // decision latency is measured on the wall clock
	if started.IsZero() {
		started = time.Now()
	}
	now := r.d.Clock.Now()
	in.Scope.EventID = in.EventID
	in.Scope.EventKind = in.Flow
	var after *model.State
	var evs []plan.ClusterEvent
	err := r.d.Store.Update(ctx, in.Scope, func(st *model.State) error {
		acts, err := in.Decide(st, now)
		if err != nil {
			return err
		}
		evs = plan.Events(st, acts, now)
		plan.Apply(st, acts)
		note, err := plan.ReplayNote(acts, store.MaxEventNoteBytes)
		if err != nil {
			return err
		}
		st.EventNote = note
		res.Actions = acts
		// The store's contract lets fn keep st once Update returns (nothing
		// of it reaches the store, and the store keeps no part of it), so
		// the actions are carried out against it as it is, uncopied.
		after = st
		return nil
	})
	log := logx.Attrs(r.d.Log, "flow", in.Flow, "event_id", in.EventID, "cluster", in.Scope.Cluster)
	switch {
	case errors.Is(err, store.ErrDuplicateEvent):
		// A redelivery: the decision was recorded before. Replay its
		// external actions (all idempotent) that still match the state, so
		// a crash between the commit and the actions loses nothing.
		res.Duplicate = true
		st, rerr := r.d.Store.Read(ctx, in.Scope)
		if rerr != nil {
			return res, fmt.Errorf("%w: reading state to replay event %s: %w", ErrTransient, in.EventID, rerr)
		}
		var dup *store.DuplicateError
		var stored []plan.Action
		hasNote := false
		if errors.As(err, &dup) && len(dup.Note) > 0 {
			hasNote = true
			if stored, rerr = plan.DecodeExternal(dup.Note); rerr != nil {
				log.Error("stored actions of the event do not decode: re-driving from state", "error", rerr.Error())
				stored, hasNote = nil, false
			}
		}
		redo := plan.Replay(st, stored, hasNote)
		log.Info("event already applied: replaying its actions that are still current", "actions", len(redo))
		res.Actions = redo
		after = st
	case errors.Is(err, plan.ErrRejected):
		res.Rejected = err
		log.Warn("event rejected", "reason", err.Error())
		return res, nil
	case err != nil:
		return res, fmt.Errorf("%w: recording decision for event %s: %w", ErrTransient, in.EventID, err)
	}
	for _, a := range res.Actions {
		if plan.IsRecord(a) {
			logAction(log, a, "recorded")
		}
	}
	if len(evs) > 0 {
		// Stored beside the external actions, not before them: an event
		// never delays what its decision does. A redelivery derives none.
		stored := make(chan struct{})
		go func() {
			defer close(stored)
			r.recordEvents(ctx, in.Scope.Cluster, in.EventID, evs, log)
		}()
		defer func() { <-stored }()
	}
	if r.d.Fault != nil {
		if err := r.d.Fault("commit", nil); err != nil {
			return res, fmt.Errorf("%w: crash after commit of event %s: %w", ErrTransient, in.EventID, err)
		}
	}
	var ended []plan.CancelResizeRequest
	res.Failed, ended = r.executeAll(ctx, in.Scope.Cluster, after, plan.External(res.Actions), log)
	for _, f := range res.Failed {
		if errors.Is(f.Err, errCrash) {
			return res, fmt.Errorf("%w: crash before %s: %w", ErrTransient, f.Action, f.Err)
		}
	}
	r.requestsEnded(ctx, in.Scope.Cluster, after, ended, log)
	err = r.respond(ctx, in.Scope.Cluster, res.Failed, log)
	r.observe(in, after, now, time.Since(started), err, log)
	return res, err
}

// respond carries out what plan.Respond decides for each failed action,
// and returns an error wrapping ErrTransient when the event is to be
// redelivered (the first such failure's).
func (r *Runner) respond(ctx context.Context, cluster string, failed []ActionError, log *slog.Logger) error {
	var retry error
	for _, f := range failed {
		var err error
		switch plan.Respond(f.Failure()) {
		case plan.RecordHostRepairFailed:
			err = r.hostRepairFailed(ctx, cluster, f.Action.(plan.ReportHostAsFaulty), f, log)
		case plan.RecordProvisioningFailed:
			err = r.provisioningFailed(ctx, cluster, f.Action.(plan.CreateResizeRequest), f, log)
		case plan.RetryEvent:
			err = fmt.Errorf("%w: %d of the event's actions failed, first: %w", ErrTransient, len(failed), f.Err)
		}
		if err != nil && retry == nil {
			retry = err
		}
	}
	return retry
}

// requestsEnded records, in a follow-up transaction, that the resize
// requests whose cancellation Compute confirmed have ended, so that the
// nodes whose previous generation waited on one of them may be requested
// again without waiting for a reconcile pass to list it
// (plan.RequestsEnded). A failure is only logged: the reconciler sees the
// same from its listing.
func (r *Runner) requestsEnded(ctx context.Context, cluster string, st *model.State, ended []plan.CancelResizeRequest, log *slog.Logger) {
	if len(ended) == 0 || st == nil {
		return
	}
	names := make([]string, 0, len(ended))
	for _, c := range ended {
		names = append(names, c.Name)
	}
	nodes := plan.NodesAwaitingRequests(st, names)
	if len(nodes) == 0 {
		return
	}
	// The nodes' pools are read whole: a MIG is deleted only when none of
	// its pool's nodes serves from it.
	var pools []string
	for _, name := range nodes {
		if n, ok := st.Nodes[name]; ok && !slices.Contains(pools, n.Pool) {
			pools = append(pools, n.Pool)
		}
	}
	var acts []plan.Action
	var evs []plan.ClusterEvent
	var after *model.State
	now := r.d.Clock.Now()
	err := r.d.Store.Update(ctx, store.Scope{Cluster: cluster, Pools: pools, Nodes: nodes}, func(st *model.State) error {
		acts = plan.RequestsEnded(st, names, now, r.d.Policy)
		evs = plan.Events(st, acts, now)
		plan.Apply(st, acts)
		after = st
		return nil
	})
	if err != nil {
		log.Warn("recording the end of cancelled resize requests failed: the reconciler will see it", "resize_requests", strings.Join(names, ","), "error", err.Error())
		return
	}
	for _, a := range acts {
		if plan.IsRecord(a) {
			logAction(log, a, "recorded")
		}
	}
	r.recordEvents(ctx, cluster, "requests-ended/"+strings.Join(names, ","), evs, log)
	// The MIGs of the requests that ended without a VM (idempotent
	// deletions; a failure is logged and the reconciler deletes them).
	r.executeAll(ctx, cluster, after, plan.External(acts), log)
}

// provisioningFailed records a refused resize request: pool backoff, nodes
// released, job left pending (plan.ProvisioningFailed), in one transaction.
func (r *Runner) provisioningFailed(ctx context.Context, cluster string, c plan.CreateResizeRequest, f ActionError, log *slog.Logger) error {
	var acts []plan.Action
	var evs []plan.ClusterEvent
	now := r.d.Clock.Now()
	err := r.d.Store.Update(ctx, store.Scope{Cluster: cluster, Pools: []string{c.Pool}, Jobs: nonEmpty(c.JobID)}, func(st *model.State) error {
		a, err := plan.ProvisioningFailedQuota(st, c.Pool, c.Name, f.Class.Provisioning(), f.Code, f.Quota(), now, r.d.Policy)
		if err != nil {
			return err
		}
		evs = plan.Events(st, a, now)
		plan.Apply(st, a)
		acts = a
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: recording the failure of resize request %s: %w", ErrTransient, c.Name, err)
	}
	for _, a := range acts {
		logAction(log, a, "recorded")
	}
	r.recordEvents(ctx, cluster, "provisioning-failed/"+c.Name, evs, log)
	return nil
}

// hostRepairFailed records a refused host repair: the node's VM is deleted
// and replaced (plan.HostRepairFailed), in one transaction, whose external
// actions are then carried out. A node no longer in that host repair (a
// redelivery after it was handled) is left alone.
func (r *Runner) hostRepairFailed(ctx context.Context, cluster string, hr plan.ReportHostAsFaulty, f ActionError, log *slog.Logger) error {
	var acts []plan.Action
	var after *model.State
	scope := store.Scope{Cluster: cluster, Pools: []string{hr.Pool}, Jobs: nonEmpty(hr.JobID), Slurm: true}
	var evs []plan.ClusterEvent
	now := r.d.Clock.Now()
	err := r.d.Store.Update(ctx, scope, func(st *model.State) error {
		a, err := plan.HostRepairFailed(st, hr.Node, hr.Generation, f.Code, now, r.d.Policy)
		if err != nil {
			return err
		}
		evs = plan.Events(st, a, now)
		plan.Apply(st, a)
		acts = a
		after = st // kept as Process keeps it: the store contract allows it
		return nil
	})
	if errors.Is(err, plan.ErrRejected) {
		log.Info("host repair refused, but the node has moved on: nothing to replace", "node", hr.Node, "reason", err.Error())
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: recording the refused host repair of %s: %w", ErrTransient, hr.VM, err)
	}
	for _, a := range acts {
		if plan.IsRecord(a) {
			logAction(log, a, "recorded")
		}
	}
	r.recordEvents(ctx, cluster, fmt.Sprintf("host-repair-failed/%s/%d", hr.Node, hr.Generation), evs, log)
	failed := r.Execute(ctx, cluster, after, plan.External(acts), log)
	for _, ff := range failed {
		if errors.Is(ff.Err, errCrash) {
			return fmt.Errorf("%w: crash replacing %s after its refused host repair: %w", ErrTransient, hr.VM, ff.Err)
		}
	}
	// The node is recorded deleting or requested: the reconciler re-drives
	// the deletion and the request if the event is not retried.
	if err := r.respond(ctx, cluster, failed, log); err != nil {
		return fmt.Errorf("replacing %s after its refused host repair: %w", hr.VM, err)
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// classify maps the error of a failed action to its plan.FailureClass, at
// the adapter edge: Compute errors by shared/gce's table of error codes
// (resourceNotReady, which gce counts transient, told apart); a Slurm
// command that was not published failed for a transient reason (the topic
// exists and the payload is flexslurm's), unless the context ended.
func classify(ctx context.Context, a plan.Action, err error) plan.FailureClass {
	if _, ok := a.(plan.SlurmCommand); ok && ctx.Err() == nil {
		return plan.FailTransient
	}
	if gce.IsNotReady(err) {
		return plan.FailNotReady
	}
	if errors.Is(err, errWorkloadPolicyRefused) {
		return plan.FailWorkloadPolicy
	}
	return failureClass(gce.Classify(err))
}

// failureClass maps a Compute error class to the decisions' failure class
// (0, no failure, for ClassNone: a resize request's empty error code).
func failureClass(c gce.Class) plan.FailureClass {
	switch c {
	case gce.ClassNone:
		return 0
	case gce.ClassTransient:
		return plan.FailTransient
	case gce.ClassRateLimit:
		return plan.FailRateLimit
	case gce.ClassNotFound:
		return plan.FailNotFound
	case gce.ClassAlreadyExists:
		return plan.FailAlreadyExists
	case gce.ClassCapacity:
		return plan.FailCapacity
	case gce.ClassQuota:
		return plan.FailQuota
	}
	return plan.FailPermanent
}

// errorCode extracts the Compute error code of a failure, for operators and
// metrics ("" when there is none).
func errorCode(err error) string {
	var oe *gce.OperationError
	if errors.As(err, &oe) {
		return oe.Code
	}
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		if r := ae.Reason(); r != "" {
			return r
		}
		return fmt.Sprintf("HTTP_%d", ae.HTTPCode())
	}
	return "UNKNOWN"
}

// Execute carries out external actions in order. A failing action does not
// stop the others; the failures are returned with their error class.
func (r *Runner) Execute(ctx context.Context, cluster string, st *model.State, actions []plan.Action, log *slog.Logger) []ActionError {
	failed, _ := r.executeAll(ctx, cluster, st, actions, log)
	return failed
}

// errRequestGone marks a cancellation of a resize request Compute does not
// know (never created, or deleted): nothing to do, but nothing seen to end
// either — a create still in flight may yet make it.
var errRequestGone = errors.New("resize request not found")

// executeAll is Execute; it also returns the cancellations whose request
// Compute showed ended without VMs: cancelled by the call (its operation
// done without error), or no longer queued (gce.ErrNotCancellable: FAILED
// or CANCELLED). A request Compute does not know is not among them, nor
// one that SUCCEEDED (gce.ErrRequestSucceeded): its VMs exist and may serve
// a pending job, which only the reconciler's listing shows
// (plan.RequestsEnded).
func (r *Runner) executeAll(ctx context.Context, cluster string, st *model.State, actions []plan.Action, log *slog.Logger) (failed []ActionError, ended []plan.CancelResizeRequest) {
	for _, a := range actions {
		if r.d.Fault != nil {
			if err := r.d.Fault("action", a); err != nil {
				// A crash: nothing after this point happens.
				failed = append(failed, ActionError{Action: a, Class: plan.FailTransient, Err: fmt.Errorf("%w: %w", errCrash, err)})
				return failed, ended
			}
		}
		err := r.execute(ctx, cluster, st, a)
		if c, ok := a.(plan.CancelResizeRequest); ok {
			if err == nil || (errors.Is(err, gce.ErrNotCancellable) && !gce.IsNotFound(err) && !errors.Is(err, gce.ErrRequestSucceeded)) {
				ended = append(ended, c)
			}
			if errors.Is(err, errRequestGone) {
				err = nil
			}
		}
		if err != nil {
			cls := classify(ctx, a, err)
			failed = append(failed, ActionError{Action: a, Class: cls, Code: errorCode(err), Err: err})
			logAction(log, a, "failed", "error", err.Error(), "error_class", cls.String())
			continue
		}
		logAction(log, a, "done")
	}
	return failed, ended
}

func (r *Runner) execute(ctx context.Context, cluster string, st *model.State, a plan.Action) error {
	poolOf := func(id string) (*model.Pool, error) {
		if st == nil {
			return nil, fmt.Errorf("no state for pool %s", id)
		}
		p, ok := st.Pools[id]
		if !ok {
			return nil, fmt.Errorf("pool %s has no record", id)
		}
		return p, nil
	}
	// migOf is poolOf for the actions on a MIG of the pool (and what it
	// holds): the MIG must be the one shared/naming gives the cluster's
	// pool for the request the action names (one MIG per resize request),
	// or, for an action on the layout before it (legacy, or no MIG named:
	// an action stored by an earlier flexslurm), the pool's MIG. Compute's
	// IAM cannot scope MIG permissions to names (deploy/README.md, "Compute
	// permissions of the function accounts"), so this is the wall that
	// keeps a bad record or action off another MIG.
	migOf := func(id, mig, request string, legacy bool) (*model.Pool, string, error) {
		p, err := poolOf(id)
		if err != nil {
			return nil, "", err
		}
		if legacy || mig == "" {
			if want := naming.MIG(cluster, p.ID); p.MIG != want || (mig != "" && mig != want) {
				return nil, "", fmt.Errorf("%w: refusing to act on MIG %q for pool %s: pool %s of cluster %s has MIG %s", errNotOurs, orStr(mig, p.MIG), p.ID, p.ID, cluster, want)
			}
			return p, p.MIG, nil
		}
		if want := naming.RequestMIG(cluster, p.ID, request); request == "" || mig != want {
			return nil, "", fmt.Errorf("%w: refusing to act on MIG %q for resize request %q of pool %s: its MIG is %s", errNotOurs, mig, request, p.ID, want)
		}
		return p, mig, nil
	}
	switch a := a.(type) {
	case plan.EnsurePool:
		p, err := poolOf(a.Pool)
		if err != nil {
			return err
		}
		_, err = r.ensureTemplate(ctx, cluster, st.Cluster.Incarnation(), p, a.Template, a.TemplateBody)
		return err
	case plan.CreateResizeRequest:
		if a.MIG == "" {
			return fmt.Errorf("%w: refusing to create resize request %s of pool %s in the pool's MIG: every request is made in a MIG of its own", errNotOurs, a.Name, a.Pool)
		}
		p, mig, err := migOf(a.Pool, a.MIG, a.Name, false)
		if err != nil {
			return err
		}
		// Only VMs named as this cluster's and pool's are ever requested.
		for _, vm := range a.VMs {
			if _, c, pool, _, ok := naming.ParseVMName(vm); !ok || c != cluster || pool != a.Pool {
				return fmt.Errorf("%w: refusing to request VM %s: not named as a VM of pool %s of cluster %s", errNotOurs, vm, a.Pool, cluster)
			}
		}
		return r.createRequest(ctx, cluster, st, p, mig, a)
	case plan.CancelResizeRequest:
		p, mig, err := migOf(a.Pool, a.MIG, a.Name, a.Legacy)
		if err != nil {
			return err
		}
		loc, err := r.migLocation(ctx, p, mig)
		if err != nil {
			return err
		}
		err = r.d.Compute.CancelResizeRequest(ctx, loc, mig, a.Name, a.RequestID)
		if gce.IsNotFound(err) {
			return fmt.Errorf("%w: %w", errRequestGone, err)
		}
		return err
	case plan.DeleteResizeRequest:
		p, mig, err := migOf(a.Pool, a.MIG, a.Name, a.Legacy)
		if err != nil {
			return err
		}
		loc, err := r.migLocation(ctx, p, mig)
		if err != nil {
			return err
		}
		return r.d.Compute.DeleteResizeRequest(ctx, loc, mig, a.Name, a.RequestID)
	case plan.DeleteVMs:
		p, mig, err := migOf(a.Pool, a.MIG, a.Request, a.Request == "")
		if err != nil {
			return err
		}
		// Only VMs named and labelled as this cluster's and pool's are ever
		// deleted, whatever the event that asked for it said.
		var ours []string
		for _, vm := range a.VMs {
			_, err := r.ownVM(ctx, cluster, p, vm, "", "delete")
			if gce.IsNotFound(err) {
				continue // already gone
			}
			if err != nil {
				return err
			}
			ours = append(ours, vm)
		}
		if len(ours) == 0 {
			return nil
		}
		loc, err := r.migLocation(ctx, p, mig)
		if err != nil {
			return err
		}
		return r.d.Compute.DeleteInstances(ctx, loc, mig, ours, a.RequestID)
	case plan.SlurmCommand:
		if r.d.Publisher == nil || r.d.SlurmTopic == "" {
			return nil
		}
		msg := event.SlurmCommand{
			Header: event.Header{Version: event.SchemaVersion, Type: event.TypeSlurmCommand, Cluster: cluster},
			ID:     a.ID, Command: a.Command, Nodes: a.Nodes, JobID: a.JobID, Reason: event.RenderReason(a.Command, a.Reason),
			Reservation: a.Reservation, StartTime: a.StartTime, DurationSeconds: a.DurationSeconds,
			Signal: a.Signal,
		}
		data, err := json.Marshal(msg)
		if err != nil {
			return err
		}
		_, err = r.d.Publisher.Publish(ctx, r.d.SlurmTopic, data, map[string]string{"cluster": cluster, "command": string(a.Command)})
		return err
	case plan.ReportHostAsFaulty:
		p, err := poolOf(a.Pool)
		if err != nil {
			return err
		}
		// Only a VM named and labelled as this cluster's and pool's is
		// ever repaired (a repair restarts it).
		zone, err := r.ownVM(ctx, cluster, p, a.VM, a.Node, "repair")
		if err != nil {
			return err
		}
		return r.d.Compute.ReportHostAsFaulty(ctx, zone, a.VM, a.Behavior, text.Truncate(a.Description, plan.MaxFaultDescription), a.RequestID)
	case plan.StartVM:
		p, err := poolOf(a.Pool)
		if err != nil {
			return err
		}
		// Only a VM named and labelled as this cluster's and pool's is
		// ever started.
		zone, err := r.ownVM(ctx, cluster, p, a.VM, a.Node, "start")
		if err != nil {
			return err
		}
		return r.d.Compute.StartInstance(ctx, zone, a.VM, a.RequestID)
	case plan.DeleteMIG:
		p, mig, err := migOf(a.Pool, a.MIG, a.Request, a.Request == "")
		if err != nil {
			return err
		}
		// The MIG as Compute holds it must say it is what its name says: a
		// request MIG's description names its request, pool and cluster
		// (naming.IsRequestMIG); the pool's MIG of the earlier layout
		// carries the description flexslurm gave it.
		loc, err := r.migLocation(ctx, p, mig)
		if err != nil {
			return fmt.Errorf("reading MIG %s before deleting it: %w", mig, err)
		}
		migs, err := r.d.Compute.ListMIGs(ctx, loc, mig)
		if err != nil {
			return fmt.Errorf("reading MIG %s before deleting it: %w", mig, err)
		}
		for _, m := range migs {
			if m.Name != mig {
				continue
			}
			if a.Request != "" {
				if _, ok := naming.IsRequestMIG(cluster, p.ID, m.Name, m.Description); !ok {
					return fmt.Errorf("%w: refusing to delete MIG %s: its description %q does not name resize request %s of pool %s of cluster %s", errNotOurs, mig, m.Description, a.Request, p.ID, cluster)
				}
			} else if m.Description != poolMIGDescription(cluster, p.ID) {
				return fmt.Errorf("%w: refusing to delete MIG %s: its description %q is not pool %s of cluster %s's", errNotOurs, mig, m.Description, p.ID, cluster)
			}
			return r.d.Compute.DeleteMIG(ctx, loc, mig, a.RequestID)
		}
		return nil // already gone
	case plan.Alert:
		return nil
	case plan.Metric:
		return nil
	}
	return fmt.Errorf("unknown action %T", a)
}

// ownVM proves that vm is this cluster's before the executor verbs it
// (delete, repair, start): named as a VM of pool p of the cluster (and of
// node, when given), and labelled so in Compute. A VM that does not exist
// is an error gce.IsNotFound matches.
// It returns the zone the VM is in: the pool's, or for a pool that is or
// was multi-zone the one of its zones that holds it (zones.go).
func (r *Runner) ownVM(ctx context.Context, cluster string, p *model.Pool, vm, node, verb string) (string, error) {
	n, c, pool, _, ok := naming.ParseVMName(vm)
	switch {
	case !ok || c != cluster || pool != p.ID:
		return "", fmt.Errorf("%w: refusing to %s %s: not named as a VM of pool %s of cluster %s", errNotOurs, verb, vm, p.ID, cluster)
	case node != "" && n != node:
		return "", fmt.Errorf("%w: refusing to %s %s: not named as node %s's VM in pool %s of cluster %s", errNotOurs, verb, vm, node, p.ID, cluster)
	}
	inst, err := r.getPoolVM(ctx, p, vm)
	if err != nil {
		return "", fmt.Errorf("reading VM %s before the %s: %w", vm, verb, err)
	}
	for k, v := range naming.Labels(cluster, p.ID) {
		if inst.Labels[k] != v {
			return "", fmt.Errorf("%w: refusing to %s %s: label %s=%q, not %q (not this cluster's VM)", errNotOurs, verb, vm, k, inst.Labels[k], v)
		}
	}
	return orStr(inst.Zone, p.Zone), nil
}

// ensureTemplate creates the pool's instance template if missing. The
// template is the one the decision carried (template, body), built when the
// spec was applied and sent as it is: nothing is built here. It is refused
// when it is not the template the pool records (a stale request), when the
// pool left the spec, and when its body is not exactly what its name was
// made from (instancetemplate.FromBody). The template's insert carries a
// request id of the cluster's incarnation (naming.InsertTemplateRequestIDIn),
// so a cluster created again after a teardown does not get its template
// answered as already inserted.
func (r *Runner) ensureTemplate(ctx context.Context, cluster, incarnation string, p *model.Pool, template, body string) (instancetemplate.Template, error) {
	if p.Removed {
		return instancetemplate.Template{}, fmt.Errorf("refusing to create the template of pool %s: the pool left the cluster spec", p.ID)
	}
	if template != p.Template {
		return instancetemplate.Template{}, fmt.Errorf("refusing to create template %s for pool %s: the pool records template %s", template, p.ID, p.Template)
	}
	t, err := instancetemplate.FromBody(cluster, p.ID, template, body)
	if err != nil {
		return instancetemplate.Template{}, fmt.Errorf("refusing to create the template of pool %s: %w", p.ID, err)
	}
	if err := r.d.Compute.EnsureInstanceTemplate(ctx, t, naming.InsertTemplateRequestIDIn(t.Name, incarnation)); err != nil {
		return instancetemplate.Template{}, fmt.Errorf("ensuring instance template %s: %w", t.Name, err)
	}
	return t, nil
}

// poolMIGDescription is the description of a pool's MIG in the layout
// before one MIG per request.
func poolMIGDescription(cluster, pool string) string {
	return fmt.Sprintf("flexslurm node pool %s of cluster %s", pool, cluster)
}

// createRequest makes a resize request in a MIG of its own: the pool's
// current instance template (as the pool record holds it), the request's
// MIG (target size 0, updatePolicy OPPORTUNISTIC, DO_NOTHING, no
// autoscaler: gce.EnsureMIG), then the request naming its VMs. A MIG that
// already exists (a repeated call) is used as it is: its template is never
// changed under VMs it may have made.
func (r *Runner) createRequest(ctx context.Context, cluster string, st *model.State, p *model.Pool, mig string, a plan.CreateResizeRequest) error {
	t, err := r.ensureTemplate(ctx, cluster, st.Cluster.Incarnation(), p, p.Template, p.TemplateBody)
	if err != nil {
		return err
	}
	// A request for one VM gives its MIG that VM's name as base instance
	// name: should the request be made without naming its VM (resizeBy,
	// where Compute accepts no instances[]: gce.ResizeRequestAPICount),
	// the MIG names the VM "<VM name>-xxxx", which still tells its node
	// and generation (naming.ParseVMName).
	base := cluster + "-" + p.ID
	if len(a.VMs) == 1 {
		base = a.VMs[0]
	}
	// A multi-zone pool's request MIG is regional, ANY_SINGLE_ZONE over
	// the pool's zones (zones.go); the request id stays the one of the
	// pool's zone.
	m := gce.MIGSpec{Zone: p.MIGLocation(), Name: mig, Template: t.Name, BaseInstanceName: base,
		Description: naming.RequestMIGDescription(cluster, p.ID, a.Name)}
	if p.MultiZone() {
		m.Zones = p.Zones
	}
	if a.WorkloadPolicy != "" {
		path, err := r.ensureWorkloadPolicy(ctx, cluster, st.Cluster.Incarnation(), p, a)
		if err != nil {
			return err
		}
		m.WorkloadPolicy = path
	}
	if err := r.d.Compute.EnsureMIG(ctx, m, naming.InsertRequestMIGRequestID(p.Zone, mig, st.Cluster.Incarnation())); err != nil {
		if m.WorkloadPolicy != "" && gce.HTTPStatus(err) == http.StatusBadRequest {
			// Compute refused a MIG that carried the pool's workload
			// policy: the decisions record it on the pool and make the
			// next request without it (plan.FailWorkloadPolicy). A
			// refused insert made no MIG, and the next request has a
			// name, MIG and request ids of its own.
			return fmt.Errorf("%w: ensuring MIG %s of resize request %s with workload policy %s: %w", errWorkloadPolicyRefused, mig, a.Name, a.WorkloadPolicy, err)
		}
		return fmt.Errorf("ensuring MIG %s of resize request %s: %w", mig, a.Name, err)
	}
	return r.d.Compute.CreateResizeRequest(ctx, m.Zone, mig, gce.ResizeRequestSpec{
		Name: a.Name, Instances: a.VMs, RunDuration: a.RunDuration,
		Description: text.Truncate("flexslurm: "+a.Reason, 2048),
	}, a.RequestID)
}

// ensureWorkloadPolicy makes sure of the workload policy request a's MIG
// references (compact placement, docs/design/placement.md) and returns the path
// the MIG names it by. Only the policy the pool records, named by
// shared/naming for the cluster's pool and its distance, is ever created
// or referenced: a request that names another is refused.
func (r *Runner) ensureWorkloadPolicy(ctx context.Context, cluster, incarnation string, p *model.Pool, a plan.CreateResizeRequest) (string, error) {
	want := naming.WorkloadPolicy(cluster, p.ID, p.PlacementDistance)
	if p.WorkloadPolicy == "" || a.WorkloadPolicy != p.WorkloadPolicy || a.WorkloadPolicy != want {
		return "", fmt.Errorf("%w: refusing workload policy %q for resize request %s of pool %s: the pool's is %q", errNotOurs, a.WorkloadPolicy, a.Name, p.ID, orStr(p.WorkloadPolicy, "none"))
	}
	region := naming.ZoneRegion(p.Zone)
	w := gce.WorkloadPolicySpec{Region: region, Name: want, Description: naming.WorkloadPolicyDescription(cluster, p.ID), MaxTopologyDistance: p.PlacementDistance}
	if err := r.d.Compute.EnsureWorkloadPolicy(ctx, w, naming.InsertWorkloadPolicyRequestID(region, want, incarnation)); err != nil {
		return "", fmt.Errorf("ensuring workload policy %s of pool %s: %w", want, p.ID, err)
	}
	return naming.WorkloadPolicyPath(p.Zone, want), nil
}

func orStr(s, alt string) string {
	if s != "" {
		return s
	}
	return alt
}

// Spec parses (and caches) the cluster spec stored in st.
func (r *Runner) Spec(st *model.State) (*spec.Cluster, error) {
	if st == nil || st.Cluster == nil {
		return nil, fmt.Errorf("%w: the cluster spec was never applied", plan.ErrRejected)
	}
	r.mu.Lock()
	c, ok := r.specs[st.Cluster.SpecSHA256]
	r.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := spec.Parse(st.Cluster.Spec)
	if err != nil {
		return nil, fmt.Errorf("stored spec of cluster %s does not parse: %w", st.Cluster.ID, err)
	}
	r.mu.Lock()
	r.specs[st.Cluster.SpecSHA256] = c
	r.mu.Unlock()
	return c, nil
}

func logAction(log *slog.Logger, a plan.Action, status string, extra ...any) {
	lvl := slog.LevelInfo
	if status == "failed" {
		lvl = slog.LevelError
	}
	if _, ok := a.(plan.Alert); ok {
		lvl = slog.LevelWarn
	}
	// Logger.Log asks the handler the same before formatting the line;
	// asking first also spares building its attributes.
	ctx := context.Background()
	if !log.Enabled(ctx, lvl) {
		return
	}
	args := []any{"action", fmt.Sprintf("%T", a)[len("plan."):], "status", status, "reason", a.Why()}
	switch a := a.(type) {
	case plan.PutNode:
		args = append(args, "node", a.Node.Name, "pool", a.Node.Pool, "generation", a.Node.Generation, "phase", string(a.Node.Phase))
	case plan.PutJob:
		args = append(args, "job", a.Job.ID, "pool", a.Job.Pool, "state", string(a.Job.State))
	case plan.PutPool:
		args = append(args, "pool", a.Pool.ID)
	case plan.CreateResizeRequest:
		args = append(args, "pool", a.Pool, "resize_request", a.Name, "vms", strings.Join(a.VMs, ","), "job", a.JobID)
		if a.WorkloadPolicy != "" {
			args = append(args, "workload_policy", a.WorkloadPolicy)
		}
	case plan.CancelResizeRequest:
		args = append(args, "pool", a.Pool, "resize_request", a.Name)
	case plan.DeleteResizeRequest:
		args = append(args, "pool", a.Pool, "resize_request", a.Name, "state", a.State)
	case plan.DeleteVMs:
		args = append(args, "pool", a.Pool, "vms", strings.Join(a.VMs, ","))
	case plan.ReportHostAsFaulty:
		args = append(args, "pool", a.Pool, "node", a.Node, "vm", a.VM, "generation", a.Generation, "behavior", a.Behavior)
	case plan.StartVM:
		args = append(args, "pool", a.Pool, "node", a.Node, "vm", a.VM, "generation", a.Generation)
	case plan.SlurmCommand:
		args = append(args, "slurm_command", a.Command, "nodes", strings.Join(a.Nodes, ","), "job", a.JobID)
	case plan.EnsurePool:
		args = append(args, "pool", a.Pool, "template", a.Template)
	case plan.Alert:
		args = append(args, "pool", a.Pool, "node", a.Node)
	case plan.Metric:
		// One line per increment: a log-based metric counts lines with
		// jsonPayload.metric = name and extracts the labels.
		args = append(args, "metric", a.Name)
		for k, v := range a.Labels {
			args = append(args, "metric_"+k, v)
		}
	}
	args = append(args, extra...)
	log.Log(ctx, lvl, a.String(), args...)
}
