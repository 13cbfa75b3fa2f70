package apply_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
)

func storedEvents(t *testing.T, l store.EventLog, cluster string) []store.ClusterEvent {
	t.Helper()
	evs, err := l.Events(context.Background(), cluster, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func types(evs []store.ClusterEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+" "+e.Node)
	}
	return out
}

// TestProcessStoresClusterEvents: the cluster's creation stores the static
// node's VM_REQUESTED with its cluster, VM, TTL; a redelivery stores
// nothing more; a refused resize request's follow-up decision stores its
// failure, backoff and stockout.
func TestProcessStoresClusterEvents(t *testing.T) {
	h, rec, c, ctx := setup(t)
	log := h.Store.(store.EventLog)
	evs := storedEvents(t, log, c.ID)
	if !slices.Contains(types(evs), "VM_REQUESTED flexvm-a3u-0") {
		t.Fatalf("after the cluster was applied: events %q", types(evs))
	}
	e := evs[0]
	if e.Cluster != c.ID || e.VM != "flexvm-a3u-0-g1" || e.Pool != "a3u" || e.Message == "" || !e.ExpireAt.Equal(e.Time.Add(store.ClusterEventTTL)) {
		t.Errorf("stored event %+v", e)
	}

	// The same decision delivered again stores nothing new.
	noop := apply.Input{Flow: "test", EventID: "e-dup", Scope: store.Scope{Cluster: c.ID, AllPools: true},
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			n := *st.Nodes["flexvm-a3u-0"]
			n.Phase, n.TerminationTime = model.PhaseRunning, now.Add(time.Hour)
			return []plan.Action{plan.PutNode{Node: n, Reason: "test"}}, nil
		}}
	for range 2 {
		if _, err := h.Runner.Process(ctx, noop); err != nil {
			t.Fatal(err)
		}
	}
	if got := types(storedEvents(t, log, c.ID)); len(got) != len(evs)+1 || !slices.Contains(got, "VM_RUNNING flexvm-a3u-0") {
		t.Fatalf("after one decision delivered twice: %q", got)
	}

	// A stock-out: the follow-up transaction's events are stored too.
	mig := naming.RequestMIG("flexvm", "a3u", "rr-flexvm-a3u-2-g1")
	create := plan.CreateResizeRequest{Pool: "a3u", MIG: mig, Name: "rr-flexvm-a3u-2-g1", VMs: []string{"flexvm-a3u-2-g1"}, RunDuration: time.Hour,
		RequestID: naming.CreateResizeRequestID(mig, "rr-flexvm-a3u-2-g1"), Reason: "test"}
	rec.fail["CreateResizeRequest"] = &gce.OperationError{Op: "op-1", Code: "ZONE_RESOURCE_POOL_EXHAUSTED", HTTPStatus: 503}
	if _, err := h.Runner.Process(ctx, apply.Input{Flow: "test", EventID: "e-so", Scope: store.Scope{Cluster: c.ID, AllPools: true}, Decide: decide(create)}); err != nil {
		t.Fatal(err)
	}
	got := types(storedEvents(t, log, c.ID))
	for _, want := range []string{"POOL_BACKOFF ", "STOCKOUT "} {
		if !slices.Contains(got, want) {
			t.Errorf("after a stock-out: no %q in %q", want, got)
		}
	}
}

type failingLog struct{ calls int }

func (f *failingLog) AddEvents(context.Context, []store.ClusterEvent) error {
	f.calls++
	return errors.New("firestore: unavailable")
}
func (f *failingLog) Events(context.Context, string, store.EventFilter) ([]store.ClusterEvent, error) {
	return nil, nil
}

// TestEventStoreErrorFailsNothing: events that cannot be stored are
// logged, and the decision stands and is not redelivered.
func TestEventStoreErrorFailsNothing(t *testing.T) {
	h, _, c, ctx := setup(t)
	d := h.Runner.Deps()
	fl := &failingLog{}
	d.Events = fl
	r := apply.New(d)
	res, err := r.Process(ctx, apply.Input{Flow: "test", EventID: "e-1", Scope: store.Scope{Cluster: c.ID, AllPools: true},
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			n := *st.Nodes["flexvm-a3u-0"]
			n.Phase, n.TerminationTime = model.PhaseRunning, now.Add(time.Hour)
			return []plan.Action{plan.PutNode{Node: n, Reason: "test"}}, nil
		}})
	if err != nil || res.Rejected != nil {
		t.Fatalf("Process: %v %v", err, res.Rejected)
	}
	if fl.calls != 1 {
		t.Fatalf("the event log was asked %d times, want 1", fl.calls)
	}
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Nodes["flexvm-a3u-0"].Phase != model.PhaseRunning {
		t.Errorf("the decision was not committed: %s", st.Nodes["flexvm-a3u-0"].Phase)
	}
}

// TestReconcilePassLogsGauges: a reconcile pass over every pool logs the
// cluster's gauges and its decision's latency, and a VM seen running logs
// its capacity wait, as deploy/metrics.tf's log-based metrics read them.
func TestReconcilePassLogsGauges(t *testing.T) {
	h, _, c, ctx := setup(t)
	var buf bytes.Buffer
	d := h.Runner.Deps()
	d.Log = logx.New(&buf, slog.LevelInfo)
	r := apply.New(d)
	_, err := r.Process(ctx, apply.Input{Flow: "flex.reconcile", EventID: "tick-1", Scope: store.Scope{Cluster: c.ID, AllPools: true},
		Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
			n := *st.Nodes["flexvm-a3u-0"]
			n.Phase, n.RunningAt, n.TerminationTime = model.PhaseRunning, n.RequestedAt.Add(90*time.Second), now.Add(time.Hour)
			return []plan.Action{plan.PutNode{Node: n, Reason: "test"}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]map[string]any{}
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %s: %v", line, err)
		}
		switch {
		case m["gauge"] != nil:
			seen[fmt.Sprint("gauge ", m["gauge"], " ", m["state"])] = m
		case m["cluster_event"] != nil:
			seen[fmt.Sprint("event ", m["cluster_event"])] = m
		case m["sample"] != nil:
			seen[fmt.Sprint("sample ", m["sample"])] = m
		}
	}
	for key, want := range map[string]float64{"gauge nodes running": 1, "gauge static_shortfall <nil>": 0, "gauge queued_requests <nil>": 0} {
		if m, ok := seen[key]; !ok || m["value"] != want || m["pool"] != "a3u" || m["cluster"] != c.ID {
			t.Errorf("%s: logged %v, want value %g", key, m, want)
		}
	}
	if m := seen["event VM_RUNNING"]; m == nil || m["node"] != "flexvm-a3u-0" || m["cluster"] != c.ID {
		t.Errorf("VM_RUNNING logged %v", m)
	}
	if m := seen["sample capacity_wait_seconds"]; m == nil || m["value"] != 90.0 || m["pool"] != "a3u" {
		t.Errorf("capacity wait logged %v, want 90 s", m)
	}
	if m := seen["sample decision_latency_seconds"]; m == nil || m["value"].(float64) <= 0 {
		t.Errorf("decision latency logged %v", m)
	}
}
