package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/store"
)

// benchState is a cluster of the size a chaos seed runs (two flex pools
// of four nodes, a few jobs, a Slurm view of every node, a spec of a few
// KB), in a new Memory.
func benchState(b *testing.B) (*store.Memory, *model.SlurmView) {
	ctx := context.Background()
	m := store.NewMemory(nil)
	const c = "chaos"
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	view := &model.SlurmView{Version: model.SlurmViewVersion, TakenAt: t0, ReceivedAt: t0, Nodes: map[string]model.SlurmNode{}}
	err := m.Update(ctx, store.Scope{Cluster: c, AllPools: true, Slurm: true}, func(st *model.State) error {
		st.Cluster = &model.Cluster{ID: c, Spec: []byte(`{"spec":"` + strings.Repeat("x", 3000) + `"}`), SpecVersion: 1,
			Node: nodeconfig.Settings{Image: "img", PoolImages: map[string]string{"a": "img-a"}}}
		for _, p := range []string{"a", "b"} {
			st.Pools[p] = &model.Pool{ID: p, MaxNodes: 4, TemplateBody: strings.Repeat("t", 4000), CapacityWaits: []int64{60, 120}}
			for i := range 4 {
				n := model.NodeName(c, p, i)
				st.Nodes[n] = &model.Node{Name: n, Pool: p, Index: i, Kind: model.NodeDynamic, Generation: 3, Phase: model.PhaseRunning,
					VMName: model.VMName(n, 3), RequestedAt: t0, RunningAt: t0, UpdatedAt: t0}
				view.Nodes[n] = slurmstate.ParseNode(n, []string{"ALLOCATED", "CLOUD"}, "")
			}
			for j := range 2 {
				id := fmt.Sprint(len(st.Jobs) + 1)
				st.Jobs[id] = &model.Job{ID: id, Pool: p, Partition: p, State: model.JobRunning, NodesWanted: 2,
					Nodes: []string{model.NodeName(c, p, 2*j), model.NodeName(c, p, 2*j+1)}, Generation: 1, UpdatedAt: t0}
				view.Jobs = append(view.Jobs, model.SlurmJob{ID: id, State: "RUNNING", Partition: p, Nodes: st.Jobs[id].Nodes, NodeCount: 2})
			}
		}
		st.Slurm = view
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return m, view
}

// BenchmarkMemoryReconcile is what a chaos seed asks of the store per
// reconcile tick and Slurm snapshot (shared/apply, functions/reconcile):
// a read of the pool records and the Slurm view, a transaction over every
// pool that changes one node record, and a transaction that stores a new
// Slurm view. Run with -benchmem: allocations are most of its cost.
func BenchmarkMemoryReconcile(b *testing.B) {
	ctx := context.Background()
	m, view := benchState(b)
	node := model.NodeName("chaos", "a", 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		st, err := m.Read(ctx, store.Scope{Cluster: "chaos", AllPoolRecords: true, Slurm: true})
		if err != nil || st.Slurm == nil {
			b.Fatal(err)
		}
		err = m.Update(ctx, store.Scope{Cluster: "chaos", AllPools: true, Slurm: true, EventID: fmt.Sprint("tick-", i)}, func(st *model.State) error {
			n := *st.Nodes[node]
			n.MissCount = i % 2
			st.Nodes[node] = &n
			st.EventNote = []byte("note")
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		err = m.Update(ctx, store.Scope{Cluster: "chaos", Slurm: true, EventID: fmt.Sprint("snap-", i)}, func(st *model.State) error {
			v := *view
			v.TakenAt = v.TakenAt.Add(time.Duration(i+1) * time.Minute)
			st.Slurm = &v
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
