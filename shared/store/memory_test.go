package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
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
		st.Slurm = &model.SlurmView{}
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

// TestMemoryDetectsSharedEdits: Memory shares the Slurm view and the
// cluster record's Spec and Node.PoolImages with the states it hands out
// (they are replaced, never edited in place); an edit in place of any of
// them, from a transaction's fn or from a state Read returned, makes the
// next transaction panic naming what was edited, so that a writer that
// breaks the contract fails its tests (every test and simulation that
// runs the functions over a Memory).
func TestMemoryDetectsSharedEdits(t *testing.T) {
	ctx := context.Background()
	c := storetest.Cluster
	scope := store.Scope{Cluster: c, Slurm: true}
	n0 := model.NodeName(c, "a", 0)
	fresh := func(t *testing.T) *store.Memory {
		m := store.NewMemory(nil)
		if err := m.Update(ctx, scope, func(st *model.State) error {
			st.Cluster = &model.Cluster{ID: c, Spec: []byte(`{}`), Node: nodeconfig.Settings{PoolImages: map[string]string{"a": "img"}}}
			st.Slurm = &model.SlurmView{Version: model.SlurmViewVersion,
				Nodes: map[string]model.SlurmNode{n0: slurmstate.ParseNode(n0, []string{"IDLE", "CLOUD"}, "")},
				Jobs:  []model.SlurmJob{{ID: "7", Nodes: []string{n0}}},
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	edits := map[string]func(st *model.State){
		"view field":      func(st *model.State) { st.Slurm.Version++ },
		"view node":       func(st *model.State) { st.Slurm.Nodes[n0] = model.SlurmNode{} },
		"view node flags": func(st *model.State) { st.Slurm.Nodes[n0].Flags[0] = "DRAIN" },
		"view job nodes":  func(st *model.State) { st.Slurm.Jobs[0].Nodes[0] = "x" },
		"spec":            func(st *model.State) { st.Cluster.Spec[0] = '[' },
		"pool images":     func(st *model.State) { st.Cluster.Node.PoolImages["a"] = "other" },
	}
	for name, edit := range edits {
		for _, where := range []string{"fn", "read"} {
			t.Run(name+" in "+where, func(t *testing.T) {
				m := fresh(t)
				if where == "read" {
					st, err := m.Read(ctx, scope)
					if err != nil {
						t.Fatal(err)
					}
					edit(st)
				}
				var msg string
				func() {
					defer func() { msg = fmt.Sprint(recover()) }()
					_ = m.Update(ctx, scope, func(st *model.State) error {
						if where == "fn" {
							edit(st)
						}
						return nil
					})
				}()
				if !strings.Contains(msg, "edited in place") || !strings.Contains(msg, "cluster "+c) {
					t.Errorf("the edit in place was not detected: recovered %q", msg)
				}
			})
		}
	}
	// The view a transaction stored is the store's once written: an edit
	// of it afterwards is detected too.
	t.Run("stored view edited after the transaction", func(t *testing.T) {
		m := fresh(t)
		v := &model.SlurmView{Version: model.SlurmViewVersion, Jobs: []model.SlurmJob{{ID: "8"}}}
		if err := m.Update(ctx, scope, func(st *model.State) error {
			st.Slurm = v
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		v.Jobs[0].ID = "9"
		var msg string
		func() {
			defer func() { msg = fmt.Sprint(recover()) }()
			_ = m.Update(ctx, scope, func(st *model.State) error { return nil })
		}()
		if !strings.Contains(msg, "Slurm view of cluster "+c+" was edited in place") {
			t.Errorf("the edit in place was not detected: recovered %q", msg)
		}
	})
	// Replacing them is what a writer does, and passes.
	m := fresh(t)
	st, err := m.Read(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	st.Slurm, st.Cluster.Spec, st.Cluster.Node.PoolImages = &model.SlurmView{}, []byte("x"), nil
	if err := m.Update(ctx, scope, func(st *model.State) error {
		st.Slurm = &model.SlurmView{Version: 9}
		st.Cluster = &model.Cluster{ID: c, Spec: []byte(`{"v":2}`)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.Update(ctx, scope, func(st *model.State) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Read(ctx, scope); err != nil || got.Slurm.Version != 9 || string(got.Cluster.Spec) != `{"v":2}` {
		t.Errorf("after replacing: %+v, %v", got, err)
	}
}
