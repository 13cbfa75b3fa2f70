package computesim

import (
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// TestVersion: Version changes with every call that may change the
// simulator's state (API calls, Tick, direct lists, out-of-band changes)
// and not with the read-only introspection calls.
func TestVersion(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	v := e.sim.Version()
	e.sim.Instances()
	e.sim.ResizeRequests()
	e.sim.MIGs()
	e.sim.NextDue()
	e.sim.Calls()
	if got := e.sim.Version(); got != v {
		t.Errorf("introspection changed Version from %d to %d", v, got)
	}
	steps := []struct {
		name string
		do   func()
	}{
		{"resize request inserted", func() {
			if err := e.insertRR("pool", namedRR("rr", 3600, "vm-1"), ""); err != nil {
				t.Fatal(err)
			}
		}},
		{"tick", func() { e.sim.Tick(e.clk.Advance(time.Minute)) }},
		{"direct list", func() {
			l := ListShortcut{Sim: e.sim}
			if _, ok := l.ListInstances(e.ctx, &computepb.ListInstancesRequest{Project: testProject, Zone: testZone}); !ok {
				t.Fatal("the direct list was not answered")
			}
		}},
		{"expired", func() {
			if err := e.sim.ExpireNow(testZone, e.sim.Instances()[0].Name); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, s := range steps {
		s.do()
		got := e.sim.Version()
		if got == v {
			t.Errorf("%s: Version still %d", s.name, v)
		}
		v = got
	}
}

// TestDirectListCopies: a direct list's answer is the caller's: changing it
// changes nothing in the simulator, and later changes of the simulator do
// not show in it.
func TestDirectListCopies(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	if err := e.insertRR("pool", namedRR("rr", 3600, "vm-1"), ""); err != nil {
		t.Fatal(err)
	}
	e.sim.Tick(e.clk.Advance(time.Minute))
	l := ListShortcut{Sim: e.sim}
	req := &computepb.ListInstancesRequest{Project: testProject, Zone: testZone}
	got, ok := l.ListInstances(e.ctx, req)
	if !ok || len(got.GetItems()) != 1 {
		t.Fatalf("list = %v, %t", got, ok)
	}
	before := proto.Clone(got)
	got.Items[0].Status = proto.String("MANGLED")
	got.Items[0].Labels["x"] = "y"
	again, _ := l.ListInstances(e.ctx, req)
	if again.Items[0].GetStatus() == "MANGLED" || again.Items[0].GetLabels()["x"] != "" {
		t.Errorf("changing an answer changed the simulator: %v", again.Items[0])
	}
	if err := e.sim.ExpireNow(testZone, again.Items[0].GetName()); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(before, again) {
		t.Errorf("a later change of the simulator shows in an earlier answer")
	}
}
