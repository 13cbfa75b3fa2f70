package apply_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// slowLists is a Compute whose every list call takes an hour of the clock.
type slowLists struct {
	apply.Compute
	clk *clock.Manual
	mig string
}

func (c slowLists) ListResizeRequests(context.Context, string, string) ([]gce.ResizeRequest, error) {
	c.clk.Advance(time.Hour)
	return nil, nil
}

func (c slowLists) ListInstances(context.Context, string, map[string]string) ([]gce.Instance, error) {
	c.clk.Advance(time.Hour)
	return nil, nil
}

func (c slowLists) ListMIGs(_ context.Context, zone, _ string) ([]gce.MIG, error) {
	c.clk.Advance(time.Hour)
	// The pool's MIG of the layout before one MIG per request, with the
	// description flexslurm gave it.
	return []gce.MIG{{Zone: zone, Name: c.mig, Description: "flexslurm node pool a3u of cluster flexvm"}}, nil
}

// TestObserveStampsEachPoolBeforeItsLists: what a pool's lists show is
// true as of the time before its first list call, not after the last.
func TestObserveStampsEachPoolBeforeItsLists(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewManual(start)
	r := apply.New(apply.Deps{Clock: clk, Compute: slowLists{clk: clk, mig: "fs-flexvm-a3u"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	st := model.NewState()
	st.Pools["a3u"] = &model.Pool{ID: "a3u", Zone: "us-central1-a", MIG: "fs-flexvm-a3u", Ready: true}
	st.Pools["b"] = &model.Pool{ID: "b", Zone: "us-central1-b", MIG: "fs-flexvm-b", Ready: true}
	obs := r.Observe(context.Background(), "flexvm", st)
	a, b := obs.Pools["a3u"], obs.Pools["b"]
	if !a.Listed || !a.MIGExists || !a.ListedAt.Equal(start) {
		t.Errorf("pool a3u: listed %v, MIG found %v, at %v; want listed, found, at %v", a.Listed, a.MIGExists, a.ListedAt, start)
	}
	if want := start.Add(3 * time.Hour); !b.Listed || b.MIGExists || !b.ListedAt.Equal(want) {
		t.Errorf("pool b: listed %v, MIG found %v, at %v; want listed, not found, at %v", b.Listed, b.MIGExists, b.ListedAt, want)
	}
}

// listedVMs is a Compute that lists vms in every zone.
type listedVMs struct {
	apply.Compute
	vms []gce.Instance
}

func (c listedVMs) ListResizeRequests(context.Context, string, string) ([]gce.ResizeRequest, error) {
	return nil, nil
}

func (c listedVMs) ListInstances(context.Context, string, map[string]string) ([]gce.Instance, error) {
	return c.vms, nil
}

func (c listedVMs) ListMIGs(_ context.Context, zone, mig string) ([]gce.MIG, error) {
	return []gce.MIG{{Zone: zone, Name: mig}}, nil
}

// TestObserveKeepsEveryVMField: the observation holds each listed VM's
// name, id, status and times as listed, whatever their lengths (the
// names are copied together, observedVMs), and no VM for an empty list.
func TestObserveKeepsEveryVMField(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	listed := []gce.Instance{
		{Zone: "us-central1-a", Name: "flexvm-a3u-0-g1", ID: 8421376120393812345, Status: "RUNNING",
			Created: at, TerminationTime: at.Add(7 * 24 * time.Hour), LastStart: at.Add(time.Minute)},
		{Zone: "us-central1-a", Name: "flexvm-a3u-10-g12", ID: 0, Status: "", Created: at.Add(time.Hour)},
		{Zone: "us-central1-a", Name: "", ID: math.MaxUint64, Status: "STOPPING"},
		{Zone: "us-central1-a", Name: "flexvm-a3u-1-g1", ID: 7, Status: "PROVISIONING"},
	}
	want := []plan.VM{
		{Name: "flexvm-a3u-0-g1", ID: "8421376120393812345", Status: "RUNNING",
			Created: at, TerminationTime: at.Add(7 * 24 * time.Hour), LastStart: at.Add(time.Minute), Zone: "us-central1-a"},
		{Name: "flexvm-a3u-10-g12", ID: "0", Status: "", Created: at.Add(time.Hour), Zone: "us-central1-a"},
		{Name: "", ID: "18446744073709551615", Status: "STOPPING", Zone: "us-central1-a"},
		{Name: "flexvm-a3u-1-g1", ID: "7", Status: "PROVISIONING", Zone: "us-central1-a"},
	}
	st := model.NewState()
	st.Pools["a3u"] = &model.Pool{ID: "a3u", Zone: "us-central1-a", MIG: "fs-flexvm-a3u", Ready: true}
	observe := func(vms []gce.Instance) []plan.VM {
		r := apply.New(apply.Deps{Clock: clock.NewManual(at), Compute: listedVMs{vms: vms},
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		return r.Observe(context.Background(), "flexvm", st).Pools["a3u"].VMs
	}
	got := observe(listed)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("observed VMs (-want +got):\n%s", diff)
	}
	// The names lie one after the other in one string; no id lies in it,
	// since a node record keeps its VM's id.
	addr := func(s string) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(s))) }
	start, end := addr(got[0].Name), addr(got[3].Name)+uintptr(len(got[3].Name))
	if want := start + uintptr(len(got[0].Name)+len(got[1].Name)+len(got[2].Name)); addr(got[3].Name) != want {
		t.Errorf("the last VM's name is not right after the others in the pool's string of names")
	}
	for _, vm := range got {
		if p := addr(vm.ID); p >= start && p < end {
			t.Errorf("VM %q: its id %s lies in the pool's string of names", vm.Name, vm.ID)
		}
	}
	if got := observe(nil); got != nil {
		t.Errorf("no VM listed: observed %v, want none", got)
	}
}

// namedLikeThePoolMIG is a Compute holding one MIG with the name of pool
// a3u's MIG of the layout before one MIG per request and the description
// desc, with one resize request.
type namedLikeThePoolMIG struct {
	apply.Compute
	desc string
}

func (c namedLikeThePoolMIG) ListMIGs(_ context.Context, zone, _ string) ([]gce.MIG, error) {
	return []gce.MIG{{Zone: zone, Name: "fs-flexvm-a3u", Description: c.desc}}, nil
}

func (c namedLikeThePoolMIG) ListResizeRequests(_ context.Context, zone, mig string) ([]gce.ResizeRequest, error) {
	return []gce.ResizeRequest{{Zone: zone, MIG: mig, Name: "users-request", State: "SUCCEEDED"}}, nil
}

func (c namedLikeThePoolMIG) ListInstances(context.Context, string, map[string]string) ([]gce.Instance, error) {
	return nil, nil
}

// TestObserveTakesOnlyItsOwnPoolMIG: a MIG that has the name of the pool's
// MIG of the earlier layout is that MIG only with the description
// flexslurm always gave it. Another (a user's MIG that happens to bear the
// name, with no description or its own) is not the cluster's: it is not
// observed, so the reconciler neither deletes it once "empty" nor cancels
// or deletes its resize requests.
func TestObserveTakesOnlyItsOwnPoolMIG(t *testing.T) {
	for _, tc := range []struct {
		desc string
		ours bool
	}{
		{"flexslurm node pool a3u of cluster flexvm", true},
		{"", false},
		{"payments service", false},
		{"flexslurm node pool a3u of cluster other", false},
	} {
		st := model.NewState()
		st.Pools["a3u"] = &model.Pool{ID: "a3u", Zone: "us-central1-a", MIG: "fs-flexvm-a3u", Ready: true}
		r := apply.New(apply.Deps{Clock: clock.NewManual(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)), Compute: namedLikeThePoolMIG{desc: tc.desc},
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		po := r.Observe(context.Background(), "flexvm", st).Pools["a3u"]
		if !po.Listed || po.MIGExists != tc.ours || (len(po.MIGs) == 1) != tc.ours || (len(po.ResizeRequests) == 1) != tc.ours {
			t.Errorf("description %q: MIG found %v, MIGs %+v, requests %+v; want the MIG and its request observed: %v", tc.desc, po.MIGExists, po.MIGs, po.ResizeRequests, tc.ours)
		}
	}
}
