package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"weak"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// The reconcile scale runs: reconcilePools pools, reconcileSteadyPasses
// steady passes timed in each case of reconcileCases.
const (
	reconcilePools        = 100
	reconcileSteadyPasses = 5
	// The decision alone is timed reconcileDecideRuns times, each sample
	// the mean run time over at least reconcileDecideSample.
	reconcileDecideRuns   = 11
	reconcileDecideSample = 100 * time.Millisecond
	// reconcileBatch is how many nodes come up between two passes while
	// populating: a pass in which more than about 790 nodes come up stores
	// an event note above store.MaxEventNoteBytes (one end-of-life
	// reservation command per node, about 330 bytes each) and fails on
	// every retry; BenchmarkReconcileScale reports that separately.
	reconcileBatch = 500
	// Environment of the helper process.
	envReconcileNodes = "FLEXSLURM_BENCH_RECONCILE_NODES"
	envReconcileZones = "FLEXSLURM_BENCH_RECONCILE_ZONES"
	envReconcileOut   = "FLEXSLURM_BENCH_RECONCILE_OUT"
	// envReconcileProfile, when set, names the prefix of the profiles of
	// the decision alone the helper process writes (profileDecision).
	envReconcileProfile  = "FLEXSLURM_BENCH_RECONCILE_PROFILE"
	reconcileProfileRuns = 200
	// envReconcilePair, when set to a node count, has the helper process
	// also populate a cluster of that size and time the two decisions
	// alone in turns (pairDecisions).
	envReconcilePair = "FLEXSLURM_BENCH_RECONCILE_PAIR"
)

// scaleCase is one reconcile run: nodes over reconcilePools pools spread
// over zones zones; with pair > 0, the process also times the decision
// alone in turns with a cluster of pair nodes (pairDecisions).
type scaleCase struct{ nodes, zones, pair int }

// reconcileCases: the two sizes with the pools over 26 zones, then the
// small size with every pool in one zone. The simulator filters a VM list
// by encoding every VM of the zone to JSON, so with one zone its own work
// per pass is pools × all VMs; spreading the pools keeps the measurement
// on flexslurm. flexslurm makes the same calls either way.
// The 10,000-node process also times the decision alone in turns with a
// 1,000-node cluster, for the 10k/1k ratio of the decision alone.
var reconcileCases = []scaleCase{{1000, 26, 0}, {10000, 26, 1000}, {1000, 1, 0}}

// passResult is one measured reconcile pass.
type passResult struct {
	Seconds      float64        `json:"seconds"`
	ComputeSecs  float64        `json:"compute_seconds"` // inside Compute calls (client, HTTP and simulator)
	CPUSeconds   float64        `json:"cpu_seconds"`     // process CPU time (user + system) during the pass
	Calls        map[string]int `json:"calls"`
	AllocBytes   uint64         `json:"alloc_bytes"`    // allocated during the pass
	PeakRSSBytes int64          `json:"peak_rss_bytes"` // VmHWM during the pass
	BaseRSSBytes int64          `json:"base_rss_bytes"` // VmRSS just before it
}

// scaleResult is what the helper process reports for one case.
type scaleResult struct {
	Nodes, Pools, Zones int
	VMs                 int
	PopulateSeconds     float64
	StateHeapBytes      uint64     // live heap after populating (store, simulator, harness)
	Converging          passResult // the pass in which the last reconcileBatch nodes came up
	Steady              []passResult
	HWMResetWorks       bool
	DecideSeconds       []float64 // plan.Reconcile alone: per sample, the mean run (reconcileDecideRuns)
	DecideCPUSeconds    []float64 // the same samples' process CPU time (user + system, collections included) per run
	DecideHeapBytes     uint64    // live heap while the decision alone is timed (its input; the harness closed)
	HarnessCollected    bool      // the closed harness was collected before the decision alone was timed
	ProcessPeakBytes    int64     // VmHWM of the whole process once this case's decision alone was timed
	// Pair is the decision alone timed in turns with a smaller cluster's
	// in this same process (envReconcilePair); nil when not asked for.
	Pair *pairResult `json:",omitempty"`
}

// pairResult is plan.Reconcile alone on two clusters timed in turns in one
// process: sample i of the smaller (SmallSeconds) is taken just before
// sample i of the larger (BigSeconds), so both see the machine as it was
// then.
type pairResult struct {
	SmallNodes   int
	SmallSeconds []float64
	BigSeconds   []float64
}

// ratios returns each pair's ratio, big over small.
func (p *pairResult) ratios() []float64 {
	rs := make([]float64, 0, len(p.BigSeconds))
	for i := range min(len(p.SmallSeconds), len(p.BigSeconds)) {
		rs = append(rs, p.BigSeconds[i]/p.SmallSeconds[i])
	}
	return rs
}

// BenchmarkReconcileScale times reconcile passes over 1,000 and 10,000 nodes
// in 100 pools (in-memory store, Compute simulator over HTTP through the
// apiv1 clients), each case in a fresh process so that its memory is its
// own, and checks that Compute list calls grow with pools, not nodes.
func BenchmarkReconcileScale(b *testing.B) {
	var res []scaleResult
	var atOnce error
	var atOnceTook time.Duration
	for b.Loop() {
		res = nil
		for _, c := range reconcileCases {
			res = append(res, runScaleChild(b, c))
		}
		atOnceTook, atOnce = convergeAtOnce(b, reconcileCases[0])
	}
	sec := results.Section(rankReconcile, fmt.Sprintf("Reconcile at scale (%d pools, in-memory store, Compute simulator over HTTP through the apiv1 clients; each case in its own process; steady pass = median of %d, nothing to change)", reconcilePools, reconcileSteadyPasses),
		"nodes", "zones", "steady pass", "CPU time of the pass", "in Compute calls", "outside Compute calls", fmt.Sprintf("plan.Reconcile alone (on the last pass's state and observation, store, simulator and harness closed; median of %d samples, each the mean run over %s)", reconcileDecideRuns, reconcileDecideSample), "Compute calls per pass", "allocated per pass", "peak RSS during pass (RSS before it)", fmt.Sprintf("pass in which the last %d nodes come up", reconcileBatch))
	listsOK := true
	for _, r := range res {
		s := medianPass(r.Steady)
		for _, p := range r.Steady {
			c := Calls(p.Calls)
			for _, m := range Lists {
				if c[m] != r.Pools {
					listsOK = false
					b.Errorf("%d nodes: %s called %d times in a pass, want %d (once per pool)", r.Nodes, m, c[m], r.Pools)
				}
			}
			if mut := c.Sum(Mutations...); mut != 0 {
				b.Errorf("%d nodes: %d Compute mutations in a steady pass (%s)", r.Nodes, mut, c)
			}
		}
		if r.VMs != r.Nodes {
			b.Errorf("%d nodes: %d VMs after populating", r.Nodes, r.VMs)
		}
		if !r.HarnessCollected {
			b.Errorf("%d nodes: plan.Reconcile alone was timed with the closed harness not yet collected", r.Nodes)
		}
		peak := fmt.Sprintf("%s (%s)", mib(s.PeakRSSBytes), mib(s.BaseRSSBytes))
		if !r.HWMResetWorks {
			peak = fmt.Sprintf("process peak %s (VmHWM could not be reset)", mib(r.ProcessPeakBytes))
		}
		sec.Add(strconv.Itoa(r.Nodes), strconv.Itoa(r.Zones), secs(s.Seconds), secs(s.CPUSeconds), secs(s.ComputeSecs), secs(s.Seconds-s.ComputeSecs), msec(medianOf(r.DecideSeconds)),
			fmt.Sprintf("%s = %d × pools", Calls(s.Calls), Calls(s.Calls).Sum(Lists...)/r.Pools),
			mib(int64(s.AllocBytes)), peak, secs(r.Converging.Seconds))
		b.ReportMetric(s.Seconds, fmt.Sprintf("pass-s-%dnodes-%dzones", r.Nodes, r.Zones))
	}
	for _, r := range res {
		sec.Note("%d nodes, %d zone(s): populating (cluster applied; per pool one job of %d nodes, one resize request; capacity for %d nodes between passes) took %.1f s; live heap after it %s (store, simulator, harness), while plan.Reconcile alone is timed %s; whole-process peak RSS %s.",
			r.Nodes, r.Zones, r.Nodes/r.Pools, reconcileBatch, r.PopulateSeconds, mib(int64(r.StateHeapBytes)), mib(int64(r.DecideHeapBytes)), mib(r.ProcessPeakBytes))
	}
	if atOnce != nil {
		sec.Note("All %d nodes coming up between two passes (one job per pool, capacity for all arriving at once): the pass fails, and the next tick fails the same way, so the reconciler is stuck for this cluster: %v", reconcileCases[0].nodes, atOnce)
	} else {
		sec.Note("All %d nodes coming up between two passes: the pass commits in %s.", reconcileCases[0].nodes, secs(atOnceTook.Seconds()))
	}
	sec.Target(fmt.Sprintf("reconcile: a pass in which %d nodes come up at once commits", reconcileCases[0].nodes),
		errString(atOnce, "commits in "+secs(atOnceTook.Seconds())), "commits (not a stated target: a stuck reconciler repairs nothing)", atOnce == nil)
	sec.Target("reconcile: Compute list calls per pass", fmt.Sprintf("ListInstances, ListResizeRequests, ListMIGs once per pool: %d = 3 × %d pools, at every size", 3*reconcilePools, reconcilePools), "grow with pools, not nodes", listsOK)
	if len(res) < 2 {
		return
	}
	small, big := medianPass(res[0].Steady), medianPass(res[1].Steady)
	ratio := big.Seconds / small.Seconds
	cpuRatio := big.CPUSeconds / small.CPUSeconds
	flexRatio := (big.Seconds - big.ComputeSecs) / (small.Seconds - small.ComputeSecs)
	memRatio := float64(big.PeakRSSBytes) / float64(small.PeakRSSBytes)
	decideRatio := medianOf(res[1].DecideSeconds) / medianOf(res[0].DecideSeconds)
	decideCPURatio := medianOf(res[1].DecideCPUSeconds) / medianOf(res[0].DecideCPUSeconds)
	sec.Note("10k/1k ratios (%d zones): steady pass %.1f (CPU time %.1f); in Compute calls %.1f; outside Compute calls %.1f; plan.Reconcile alone, each case in its own process %.1f (%s vs %s a run; CPU time %.1f: %s vs %s); allocated per pass %.1f; peak RSS during the pass %.1f; the pass in which %d nodes come up %.1f.",
		res[0].Zones, ratio, cpuRatio, big.ComputeSecs/small.ComputeSecs, flexRatio, decideRatio, msec(medianOf(res[1].DecideSeconds)), msec(medianOf(res[0].DecideSeconds)), decideCPURatio, msec(medianOf(res[1].DecideCPUSeconds)), msec(medianOf(res[0].DecideCPUSeconds)), float64(big.AllocBytes)/float64(small.AllocBytes), memRatio, reconcileBatch, res[1].Converging.Seconds/res[0].Converging.Seconds)
	sec.Target("reconcile: 10k/1k steady pass time", fmt.Sprintf("%.1f (%s vs %s)", ratio, secs(big.Seconds), secs(small.Seconds)), "≤ 12", ratio <= 12)
	sec.Target("reconcile: 10k/1k steady pass CPU time", fmt.Sprintf("%.1f (%s vs %s)", cpuRatio, secs(big.CPUSeconds), secs(small.CPUSeconds)), "≤ 12", cpuRatio <= 12)
	sec.Target("reconcile: 10k/1k time outside Compute calls (flexslurm's own work: store, decisions, handler)", fmt.Sprintf("%.1f (%s vs %s)", flexRatio, secs(big.Seconds-big.ComputeSecs), secs(small.Seconds-small.ComputeSecs)), "≤ 12", flexRatio <= 12)
	const decideTarget = "reconcile: 10k/1k plan.Reconcile alone (the decision, no I/O; timed in turns in one process)"
	p := res[1].Pair
	var ratios []float64
	if p != nil && p.SmallNodes == res[0].Nodes {
		ratios = p.ratios()
	}
	if len(ratios) == 0 {
		b.Errorf("the %d-node process did not time the decision alone in turns with a %d-node cluster", res[1].Nodes, res[0].Nodes)
		sec.Target(decideTarget, "not timed", "≤ 11", false)
	} else {
		pairRatio := medianOf(ratios)
		sec.Note("plan.Reconcile alone timed in turns in the %d-node process, beside a %d-node cluster populated the same way (a %d-node sample then a %d-node sample, %d pairs; samples as above): 10k/1k %.1f, the median of the pairs' ratios (%.1f–%.1f); medians %s vs %s a run (the same process's %d-node samples before the pair: %s).",
			res[1].Nodes, p.SmallNodes, p.SmallNodes, res[1].Nodes, len(ratios), pairRatio, slices.Min(ratios), slices.Max(ratios), msec(medianOf(p.BigSeconds)), msec(medianOf(p.SmallSeconds)), res[1].Nodes, msec(medianOf(res[1].DecideSeconds)))
		sec.Target(decideTarget, fmt.Sprintf("%.1f (median of %d pair ratios; %s vs %s a run)", pairRatio, len(ratios), msec(medianOf(p.BigSeconds)), msec(medianOf(p.SmallSeconds))), "≤ 11", pairRatio <= 11)
	}
	sec.Target("reconcile: 10k/1k peak RSS during a pass", fmt.Sprintf("%.1f (%s vs %s)", memRatio, mib(big.PeakRSSBytes), mib(small.PeakRSSBytes)), "≤ 12", memRatio <= 12)
}

// convergeAtOnce brings the nodes of case c up between two reconcile
// passes, in this process, and returns how long the pass took and its error.
// A second tick shows whether a retry gets through.
func convergeAtOnce(tb testing.TB, c scaleCase) (time.Duration, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := newRig(tb, ctx, nil, harness.Options{Sim: computesim.Options{CapacityDelay: func(string, string) time.Duration { return 20 * time.Minute }}})
	n := c.nodes
	if err := r.h.Apply(ctx, scaleSpec(tb, c)); err != nil {
		tb.Fatal(err)
	}
	for p := range reconcilePools {
		if _, err := r.h.Publish(ctx, config.TopicJobs, event.Job{Header: event.Header{Version: 1, Type: event.TypeJobPending, Cluster: "flexvm"},
			JobID: strconv.Itoa(1 + p), Partition: PoolID(p, reconcilePools), NodeCount: n / reconcilePools}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := r.h.Advance(ctx, time.Hour); err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	err := r.h.Tick(ctx)
	took := time.Since(start)
	if err != nil {
		if again := r.h.Tick(ctx); again != nil {
			return took, fmt.Errorf("%w (the next tick fails the same way)", err)
		}
		return took, fmt.Errorf("%w (the next tick succeeds)", err)
	}
	return took, nil
}

func errString(err error, ok string) string {
	if err == nil {
		return ok
	}
	s := err.Error()
	if i := strings.Index(s, "event note of"); i >= 0 {
		s = s[i:]
	}
	return "fails: " + s
}

// medianPass returns the pass with the median time.
func medianPass(ps []passResult) passResult {
	if len(ps) == 0 {
		return passResult{}
	}
	s := slices.Clone(ps)
	slices.SortFunc(s, func(a, b passResult) int { return cmp.Compare(a.Seconds, b.Seconds) })
	return s[len(s)/2]
}

// medianOf returns the median of xs (0 when empty).
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func secs(s float64) string { return fmt.Sprintf("%.3f s", s) }

// msec is s seconds in milliseconds.
func msec(s float64) string { return ms(time.Duration(s * 1e9)) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// scaleSpec is the example with reconcilePools pools of c.nodes/pools
// nodes each, spread over c.zones zones.
func scaleSpec(tb testing.TB, c scaleCase) *spec.Cluster {
	tb.Helper()
	sp, err := WithZones(flexSpec(tb, reconcilePools, c.nodes/reconcilePools), c.zones)
	if err != nil {
		tb.Fatal(err)
	}
	return sp
}

// runScaleChild runs TestReconcileScaleChild for one case in a new process
// and returns what it measured.
func runScaleChild(tb testing.TB, c scaleCase) scaleResult {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "result.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestReconcileScaleChild$", "-test.count=1", "-test.timeout=20m")
	// The case alone decides what the child does: none of the helper's
	// variables comes from the benchmark's own environment.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "FLEXSLURM_BENCH_RECONCILE_") })
	cmd.Env = append(env, envReconcileNodes+"="+strconv.Itoa(c.nodes), envReconcileZones+"="+strconv.Itoa(c.zones), envReconcileOut+"="+out)
	if c.pair > 0 {
		cmd.Env = append(cmd.Env, envReconcilePair+"="+strconv.Itoa(c.pair))
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("reconcile run with %d nodes over %d zones: %v\n%s", c.nodes, c.zones, err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		tb.Fatalf("reconcile run with %d nodes over %d zones wrote no result: %v", c.nodes, c.zones, err)
	}
	var r scaleResult
	if err := json.Unmarshal(data, &r); err != nil {
		tb.Fatal(err)
	}
	return r
}

// TestReconcileScaleChild is BenchmarkReconcileScale's helper process: it
// populates a cluster of FLEXSLURM_BENCH_RECONCILE_NODES nodes over 100
// pools through the real path (cluster applied, one job per pool covering
// all its nodes, one resize request each, capacity arrived, a converging
// reconcile pass, jobs started), then times steady passes. It then closes
// the harness and times plan.Reconcile alone on the last pass's state and
// observation; with FLEXSLURM_BENCH_RECONCILE_PAIR=N it then times it in
// turns with a cluster of N nodes (pairDecisions), and with
// FLEXSLURM_BENCH_RECONCILE_PROFILE=PREFIX it last writes CPU and
// allocation profiles of the decision to PREFIX.cpu and PREFIX.allocs.
func TestReconcileScaleChild(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(envReconcileNodes))
	if err != nil {
		t.Skip("helper process of BenchmarkReconcileScale (" + envReconcileNodes + " unset)")
	}
	zones, err := strconv.Atoi(os.Getenv(envReconcileZones))
	if err != nil {
		zones = 1
	}
	perPool := n / reconcilePools
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res := scaleResult{Nodes: n, Pools: reconcilePools, Zones: zones}
	// The passes run in a subtest, whose cleanup closes the harness (store,
	// simulator, servers); what it hands out for the decision alone is the
	// state and observation of the last pass, plain data.
	var st *model.State
	var obs plan.Observed
	var now time.Time
	var harnessRef weak.Pointer[harness.Harness]
	t.Run("passes", func(t *testing.T) {
		st, obs, now, harnessRef = reconcilePasses(t, ctx, &res, perPool)
	})
	if t.Failed() || st == nil {
		return
	}
	// The closed harness's goroutines may take a moment to end and let go
	// of it; the decision is timed once it is collected.
	res.HarnessCollected = collected(harnessRef)
	// The decision alone (shared/plan.Reconcile, a pure function) on the
	// same state and observation, without store or Compute, in a process
	// holding little else: the harness is closed, so a collection the
	// decision triggers marks the decision's input, not the simulator's VMs.
	res.DecideHeapBytes = liveHeap()
	for range reconcileDecideRuns {
		wall, cpu := decideSample(t, st, obs, now)
		res.DecideSeconds = append(res.DecideSeconds, wall)
		res.DecideCPUSeconds = append(res.DecideCPUSeconds, cpu)
	}
	// Read before the pair's cluster is populated, which resets VmHWM.
	res.ProcessPeakBytes = procStatus("VmHWM")
	if small := os.Getenv(envReconcilePair); small != "" {
		res.Pair = pairDecisions(t, ctx, small, zones, st, obs, now)
	}
	// Last: the profiles' finer allocation sampling would slow any sample
	// taken after them.
	if prefix := os.Getenv(envReconcileProfile); prefix != "" {
		profileDecision(t, prefix, func() { plan.Reconcile(st, obs, now, plan.Policy{}) })
	}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv(envReconcileOut), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// collected waits for a closed harness's goroutines to end and let go of
// it, and reports whether it was collected within ten seconds.
func collected(ref weak.Pointer[harness.Harness]) bool {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		if ref.Value() == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// decideSample times one sample of plan.Reconcile alone: the mean wall and
// process CPU time of as many runs as fill reconcileDecideSample (a run
// takes milliseconds, shorter than the machine's noise).
func decideSample(t *testing.T, st *model.State, obs plan.Observed, now time.Time) (wall, cpu float64) {
	var runs int
	start, cpu0 := time.Now(), cpuTime()
	for runs == 0 || time.Since(start) < reconcileDecideSample {
		acts := plan.Reconcile(st, obs, now, plan.Policy{})
		if len(plan.External(acts)) != 0 {
			t.Fatalf("the steady decision has external actions: %v", plan.External(acts))
		}
		runs++
	}
	return time.Since(start).Seconds() / float64(runs), (cpuTime() - cpu0).Seconds() / float64(runs)
}

// pairDecisions populates a second cluster, of small nodes, through the
// same real path, closes its harness, and times plan.Reconcile alone on it
// and on the larger cluster's state in turns: a small sample, then a big
// one, reconcileDecideRuns times. Timed in separate processes, minutes
// apart, the two cases see different machines when it is shared (other
// processes' load and cache use vary over minutes), and their ratio
// varies with it; in turns, both see the same.
func pairDecisions(t *testing.T, ctx context.Context, small string, zones int, bigSt *model.State, bigObs plan.Observed, bigNow time.Time) *pairResult {
	n, err := strconv.Atoi(small)
	if err != nil || n < reconcilePools || n%reconcilePools != 0 {
		t.Fatalf("%s=%q: want a node count that is a multiple of %d pools", envReconcilePair, small, reconcilePools)
	}
	var st *model.State
	var obs plan.Observed
	var now time.Time
	var ref weak.Pointer[harness.Harness]
	t.Run("pair", func(t *testing.T) {
		st, obs, now, ref = reconcilePasses(t, ctx, &scaleResult{Nodes: n, Pools: reconcilePools, Zones: zones}, n/reconcilePools)
	})
	if t.Failed() || st == nil {
		t.Fatalf("populating the %d-node cluster of the pair failed", n)
	}
	if !collected(ref) {
		t.Fatalf("the %d-node harness was not collected before the paired decisions", n)
	}
	p := &pairResult{SmallNodes: n}
	for range reconcileDecideRuns {
		s, _ := decideSample(t, st, obs, now)
		b, _ := decideSample(t, bigSt, bigObs, bigNow)
		p.SmallSeconds, p.BigSeconds = append(p.SmallSeconds, s), append(p.BigSeconds, b)
	}
	return p
}

// reconcilePasses populates the cluster through the real path, times the
// converging and the steady passes into res, and returns the state and
// observation of the last pass and the clock's time.
func reconcilePasses(t *testing.T, ctx context.Context, res *scaleResult, perPool int) (*model.State, plan.Observed, time.Time, weak.Pointer[harness.Harness]) {
	n, zones := res.Nodes, res.Zones
	r := newRig(t, ctx, nil, harness.Options{Sim: computesim.Options{CapacityDelay: func(string, string) time.Duration { return 20 * time.Minute }}})
	h := r.h

	start := time.Now()
	if err := h.Apply(ctx, scaleSpec(t, scaleCase{nodes: n, zones: zones})); err != nil {
		t.Fatal(err)
	}
	job := func(typ string, p int) event.Job {
		return event.Job{Header: event.Header{Version: 1, Type: typ, Cluster: "flexvm"},
			JobID: strconv.Itoa(1 + p), Partition: PoolID(p, reconcilePools), NodeCount: perPool}
	}
	// Capacity arrives for reconcileBatch nodes between two passes (see
	// reconcileBatch for why not all at once).
	batch := max(1, reconcileBatch/perPool)
	for first := 0; first < reconcilePools; first += batch {
		for p := first; p < min(first+batch, reconcilePools); p++ {
			if _, err := h.Publish(ctx, config.TopicJobs, job(event.TypeJobPending, p)); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.Advance(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		if first+batch >= reconcilePools {
			res.HWMResetWorks = resetPeakRSS()
			res.Converging = measurePass(t, ctx, r)
		} else if err := h.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		h.Publisher.Take(config.TopicSlurmCommands)
	}
	res.VMs = len(h.VMs())
	res.PopulateSeconds = time.Since(start).Seconds()
	st, err := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, node := range st.Nodes {
		if node.Phase == model.PhaseRunning {
			running++
		}
	}
	if running != n {
		t.Fatalf("%d of %d nodes running after populating", running, n)
	}
	for p := range reconcilePools {
		if _, err := h.Publish(ctx, config.TopicJobs, job(event.TypeJobStarted, p)); err != nil {
			t.Fatal(err)
		}
	}
	h.Publisher.Take(config.TopicSlurmCommands)
	res.StateHeapBytes = liveHeap()

	for range reconcileSteadyPasses {
		if err := h.Advance(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		res.Steady = append(res.Steady, measurePass(t, ctx, r))
		h.Publisher.Take(config.TopicSlurmCommands)
	}
	st, err = h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true, Slurm: true})
	if err != nil {
		t.Fatal(err)
	}
	return st, h.Runner.Observe(ctx, "flexvm", st), h.Clock.Now(), weak.Make(h)
}

// profileDecision writes a CPU profile of reconcileProfileRuns runs of
// decide to prefix.cpu, and the allocations they make (sampled every
// 4 KiB) to prefix.allocs, for go tool pprof. It runs after the timed
// samples: the finer allocation sampling would slow them.
func profileDecision(t *testing.T, prefix string, decide func()) {
	cpu, err := os.Create(prefix + ".cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 4 << 10
	runtime.GC()
	if err := pprof.StartCPUProfile(cpu); err != nil {
		t.Fatal(err)
	}
	for range reconcileProfileRuns {
		decide()
	}
	pprof.StopCPUProfile()
	runtime.GC() // the profile's allocations are those up to the last collection
	allocs, err := os.Create(prefix + ".allocs")
	if err != nil {
		t.Fatal(err)
	}
	defer allocs.Close()
	if err := pprof.Lookup("allocs").WriteTo(allocs, 0); err != nil {
		t.Fatal(err)
	}
}

// measurePass runs one reconcile tick and measures it.
func measurePass(tb testing.TB, ctx context.Context, r *rig) passResult {
	tb.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	base := procStatus("VmRSS")
	resetPeakRSS()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0, busy0 := r.compute.Calls(), r.compute.Busy()
	cpu0 := cpuTime()
	start := time.Now()
	if err := r.h.Tick(ctx); err != nil {
		tb.Fatal(err)
	}
	d := time.Since(start)
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&m1)
	return passResult{
		Seconds: d.Seconds(), ComputeSecs: (r.compute.Busy() - busy0).Seconds(), CPUSeconds: cpu.Seconds(),
		Calls: r.compute.Calls().Sub(c0), AllocBytes: m1.TotalAlloc - m0.TotalAlloc,
		PeakRSSBytes: procStatus("VmHWM"), BaseRSSBytes: base,
	}
}

// cpuTime returns the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// liveHeap returns the live heap after a GC.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// resetPeakRSS resets the process's VmHWM to its current RSS (Linux ≥ 4.0:
// write 5 to /proc/self/clear_refs) and reports whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// procStatus returns a memory field of /proc/self/status in bytes (-1 if
// unavailable).
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok || k != field {
			continue
		}
		var kb int64
		if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return -1
}
