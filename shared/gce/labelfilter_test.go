package gce_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/gce"
)

// TestLabelsCheckedAfterAnIgnoredFilter: a Compute that ignores the label
// filter of instance lists (gcloud never relies on it) returns every VM;
// ListInstances and ListInstancesAllZones still return only the VMs that
// carry every asked label, whether the list comes through REST or a
// ListShortcut.
func TestLabelsCheckedAfterAnIgnoredFilter(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	want := map[string]string{"flexslurm-cluster": "c1", "managed-by": "flexslurm"}
	for name, labels := range map[string]map[string]string{
		"c1-a3-0-g1":   {"flexslurm-cluster": "c1", "managed-by": "flexslurm", "flexslurm-pool": "a3"},
		"c1-half":      {"flexslurm-cluster": "c1"},
		"c10-a3-0-g1":  {"flexslurm-cluster": "c10", "managed-by": "flexslurm"},
		"c1-wrong-val": {"flexslurm-cluster": "c1", "managed-by": "someone"},
		"plain":        nil,
	} {
		if _, err := h.sim.AddInstance("", zone, name, labels); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.sim.AddInstance("", "europe-west4-b", "c1-b-0-g1", want); err != nil {
		t.Fatal(err)
	}

	var filtersDropped int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/instances") {
			q := r.URL.Query()
			if q.Get("filter") != "" {
				filtersDropped++
				q.Del("filter")
				r.URL.RawQuery = q.Encode()
			}
		}
		h.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := gce.New(h.ctx, project, option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	names := func(vms []gce.Instance) []string {
		var out []string
		for _, v := range vms {
			out = append(out, v.Zone+"/"+v.Name)
		}
		return out
	}
	vms, err := c.ListInstances(h.ctx, zone, want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{zone + "/c1-a3-0-g1"}, names(vms)); diff != "" {
		t.Errorf("ListInstances with the filter ignored (-want +got):\n%s", diff)
	}
	all, err := c.ListInstancesAllZones(h.ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"europe-west4-b/c1-b-0-g1", zone + "/c1-a3-0-g1"}, names(all)); diff != "" {
		t.Errorf("ListInstancesAllZones with the filter ignored (-want +got):\n%s", diff)
	}
	if filtersDropped != 2 {
		t.Errorf("%d filters dropped, want 2: the test did not exercise an ignored filter", filtersDropped)
	}
	if every, err := c.ListInstances(h.ctx, zone, nil); err != nil || len(every) != 5 {
		t.Errorf("ListInstances without labels = %d VMs, %v; want all 5", len(every), err)
	}

	// A ListShortcut that ignores the filter too.
	c.SetListShortcut(ignoringShortcut{items: []*computepb.Instance{
		{Name: proto.String("c1-a3-0-g1"), Labels: map[string]string{"flexslurm-cluster": "c1", "managed-by": "flexslurm"}},
		{Name: proto.String("c1-half"), Labels: map[string]string{"flexslurm-cluster": "c1"}},
		{Name: proto.String("plain")},
	}})
	vms, err = c.ListInstances(context.Background(), zone, want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{zone + "/c1-a3-0-g1"}, names(vms)); diff != "" {
		t.Errorf("ListInstances through a shortcut ignoring the filter (-want +got):\n%s", diff)
	}
}

// ignoringShortcut answers instance lists with every VM it holds, whatever
// the filter; it leaves the other lists to REST.
type ignoringShortcut struct{ items []*computepb.Instance }

func (s ignoringShortcut) ListInstances(_ context.Context, _ *computepb.ListInstancesRequest, read func(*computepb.InstanceList)) bool {
	read(&computepb.InstanceList{Items: s.items})
	return true
}

func (ignoringShortcut) ListInstanceGroupManagers(context.Context, *computepb.ListInstanceGroupManagersRequest, func(*computepb.InstanceGroupManagerList)) bool {
	return false
}

func (ignoringShortcut) ListResizeRequests(context.Context, *computepb.ListInstanceGroupManagerResizeRequestsRequest, func(*computepb.InstanceGroupManagerResizeRequestsListResponse)) bool {
	return false
}
