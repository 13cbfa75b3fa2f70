package store

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/model/modeltest"
)

// TestEqualMatchesDeepEqual: the equality applyDiff uses for each kind of
// record says what reflect.DeepEqual says, on two records filled alike
// (every field set, two entries in each slice and map, by reflection) and
// on two zero records, and on every record made from one of them by
// changing one thing: a field (each field reachable, so a field added to a
// record and not compared fails here), a slice or map set to nil or to
// empty, shortened, or given another key, a pointer set to nil or to a
// new value, a time moved by a nanosecond or to another location.
func TestEqualMatchesDeepEqual(t *testing.T) {
	check(t, "Cluster", clusterEqual)
	check(t, "Pool", poolEqual)
	check(t, "Node", nodeEqual)
	check(t, "Job", jobEqual)
	check(t, "SlurmView", slurmViewEqual)
}

func check[T any](t *testing.T, name string, eq func(a, b *T) bool) {
	t.Helper()
	for _, base := range []struct {
		name string
		make func() *T
	}{
		{"filled", func() *T { v := new(T); modeltest.Fill(v); return v }},
		{"zero", func() *T { return new(T) }},
	} {
		a := base.make()
		if !eq(a, base.make()) || !eq(a, a) {
			t.Errorf("%s, %s: two records made alike are not equal", name, base.name)
		}
		n := 0
		for i := 1; ; i++ {
			b := base.make()
			k := i
			what, ok := mutate(reflect.ValueOf(b).Elem(), &k, name)
			if !ok {
				break
			}
			n++
			deep := reflect.DeepEqual(a, b)
			if got, back := eq(a, b), eq(b, a); got != deep || back != deep {
				t.Errorf("%s, %s, %s: equal says %v (and %v the other way), reflect.DeepEqual %v", name, base.name, what, got, back, deep)
			}
		}
		// Every field is changed at least once, by reflection.
		if min := reflect.TypeFor[T]().NumField(); n < min {
			t.Errorf("%s, %s: %d changes tried, fewer than its %d fields", name, base.name, n, min)
		}
	}
}

// TestSameTime: times equal for reflect.DeepEqual are the same to
// sameTime, including equal locations held apart.
func TestSameTime(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	a, b := at.In(time.FixedZone("X", 3600)), at.In(time.FixedZone("X", 3600))
	for _, c := range []struct {
		name string
		a, b time.Time
	}{
		{"same", at, at},
		{"equal locations held apart", a, b},
		{"other location", at, a},
		{"a nanosecond later", at, at.Add(1)},
		{"with a monotonic reading", time.Now(), time.Now().Round(0)},
	} {
		if got, want := sameTime(c.a, c.b), reflect.DeepEqual(c.a, c.b); got != want {
			t.Errorf("%s: sameTime %v, reflect.DeepEqual %v", c.name, got, want)
		}
	}
}

// mutate makes the k-th change (counting from 1) of the changes it finds
// walking v in a fixed order, and says what it changed; false when v
// offers fewer than k.
func mutate(v reflect.Value, k *int, path string) (string, bool) {
	point := func() bool { *k--; return *k == 0 }
	if v.Type() == timeType {
		t := v.Interface().(time.Time)
		if point() {
			v.Set(reflect.ValueOf(t.Add(1)))
			return path + " +1ns", true
		}
		if point() {
			v.Set(reflect.ValueOf(t.In(time.FixedZone("Y", 0))))
			return path + " in another location", true
		}
		return "", false
	}
	switch v.Kind() {
	case reflect.String:
		if point() {
			v.SetString(v.String() + "x")
			return path, true
		}
	case reflect.Bool:
		if point() {
			v.SetBool(!v.Bool())
			return path, true
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if point() {
			v.SetInt(v.Int() + 1)
			return path, true
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if point() {
			v.SetUint(v.Uint() + 1)
			return path, true
		}
	case reflect.Pointer:
		if point() {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
				return path + " set", true
			}
			v.Set(reflect.Zero(v.Type()))
			return path + " nil", true
		}
		if !v.IsNil() {
			return mutate(v.Elem(), k, path)
		}
	case reflect.Slice:
		if point() {
			if v.IsNil() {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
				return path + " empty", true
			}
			v.Set(reflect.Zero(v.Type()))
			return path + " nil", true
		}
		if v.Len() > 0 {
			if point() {
				v.Set(v.Slice(0, v.Len()-1))
				return path + " shortened", true
			}
			if point() {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
				return path + " emptied", true
			}
		}
		for i := range v.Len() {
			if what, ok := mutate(v.Index(i), k, fmt.Sprintf("%s[%d]", path, i)); ok {
				return what, true
			}
		}
	case reflect.Map:
		if point() {
			if v.IsNil() {
				v.Set(reflect.MakeMap(v.Type()))
				return path + " empty", true
			}
			v.Set(reflect.Zero(v.Type()))
			return path + " nil", true
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		if len(keys) > 0 {
			if point() {
				v.SetMapIndex(keys[0], reflect.Value{})
				return path + " one key fewer", true
			}
			if point() {
				e := v.MapIndex(keys[0])
				v.SetMapIndex(keys[0], reflect.Value{})
				v.SetMapIndex(reflect.ValueOf(keys[0].String()+"x").Convert(v.Type().Key()), e)
				return path + " a key renamed", true
			}
			if point() {
				v.Set(reflect.MakeMap(v.Type()))
				return path + " emptied", true
			}
		}
		for _, key := range keys {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(key))
			if what, ok := mutate(e, k, fmt.Sprintf("%s[%v]", path, key)); ok {
				v.SetMapIndex(key, e)
				return what, true
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				if what, ok := mutate(f, k, path+"."+v.Type().Field(i).Name); ok {
					return what, true
				}
			}
		}
	}
	return "", false
}

// TestApplyDiffWritesChangedRecords: a transaction writes the records it
// changed and only those, whatever kind.
func TestApplyDiffWritesChangedRecords(t *testing.T) {
	var full model.State
	modeltest.Fill(&full)
	full.EventNote = nil
	before := full.Clone()
	if n := applyDiff(&full, &sharedCopy{}, before, before.CloneEditable()); n != 0 {
		t.Fatalf("unchanged state, Slurm view and spec shared: %d records written", n)
	}
	after := before.Clone()
	if n := applyDiff(&full, &sharedCopy{}, before, after); n != 0 {
		t.Fatalf("unchanged state: %d records written", n)
	}
	for id := range after.Pools {
		after.Pools[id].CapacityWaits = append(after.Pools[id].CapacityWaits, 1)
		break
	}
	for id := range after.Jobs {
		after.Jobs[id].Nodes[0] += "x"
		break
	}
	for name, n := range after.Slurm.Nodes {
		n.Flags = append(n.Flags, "DRAIN")
		after.Slurm.Nodes[name] = n
		break
	}
	after.Cluster.Spec = append(after.Cluster.Spec, ' ')
	kept := &sharedCopy{}
	if n := applyDiff(&full, kept, before, after); n != 4 {
		t.Errorf("a pool, a job, the Slurm view and the cluster changed: %d records written, want 4", n)
	}
	if !reflect.DeepEqual(full.Slurm, after.Slurm) || !reflect.DeepEqual(full.Cluster, after.Cluster) {
		t.Errorf("the changed records were not stored")
	}
	if !reflect.DeepEqual(kept.slurm, after.Slurm) || !reflect.DeepEqual(kept.spec, after.Cluster.Spec) ||
		!reflect.DeepEqual(kept.poolImages, after.Cluster.Node.PoolImages) {
		t.Errorf("no private copy was kept of the Slurm view, spec and pool images stored")
	}
	if kept.slurm == full.Slurm || &kept.spec[0] == &full.Cluster.Spec[0] {
		t.Errorf("the private copies are the records stored")
	}
}
