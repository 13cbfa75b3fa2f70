// Package metrics computes the gauges an operator alerts on from a
// cluster's state — nodes by pool and state, capacity requests queued and
// the age of the oldest, the breaker, a static pool below its minimum —
// and writes them, with counts of cluster events and recent capacity
// waits, in the Prometheus text format (the local system's /metrics).
//
// On Google Cloud the same names are log-based metrics (deploy/metrics.tf):
// the reconciler logs each gauge once per pass (LogGauges), one line per
// sample with jsonPayload.gauge = its name and jsonPayload.value.
//
// This package imports shared/model and shared/store's event type only.
package metrics

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Gauge names (the suffix of the log-based metric flexslurm_<name> and of
// the Prometheus metric flexslurm_<name>).
const (
	GaugeNodes           = "nodes"                      // labels state: requested, running, deleting
	GaugeQueuedRequests  = "queued_requests"            // resize requests waiting for capacity
	GaugeQueuedAge       = "queued_request_age_seconds" // age of the oldest queued request
	GaugeBreakerOpen     = "breaker_open"               // 1 while the pool's breaker is open
	GaugeStaticShortfall = "static_shortfall"           // static nodes missing below min_node_count
)

// Gauges lists every gauge name.
var Gauges = []string{GaugeNodes, GaugeQueuedRequests, GaugeQueuedAge, GaugeBreakerOpen, GaugeStaticShortfall}

// States are the node phases counted by GaugeNodes.
var States = []model.Phase{model.PhaseRequested, model.PhaseRunning, model.PhaseDeleting}

// Sample is one gauge value.
type Sample struct {
	Name    string
	Cluster string
	Pool    string
	State   string // GaugeNodes only
	Value   float64
}

// PoolGauges computes the gauges of every pool of st at now, in pool
// order. A pool's static shortfall is min_node_count minus its static
// nodes (model.NodeStatic) that run or whose make-before-break successor
// runs, never below zero.
func PoolGauges(st *model.State, now time.Time) []Sample {
	if st == nil || st.Cluster == nil {
		return nil
	}
	cluster := st.Cluster.ID
	var out []Sample
	for _, id := range slices.Sorted(maps.Keys(st.Pools)) {
		p := st.Pools[id]
		if p.Removed {
			continue
		}
		count := map[model.Phase]int{}
		requests := map[string]time.Time{}
		static := 0
		for _, n := range st.Nodes {
			if n.Pool != id {
				continue
			}
			count[n.Phase]++
			if n.Phase == model.PhaseRequested && n.ResizeRequest != "" {
				if t, ok := requests[n.ResizeRequest]; !ok || n.RequestedAt.Before(t) {
					requests[n.ResizeRequest] = n.RequestedAt
				}
			}
			if n.Kind == model.NodeStatic && n.Predecessor == "" {
				// A static slot is covered while its node runs, or the
				// successor taking its place does.
				succ := st.Nodes[n.Successor]
				if n.Phase == model.PhaseRunning || (succ != nil && succ.Phase == model.PhaseRunning) {
					static++
				}
			}
		}
		for _, s := range States {
			out = append(out, Sample{Name: GaugeNodes, Cluster: cluster, Pool: id, State: string(s), Value: float64(count[s])})
		}
		oldest := 0.0
		for _, t := range requests {
			if !t.IsZero() {
				oldest = max(oldest, now.Sub(t).Seconds())
			}
		}
		breaker := 0.0
		if !p.BreakerOpenedAt.IsZero() {
			breaker = 1
		}
		out = append(out,
			Sample{Name: GaugeQueuedRequests, Cluster: cluster, Pool: id, Value: float64(len(requests))},
			Sample{Name: GaugeQueuedAge, Cluster: cluster, Pool: id, Value: oldest},
			Sample{Name: GaugeBreakerOpen, Cluster: cluster, Pool: id, Value: breaker},
			Sample{Name: GaugeStaticShortfall, Cluster: cluster, Pool: id, Value: float64(max(0, p.MinNodes-static))},
		)
	}
	return out
}

// LogGauges logs each sample as one line (message "gauge", gauge, value,
// cluster, pool, state) for the log-based metrics of deploy/metrics.tf.
func LogGauges(log *slog.Logger, samples []Sample) {
	for _, s := range samples {
		args := []any{"gauge", s.Name, "value", s.Value, "cluster", s.Cluster, "pool", s.Pool}
		if s.State != "" {
			args = append(args, "state", s.State)
		}
		log.Info("gauge", args...)
	}
}

// Prefix is the prefix of every metric name.
const Prefix = "flexslurm_"

var help = map[string]string{
	GaugeNodes:           "Nodes of a pool by state (requested: waiting for capacity).",
	GaugeQueuedRequests:  "Resize requests of a pool waiting for capacity.",
	GaugeQueuedAge:       "Age of the pool's oldest queued resize request.",
	GaugeBreakerOpen:     "1 while the pool's provisioning breaker is open.",
	GaugeStaticShortfall: "Static nodes missing below the pool's min_node_count.",
}

// WritePrometheus writes samples, the event counts (by cluster, pool and
// type: the events kept, 30 days) and each pool's recent capacity waits
// (model.Pool.CapacityWaits) in the Prometheus text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
func WritePrometheus(w io.Writer, samples []Sample, events []store.ClusterEvent, pools []*model.Pool, clusterOf func(*model.Pool) string) error {
	var b strings.Builder
	for _, name := range Gauges {
		fmt.Fprintf(&b, "# HELP %s%s %s\n# TYPE %s%s gauge\n", Prefix, name, help[name], Prefix, name)
		for _, s := range samples {
			if s.Name != name {
				continue
			}
			labels := [][2]string{{"cluster", s.Cluster}, {"pool", s.Pool}}
			if s.State != "" {
				labels = append(labels, [2]string{"state", s.State})
			}
			fmt.Fprintf(&b, "%s%s%s %g\n", Prefix, name, labelString(labels), s.Value)
		}
	}
	counts := map[[3]string]int{}
	for _, e := range events {
		counts[[3]string{e.Cluster, e.Pool, e.Type}]++
	}
	keys := slices.Collect(maps.Keys(counts))
	sort.Slice(keys, func(i, j int) bool { return strings.Join(keys[i][:], "\x00") < strings.Join(keys[j][:], "\x00") })
	fmt.Fprintf(&b, "# HELP %scluster_events Cluster events kept (30 days), by type (docs/events.md).\n# TYPE %scluster_events counter\n", Prefix, Prefix)
	for _, k := range keys {
		fmt.Fprintf(&b, "%scluster_events_total%s %d\n", Prefix, labelString([][2]string{{"cluster", k[0]}, {"pool", k[1]}, {"type", k[2]}}), counts[k])
	}
	fmt.Fprintf(&b, "# HELP %scapacity_wait_seconds A pool's recent waits for capacity (request to registration).\n# TYPE %scapacity_wait_seconds summary\n", Prefix, Prefix)
	for _, p := range pools {
		if len(p.CapacityWaits) == 0 {
			continue
		}
		ws := slices.Clone(p.CapacityWaits)
		slices.Sort(ws)
		var sum int64
		for _, v := range ws {
			sum += v
		}
		base := [][2]string{{"cluster", clusterOf(p)}, {"pool", p.ID}}
		for _, q := range []float64{0.5, 0.9, 1} {
			i := min(len(ws)-1, int(q*float64(len(ws)-1)+0.5))
			fmt.Fprintf(&b, "%scapacity_wait_seconds%s %d\n", Prefix, labelString(append(slices.Clone(base), [2]string{"quantile", fmt.Sprint(q)})), ws[i])
		}
		fmt.Fprintf(&b, "%scapacity_wait_seconds_sum%s %d\n", Prefix, labelString(base), sum)
		fmt.Fprintf(&b, "%scapacity_wait_seconds_count%s %d\n", Prefix, labelString(base), len(ws))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func labelString(ls [][2]string) string {
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(l[1])
		parts = append(parts, l[0]+`="`+v+`"`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}
