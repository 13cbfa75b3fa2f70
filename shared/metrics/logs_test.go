package metrics

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/logx"
)

// TestSampleBoundsAreMetricsTF: the local histogram's buckets are those of
// the log-based distribution metrics (scale 0.01 s, factor 2, 24 finite
// buckets): 25 boundaries from 10 ms to 167772.16 s.
func TestSampleBoundsAreMetricsTF(t *testing.T) {
	if len(SampleBounds) != 25 || SampleBounds[0] != 0.01 || SampleBounds[1] != 0.02 || SampleBounds[24] != 167772.16 {
		t.Fatalf("SampleBounds = %v", SampleBounds)
	}
}

// TestLogSamples: the sample lines a function logs (through the JSON
// logger the functions use) are read from its log file by name and
// labelled by cluster and flow; other lines, other samples and a line not
// yet ended are not counted; a later Read adds only what the file gained,
// the ended line included; a file written again from its start (a new
// run) is read from its start; a file not there yet is no error.
func TestLogSamples(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ScaleUp.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log := logx.New(f, slog.LevelInfo)
	log.Info("decision done", "flow", "flex.scaleup", "cluster", "flexvm", "sample", SampleDecisionLatency, "value", 0.015625, "retry", false)
	log.Info("decision done", "flow", "flex.scaleup", "cluster", "flexvm", "sample", SampleDecisionLatency, "value", 3.0, "retry", false)
	log.Info("decision done", "flow", "flex.scaleup", "cluster", "other", "sample", SampleDecisionLatency, "value", 1e9, "retry", true)
	log.Info("capacity wait", "cluster", "flexvm", "sample", "capacity_wait_seconds", "value", 90.0)
	log.Info("event rejected", "cluster", "flexvm", "reason", `"sample":"decision_latency_seconds"`)
	f.WriteString(`{"message":"decision done","flow":"flex.scaleup","cluster":"flexvm","sample":"decision_latency_seconds","value":0.5`)

	l := &LogSamples{Name: SampleDecisionLatency, Labels: []string{"cluster", "flow"}, Files: []string{path, filepath.Join(dir, "Expiry.log")}}
	hs, err := l.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 {
		t.Fatalf("series %+v, want flexvm's and other's", hs)
	}
	fv, other := hs[0], hs[1]
	if fv.Labels[0] != [2]string{"cluster", "flexvm"} || fv.Labels[1] != [2]string{"flow", "flex.scaleup"} || fv.Count != 2 || fv.Sum != 3.015625 {
		t.Errorf("flexvm series %+v, want 2 samples summing to 3.015625 s", fv)
	}
	// 0.015625 s lies in (0.01, 0.02], 3 s in (2.56, 5.12]; 1e9 s above every bound.
	if fv.Counts[1] != 1 || fv.Counts[9] != 1 || other.Counts[len(SampleBounds)] != 1 {
		t.Errorf("buckets: flexvm %v, other %v", fv.Counts, other.Counts)
	}

	f.WriteString(",\"retry\":false}\n")
	log.Info("decision done", "flow", "flex.scaleup", "cluster", "flexvm", "sample", SampleDecisionLatency, "value", 0.5, "retry", false)
	if hs, _ = l.Read(); hs[0].Count != 4 || hs[0].Sum != 4.015625 {
		t.Errorf("after two more samples (one ended now): %+v, want 4 summing to 4.015625 s", hs[0])
	}

	// A new run writes the file again from its start.
	if err := os.WriteFile(path, []byte(`{"sample":"decision_latency_seconds","cluster":"flexvm","flow":"flex.scaleup","value":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if hs, _ = l.Read(); hs[0].Count != 5 {
		t.Errorf("after the file was started again: %+v, want its one sample added", hs[0])
	}
}

// TestWriteHistogramsAndBacklogs: a series is written as a Prometheus
// histogram (cumulative buckets ending in +Inf = the count, _sum,
// _count), and each backlog under Pub/Sub's PromQL metric name with its
// subscription_id.
func TestWriteHistogramsAndBacklogs(t *testing.T) {
	bounds := []float64{0.01, 0.02, 0.04}
	h := Histogram{Labels: [][2]string{{"cluster", "flexvm"}, {"flow", "flex.repair"}}, Counts: make([]uint64, 4)}
	for _, v := range []float64{0.0078125, 0.03125, 0.03125, 8} {
		h.add(bounds, v)
	}
	var b bytes.Buffer
	if err := WriteHistograms(&b, SampleDecisionLatency, "help.", bounds, []Histogram{h}); err != nil {
		t.Fatal(err)
	}
	if err := WriteBacklogs(&b, []Backlog{{Subscription: "job-pending-dead-letter", Messages: 2}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# TYPE flexslurm_decision_latency_seconds histogram",
		`flexslurm_decision_latency_seconds_bucket{cluster="flexvm",flow="flex.repair",le="0.01"} 1`,
		`flexslurm_decision_latency_seconds_bucket{cluster="flexvm",flow="flex.repair",le="0.02"} 1`,
		`flexslurm_decision_latency_seconds_bucket{cluster="flexvm",flow="flex.repair",le="0.04"} 3`,
		`flexslurm_decision_latency_seconds_bucket{cluster="flexvm",flow="flex.repair",le="+Inf"} 4`,
		`flexslurm_decision_latency_seconds_sum{cluster="flexvm",flow="flex.repair"} 8.0703125`,
		`flexslurm_decision_latency_seconds_count{cluster="flexvm",flow="flex.repair"} 4`,
		"# TYPE pubsub_googleapis_com:subscription_num_undelivered_messages gauge",
		`pubsub_googleapis_com:subscription_num_undelivered_messages{subscription_id="job-pending-dead-letter"} 2`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}
