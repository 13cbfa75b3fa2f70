package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Distribution samples the functions log (shared/apply), one line each
// with jsonPayload.sample = the name and jsonPayload.value = seconds.
// deploy/metrics.tf defines a log-based distribution metric
// flexslurm_<name> over each.
const (
	SampleDecisionLatency = "decision_latency_seconds" // an event's arrival to its decision's last action; labels cluster, flow
)

// ExponentialBounds returns the finite bucket boundaries of a Cloud
// Monitoring distribution with exponential buckets: scale × growth^i for
// i = 0 … n, so that n finite buckets lie between an underflow and an
// overflow bucket
// (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/TypedValue#exponential).
func ExponentialBounds(scale, growth float64, n int) []float64 {
	out := make([]float64, n+1)
	for i := range out {
		out[i] = scale * math.Pow(growth, float64(i))
	}
	return out
}

// SampleBounds are the bucket boundaries of the samples' log-based
// metrics (deploy/metrics.tf: exponential_buckets, scale 0.01, growth
// factor 2, 24 finite buckets): 10 ms to about 46 hours.
var SampleBounds = ExponentialBounds(0.01, 2, 24)

// Histogram is one series of a distribution: the samples of one set of
// label values, counted in the buckets Bounds sets.
type Histogram struct {
	Labels [][2]string // label name and value, in LogSamples.Labels order
	// Counts[i] counts the samples at most Bounds[i] and above
	// Bounds[i-1]; Counts[len(Bounds)] those above every bound.
	Counts []uint64
	Sum    float64
	Count  uint64
}

func (h *Histogram) add(bounds []float64, v float64) {
	i, _ := slices.BinarySearch(bounds, v)
	h.Counts[i]++
	h.Sum += v
	h.Count++
}

// LogSamples reads the samples of one distribution from the functions'
// JSON log files as a log-based metric reads them from Cloud Logging: the
// lines whose sample field is Name, their value field, in a series for
// each value of the fields Labels names. The local system's functions
// write their lines to files: each Read goes on from where the last
// stopped. It is safe for concurrent use.
type LogSamples struct {
	Name   string
	Labels []string
	Bounds []float64 // SampleBounds when nil
	Files  []string  // a file not there yet is read once it is

	mu     sync.Mutex
	tails  map[string]*tail
	series map[string]*Histogram
}

// tail is how far a file was read: its offset and the start of a line
// not yet ended.
type tail struct {
	off     int64
	partial []byte
}

// maxLine bounds a log line kept while it is not yet ended; a longer
// line cannot be a sample line and is dropped.
const maxLine = 64 << 10

// Read reads what the files gained since the last Read and returns every
// series seen so far, ordered by label values. A file that shrank was
// started again (a new run): it is read from its start.
func (l *LogSamples) Read() ([]Histogram, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tails == nil {
		l.tails, l.series = map[string]*tail{}, map[string]*Histogram{}
	}
	var errs []error
	for _, f := range l.Files {
		if err := l.readFile(f); err != nil {
			errs = append(errs, err)
		}
	}
	keys := make([]string, 0, len(l.series))
	for k := range l.series {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]Histogram, 0, len(keys))
	for _, k := range keys {
		h := *l.series[k]
		h.Counts = slices.Clone(h.Counts)
		out = append(out, h)
	}
	return out, errors.Join(errs...)
}

func (l *LogSamples) readFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading samples: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reading samples: %w", err)
	}
	t := l.tails[path]
	if t == nil || info.Size() < t.off {
		t = &tail{}
		l.tails[path] = t
	}
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return fmt.Errorf("reading samples: %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, info.Size()-t.off))
	if err != nil {
		return fmt.Errorf("reading samples: %s: %w", path, err)
	}
	t.off += int64(len(data))
	data = append(t.partial, data...)
	end := bytes.LastIndexByte(data, '\n')
	t.partial = nil
	if rest := data[end+1:]; len(rest) <= maxLine {
		t.partial = slices.Clone(rest)
	}
	if end < 0 {
		return nil
	}
	marker := []byte(`"sample":"` + l.Name + `"`)
	for line := range bytes.Lines(data[:end+1]) {
		if bytes.Contains(line, marker) {
			l.sample(line)
		}
	}
	return nil
}

// sample counts one line; a line that is not a JSON object with a
// numeric value is not a sample (a log-based metric skips it likewise).
func (l *LogSamples) sample(line []byte) {
	var m map[string]any
	if json.Unmarshal(line, &m) != nil || m["sample"] != l.Name {
		return
	}
	v, ok := m["value"].(float64)
	if !ok {
		return
	}
	labels := make([][2]string, len(l.Labels))
	var key strings.Builder
	for i, name := range l.Labels {
		s, _ := m[name].(string)
		labels[i] = [2]string{name, s}
		key.WriteString(strconv.Quote(s))
	}
	h := l.series[key.String()]
	if h == nil {
		bounds := l.bounds()
		h = &Histogram{Labels: labels, Counts: make([]uint64, len(bounds)+1)}
		l.series[key.String()] = h
	}
	h.add(l.bounds(), v)
}

func (l *LogSamples) bounds() []float64 {
	if l.Bounds == nil {
		return SampleBounds
	}
	return l.Bounds
}

// WriteHistograms writes the series of the distribution flexslurm_<name>
// as a Prometheus histogram: cumulative _bucket{le} counts, _sum and
// _count (https://prometheus.io/docs/instrumenting/exposition_formats/),
// the form PromQL reads a Cloud Monitoring distribution in
// (https://cloud.google.com/monitoring/promql/promql-mapping).
func WriteHistograms(w io.Writer, name, help string, bounds []float64, series []Histogram) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s%s %s\n# TYPE %s%s histogram\n", Prefix, name, help, Prefix, name)
	for _, h := range series {
		var cum uint64
		for i, c := range h.Counts {
			cum += c
			le := "+Inf"
			if i < len(bounds) {
				le = strconv.FormatFloat(bounds[i], 'g', -1, 64)
			}
			fmt.Fprintf(&b, "%s%s_bucket%s %d\n", Prefix, name, labelString(append(slices.Clone(h.Labels), [2]string{"le", le})), cum)
		}
		fmt.Fprintf(&b, "%s%s_sum%s %g\n", Prefix, name, labelString(h.Labels), h.Sum)
		fmt.Fprintf(&b, "%s%s_count%s %d\n", Prefix, name, labelString(h.Labels), h.Count)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Backlog is how many messages a Pub/Sub subscription holds.
type Backlog struct {
	Subscription string // its id
	Messages     int
}

// UndeliveredMessages is the PromQL name of Pub/Sub's metric
// pubsub.googleapis.com/subscription/num_undelivered_messages
// (https://cloud.google.com/monitoring/promql/promql-mapping), which the
// dead-letter alert of deploy/metrics.tf watches on each
// <topic>-dead-letter subscription (label subscription_id).
const UndeliveredMessages = "pubsub_googleapis_com:subscription_num_undelivered_messages"

// WriteBacklogs writes each backlog as the gauge UndeliveredMessages
// {subscription_id}, so that the same PromQL query reads the local
// system's dead letters and a deployment's.
func WriteBacklogs(w io.Writer, backlogs []Backlog) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s Messages a subscription holds (here: the dead-letter subscriptions).\n# TYPE %s gauge\n", UndeliveredMessages, UndeliveredMessages)
	for _, bl := range backlogs {
		fmt.Fprintf(&b, "%s%s %d\n", UndeliveredMessages, labelString([][2]string{{"subscription_id", bl.Subscription}}), bl.Messages)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
