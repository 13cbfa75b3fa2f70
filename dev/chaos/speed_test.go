package chaos

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/scenario"
)

// TestInProcessMatchesLoopback: a seed run with flexslurm's Compute clients
// reaching the simulator in-process (the default) has the same timeline,
// counters and results as with the clients on a loopback HTTP server, so
// the faster path exercises exactly what the HTTP path does.
func TestInProcessMatchesLoopback(t *testing.T) {
	ctx := testContext(t)
	f := Generate(4, Options{Horizon: 6 * time.Hour, Tail: time.Hour})
	run := func(loopback bool) scenario.Report {
		rep, err := scenario.RunFile(ctx, f, scenario.RunOptions{Trace: true, Loopback: loopback})
		if err != nil {
			t.Fatalf("loopback %t: %v", loopback, err)
		}
		rep.Wall = 0
		return rep
	}
	in, lo := run(false), run(true)
	if d := cmp.Diff(lo, in); d != "" {
		t.Errorf("in-process run differs from the loopback one (-loopback +in-process):\n%s", d)
	}
	if in.Stats.ComputeCalls == 0 || len(in.Trace) == 0 {
		t.Errorf("the run made no Compute call or has no timeline: %+v", in.Stats)
	}
}

// TestListFaultsMatchLoopback: with faults on the list calls of reconcile
// passes (a window of failing VM listings, listings omitting a VM's status,
// or a VM), which the list shortcut leaves to HTTP, a seed's run in-process
// is the same as over a loopback server, and the faults fire.
func TestListFaultsMatchLoopback(t *testing.T) {
	ctx := testContext(t)
	f := Generate(4, Options{Horizon: 6 * time.Hour, Tail: time.Hour})
	dur := func(d time.Duration) scenario.Duration { return scenario.Duration(d) }
	f.Steps = append(f.Steps,
		scenario.Step{At: at(2 * time.Hour), ComputeError: &scenario.ComputeErrorStep{Name: "vm-list-down", Method: "GET",
			Path: "/instances$", Status: 500, Reason: "backendError", For: dur(12 * time.Minute)}},
		scenario.Step{At: at(3 * time.Hour), ListOmit: &scenario.ListOmitStep{Name: "omit-status", VM: "^flexvm-", Field: "status", For: dur(7 * time.Minute)}},
		scenario.Step{At: at(4 * time.Hour), ComputeError: &scenario.ComputeErrorStep{Name: "rr-list-forbidden", Method: "GET",
			Path: "/resizeRequests$", Status: 403, Reason: "forbidden", Times: 2}},
		scenario.Step{At: at(4*time.Hour + 30*time.Minute), ListOmit: &scenario.ListOmitStep{Name: "omit-vm", VM: "^flexvm-", Times: 1}},
	)
	sort.SliceStable(f.Steps, func(i, j int) bool { return f.Steps[i].At.Offset < f.Steps[j].At.Offset })
	run := func(loopback bool) scenario.Report {
		rep, err := scenario.RunFile(ctx, f, scenario.RunOptions{Trace: true, Loopback: loopback})
		if err != nil {
			t.Fatalf("loopback %t: %v", loopback, err)
		}
		rep.Wall = 0
		return rep
	}
	in, lo := run(false), run(true)
	if d := cmp.Diff(lo, in); d != "" {
		t.Errorf("in-process run differs from the loopback one (-loopback +in-process):\n%s", d)
	}
	// Failing VM listings every 5 minutes for 12 minutes, and 2 resize
	// request listings.
	if in.Stats.InjectedErrors < 4 {
		t.Errorf("%d injected errors, want at least 4", in.Stats.InjectedErrors)
	}
	var omitted int
	for _, line := range in.Trace {
		if strings.Contains(line, "omit-status") || strings.Contains(line, "omit-vm") {
			omitted++
		}
	}
	if omitted == 0 {
		t.Errorf("no listing omitted anything; trace:\n%s", strings.Join(in.Trace, "\n"))
	}
}

// TestReuseChangesNothing: over chaos seeds (every invariant on, every
// fault class), a run that reuses an uncopied view of the store, the VM
// view, the resize request scan and one_request_per_node's result until
// the store or the simulator changes has the same timeline and results,
// evaluation by evaluation, as one that reads and evaluates everything
// afresh after every event (scenario.RunOptions.NoReuse).
func TestReuseChangesNothing(t *testing.T) {
	ctx := testContext(t)
	for _, seed := range []uint64{1, 2, 7} {
		f := Generate(seed, Options{Horizon: 8 * time.Hour, Tail: 2 * time.Hour})
		if !f.Invariants.OneRequestPerNode || f.Invariants.NoUnrecordedVM == nil || f.Invariants.StaticAtMin == nil {
			t.Fatalf("seed %d does not check the invariants the caches serve: %+v", seed, f.Invariants)
		}
		run := func(noReuse bool) scenario.Report {
			rep, err := scenario.RunFile(ctx, f, scenario.RunOptions{Trace: true, NoReuse: noReuse})
			if err != nil {
				t.Fatalf("seed %d, no reuse %t: %v", seed, noReuse, err)
			}
			rep.Wall = 0
			return rep
		}
		fresh, reused := run(true), run(false)
		if d := cmp.Diff(fresh, reused); d != "" {
			t.Errorf("seed %d: reuse changes the run (-fresh +reused):\n%s", seed, d)
		}
		if len(reused.Results) == 0 || reused.Stats.Deliveries == 0 || reused.Stats.Crashes == 0 {
			t.Errorf("seed %d: nothing was checked, delivered or crashed: %d results, %+v", seed, len(reused.Results), reused.Stats)
		}
	}
}

// TestRunParallelIsDeterministic: Run's outcomes, their order and the
// summary do not depend on how many seeds run at once.
func TestRunParallelIsDeterministic(t *testing.T) {
	ctx := testContext(t)
	o := Options{Horizon: 4 * time.Hour, Tail: time.Hour}
	run := func(parallel int) (Summary, []string) {
		var lines []string
		s, err := Run(ctx, 20, 6, RunOptions{Options: o, Parallel: parallel}, func(out Outcome) {
			lines = append(lines, fmt.Sprintf("seed %d: %q %+v %s", out.Seed, out.Signature(), out.Report.Stats, out.Report.Simulated))
		})
		if err != nil {
			t.Fatalf("parallel %d: %v", parallel, err)
		}
		s.Wall = 0
		return s, lines
	}
	s1, l1 := run(1)
	s3, l3 := run(3)
	if d := cmp.Diff(l1, l3); d != "" {
		t.Errorf("outcomes differ between 1 and 3 seeds at once (-1 +3):\n%s", d)
	}
	if s1.Seeds != 6 || s1.Events != s3.Events || s1.Messages != s3.Messages || s1.Crashes != s3.Crashes || len(s1.Failed) != len(s3.Failed) {
		t.Errorf("summaries differ: parallel 1 %+v, parallel 3 %+v", s1, s3)
	}
	if s1.Messages == 0 || s1.Crashes == 0 {
		t.Errorf("no deliveries or crashes: %+v", s1)
	}
}

// BenchmarkRun reports the throughput of `flexslurm chaos`: seeds 1…N of
// the default workload (30 h of events, 6 h of tail), on GOMAXPROCS seeds
// at once with the command's garbage collector setting, in seeds per wall
// second and CPU seconds (user+sys) per seed. BENCHMARKS.md records it.
func BenchmarkRun(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	defer debug.SetGCPercent(debug.SetGCPercent(GCPercent))
	cpu0 := cpuTime(b)
	start := time.Now()
	s, err := Run(ctx, 1, b.N, RunOptions{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	wall := time.Since(start)
	b.ReportMetric(float64(s.Seeds)/wall.Seconds(), "seeds/s")
	b.ReportMetric((cpuTime(b)-cpu0).Seconds()/float64(s.Seeds), "cpu-s/seed")
	b.ReportMetric(float64(s.Messages)/float64(s.Seeds), "deliveries/seed")
	b.ReportMetric(float64(s.Crashes)/float64(s.Seeds), "crashes/seed")
}

// cpuTime is the process's user+sys CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
