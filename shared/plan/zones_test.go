package plan

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// multiZone returns the example cluster with pool a3u naming zones a and
// b, applied, its pool ready.
func multiZone(t *testing.T) (*model.State, *spec.Cluster) {
	t.Helper()
	c, _ := example(t)
	for i := range c.NodePools {
		if c.NodePools[i].ID == "a3u" {
			c.NodePools[i].Ext.Zones = []string{"us-central1-a", "us-central1-b"}
		}
	}
	eff, err := c.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	st := model.NewState()
	Apply(st, ClusterApplied(st, c, testNode, built(t, c, testNode), eff, t0, Policy{}))
	st.Pools["a3u"].Ready = true
	return st, c
}

// TestClusterAppliedRecordsZones: applying a multi-zone pool records its
// zones and region (where its request MIGs go); a single-zone pool's
// record has neither, as before; a pool that goes back to one zone keeps
// its region, so its regional MIGs stay in sight, and decides the same
// actions as the single-zone pool otherwise.
func TestClusterAppliedRecordsZones(t *testing.T) {
	st, c := multiZone(t)
	p := st.Pools["a3u"]
	if !slices.Equal(p.Zones, []string{"us-central1-a", "us-central1-b"}) || p.Region != "us-central1" || p.MIGLocation() != "us-central1" {
		t.Fatalf("multi-zone pool record: zones %q, region %q, MIG location %q", p.Zones, p.Region, p.MIGLocation())
	}
	single, _ := applied(t)
	if sp := single.Pools["a3u"]; sp.Zones != nil || sp.Region != "" || sp.MIGLocation() != "us-central1-a" {
		t.Errorf("single-zone pool record: zones %q, region %q, MIG location %q", sp.Zones, sp.Region, sp.MIGLocation())
	}
	for i := range c.NodePools {
		c.NodePools[i].Ext.Zones = nil
	}
	eff, err := c.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	acts := ClusterApplied(st, c, testNode, built(t, c, testNode), eff, t0, Policy{})
	got := kinds(acts)
	Apply(st, acts)
	p = st.Pools["a3u"]
	if p.Zones != nil || p.Region != "us-central1" || p.MIGLocation() != "us-central1-a" {
		t.Errorf("back to one zone: zones %q, region %q, MIG location %q; want no zones, the region kept, new MIGs zonal", p.Zones, p.Region, p.MIGLocation())
	}
	if d := cmp.Diff([]string{"PutCluster", "PutPool:a3u"}, got); d != "" {
		t.Errorf("back to one zone (-want +got):\n%s", d)
	}
}

// TestExpiryInAnotherZoneOfThePool: the expiry audit entry of a
// multi-zone pool's VM names the zone the VM landed in: any of the pool's
// zones is its, a zone outside them is refused, and a single-zone pool
// still refuses every zone but its own.
func TestExpiryInAnotherZoneOfThePool(t *testing.T) {
	want := []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/requested",
		"CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"}
	for _, tc := range []struct {
		name    string
		multi   bool
		zone    string
		wantErr bool
	}{
		{"multi-zone pool, VM in its second zone", true, "us-central1-b", false},
		{"multi-zone pool, VM in its first zone", true, "us-central1-a", false},
		{"multi-zone pool, a zone it does not name", true, "us-central1-c", true},
		{"single-zone pool, another zone", false, "us-central1-b", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			if tc.multi {
				st, _ = multiZone(t)
			}
			running(st, "flexvm-a3u-0", t0)
			a := audit(event.AuditDeferredDelete, "flexvm-a3u-0-g1")
			a.Zone = tc.zone
			got, err := Expiry(st, a, t0, Policy{})
			if tc.wantErr {
				if !errors.Is(err, ErrRejected) {
					t.Fatalf("err = %v, want ErrRejected", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
}

// TestReconcileRecordsTheVMZone: a multi-zone pool's node that the
// reconciler sees running records the zone its VM was listed in.
func TestReconcileRecordsTheVMZone(t *testing.T) {
	st, _ := multiZone(t)
	n := st.Nodes["flexvm-a3u-0"]
	if n.Phase != model.PhaseRequested {
		t.Fatalf("static node phase %s, want requested", n.Phase)
	}
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, ListedAt: t0, MIGsListed: true,
		MIGs:           []ObservedMIG{{Name: n.MIG, Request: n.ResizeRequest, RequestsListed: true}},
		ResizeRequests: []ObservedResizeRequest{{Name: n.ResizeRequest, MIG: n.MIG, State: "SUCCEEDED", VMs: []string{n.VMName}}},
		VMs:            []VM{{Name: n.VMName, ID: "99", Status: "RUNNING", Created: t0, Zone: "us-central1-b", MIG: n.MIG}}}}}
	Apply(st, Reconcile(st, obs, t0, Policy{}))
	if n := st.Nodes["flexvm-a3u-0"]; n.Phase != model.PhaseRunning || n.Zone != "us-central1-b" {
		t.Errorf("node after the pass: phase %s, zone %q; want running in us-central1-b", n.Phase, n.Zone)
	}
}
