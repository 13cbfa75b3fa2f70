package expirybench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMinMedianMax(t *testing.T) {
	for _, tt := range []struct {
		xs          []float64
		lo, med, hi float64
	}{
		{nil, 0, 0, 0},
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 1, 3, 5},
		{[]float64{4, 1, 3, 2}, 1, 2.5, 4},
	} {
		lo, med, hi := MinMedianMax(tt.xs)
		if diff := cmp.Diff([]float64{tt.lo, tt.med, tt.hi}, []float64{lo, med, hi}); diff != "" {
			t.Errorf("MinMedianMax(%v) (-want +got):\n%s", tt.xs, diff)
		}
	}
}

// fake is a result of one strategy and seed, with the metrics the spread
// reads.
func fake(s Strategy, seed uint64, run time.Duration, avail float64, vm time.Duration) *Result {
	cfg := Config{Seed: seed, MaxRunDuration: run}.withDefaults()
	return &Result{Strategy: s, Config: cfg, Availability: avail, NodeTimeAvailability: avail, VMTime: vm}
}

func TestSpreads(t *testing.T) {
	day := 24 * time.Hour
	results := []*Result{
		fake(MakeBeforeBreak, 1, day, 0.999, 1100*time.Hour), fake(RecreateAfterTermination, 1, day, 0.9, 1000*time.Hour),
		fake(MakeBeforeBreak, 1, 7*day, 1, 1010*time.Hour), fake(RecreateAfterTermination, 1, 7*day, 0.99, 1000*time.Hour),
		fake(MakeBeforeBreak, 2, day, 0.995, 1050*time.Hour), fake(RecreateAfterTermination, 2, day, 0.8, 1000*time.Hour),
		fake(MakeBeforeBreak, 2, 7*day, 0.998, 1020*time.Hour), fake(RecreateAfterTermination, 2, 7*day, 0.98, 1000*time.Hour),
		fake(MakeBeforeBreak, 3, day, 0.997, 1080*time.Hour), fake(RecreateAfterTermination, 3, day, 0.85, 1000*time.Hour),
	}
	type got struct {
		Run      time.Duration
		Strategy string
		Seeds    []uint64
		Extra    []float64
	}
	var gots []got
	for _, s := range Spreads(results) {
		var extra []float64
		for _, e := range s.ExtraVMTime {
			extra = append(extra, float64(int(e*1000+0.5))/1000)
		}
		gots = append(gots, got{s.Config.MaxRunDuration, s.Strategy.Name, s.Seeds, extra})
	}
	want := []got{
		{day, MakeBeforeBreak.Name, []uint64{1, 2, 3}, []float64{0.1, 0.05, 0.08}},
		{day, RecreateAfterTermination.Name, []uint64{1, 2, 3}, []float64{0, 0, 0}},
		{7 * day, MakeBeforeBreak.Name, []uint64{1, 2}, []float64{0.01, 0.02}},
		{7 * day, RecreateAfterTermination.Name, []uint64{1, 2}, []float64{0, 0}},
	}
	if diff := cmp.Diff(want, gots); diff != "" {
		t.Errorf("Spreads (-want +got):\n%s", diff)
	}

	// Without the baseline, no extra VM time.
	if s := Spreads(results[:1])[0]; s.ExtraVMTime != nil {
		t.Errorf("ExtraVMTime without a baseline: %v", s.ExtraVMTime)
	}

	var b bytes.Buffer
	if err := WriteSpread(&b, results, true); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"| max run duration 1d, 3 seeds (1–3): min / median / max | make-before-break | recreate-after-termination |",
		"| static availability (time at ≥ min) | 99.50% / 99.70% / 99.90% | 80.00% / 85.00% / 90.00% |",
		"| extra VM time vs recreate-after-termination | +5.0% / +8.0% / +10.0% | +0.0% / +0.0% / +0.0% |",
		"| max run duration 7d, 2 seeds (1–2): min / median / max | make-before-break | recreate-after-termination |",
		"| static availability (time at ≥ min) | 99.80% / 99.90% / 100.00% | 98.00% / 98.50% / 99.00% |",
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("spread lacks %q:\n%s", line, b.String())
		}
	}
	if !strings.Contains(b.String(), "; seeds 1–3\n") {
		t.Errorf("spread does not name its seeds:\n%s", b.String())
	}
}

func TestSeedsString(t *testing.T) {
	for want, seeds := range map[string][]uint64{"1–10": {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "1, 3–4, 9": {1, 3, 4, 9}, "7": {7}} {
		if got := seedsString(seeds); got != want {
			t.Errorf("seedsString(%v) = %q, want %q", seeds, got, want)
		}
	}
}

// TestWriteSeeds: make-before-break's metrics seed by seed, with each
// seed's extra VM time against its own recreate-after-termination run; the
// baselines get no table of their own.
func TestWriteSeeds(t *testing.T) {
	day := 24 * time.Hour
	results := []*Result{
		fake(MakeBeforeBreak, 1, day, 0.999, 1100*time.Hour), fake(RecreateAfterTermination, 1, day, 0.9, 1000*time.Hour),
		fake(MakeBeforeBreak, 2, day, 1, 1040*time.Hour), fake(RecreateAfterTermination, 2, day, 0.8, 1000*time.Hour),
	}
	var buf bytes.Buffer
	if err := WriteSeeds(&buf, results, true); err != nil {
		t.Fatal(err)
	}
	want := MakeBeforeBreak.Name + `, max run duration 1d, per seed:

| seed | static availability | time below min | extra VM time | overlap (node-h) | mean wait to start |
|---|---|---|---|---|---|
| 1 | 99.90% | 0s | +10.0% | 0.0 | 0s |
| 2 | 100.00% | 0s | +4.0% | 0.0 | 0s |

`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("WriteSeeds (-want +got):\n%s", diff)
	}
}
