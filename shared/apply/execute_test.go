package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// recorder passes Compute calls to the simulator and records each one as
// "method name requestID"; fail, when set for a method, is returned instead.
type recorder struct {
	apply.Compute
	mu    sync.Mutex
	calls []string
	fail  map[string]error
	// templates are the instance templates sent, in order, and
	// templateIDs their request ids.
	templates   []instancetemplate.Template
	templateIDs []string
}

func (r *recorder) EnsureInstanceTemplate(ctx context.Context, t instancetemplate.Template, id string) error {
	r.mu.Lock()
	r.templates = append(r.templates, t)
	r.templateIDs = append(r.templateIDs, id)
	r.mu.Unlock()
	return r.Compute.EnsureInstanceTemplate(ctx, t, id)
}

func (r *recorder) takeTemplates() []instancetemplate.Template {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.templates
	r.templates = nil
	return out
}

func (r *recorder) rec(method, name, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, method+" "+name+" "+id)
	return r.fail[method]
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.calls
	r.calls = nil
	return out
}

func (r *recorder) CreateResizeRequest(ctx context.Context, zone, mig string, rr gce.ResizeRequestSpec, id string) error {
	if err := r.rec("CreateResizeRequest", mig+"/"+rr.Name, id); err != nil {
		return err
	}
	return r.Compute.CreateResizeRequest(ctx, zone, mig, rr, id)
}

func (r *recorder) CancelResizeRequest(ctx context.Context, zone, mig, name, id string) error {
	if err := r.rec("CancelResizeRequest", mig+"/"+name, id); err != nil {
		return err
	}
	return r.Compute.CancelResizeRequest(ctx, zone, mig, name, id)
}

func (r *recorder) DeleteResizeRequest(ctx context.Context, zone, mig, name, id string) error {
	if err := r.rec("DeleteResizeRequest", mig+"/"+name, id); err != nil {
		return err
	}
	return r.Compute.DeleteResizeRequest(ctx, zone, mig, name, id)
}

func (r *recorder) DeleteInstances(ctx context.Context, zone, mig string, names []string, id string) error {
	if err := r.rec("DeleteInstances", mig+"/"+names[0], id); err != nil {
		return err
	}
	return r.Compute.DeleteInstances(ctx, zone, mig, names, id)
}

func (r *recorder) DeleteMIG(ctx context.Context, zone, name, id string) error {
	if err := r.rec("DeleteMIG", zone+"/"+name, id); err != nil {
		return err
	}
	return r.Compute.DeleteMIG(ctx, zone, name, id)
}

func (r *recorder) StartInstance(ctx context.Context, zone, name, id string) error {
	if err := r.rec("StartInstance", zone+"/"+name, id); err != nil {
		return err
	}
	return r.Compute.StartInstance(ctx, zone, name, id)
}

func setup(t *testing.T) (*harness.Harness, *recorder, *spec.Cluster, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	rec := &recorder{fail: map[string]error{}}
	h, err := harness.New(ctx, harness.Options{Compute: func(c apply.Compute) apply.Compute { rec.Compute = c; return rec }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	data, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	rec.take()
	rec.takeTemplates()
	return h, rec, c, ctx
}

// decide returns a Decision that decides acts whatever the state.
func decide(acts ...plan.Action) apply.Decision {
	return func(*model.State, time.Time) ([]plan.Action, error) { return acts, nil }
}

// TestExecuteEachActionKind: each external action reaches Compute as the
// matching call, on the MIG of its resize request, with the decision's
// request id.
func TestExecuteEachActionKind(t *testing.T) {
	h, rec, c, ctx := setup(t)
	const rr = "rr-flexvm-a3u-2-g1"
	mig := naming.RequestMIG("flexvm", "a3u", rr)
	acts := []plan.Action{
		plan.CreateResizeRequest{Pool: "a3u", MIG: mig, Name: rr, VMs: []string{"flexvm-a3u-2-g1"}, RunDuration: time.Hour,
			RequestID: naming.CreateResizeRequestID(mig, rr), Reason: "test"},
		plan.CancelResizeRequest{Pool: "a3u", MIG: mig, Name: rr, RequestID: naming.CancelResizeRequestID(mig, rr), Reason: "test"},
		plan.DeleteResizeRequest{Pool: "a3u", MIG: mig, Name: rr, State: "CANCELLED", RequestID: naming.DeleteResizeRequestID(mig, rr, 0), Reason: "test"},
		plan.DeleteVMs{Pool: "a3u", MIG: mig, Request: rr, VMs: []string{"flexvm-a3u-2-g1"}, RequestID: naming.DeleteInstancesRequestID(mig, "flexvm-a3u-2-g1"), Reason: "test"},
		plan.DeleteMIG{Pool: "a3u", MIG: mig, Request: rr, RequestID: naming.DeleteMIGRequestID("us-central1-a", mig, 0), Reason: "test"},
	}
	res, err := h.Runner.Process(ctx, apply.Input{Flow: "test", EventID: "e-1", Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide(acts...)})
	if err != nil {
		t.Fatalf("Process: %v (failed: %v)", err, res.Failed)
	}
	want := []string{
		"CreateResizeRequest " + mig + "/" + rr + " " + naming.CreateResizeRequestID(mig, rr),
		"CancelResizeRequest " + mig + "/" + rr + " " + naming.CancelResizeRequestID(mig, rr),
		"DeleteResizeRequest " + mig + "/" + rr + " " + naming.DeleteResizeRequestID(mig, rr, 0),
		"DeleteInstances " + mig + "/flexvm-a3u-2-g1 " + naming.DeleteInstancesRequestID(mig, "flexvm-a3u-2-g1"),
		"DeleteMIG us-central1-a/" + mig + " " + naming.DeleteMIGRequestID("us-central1-a", mig, 0),
	}
	if d := cmp.Diff(want, rec.take()); d != "" {
		t.Errorf("Compute calls (-want +got):\n%s", d)
	}
}

// TestExecuteErrorClasses: a transient Compute failure makes the event be
// redelivered; a capacity failure of a resize request backs the pool off
// instead (redelivering would only hammer the API).
func TestExecuteErrorClasses(t *testing.T) {
	mig := naming.RequestMIG("flexvm", "a3u", "rr-flexvm-a3u-2-g1")
	create := plan.CreateResizeRequest{Pool: "a3u", MIG: mig, Name: "rr-flexvm-a3u-2-g1", VMs: []string{"flexvm-a3u-2-g1"}, RunDuration: time.Hour,
		RequestID: naming.CreateResizeRequestID(mig, "rr-flexvm-a3u-2-g1"), Reason: "test"}
	for _, tc := range []struct {
		name      string
		err       error
		class     plan.FailureClass
		retried   bool
		backedOff bool
	}{
		{"server error", &gce.OperationError{Op: "op-1", Code: "INTERNAL_ERROR", HTTPStatus: 503}, plan.FailTransient, true, false},
		{"stockout", &gce.OperationError{Op: "op-1", Code: "ZONE_RESOURCE_POOL_EXHAUSTED", HTTPStatus: 503}, plan.FailCapacity, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, rec, c, ctx := setup(t)
			rec.fail["CreateResizeRequest"] = tc.err
			res, err := h.Runner.Process(ctx, apply.Input{Flow: "test", EventID: "e-1", Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide(create)})
			if len(res.Failed) != 1 || res.Failed[0].Class != tc.class {
				t.Fatalf("failed actions %+v, want the resize request failed as %s", res.Failed, tc.class)
			}
			if got := errors.Is(err, apply.ErrTransient); got != tc.retried {
				t.Errorf("Process error %v: retried = %v, want %v", err, got, tc.retried)
			}
			if tc.retried && !errors.Is(err, tc.err) {
				t.Errorf("Process error %v does not wrap the Compute error", err)
			}
			st, rerr := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
			if rerr != nil {
				t.Fatal(rerr)
			}
			if got := !st.Pools["a3u"].BackoffUntil.IsZero(); got != tc.backedOff {
				t.Errorf("pool backoff until %v: backed off = %v, want %v", st.Pools["a3u"].BackoffUntil, got, tc.backedOff)
			}
		})
	}
}

// TestRerunIsIdempotent: the same event processed again (a redelivery) is a
// duplicate whose replayed Compute calls carry the same request ids.
func TestRerunIsIdempotent(t *testing.T) {
	h, rec, c, ctx := setup(t)
	mig := naming.RequestMIG("flexvm", "a3u", "rr-flexvm-a3u-2-g1")
	create := plan.CreateResizeRequest{Pool: "a3u", MIG: mig, Name: "rr-flexvm-a3u-2-g1", VMs: []string{"flexvm-a3u-2-g1"}, RunDuration: time.Hour,
		RequestID: naming.CreateResizeRequestID(mig, "rr-flexvm-a3u-2-g1"), Reason: "test"}
	in := apply.Input{Flow: "test", EventID: "e-1", Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide(create)}
	if _, err := h.Runner.Process(ctx, in); err != nil {
		t.Fatal(err)
	}
	first := rec.take()
	res, err := h.Runner.Process(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Duplicate {
		t.Error("the second run of the same event was not recognised as a duplicate")
	}
	for _, call := range rec.take() {
		if call != first[0] {
			t.Errorf("replayed call %q differs from the first run's %q", call, first[0])
		}
	}
	n := 0
	for _, rr := range h.Sim.ResizeRequestHistory() {
		if rr.Name == "rr-flexvm-a3u-2-g1" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("Compute holds %d resize requests rr-flexvm-a3u-2-g1, want 1", n)
	}
}

// TestCancelConfirmedEndsTheRequest: a node whose generation ended while
// its resize request was queued (model.Node.RequestOpen) may be requested
// again as soon as Compute confirms the request ended — the cancel's
// operation completed, or Compute answers that the request is no longer
// queued — but not when Compute does not know the request (a create still
// in flight could make it): the reconciler's listing decides then. A
// request confirmed ended has its MIG deleted at once.
func TestCancelConfirmedEndsTheRequest(t *testing.T) {
	const rr = "rr-flexvm-a3u-j7-g1"
	mig := naming.RequestMIG("flexvm", "a3u", rr)
	create := plan.CreateResizeRequest{Pool: "a3u", MIG: mig, Name: rr, VMs: []string{"flexvm-a3u-2-g1"}, RunDuration: time.Hour, JobID: "7",
		RequestID: naming.CreateResizeRequestID(mig, rr), Reason: "test"}
	cancel := func(id string) plan.CancelResizeRequest {
		return plan.CancelResizeRequest{Pool: "a3u", MIG: mig, Name: rr, RequestID: id, Reason: "test"}
	}
	released := model.Node{Name: "flexvm-a3u-2", Pool: "a3u", Index: 2, Kind: model.NodeDynamic, Generation: 1, Phase: model.PhaseDeleting,
		VMName: "flexvm-a3u-2-g1", ResizeRequest: rr, MIG: mig, JobID: "7", RequestOpen: true}
	for _, tc := range []struct {
		name     string
		before   []plan.Action // run as an earlier event
		open     bool
		failures int
	}{
		{name: "cancelled now", before: []plan.Action{create}, open: false},
		{name: "already cancelled (no longer queued)", before: []plan.Action{create, cancel(naming.CancelResizeRequestID("an-earlier-call", rr))}, open: false, failures: 1},
		{name: "unknown to Compute: left to the reconciler's listing", open: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, rec, c, ctx := setup(t)
			h.Sim.SetShortage(computesim.Shortage{Name: "queued"}) // requests stay ACCEPTED
			scope := store.Scope{Cluster: c.ID, AllPools: true}
			if tc.before != nil {
				if res, err := h.Runner.Process(ctx, apply.Input{Flow: "test", EventID: "e-0", Scope: scope, Decide: decide(tc.before...)}); err != nil {
					t.Fatalf("Process: %v (failed: %v)", err, res.Failed)
				}
			}
			acts := []plan.Action{plan.PutNode{Node: released, Reason: "released while queued"}, cancel(naming.CancelResizeRequestID(mig, rr))}
			res, err := h.Runner.Process(ctx, apply.Input{Flow: "test", EventID: "e-1", Scope: scope, Decide: decide(acts...)})
			if err != nil {
				t.Fatalf("Process: %v (failed: %v)", err, res.Failed)
			}
			if len(res.Failed) != tc.failures {
				t.Errorf("failed actions %+v, want %d; calls %v", res.Failed, tc.failures, rec.take())
			}
			st, err := h.Store.Read(ctx, scope)
			if err != nil {
				t.Fatal(err)
			}
			if n := st.Nodes["flexvm-a3u-2"]; n == nil || n.RequestOpen != tc.open {
				t.Errorf("node after the cancel = %+v; want its previous request open = %v", n, tc.open)
			}
			// A request confirmed ended before it made a VM leaves an
			// empty MIG no node serves from: deleted at once.
			for _, m := range h.Sim.MIGs() {
				if m.Name == mig && !tc.open {
					t.Errorf("MIG %s of the cancelled request %s is left (VMs %v)", mig, rr, m.Instances)
				}
			}
		})
	}
}

// TestEnsurePoolSendsTheCarriedTemplate: the executor sends the template
// body the decision carried, as it is, and builds nothing: with the stored
// node settings changed since (a rebuild would make another template) it
// still sends the carried one. It refuses a template the pool does not
// record, and a body that is not what its name was made from, without a
// call to Compute.
func TestEnsurePoolSendsTheCarriedTemplate(t *testing.T) {
	h, rec, c, ctx := setup(t)
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	pool := *st.Pools["a3u"]
	if pool.TemplateBody == "" {
		t.Fatal("the applied pool records no template body")
	}
	carried := plan.EnsurePool{Pool: "a3u", Template: pool.Template, TemplateBody: pool.TemplateBody, Reason: "test"}
	other := *st.Cluster
	other.Node.Image += "-elsewhere"
	tampered := carried
	tampered.TemplateBody = strings.Replace(carried.TemplateBody, `"diskSizeGb":"`, `"diskSizeGb":"1`, 1)
	stale := carried
	stale.Template = "fs-flexvm-a3u-00000000"
	tests := []struct {
		name string
		acts []plan.Action
		sent bool
	}{
		{"the carried template", []plan.Action{carried}, true},
		{"the carried template, node settings changed since", []plan.Action{plan.PutCluster{Cluster: other, Reason: "test"}, carried}, true},
		{"a template the pool does not record", []plan.Action{stale}, false},
		{"a body that is not what its name was made from", []plan.Action{tampered}, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := h.Runner.Process(ctx, apply.Input{Flow: "test", EventID: fmt.Sprintf("e-%d", i), Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide(tc.acts...)})
			sent := rec.takeTemplates()
			if !tc.sent {
				if len(sent) != 0 || len(res.Failed) != 1 {
					t.Fatalf("sent %d templates, failed %+v; want the action refused and nothing sent", len(sent), res.Failed)
				}
				return
			}
			if err != nil || len(res.Failed) != 0 {
				t.Fatalf("Process: %v (failed: %+v)", err, res.Failed)
			}
			if len(sent) != 1 {
				t.Fatalf("sent %d templates, want 1", len(sent))
			}
			if sent[0].Name != carried.Template || sent[0].Body() != carried.TemplateBody {
				t.Errorf("sent template %s:\n%s\nwant %s:\n%s", sent[0].Name, sent[0].Body(), carried.Template, carried.TemplateBody)
			}
		})
	}
}

// TestEnsurePoolTemplateRequestIDIsTheIncarnations: the template insert
// carries the request id of the cluster record's incarnation, so a cluster
// torn down and created again (a new record, a new CreatedAt) inserts its
// template under a new id; a record older than incarnations keeps the id
// inserts had before.
func TestEnsurePoolTemplateRequestIDIsTheIncarnations(t *testing.T) {
	h, rec, c, ctx := setup(t)
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Cluster.Incarnation() == "" {
		t.Fatal("the applied cluster record has no incarnation")
	}
	pool := *st.Pools["a3u"]
	carried := plan.EnsurePool{Pool: "a3u", Template: pool.Template, TemplateBody: pool.TemplateBody, Reason: "test"}
	legacy := *st.Cluster
	legacy.CreatedAt = time.Time{}
	rec.mu.Lock()
	rec.templateIDs = nil // the apply's own
	rec.mu.Unlock()
	for i, tc := range []struct {
		name string
		acts []plan.Action
		want string
	}{
		{"this incarnation", []plan.Action{carried}, naming.InsertTemplateRequestIDIn(pool.Template, st.Cluster.Incarnation())},
		{"a record without incarnation", []plan.Action{plan.PutCluster{Cluster: legacy, Reason: "test"}, carried}, naming.InsertTemplateRequestID(pool.Template)},
	} {
		res, err := h.Runner.Process(ctx, apply.Input{Flow: "test", EventID: fmt.Sprintf("inc-%d", i), Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide(tc.acts...)})
		if err != nil || len(res.Failed) != 0 {
			t.Fatalf("%s: Process: %v (failed: %+v)", tc.name, err, res.Failed)
		}
		rec.mu.Lock()
		ids := rec.templateIDs
		rec.templateIDs = nil
		rec.mu.Unlock()
		if len(ids) != 1 || ids[0] != tc.want {
			t.Errorf("%s: template request ids %v, want [%s]", tc.name, ids, tc.want)
		}
	}
	if naming.InsertTemplateRequestIDIn(pool.Template, st.Cluster.Incarnation()) == naming.InsertTemplateRequestID(pool.Template) {
		t.Error("an incarnation's template request id is the legacy one")
	}
}
