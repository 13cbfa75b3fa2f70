package apply_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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

// mutations records every Compute call that changes something, as
// "Method target", and passes it on.
type mutations struct {
	apply.Compute
	mu    sync.Mutex
	calls []string
}

func (m *mutations) add(method, target string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, method+" "+target)
}

func (m *mutations) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.calls
	m.calls = nil
	return out
}

func (m *mutations) EnsureInstanceTemplate(ctx context.Context, t instancetemplate.Template, id string) error {
	m.add("EnsureInstanceTemplate", t.Name)
	return m.Compute.EnsureInstanceTemplate(ctx, t, id)
}

func (m *mutations) EnsureMIG(ctx context.Context, s gce.MIGSpec, id string) error {
	m.add("EnsureMIG", s.Name)
	return m.Compute.EnsureMIG(ctx, s, id)
}

func (m *mutations) CreateResizeRequest(ctx context.Context, zone, mig string, rr gce.ResizeRequestSpec, id string) error {
	m.add("CreateResizeRequest", mig+"/"+rr.Name+":"+strings.Join(rr.Instances, ","))
	return m.Compute.CreateResizeRequest(ctx, zone, mig, rr, id)
}

func (m *mutations) CancelResizeRequest(ctx context.Context, zone, mig, name, id string) error {
	m.add("CancelResizeRequest", mig+"/"+name)
	return m.Compute.CancelResizeRequest(ctx, zone, mig, name, id)
}

func (m *mutations) DeleteResizeRequest(ctx context.Context, zone, mig, name, id string) error {
	m.add("DeleteResizeRequest", mig+"/"+name)
	return m.Compute.DeleteResizeRequest(ctx, zone, mig, name, id)
}

func (m *mutations) DeleteInstances(ctx context.Context, zone, mig string, names []string, id string) error {
	m.add("DeleteInstances", mig+"/"+strings.Join(names, ","))
	return m.Compute.DeleteInstances(ctx, zone, mig, names, id)
}

func (m *mutations) DeleteMIG(ctx context.Context, zone, name, id string) error {
	m.add("DeleteMIG", name)
	return m.Compute.DeleteMIG(ctx, zone, name, id)
}

func (m *mutations) ReportHostAsFaulty(ctx context.Context, zone, name, behavior, description, id string) error {
	m.add("ReportHostAsFaulty", name)
	return m.Compute.ReportHostAsFaulty(ctx, zone, name, behavior, description, id)
}

func (m *mutations) StartInstance(ctx context.Context, zone, name, id string) error {
	m.add("StartInstance", name)
	return m.Compute.StartInstance(ctx, zone, name, id)
}

// TestAttackComputeOnWhatIsNotTheClusters: a decision built from bad input
// (a forged event, a corrupted record) that names a VM or MIG that is not
// the cluster's own makes no Compute call that changes it. Compute's IAM
// lets the function accounts act on any MIG of the project and, for
// instances, on any VM whose name begins with the cluster id
// (deploy/README.md): the executor's name-and-label guard is the wall.
func TestAttackComputeOnWhatIsNotTheClusters(t *testing.T) {
	const zone = "us-central1-a"
	rid := naming.RequestID("attack", "1") // valid: Compute would not refuse it
	const rr = "rr-flexvm-a3u-5-g1"
	own := naming.RequestMIG("flexvm", "a3u", rr) // the request's own MIG
	// tamper points the a3u pool's record at another cluster's MIG.
	tamper := func(removed bool) func(*model.State) {
		return func(st *model.State) {
			p := st.Pools["a3u"]
			p.MIG = naming.MIG("other", "a3u")
			p.Removed = removed
		}
	}
	for _, tc := range []struct {
		name string
		// plant adds VMs to the simulated project.
		plant map[string]map[string]string
		// mig creates a MIG (name, description) in the simulated project.
		mig    [2]string
		tamper func(*model.State)
		act    plan.Action
	}{
		{
			name:  "delete a VM named as the pool's but not labelled",
			plant: map[string]map[string]string{"flexvm-a3u-5-g1": nil},
			act:   plan.DeleteVMs{Pool: "a3u", VMs: []string{"flexvm-a3u-5-g1"}, RequestID: rid, Reason: "attack"},
		},
		{
			name: "delete a VM named as the pool's, labelled as another cluster's",
			plant: map[string]map[string]string{"flexvm-a3u-5-g1": {
				naming.LabelManagedBy: naming.ManagedBy, naming.LabelCluster: "other", naming.LabelPool: "a3u"}},
			act: plan.DeleteVMs{Pool: "a3u", VMs: []string{"flexvm-a3u-5-g1"}, RequestID: rid, Reason: "attack"},
		},
		{
			name:  "delete a VM not named as the pool's",
			plant: map[string]map[string]string{"database-0": naming.Labels("flexvm", "a3u")},
			act:   plan.DeleteVMs{Pool: "a3u", VMs: []string{"database-0"}, RequestID: rid, Reason: "attack"},
		},
		{
			name:  "repair the host of a VM not labelled as the cluster's",
			plant: map[string]map[string]string{"flexvm-a3u-5-g1": {naming.LabelManagedBy: naming.ManagedBy}},
			act:   plan.ReportHostAsFaulty{Pool: "a3u", Node: "flexvm-a3u-5", VM: "flexvm-a3u-5-g1", Generation: 1, Behavior: "PERFORMANCE", RequestID: rid, Reason: "attack"},
		},
		{
			name:  "start a VM not labelled as the cluster's",
			plant: map[string]map[string]string{"flexvm-a3u-5-g1": nil},
			act:   plan.StartVM{Pool: "a3u", Node: "flexvm-a3u-5", VM: "flexvm-a3u-5-g1", Generation: 1, RequestID: rid, Reason: "attack"},
		},
		{
			name: "request VMs not named as the pool's",
			act:  plan.CreateResizeRequest{Pool: "a3u", MIG: own, Name: rr, VMs: []string{"other-a3u-5-g1"}, RunDuration: time.Hour, RequestID: rid, Reason: "attack"},
		},
		{
			name: "queue a resize request in a MIG that is not the request's own",
			act: plan.CreateResizeRequest{Pool: "a3u", MIG: naming.RequestMIG("flexvm", "a3u", "rr-flexvm-a3u-6-g1"), Name: rr,
				VMs: []string{"flexvm-a3u-5-g1"}, RunDuration: time.Hour, RequestID: rid, Reason: "attack"},
		},
		{
			name: "queue a resize request in the pool's MIG of the earlier layout",
			act:  plan.CreateResizeRequest{Pool: "a3u", Name: rr, VMs: []string{"flexvm-a3u-5-g1"}, RunDuration: time.Hour, RequestID: rid, Reason: "attack"},
		},
		{
			name: "delete another cluster's request MIG",
			mig:  [2]string{naming.RequestMIG("other", "a3u", rr), naming.RequestMIGDescription("other", "a3u", rr)},
			act:  plan.DeleteMIG{Pool: "a3u", MIG: naming.RequestMIG("other", "a3u", rr), Request: rr, RequestID: rid, Reason: "attack"},
		},
		{
			name: "delete a MIG named as a request's whose description names another cluster",
			mig:  [2]string{own, naming.RequestMIGDescription("other", "a3u", rr)},
			act:  plan.DeleteMIG{Pool: "a3u", MIG: own, Request: rr, RequestID: rid, Reason: "attack"},
		},
		{
			name: "delete a MIG named as a request's that describes no request",
			mig:  [2]string{own, "payments service"},
			act:  plan.DeleteMIG{Pool: "a3u", MIG: own, Request: rr, RequestID: rid, Reason: "attack"},
		},
		{
			name: "delete a MIG with the name of the pool's MIG of the earlier layout and no description",
			mig:  [2]string{naming.MIG("flexvm", "a3u"), ""},
			act:  plan.DeleteMIG{Pool: "a3u", RequestID: rid, Reason: "attack"},
		},
		{
			name:  "delete VMs of a MIG that is not the request's own",
			plant: map[string]map[string]string{"flexvm-a3u-5-g1": naming.Labels("flexvm", "a3u")},
			act: plan.DeleteVMs{Pool: "a3u", MIG: naming.RequestMIG("other", "a3u", rr), Request: rr, VMs: []string{"flexvm-a3u-5-g1"},
				RequestID: rid, Reason: "attack"},
		},
		{
			name:   "delete another cluster's MIG through a corrupted pool record",
			tamper: tamper(true),
			act:    plan.DeleteMIG{Pool: "a3u", RequestID: rid, Reason: "attack"},
		},
		{
			name:   "delete VMs of another cluster's MIG through a corrupted pool record",
			plant:  map[string]map[string]string{"flexvm-a3u-5-g1": naming.Labels("flexvm", "a3u")},
			tamper: tamper(false),
			act:    plan.DeleteVMs{Pool: "a3u", VMs: []string{"flexvm-a3u-5-g1"}, RequestID: rid, Reason: "attack"},
		},
		{
			name:   "queue a resize request in another cluster's MIG",
			tamper: tamper(false),
			act:    plan.CancelResizeRequest{Pool: "a3u", Legacy: true, Name: "rr-flexvm-a3u-5-g1", RequestID: rid, Reason: "attack"},
		},
		{
			name:   "cancel a resize request of another cluster's MIG",
			tamper: tamper(false),
			act:    plan.CancelResizeRequest{Pool: "a3u", Name: "rr-other-a3u-5-g1", RequestID: rid, Reason: "attack"},
		},
		{
			name:   "delete a resize request of another cluster's MIG",
			tamper: tamper(false),
			act:    plan.DeleteResizeRequest{Pool: "a3u", Name: "rr-other-a3u-5-g1", State: "SUCCEEDED", RequestID: rid, Reason: "attack"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, mut, c, ctx := attackSetup(t)
			for vm, labels := range tc.plant {
				if _, err := h.Sim.AddInstance("", zone, vm, labels); err != nil {
					t.Fatal(err)
				}
			}
			if tc.mig[0] != "" {
				st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
				if err != nil {
					t.Fatal(err)
				}
				tmpl := st.Pools["a3u"].Template
				if err := mut.Compute.EnsureMIG(ctx, gce.MIGSpec{Zone: zone, Name: tc.mig[0], Template: tmpl, Description: tc.mig[1]}, ""); err != nil {
					t.Fatal(err)
				}
			}
			decide := func(st *model.State, _ time.Time) ([]plan.Action, error) {
				if tc.tamper != nil {
					tc.tamper(st)
				}
				return []plan.Action{tc.act}, nil
			}
			res, err := h.Runner.Process(ctx, apply.Input{Flow: "attack", EventID: "attack-1",
				Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide})
			if err != nil {
				t.Fatalf("Process: %v (a refusal is permanent: the event is acknowledged, not retried)", err)
			}
			if got := mut.take(); len(got) > 0 {
				t.Errorf("Compute was asked to change what is not the cluster's: %v", got)
			}
			if len(res.Failed) != 1 || res.Failed[0].Class != plan.FailPermanent || !strings.Contains(res.Failed[0].Err.Error(), "refusing") {
				t.Errorf("failed actions %+v, want the action refused as permanent", res.Failed)
			}
			for _, vm := range h.Sim.Instances() {
				if _, planted := tc.plant[vm.Name]; planted && vm.Status != "RUNNING" {
					t.Errorf("%s is %s, want it untouched (RUNNING)", vm.Name, vm.Status)
				}
			}
		})
	}
}

// TestGuardLetsTheClustersOwnThrough: the same actions on the cluster's
// own VMs and MIG reach Compute, so the refusals above are the guard's.
func TestGuardLetsTheClustersOwnThrough(t *testing.T) {
	h, mut, c, ctx := attackSetup(t)
	rid, rid2 := naming.RequestID("own", "1"), naming.RequestID("own", "2")
	if _, err := h.Sim.AddInstance("", "us-central1-a", "flexvm-a3u-5-g1", naming.Labels("flexvm", "a3u")); err != nil {
		t.Fatal(err)
	}
	rr := "rr-flexvm-a3u-6-g1"
	mig := naming.RequestMIG("flexvm", "a3u", rr)
	acts := []plan.Action{
		plan.CreateResizeRequest{Pool: "a3u", MIG: mig, Name: rr, VMs: []string{"flexvm-a3u-6-g1"}, RunDuration: time.Hour, RequestID: rid, Reason: "own"},
		plan.DeleteMIG{Pool: "a3u", MIG: mig, Request: rr, RequestID: rid2, Reason: "own"},
	}
	res, err := h.Runner.Process(ctx, apply.Input{Flow: "own", EventID: "own-1",
		Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide(acts...)})
	if err != nil || len(res.Failed) > 0 {
		t.Fatalf("Process: %v, failed %+v", err, res.Failed)
	}
	got := mut.take()
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := st.Pools["a3u"].Template
	want := []string{"EnsureInstanceTemplate " + tmpl, "EnsureMIG " + mig, "CreateResizeRequest " + mig + "/" + rr + ":flexvm-a3u-6-g1", "DeleteMIG " + mig}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Compute calls %v, want %v", got, want)
	}
}

func attackSetup(t *testing.T) (*harness.Harness, *mutations, *spec.Cluster, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	mut := &mutations{}
	h, err := harness.New(ctx, harness.Options{Compute: func(c apply.Compute) apply.Compute { mut.Compute = c; return mut }})
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
	mut.take()
	return h, mut, c, ctx
}
