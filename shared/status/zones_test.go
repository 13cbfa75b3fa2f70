package status_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/status"
	"github.com/flexslurm/flexslurm/shared/store"
)

// TestMultiZonePoolShowsZones: a multi-zone pool's line names its zones,
// and each node whose VM runs names the zone Compute placed it in; a node
// still waiting for capacity names none (its request may land in any).
func TestMultiZonePoolShowsZones(t *testing.T) {
	s := store.NewMemory(nil)
	err := s.Update(context.Background(), store.Scope{Cluster: "c1", AllPools: true}, func(st *model.State) error {
		st.Cluster = &model.Cluster{ID: "c1", Spec: []byte(`{}`), SpecVersion: 1, SpecSHA256: "x", Project: "p", UpdatedAt: now.Add(-time.Hour)}
		st.Pools["gpu"] = &model.Pool{ID: "gpu", Zone: "us-central1-a", Zones: []string{"us-central1-a", "us-central1-b"}, Region: "us-central1",
			MaxNodes: 2, RunDuration: time.Hour, Ready: true, UpdatedAt: now.Add(-time.Hour)}
		st.Nodes["c1-gpu-0"] = &model.Node{Name: "c1-gpu-0", Pool: "gpu", Kind: model.NodeDynamic, Generation: 1, Phase: model.PhaseRunning,
			VMName: "c1-gpu-0-g1", Zone: "us-central1-b", TerminationTime: now.Add(time.Hour), UpdatedAt: now.Add(-time.Minute)}
		st.Nodes["c1-gpu-1"] = &model.Node{Name: "c1-gpu-1", Pool: "gpu", Index: 1, Kind: model.NodeDynamic, Generation: 1, Phase: model.PhaseRequested,
			VMName: "c1-gpu-1-g1", Zone: "us-central1-a", UpdatedAt: now.Add(-time.Minute)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := status.Collect(context.Background(), s, now, status.Options{Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := status.Render(&b, snap); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"pool gpu · zones us-central1-a, us-central1-b (each request in one of them, where capacity is)",
		"c1-gpu-0-g1 in us-central1-b",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "c1-gpu-1-g1 in") {
		t.Errorf("a node waiting for capacity shows a zone:\n%s", out)
	}
}
