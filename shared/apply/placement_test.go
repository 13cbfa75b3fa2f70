package apply_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

func (r *recorder) EnsureWorkloadPolicy(ctx context.Context, w gce.WorkloadPolicySpec, id string) error {
	if err := r.rec("EnsureWorkloadPolicy", w.Region+"/"+w.Name+"/"+w.MaxTopologyDistance, id); err != nil {
		return err
	}
	return r.Compute.EnsureWorkloadPolicy(ctx, w, id)
}

// TestCreateRequestWithWorkloadPolicy: a request that names its pool's
// workload policy makes sure of the policy, then creates a MIG that
// references it; a request naming any other policy, or a policy for a
// pool without compact placement, is refused before any call.
func TestCreateRequestWithWorkloadPolicy(t *testing.T) {
	h, rec, c, ctx := setup(t)
	const rr = "rr-flexvm-a3u-j7-g1"
	mig := naming.RequestMIG("flexvm", "a3u", rr)
	vms := []string{"flexvm-a3u-1-g1", "flexvm-a3u-2-g1"}
	create := func(policy string) plan.CreateResizeRequest {
		return plan.CreateResizeRequest{Pool: "a3u", MIG: mig, Name: rr, VMs: vms, RunDuration: time.Hour, WorkloadPolicy: policy,
			RequestID: naming.CreateResizeRequestID(mig, rr), Reason: "test"}
	}
	run := func(id string, a plan.Action) apply.Result {
		t.Helper()
		res, _ := h.Runner.Process(ctx, apply.Input{Flow: "test", EventID: id, Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide(a)})
		return res
	}
	// The example pool asks for no compact placement: no policy is taken.
	if res := run("e-none", create(naming.WorkloadPolicy("flexvm", "a3u", ""))); len(res.Failed) != 1 || len(rec.take()) != 0 {
		t.Fatalf("a policy for a pool without compact placement: failed %+v; want refused before any call", res.Failed)
	}

	for i := range c.NodePools {
		if c.NodePools[i].ID == "a3u" {
			c.NodePools[i].Ext.CompactPlacement = &spec.CompactPlacement{MaxTopologyDistance: spec.TopologyBlock}
		}
	}
	h.Clock.Advance(time.Minute)
	if err := h.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	rec.take()
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Pools["a3u"]; p.WorkloadPolicy == "" {
		t.Fatalf("after applying compact placement the pool records no policy: %+v", p)
	}
	want := naming.WorkloadPolicy("flexvm", "a3u", "BLOCK")
	if res := run("e-other", create(naming.WorkloadPolicy("flexvm", "a3u", ""))); len(res.Failed) != 1 || len(rec.take()) != 0 {
		t.Fatalf("another policy than the pool's: failed %+v; want refused before any call", res.Failed)
	}
	if res := run("e-ours", create(want)); len(res.Failed) != 0 {
		t.Fatalf("the pool's policy: failed %+v", res.Failed)
	}
	calls := rec.take()
	if len(calls) != 2 || calls[0] != fmt.Sprintf("EnsureWorkloadPolicy us-central1/%s/BLOCK %s", want, naming.InsertWorkloadPolicyRequestID("us-central1", want, st.Cluster.Incarnation())) ||
		!strings.HasPrefix(calls[1], "CreateResizeRequest "+mig+"/"+rr) {
		t.Errorf("calls %q, want the policy ensured, then the request", calls)
	}
	found := false
	for _, r := range h.Sim.ResizeRequests() {
		if r.Name == rr {
			found = true
			if r.WorkloadPolicy != want {
				t.Errorf("request %s's MIG references %q, want %s", rr, r.WorkloadPolicy, want)
			}
		}
	}
	if !found {
		t.Errorf("request %s not in the simulator", rr)
	}
}
