package metrics

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

var now = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

func state() *model.State {
	st := model.NewState()
	st.Cluster = &model.Cluster{ID: "flexvm"}
	st.Pools["a3u"] = &model.Pool{ID: "a3u", MinNodes: 2, MaxNodes: 8, BreakerOpenedAt: now.Add(-time.Minute), CapacityWaits: []int64{60, 600, 120}}
	st.Pools["old"] = &model.Pool{ID: "old", Removed: true}
	add := func(n model.Node) { st.Nodes[n.Name] = &n }
	add(model.Node{Name: "flexvm-a3u-0", Pool: "a3u", Index: 0, Kind: model.NodeStatic, Phase: model.PhaseRunning, Successor: "flexvm-a3u-5"})
	add(model.Node{Name: "flexvm-a3u-5", Pool: "a3u", Index: 5, Kind: model.NodeStatic, Predecessor: "flexvm-a3u-0", Phase: model.PhaseRequested, ResizeRequest: "rr-5", RequestedAt: now.Add(-3 * time.Minute)})
	add(model.Node{Name: "flexvm-a3u-1", Pool: "a3u", Index: 1, Kind: model.NodeStatic, Phase: model.PhaseRequested, ResizeRequest: "rr-1", RequestedAt: now.Add(-10 * time.Minute)})
	add(model.Node{Name: "flexvm-a3u-2", Pool: "a3u", Index: 2, Kind: model.NodeDynamic, Phase: model.PhaseRequested, ResizeRequest: "rr-j7", RequestedAt: now.Add(-2 * time.Minute)})
	add(model.Node{Name: "flexvm-a3u-3", Pool: "a3u", Index: 3, Kind: model.NodeDynamic, Phase: model.PhaseRequested, ResizeRequest: "rr-j7", RequestedAt: now.Add(-2 * time.Minute)})
	add(model.Node{Name: "flexvm-a3u-4", Pool: "a3u", Index: 4, Kind: model.NodeDynamic, Phase: model.PhaseDeleting})
	return st
}

func value(t *testing.T, ss []Sample, name, state string) float64 {
	t.Helper()
	for _, s := range ss {
		if s.Name == name && s.State == state && s.Pool == "a3u" && s.Cluster == "flexvm" {
			return s.Value
		}
	}
	t.Fatalf("no sample %s %s", name, state)
	return 0
}

// TestPoolGauges: nodes by state, queued requests counted once each with
// the oldest's age, the breaker, and the static shortfall (a static node
// running or covered by its running successor counts; one waiting for
// capacity does not); a removed pool has none.
func TestPoolGauges(t *testing.T) {
	st := state()
	ss := PoolGauges(st, now)
	for _, c := range []struct {
		name, state string
		want        float64
	}{
		{GaugeNodes, "requested", 4}, {GaugeNodes, "running", 1}, {GaugeNodes, "deleting", 1},
		{GaugeQueuedRequests, "", 3}, {GaugeQueuedAge, "", 600}, {GaugeBreakerOpen, "", 1}, {GaugeStaticShortfall, "", 1},
	} {
		if got := value(t, ss, c.name, c.state); got != c.want {
			t.Errorf("%s %s = %g, want %g", c.name, c.state, got, c.want)
		}
	}
	for _, s := range ss {
		if s.Pool == "old" {
			t.Errorf("a removed pool has gauges: %+v", s)
		}
	}
	// The static node ends before its successor runs: two missing.
	st.Nodes["flexvm-a3u-0"].Phase = model.PhaseReleased
	if got := value(t, PoolGauges(st, now), GaugeStaticShortfall, ""); got != 2 {
		t.Errorf("shortfall with no static node running: %g, want 2", got)
	}
	// Its successor runs: one covered again.
	st.Nodes["flexvm-a3u-5"].Phase = model.PhaseRunning
	if got := value(t, PoolGauges(st, now), GaugeStaticShortfall, ""); got != 1 {
		t.Errorf("shortfall with the successor running: %g, want 1", got)
	}
}

func TestWritePrometheus(t *testing.T) {
	st := state()
	evs := []store.ClusterEvent{
		{Cluster: "flexvm", Pool: "a3u", Type: "STOCKOUT"},
		{Cluster: "flexvm", Pool: "a3u", Type: "STOCKOUT"},
		{Cluster: "flexvm", Pool: "a3u", Type: "REPAIR_STARTED"},
	}
	var b bytes.Buffer
	if err := WritePrometheus(&b, PoolGauges(st, now), evs, []*model.Pool{st.Pools["a3u"]}, func(*model.Pool) string { return "flexvm" }); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# TYPE flexslurm_nodes gauge\n",
		`flexslurm_nodes{cluster="flexvm",pool="a3u",state="requested"} 4` + "\n",
		`flexslurm_static_shortfall{cluster="flexvm",pool="a3u"} 1` + "\n",
		`flexslurm_queued_request_age_seconds{cluster="flexvm",pool="a3u"} 600` + "\n",
		`flexslurm_cluster_events_total{cluster="flexvm",pool="a3u",type="STOCKOUT"} 2` + "\n",
		`flexslurm_capacity_wait_seconds{cluster="flexvm",pool="a3u",quantile="0.5"} 120` + "\n",
		`flexslurm_capacity_wait_seconds{cluster="flexvm",pool="a3u",quantile="1"} 600` + "\n",
		`flexslurm_capacity_wait_seconds_count{cluster="flexvm",pool="a3u"} 3` + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	// Every sample line is NAME{labels} VALUE, under a TYPE line of its family.
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.HasPrefix(line, Prefix) || strings.Count(line, "{") != 1 || !strings.Contains(line, "} ") {
			t.Errorf("malformed sample line %q", line)
		}
	}
}
