package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/store"
)

// eventLogContract holds an EventLog to what the API and the CLI rely on:
// a cluster's events in time order, filtered by node, job and type, paged
// by the last id, other clusters' never listed, an event stored twice
// listed once.
func eventLogContract(t *testing.T, l store.EventLog, now time.Time) {
	t.Helper()
	ctx := context.Background()
	t0 := now.Add(-time.Hour).Truncate(time.Second)
	mk := func(cluster string, at time.Duration, src string, i int, typ, node, job string) store.ClusterEvent {
		tm := t0.Add(at)
		return store.ClusterEvent{ID: store.ClusterEventID(cluster, tm, src, i), Cluster: cluster, Type: typ, Time: tm,
			Pool: "a3u", Node: node, Job: job, Message: typ + " " + node, ExpireAt: tm.Add(store.ClusterEventTTL)}
	}
	evs := []store.ClusterEvent{
		mk("flexvm", 2*time.Second, "e2", 0, "VM_RUNNING", "flexvm-a3u-0", ""),
		mk("flexvm", time.Second, "e1", 0, "VM_REQUESTED", "flexvm-a3u-0", ""),
		mk("flexvm", time.Second, "e1", 1, "VM_REQUESTED", "flexvm-a3u-1", "7"),
		mk("flexvm", 3*time.Second, "e3", 0, "VM_EXPIRED", "flexvm-a3u-0", ""),
		mk("other", time.Second, "e1", 0, "VM_REQUESTED", "other-a3u-0", ""),
	}
	if err := l.AddEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := l.AddEvents(ctx, evs[:1]); err != nil { // a repeat
		t.Fatal(err)
	}
	list := func(f store.EventFilter) []string {
		t.Helper()
		got, err := l.Events(ctx, "flexvm", f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range got {
			out = append(out, e.Message)
		}
		return out
	}
	same := func(name string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: got %q, want %q", name, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: got %q, want %q", name, got, want)
			}
		}
	}
	same("all", list(store.EventFilter{}),
		"VM_REQUESTED flexvm-a3u-0", "VM_REQUESTED flexvm-a3u-1", "VM_RUNNING flexvm-a3u-0", "VM_EXPIRED flexvm-a3u-0")
	same("node", list(store.EventFilter{Node: "flexvm-a3u-0"}), "VM_REQUESTED flexvm-a3u-0", "VM_RUNNING flexvm-a3u-0", "VM_EXPIRED flexvm-a3u-0")
	same("job", list(store.EventFilter{Job: "7"}), "VM_REQUESTED flexvm-a3u-1")
	same("type", list(store.EventFilter{Type: "VM_REQUESTED"}), "VM_REQUESTED flexvm-a3u-0", "VM_REQUESTED flexvm-a3u-1")
	same("node and type", list(store.EventFilter{Node: "flexvm-a3u-0", Type: "VM_EXPIRED"}), "VM_EXPIRED flexvm-a3u-0")
	page, err := l.Events(ctx, "flexvm", store.EventFilter{Limit: 2})
	if err != nil || len(page) != 2 {
		t.Fatalf("first page: %v %v", page, err)
	}
	same("second page", list(store.EventFilter{After: page[1].ID, Limit: 2}), "VM_RUNNING flexvm-a3u-0", "VM_EXPIRED flexvm-a3u-0")
	same("past the end", list(store.EventFilter{After: evs[3].ID}))
	if err := l.AddEvents(ctx, []store.ClusterEvent{{ID: "x-1", Cluster: "flexvm"}}); err == nil {
		t.Error("an event whose id is not its cluster's was stored")
	}
}

func TestMemoryEventLog(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	m := store.NewMemory(func() time.Time { return now })
	eventLogContract(t, m, now)
	// Past their TTL, events are gone.
	later := store.NewMemory(func() time.Time { return now.Add(store.ClusterEventTTL + time.Hour) })
	e := store.ClusterEvent{ID: store.ClusterEventID("flexvm", now, "e", 0), Cluster: "flexvm", Type: "VM_RUNNING", Time: now, ExpireAt: now.Add(store.ClusterEventTTL)}
	if err := later.AddEvents(context.Background(), []store.ClusterEvent{e}); err != nil {
		t.Fatal(err)
	}
	if got, _ := later.Events(context.Background(), "flexvm", store.EventFilter{}); len(got) != 0 {
		t.Errorf("an expired event is listed: %+v", got)
	}
}

func TestFirestoreEventLog(t *testing.T) {
	c := emulatorClient(t)
	eventLogContract(t, newEmulatorStore(t, c), time.Now())
}
