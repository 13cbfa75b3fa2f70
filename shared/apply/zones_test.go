package apply_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// TestMultiZonePoolAddressesVMsInTheirZone: a pool naming zones a and b,
// with zone a stocked out. Its static node's request goes to a regional
// MIG and lands in b; a start and a deletion of that VM are sent to zone
// b (the zone Compute placed it in), not to the pool's zone a.
func TestMultiZonePoolAddressesVMsInTheirZone(t *testing.T) {
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
	for i := range c.NodePools {
		if c.NodePools[i].ID == "a3u" {
			c.NodePools[i].Ext.Zones = []string{"us-central1-a", "us-central1-b"}
		}
	}
	h.Sim.SetShortage(computesim.Shortage{Name: "a-out", Zone: "us-central1-a"})
	if err := h.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := h.Advance(ctx, computesim.DefaultAttemptInterval+time.Minute); err != nil {
		t.Fatal(err)
	}
	const vm = "flexvm-a3u-0-g1"
	var zone string
	for _, in := range h.Sim.Instances() {
		if in.Name == vm {
			zone = in.Zone
		}
	}
	if zone != "us-central1-b" {
		t.Fatalf("static node's VM in zone %q, want us-central1-b (zone a is stocked out); VMs %v", zone, h.Sim.Instances())
	}
	var regional bool
	for _, m := range h.Sim.MIGs() {
		regional = regional || m.Zone == "us-central1"
	}
	if !regional {
		t.Fatalf("no regional MIG: %+v", h.Sim.MIGs())
	}
	rec.take()
	mig := ""
	for _, m := range h.Sim.MIGs() {
		mig = m.Name
	}
	acts := []plan.Action{
		plan.StartVM{Pool: "a3u", Node: "flexvm-a3u-0", VM: vm, RequestID: naming.StartInstanceRequestID("us-central1-a", vm), Reason: "test"},
	}
	// The VM runs, so Compute answers the start "not ready": what
	// matters here is the zone the call was sent to.
	_, _ = h.Runner.Process(ctx, apply.Input{Flow: "test", EventID: "e-1", Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide(acts...)})
	if got := rec.take(); len(got) != 1 || got[0] != "StartInstance us-central1-b/"+vm+" "+naming.StartInstanceRequestID("us-central1-a", vm) {
		t.Errorf("start went to %q, want zone us-central1-b", got)
	}
	del := plan.DeleteVMs{Pool: "a3u", MIG: mig, Request: "rr-flexvm-a3u-0-g1", VMs: []string{vm}, RequestID: naming.DeleteInstancesRequestID(mig, vm), Reason: "test"}
	if res, err := h.Runner.Process(ctx, apply.Input{Flow: "test", EventID: "e-2", Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide(del)}); err != nil {
		t.Fatalf("Process: %v (failed: %v)", err, res.Failed)
	}
	for _, in := range h.Sim.Instances() {
		if in.Name == vm && in.Status != "STOPPING" {
			t.Errorf("VM %s in %s is %s after the deletion, want STOPPING", vm, in.Zone, in.Status)
		}
	}
}
