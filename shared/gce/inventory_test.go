package gce_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/gce"
)

// TestProjectWideListsAndDeletes lists templates, MIGs and VMs across zones
// and deletes a template, a standalone VM and a MIG, twice (the second time
// every call is a no-op).
func TestProjectWideListsAndDeletes(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	h.pool() // template c1-h200-v1, MIG c1-h200 in zone
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr-1", Instances: []string{"c1-h200-0-g1"}}, rid("rr-1")); err != nil {
		t.Fatal(err)
	}
	h.tick(0)
	other := flexSpec("loose")
	other.Properties.Labels = map[string]string{"team": "x"}
	if err := h.c.EnsureInstanceTemplate(h.ctx, other, rid("loose")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sim.AddInstance("", "europe-west4-b", "stray", map[string]string{"flexslurm-cluster": "c1", "managed-by": "flexslurm"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sim.AddInstance("", "europe-west4-b", "half", map[string]string{"flexslurm-cluster": "c1"}); err != nil {
		t.Fatal(err)
	}

	tpls, err := h.c.ListInstanceTemplates(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	type tpl struct {
		Name, Path string
		Labels     map[string]string
	}
	var gotT []tpl
	for _, x := range tpls {
		gotT = append(gotT, tpl{x.Name, x.Path, x.Labels})
	}
	wantT := []tpl{
		{"c1-h200-v1", "projects/proj/global/instanceTemplates/c1-h200-v1", map[string]string{"flexslurm-cluster": "c1", "flexslurm-pool": "h200"}},
		{"loose", "projects/proj/global/instanceTemplates/loose", map[string]string{"team": "x"}},
	}
	if diff := cmp.Diff(wantT, gotT); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}

	migs, err := h.c.ListMIGsAllScopes(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantM := []gce.MIGRef{{Zone: zone, Name: "c1-h200", Templates: []string{"projects/proj/global/instanceTemplates/c1-h200-v1"}, TargetSize: 1}}
	if diff := cmp.Diff(wantM, migs); diff != "" {
		t.Errorf("MIGs (-want +got):\n%s", diff)
	}
	// A MIG's description is listed with it (a request MIG's proves whose
	// it is).
	if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: "europe-west4-b", Name: "c1-h200-r0123456789", Template: "c1-h200-v1",
		Description: "flexslurm resize request rr-1 of pool h200 of cluster c1"}, rid("described MIG")); err != nil {
		t.Fatal(err)
	}
	if migs, err = h.c.ListMIGsAllScopes(h.ctx); err != nil || len(migs) != 2 || migs[0].Name != "c1-h200-r0123456789" ||
		migs[0].Description != "flexslurm resize request rr-1 of pool h200 of cluster c1" || migs[1].Description != "" {
		t.Fatalf("MIGs with a description: %+v, %v", migs, err)
	}
	if err := h.c.DeleteMIG(h.ctx, "europe-west4-b", "c1-h200-r0123456789", ""); err != nil {
		t.Fatal(err)
	}

	vmNames := func(labels map[string]string) []string {
		t.Helper()
		vms, err := h.c.ListInstancesAllZones(h.ctx, labels)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range vms {
			out = append(out, v.Zone+"/"+v.Name+" mig="+v.MIG)
		}
		return out
	}
	// The pool's VMs carry flexslurm-cluster but not managed-by.
	want := []string{"europe-west4-b/stray mig="}
	if diff := cmp.Diff(want, vmNames(map[string]string{"flexslurm-cluster": "c1", "managed-by": "flexslurm"})); diff != "" {
		t.Errorf("labelled VMs (-want +got):\n%s", diff)
	}
	want = []string{"europe-west4-b/half mig=", "europe-west4-b/stray mig=", "us-central1-a/c1-h200-0-g1 mig=c1-h200"}
	if diff := cmp.Diff(want, vmNames(nil)); diff != "" {
		t.Errorf("all VMs (-want +got):\n%s", diff)
	}

	// A template in use cannot be deleted.
	if err := h.c.DeleteInstanceTemplate(h.ctx, "c1-h200-v1", rid("del tpl early")); err == nil {
		t.Error("deleting a template in use: got nil error")
	}
	for round := range 2 {
		if err := h.c.DeleteMIG(h.ctx, zone, "c1-h200", ""); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := h.c.DeleteInstance(h.ctx, "europe-west4-b", "stray", ""); err != nil && !gce.IsNotReady(err) {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := h.c.DeleteInstanceTemplate(h.ctx, "c1-h200-v1", ""); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		h.tick(0)
	}
	if diff := cmp.Diff([]string{"europe-west4-b/half mig="}, vmNames(nil)); diff != "" {
		t.Errorf("VMs left (-want +got):\n%s", diff)
	}
	if err := h.c.DeleteInstance(h.ctx, "europe-west4-b", "Bad_Name", ""); !errors.Is(err, gce.ErrInvalidSpec) {
		t.Errorf("bad name: got %v, want ErrInvalidSpec", err)
	}
}
