package computesim

import (
	"errors"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"
)

// TestAggregatedLists lists VMs and MIGs across zones through the REST
// clients' AggregatedList, with a label filter and pages of one item.
func TestAggregatedLists(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup() // MIG "pool" in testZone
	if err := e.insertRR("pool", namedRR("rr1", 0, "vm-a", "vm-b"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(0)
	for _, in := range []struct{ zone, name, cluster string }{
		{"europe-west4-b", "other-1", "c1"},
		{"europe-west4-b", "other-2", "c2"},
		{"us-east5-a", "vm-a", "c1"}, // same name as a MIG VM, another zone
	} {
		if _, err := e.sim.AddInstance("", in.zone, in.name, map[string]string{"flexslurm-cluster": in.cluster}); err != nil {
			t.Fatal(err)
		}
	}

	type ref struct{ Scope, Name string }
	listVMs := func(filter string) []ref {
		req := &computepb.AggregatedListInstancesRequest{Project: testProject, MaxResults: proto.Uint32(1)}
		if filter != "" {
			req.Filter = proto.String(filter)
		}
		var out []ref
		it := e.inst.AggregatedList(e.ctx, req)
		for {
			p, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range p.Value.GetInstances() {
				out = append(out, ref{p.Key, in.GetName()})
			}
		}
	}
	want := []ref{{"zones/europe-west4-b", "other-1"}, {"zones/europe-west4-b", "other-2"}, {"zones/us-central1-a", "vm-a"}, {"zones/us-central1-a", "vm-b"}, {"zones/us-east5-a", "vm-a"}}
	if diff := cmp.Diff(want, listVMs("")); diff != "" {
		t.Errorf("all VMs (-want +got):\n%s", diff)
	}
	want = []ref{{"zones/europe-west4-b", "other-1"}, {"zones/us-east5-a", "vm-a"}}
	if diff := cmp.Diff(want, listVMs(`(labels.flexslurm-cluster = "c1")`)); diff != "" {
		t.Errorf("c1's VMs (-want +got):\n%s", diff)
	}

	it := e.igm.AggregatedList(e.ctx, &computepb.AggregatedListInstanceGroupManagersRequest{Project: testProject})
	var migs []ref
	for {
		p, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Value.GetInstanceGroupManagers() {
			migs = append(migs, ref{p.Key, m.GetName() + " " + lastSegment(m.GetInstanceTemplate())})
		}
	}
	if diff := cmp.Diff([]ref{{"zones/us-central1-a", "pool tpl"}}, migs); diff != "" {
		t.Errorf("MIGs (-want +got):\n%s", diff)
	}

	_, err := e.inst.AggregatedList(e.ctx, &computepb.AggregatedListInstancesRequest{Project: testProject, Filter: proto.String("labels.x = (")}).Next()
	wantHTTP(t, err, 400, "invalid")
}
