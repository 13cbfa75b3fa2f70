package store_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
	"github.com/flexslurm/flexslurm/shared/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t,
		func(*testing.T) store.Store { return store.NewMemory(nil) },
		storetest.WithWriteCounter(func(s store.Store) int64 { return int64(s.(*store.Memory).Writes) }),
	)
}

// TestMemoryView: a view holds what Read returns for the same scope, and
// stays as it was when later Updates change, add and delete records.
func TestMemoryView(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory(nil)
	c := storetest.Cluster
	scope := store.Scope{Cluster: c, AllPools: true, Slurm: true}
	if err := m.Update(ctx, scope, func(st *model.State) error {
		st.Cluster = &model.Cluster{ID: c, Spec: []byte(`{}`)}
		st.Pools["a"] = &model.Pool{ID: "a", CapacityWaits: []int64{1}}
		for i := range 2 {
			n := model.NodeName(c, "a", i)
			st.Nodes[n] = &model.Node{Name: n, Pool: "a", Index: i, Phase: model.PhaseRunning}
		}
		st.Jobs["7"] = &model.Job{ID: "7", Pool: "a", State: model.JobRunning, Nodes: []string{model.NodeName(c, "a", 0)}}
		st.Slurm = &model.SlurmView{Version: model.SlurmViewVersion}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	read, err := m.Read(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	view, err := m.View(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(read, view); d != "" {
		t.Fatalf("view differs from Read (-read +view):\n%s", d)
	}
	if err := m.Update(ctx, scope, func(st *model.State) error {
		st.Cluster.Spec = []byte(`{"v":2}`)
		st.Pools["a"].CapacityWaits[0] = 2
		st.Nodes[model.NodeName(c, "a", 0)].Phase = model.PhaseDeleting
		delete(st.Nodes, model.NodeName(c, "a", 1))
		st.Jobs["7"].Nodes[0] = "x"
		st.Jobs["8"] = &model.Job{ID: "8", Pool: "a", State: model.JobPending}
		st.Slurm.Version = 0
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(read, view); d != "" {
		t.Errorf("a later Update changed the view (-before +view):\n%s", d)
	}
	after, err := m.View(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if after.Nodes[model.NodeName(c, "a", 0)].Phase != model.PhaseDeleting || len(after.Nodes) != 1 || after.Jobs["8"] == nil {
		t.Errorf("a new view does not show the Update: %+v", after)
	}
	if none, err := m.View(ctx, store.Scope{Cluster: "other"}); err != nil || len(none.Nodes) != 0 || none.Cluster != nil {
		t.Errorf("view of an unknown cluster: %+v, %v", none, err)
	}
}
