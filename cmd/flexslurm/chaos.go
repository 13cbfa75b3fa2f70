package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"

	"github.com/flexslurm/flexslurm/dev/chaos"
	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/scenario"
	"github.com/flexslurm/flexslurm/shared/plan"
)

func init() {
	commands["chaos"] = command{"run seeded random workloads with faults and check the invariants (chaos --seeds N [--seed S])", cmdChaos}
}

func cmdChaos(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	seeds := fs.Int("seeds", 1, "number of seeds to run")
	seed := fs.Uint64("seed", 1, "first seed")
	horizon := fs.Duration("horizon", 0, "simulated time over which events are generated (default 30h)")
	noShrink := fs.Bool("no-shrink", false, "print failing seeds' full scenarios instead of shrinking them")
	shrinkAll := fs.Bool("shrink-all", false, "shrink every failing seed, not only the first of each failure signature")
	out := fs.String("out", "", "also write each failing seed's minimal scenario to DIR/chaos-seed-S.yaml")
	verbose := fs.Bool("v", false, "print one line per seed")
	parallel := fs.Int("parallel", runtime.GOMAXPROCS(0), "how many seeds run at once (outcomes and output do not depend on it)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to FILE (go tool pprof)")
	readings := fs.String("compute-readings", "lenient", computeReadingsHelp+"; written into each seed's scenario")
	var policy policyFlag
	fs.Var(&policy, "policy", "set a decision knob in every scenario, KNOB=VALUE (plan.Policy field in snake_case, e.g. queue_timeout=2h); repeatable")
	var classes classFlag
	classNames := make([]string, len(chaos.Classes))
	for i, c := range chaos.Classes {
		classNames[i] = string(c)
	}
	fs.Var(&classes, "class", "add a convergence class's workload to every seed: "+strings.Join(classNames, ", ")+", or all; repeatable")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm chaos [--seeds N] [--seed S] [--horizon D] [--policy KNOB=VALUE] [--class NAME] [--no-shrink] [--out DIR] [--parallel N] [--cpuprofile FILE] [--compute-readings R] [-v]\n\nGenerates a random workload for each of the seeds S … S+N-1 (jobs submitted and\ncancelled, expiries, health failures, capacity delays, Compute errors), with\nevery message duplicated, delayed, reordered and crashed at random, runs it\nin-process and checks the invariants after every event. A failing seed is shrunk\nto a minimal scenario file, printed (replay it with `flexslurm scenario run`).\nExit status 1 when a seed fails.")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if noArgs(fs, stderr) {
		return 2
	}
	if *seeds < 1 {
		fmt.Fprintf(stderr, "flexslurm chaos: --seeds %d: want at least 1\n", *seeds)
		return 2
	}
	if _, err := computesim.ParseReadings(*readings); err != nil {
		fmt.Fprintf(stderr, "flexslurm chaos: --compute-readings: %v\n", err)
		return 2
	}
	if *parallel < 1 {
		fmt.Fprintf(stderr, "flexslurm chaos: --parallel %d: want at least 1\n", *parallel)
		return 2
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fmt.Fprintf(stderr, "flexslurm chaos: %v\n", err)
			return 2
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm chaos: --cpuprofile: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "flexslurm chaos: --cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(chaos.GCPercent))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opts := chaos.RunOptions{Options: chaos.Options{Horizon: *horizon, Policy: scenario.Policy(policy), Classes: classes, ComputeReadings: *readings}, Shrink: !*noShrink, ShrinkAll: *shrinkAll, Parallel: *parallel}
	sum, err := chaos.Run(ctx, *seed, *seeds, opts, func(o chaos.Outcome) {
		if o.Failed() {
			reportSeed(stdout, o, *out, !*noShrink)
		} else if *verbose {
			fmt.Fprintf(stdout, "seed %d: ok (%d deliveries, %d crashes, simulated %s in %s)\n", o.Seed, o.Report.Stats.Deliveries,
				o.Report.Stats.Crashes, scenario.FormatDuration(o.Report.Simulated), o.Report.Wall.Round(1e6))
		}
	})
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm chaos: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "chaos: %d seeds from %d, %d failed; %d deliveries, %d crashes; %.1f seeds/s\n",
		sum.Seeds, *seed, len(sum.Failed), sum.Messages, sum.Crashes, sum.SeedsPerSecond())
	if len(sum.Failed) == 0 {
		return 0
	}
	sigs := sum.Signatures()
	names := make([]string, 0, len(sigs))
	for sig := range sigs {
		names = append(names, sig)
	}
	sort.Strings(names)
	for _, sig := range names {
		var ids []string
		for _, s := range sigs[sig] {
			ids = append(ids, fmt.Sprint(s))
		}
		fmt.Fprintf(stdout, "failed: %s: %d seed(s): %s\n", sig, len(ids), strings.Join(ids, " "))
	}
	return 1
}

// reportSeed prints a failing seed: what failed, and the (minimal)
// scenario. A seed failing like an earlier one that was shrunk gets one line.
func reportSeed(w io.Writer, o chaos.Outcome, dir string, shrinking bool) {
	fmt.Fprintf(w, "seed %d FAILED: %s\n", o.Seed, o.Signature())
	if shrinking && o.Minimal == nil {
		fmt.Fprintf(w, "  (same failure as a seed shrunk above; `flexslurm chaos --seed %d --shrink-all` shrinks this one)\n", o.Seed)
		return
	}
	if o.Err != nil {
		fmt.Fprintf(w, "  error: %v\n", o.Err)
	}
	for _, f := range o.Report.Failures() {
		fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(f.String(), "\n", "\n  "))
	}
	file := o.File
	what := "scenario"
	if o.Minimal != nil {
		file = o.Minimal
		what = fmt.Sprintf("minimal scenario (%d of %d steps, %d shrinking runs)", len(o.Minimal.Steps), len(o.File.Steps), o.ShrinkRuns)
	}
	data, err := scenario.Marshal(file)
	if err != nil {
		fmt.Fprintf(w, "  cannot print the scenario: %v\n", err)
		return
	}
	fmt.Fprintf(w, "--- %s, seed %d ---\n%s---\n", what, o.Seed, data)
	if dir != "" {
		path := filepath.Join(dir, fmt.Sprintf("chaos-seed-%d.yaml", o.Seed))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintf(w, "  cannot write %s: %v\n", path, err)
			return
		}
		fmt.Fprintf(w, "written to %s\n", path)
	}
}

// policyFlag collects --policy KNOB=VALUE flags.
type policyFlag map[string]string

func (p *policyFlag) String() string {
	var parts []string
	for k, v := range *p {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (p *policyFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KNOB=VALUE, got %q", s)
	}
	if *p == nil {
		*p = policyFlag{}
	}
	if err := (scenario.Policy{k: v}).ApplyTo(new(plan.Policy)); err != nil {
		return err
	}
	(*p)[k] = v
	return nil
}

// classFlag collects --class NAME flags (chaos.Classes; "all" adds every
// class).
type classFlag []chaos.Class

func (c *classFlag) String() string {
	var parts []string
	for _, k := range *c {
		parts = append(parts, string(k))
	}
	return strings.Join(parts, ",")
}

func (c *classFlag) Set(s string) error {
	if s == "all" {
		*c = append((*c)[:0], chaos.Classes...)
		return nil
	}
	k, err := chaos.ParseClass(s)
	if err != nil {
		return err
	}
	*c = append(*c, k)
	return nil
}
