package expirybench

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// shortConfig is a day of a 3-node pool whose VMs last 6 h, with capacity
// waits of 2–10 min: always well inside the lead time (at least its 30 min
// floor) even with the 5 min boot.
func shortConfig(seed uint64) Config {
	return Config{Seed: seed, Nodes: 3, MaxNodes: 6, MaxRunDuration: 6 * time.Hour, WarmUp: 6 * time.Hour, Period: 24 * time.Hour,
		Wait: WaitDist{Median: 6 * time.Minute, Spread: 4 * time.Minute}}
}

func compare(t *testing.T, cfg Config) map[string]*Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Compare(ctx, cfg, Strategies())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Result{}
	for _, r := range res {
		out[r.Strategy.Name] = r
	}
	return out
}

// checkSane checks what must hold of any result.
func checkSane(t *testing.T, r *Result) {
	t.Helper()
	name := r.Strategy.Name
	if r.Availability < 0 || r.Availability > 1 || r.NodeTimeAvailability < 0 || r.NodeTimeAvailability > 1 {
		t.Errorf("%s: availability %g, node-time %g: want both in [0, 1]", name, r.Availability, r.NodeTimeAvailability)
	}
	if r.NodeTimeAvailability < r.Availability-1e-9 {
		t.Errorf("%s: node-time availability %g below time availability %g", name, r.NodeTimeAvailability, r.Availability)
	}
	if want := 1 - r.BelowMin.Seconds()/r.Config.Period.Seconds(); math.Abs(want-r.Availability) > 1e-9 {
		t.Errorf("%s: availability %g but %s below min of %s", name, r.Availability, r.BelowMin, r.Config.Period)
	}
	if r.FewestUsable < 0 || r.FewestUsable > r.Config.MaxNodes {
		t.Errorf("%s: fewest usable %d", name, r.FewestUsable)
	}
	if (r.Availability < 1) != (len(r.Episodes) > 0) {
		t.Errorf("%s: availability %g with %d episodes below min", name, r.Availability, len(r.Episodes))
	}
	if r.Overlap < 0 || r.VMTime < r.Overlap || r.WorkLost < 0 {
		t.Errorf("%s: overlap %s, VM time %s, work lost %s", name, r.Overlap, r.VMTime, r.WorkLost)
	}
	if r.JobsCompleted == 0 || r.Expiries+r.Deletions == 0 {
		t.Errorf("%s: %d jobs completed, %d VMs ended: the run did nothing", name, r.JobsCompleted, r.Expiries+r.Deletions)
	}
	if len(r.Timeline.Lanes) != r.Config.MaxNodes {
		t.Errorf("%s: %d timeline lanes, want %d", name, len(r.Timeline.Lanes), r.Config.MaxNodes)
	}
	end := r.Config.WarmUp + r.Config.Period
	for _, l := range r.Timeline.Lanes {
		for i, s := range l.Segments {
			if s.Start < 0 || s.End > end || s.End <= s.Start || (i > 0 && s.Start < l.Segments[i-1].End) || s.Phase == PhaseNone {
				t.Fatalf("%s: lane %s: bad segment %d %+v", name, l.Node, i, s)
			}
		}
	}
}

// TestMakeBeforeBreakKeepsTheMinimum: with every capacity wait below the
// lead time, make-before-break never lets the pool fall below
// min_node_count and kills no job, at a bounded overlap; recreating after
// termination leaves a gap at every expiry; and without end-of-life
// reservations jobs are killed.
func TestMakeBeforeBreakKeepsTheMinimum(t *testing.T) {
	res := compare(t, shortConfig(3))
	mbb, rec, base := res[MakeBeforeBreak.Name], res[RecreateAfterTermination.Name], res[RecreateNoReservations.Name]
	for _, r := range res {
		checkSane(t, r)
	}
	if mbb.Availability != 1 {
		var buf bytes.Buffer
		WriteEpisodes(&buf, []*Result{mbb})
		t.Errorf("make-before-break availability %g, want 1 (every wait is below the lead time):\n%s", mbb.Availability, buf.String())
	}
	if mbb.Availability < rec.Availability || mbb.NodeTimeAvailability < rec.NodeTimeAvailability {
		t.Errorf("make-before-break availability %g (node-time %g) below recreate-after-termination's %g (%g)",
			mbb.Availability, mbb.NodeTimeAvailability, rec.Availability, rec.NodeTimeAvailability)
	}
	if rec.Availability >= 1 || rec.Expiries == 0 {
		t.Errorf("recreate-after-termination: availability %g over %d expiries, want a gap at each", rec.Availability, rec.Expiries)
	}
	for _, r := range []*Result{mbb, rec} {
		if r.JobsKilled != 0 || r.JobsKilledOther != 0 {
			t.Errorf("%s: %d jobs killed by expiry, %d otherwise: the end-of-life reservations should prevent both", r.Strategy.Name, r.JobsKilled, r.JobsKilledOther)
		}
	}
	if base.JobsKilled == 0 || base.WorkLost <= 0 {
		t.Errorf("without end-of-life reservations: %d jobs killed, %s lost; want some", base.JobsKilled, base.WorkLost)
	}
	// Each hand-over overlaps at most the lead time (30 min here): the
	// successor is requested then, and the old VM ends at its termination
	// at the latest. Hand-overs end with the old VM (expired or released);
	// Nodes more may straddle the start of the period.
	handovers := mbb.Expiries + mbb.Deletions + mbb.Config.Nodes
	if bound := time.Duration(handovers) * 30 * time.Minute; mbb.Overlap <= 0 || mbb.Overlap > bound {
		t.Errorf("make-before-break overlap %s, want in (0, %s] (%d hand-overs × the 30 min lead)", mbb.Overlap, bound, handovers)
	}
	if rec.Overlap != 0 || rec.RecordedOverlap != 0 {
		t.Errorf("recreate-after-termination overlap %s (recorded %s), want none", rec.Overlap, rec.RecordedOverlap)
	}
	if mbb.RecordedOverlap <= 0 {
		t.Errorf("flexslurm recorded no make-before-break overlap (measured %s)", mbb.Overlap)
	}
}

// TestLongWaitsAreExplained: with waits that often exceed the lead time,
// make-before-break may fall below the minimum, but never by more than
// recreate-after-termination on the same seed, and every interval below
// the minimum gets a cause.
func TestLongWaitsAreExplained(t *testing.T) {
	cfg := shortConfig(5)
	cfg.Wait = WaitDist{Median: 40 * time.Minute, Sigma: 0.8}
	res := compare(t, cfg)
	mbb, rec := res[MakeBeforeBreak.Name], res[RecreateAfterTermination.Name]
	for _, r := range res {
		checkSane(t, r)
		for _, e := range r.Episodes {
			if e.Kind == "" || e.Kind == EpisodeUnexplained || e.End <= e.Start {
				t.Errorf("%s: episode %+v", r.Strategy.Name, e)
			}
		}
	}
	if rec.Availability >= 1 {
		t.Errorf("recreate-after-termination availability %g with 40 min waits", rec.Availability)
	}
	if mbb.NodeTimeAvailability < rec.NodeTimeAvailability {
		t.Errorf("make-before-break node-time availability %g below recreate's %g", mbb.NodeTimeAvailability, rec.NodeTimeAvailability)
	}
}

// TestReadCacheIsExact: answering repeated Compute reads from the cache
// changes nothing in a run.
func TestReadCacheIsExact(t *testing.T) {
	cfg := Config{Seed: 7, Nodes: 2, MaxNodes: 4, MaxRunDuration: 2 * time.Hour, WarmUp: 2 * time.Hour, Period: 8 * time.Hour,
		Wait: WaitDist{Median: 20 * time.Minute, Sigma: 1}}
	direct := cfg
	direct.DirectCompute = true
	res, err := RunAll(context.Background(), []Config{cfg, direct}, []Strategy{MakeBeforeBreak})
	if err != nil {
		t.Fatal(err)
	}
	res[1].Config.DirectCompute = false
	if !reflect.DeepEqual(res[0], res[1]) {
		var a, b bytes.Buffer
		WriteEpisodes(&a, res[:1])
		WriteEpisodes(&b, res[1:])
		t.Fatalf("the read cache changed the run:\ncached: %+v\n%s\ndirect: %+v\n%s", *res[0], a.String(), *res[1], b.String())
	}
}

func TestWriteTableAndTimeline(t *testing.T) {
	cfg := Config{Seed: 2, Nodes: 2, MaxNodes: 4, MaxRunDuration: 3 * time.Hour, WarmUp: 3 * time.Hour, Period: 9 * time.Hour}
	res := compare(t, cfg)
	all := []*Result{res[MakeBeforeBreak.Name], res[RecreateAfterTermination.Name], res[RecreateNoReservations.Name]}
	for _, md := range []bool{false, true} {
		var buf bytes.Buffer
		if err := WriteTable(&buf, all, md); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"static availability", "jobs killed by expiry", "overlap (node-h)", MakeBeforeBreak.Name, RecreateAfterTermination.Name} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("markdown %v: table lacks %q:\n%s", md, want, buf.String())
			}
		}
	}
	dir := t.TempDir()
	for _, name := range []string{"t.svg", "t.png"} {
		path := filepath.Join(dir, name)
		if err := WriteTimeline(path, "test", all, TimeRange{}); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) < 1000 {
			t.Errorf("%s: %d bytes", name, len(data))
		}
		if strings.HasSuffix(name, ".svg") && (!bytes.HasPrefix(data, []byte("<?xml")) || !bytes.Contains(data, []byte("make-before-break"))) {
			t.Errorf("%s does not look like the timeline SVG", name)
		}
		if strings.HasSuffix(name, ".png") && !bytes.HasPrefix(data, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG", name)
		}
	}
	if err := WriteTimeline(filepath.Join(dir, "t.gif"), "test", all, TimeRange{}); err == nil {
		t.Error("a .gif timeline was accepted")
	}
	first, ok := FirstExpiry(all)
	if !ok || first < cfg.WarmUp || first >= cfg.WarmUp+cfg.Period {
		t.Fatalf("first expiry %s, %v: want one in the measured period", first, ok)
	}
	if err := WriteTimeline(filepath.Join(dir, "zoom.svg"), "zoom", all, TimeRange{From: first - time.Hour, To: first + time.Hour}); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{
		{MaxRunDuration: 5 * time.Minute},
		{MaxRunDuration: 8 * 24 * time.Hour},
		{Nodes: 4, MaxNodes: 3},
		{Tick: 20 * time.Minute},
		{Wait: WaitDist{Median: time.Minute, Spread: 2 * time.Minute}},
		{MinLimit: 5 * time.Hour, MaxLimit: time.Hour},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func TestWaitDist(t *testing.T) {
	w := DefaultWait
	if p90 := w.Quantile(0.9); p90 < 71*time.Minute || p90 > 73*time.Minute {
		t.Errorf("p90 %s, want 72 min", p90)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var ds []time.Duration
	for range 20000 {
		ds = append(ds, w.Draw(r))
	}
	slices.Sort(ds)
	if med := ds[len(ds)/2]; med < 19*time.Minute || med > 21*time.Minute {
		t.Errorf("median of draws %s, want 20 min", med)
	}
	u := WaitDist{Median: 6 * time.Minute, Spread: 4 * time.Minute}
	for range 1000 {
		if d := u.Draw(r); d < 2*time.Minute || d > 10*time.Minute {
			t.Fatalf("uniform draw %s outside 2–10 min", d)
		}
	}
}

func TestWorkloadIsSeeded(t *testing.T) {
	cfg := Config{Seed: 9}.withDefaults()
	a, b := workload(cfg, 7*24*time.Hour), workload(cfg, 7*24*time.Hour)
	if !reflect.DeepEqual(a, b) || len(a) == 0 {
		t.Fatalf("workload not reproducible (%d, %d jobs)", len(a), len(b))
	}
	for _, j := range a {
		if j.Limit < cfg.MinLimit || j.Limit > cfg.MaxLimit+time.Minute || j.Runtime > j.Limit || j.Runtime < j.Limit/2-time.Second {
			t.Fatalf("job %+v outside the limits", j)
		}
	}
	// Offered load: jobs × mean runtime ≈ Load × Nodes × horizon.
	var work time.Duration
	for _, j := range a {
		work += j.Runtime
	}
	if got := work.Hours() / (7 * 24 * float64(cfg.Nodes)); got < 0.5 || got > 0.9 {
		t.Errorf("offered load %.2f, want about %.2f", got, cfg.Load)
	}
}
