package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/expirybench"
)

func init() {
	commands["bench"] = command{"simulate flexslurm over time and print what it achieves (bench expiry: make-before-break vs recreate; bench trace FILE: a GPU trace's cost)", cmdBench}
	for name := range benchSubcommands {
		subcommands["bench"] = append(subcommands["bench"], name)
	}
	slices.Sort(subcommands["bench"])
}

// benchSubcommands are the subcommands of `flexslurm bench`.
// registerBench adds a bench subcommand defined in a file of its own.
func registerBench(name string, run func(args []string, stdout, stderr io.Writer) int) {
	benchSubcommands[name] = run
	if !slices.Contains(subcommands["bench"], name) {
		subcommands["bench"] = append(subcommands["bench"], name)
	}
	slices.Sort(subcommands["bench"])
}

var benchSubcommands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"expiry": cmdBenchExpiry,
}

func cmdBench(args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: flexslurm bench expiry [FLAGS]\n       flexslurm bench trace [FLAGS] FILE\n       flexslurm bench react [FLAGS]\n\nexpiry: a week of a static Flex-Start pool whose VMs reach their max run\n        duration, under make-before-break (the default policy) and\n        recreate-after-termination, side by side; run 'flexslurm bench expiry -h'.")
		fmt.Fprintln(w, "trace:  a production GPU trace replayed on a Flex-Start pool: GPU-hours paid\n        against used, flexslurm's default beside Cluster Toolkit's defaults and\n        the oracle bound; run 'flexslurm bench trace -h'.")
		fmt.Fprintln(w, "react:  reaction times on the local system with real Slurm (resume, registration,\n        health failure, expiry), p50/p99 against the peers' polling periods;\n        run 'flexslurm bench react -h'.")
	}
	if code, ok := subcommand("bench", args, stdout, stderr, usage); !ok {
		return code
	}
	return benchSubcommands[args[0]](args[1:], stdout, stderr)
}

// durationList is a comma-separated list of durations.
type durationList []time.Duration

func (l *durationList) String() string {
	var s []string
	for _, d := range *l {
		s = append(s, d.String())
	}
	return strings.Join(s, ",")
}

func (l *durationList) Set(v string) error {
	var out durationList
	for _, f := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		out = append(out, d)
	}
	*l = out
	return nil
}

// seedList is a list of seeds: comma-separated seeds and ranges a-b.
type seedList []uint64

func (l *seedList) String() string {
	var s []string
	for _, v := range *l {
		s = append(s, strconv.FormatUint(v, 10))
	}
	return strings.Join(s, ",")
}

func (l *seedList) Set(v string) error {
	var out seedList
	seen := map[uint64]bool{}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return fmt.Errorf("%q: want a seed or a range of seeds a-b", f)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return fmt.Errorf("%q: want a range a-b with a ≤ b", f)
			}
			if b-a >= 1000 {
				return fmt.Errorf("%q: at most 1000 seeds", f)
			}
		}
		for s := a; ; s++ {
			if seen[s] {
				return fmt.Errorf("seed %d given twice", s)
			}
			seen[s] = true
			out = append(out, s)
			if s == b {
				break
			}
		}
	}
	*l = out
	return nil
}

func cmdBenchExpiry(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench expiry", flag.ContinueOnError)
	seed := fs.Uint64("seed", 1, "seed of the capacity waits and the job workload (the same for every strategy)")
	var seeds seedList
	fs.Var(&seeds, "seeds", "run several seeds, e.g. 1-10 or 1,4,7-9: the tables, timelines and episodes of the first, then each strategy's min / median / max over all (instead of --seed)")
	nodes := fs.Int("nodes", expirybench.DefaultNodes, "min_node_count: the static nodes")
	maxNodes := fs.Int("max-nodes", 0, "max_node_count (default 2 × nodes: room for successors)")
	week := fs.Duration("week", expirybench.DefaultPeriod, "measured period, after the warm-up")
	warmUp := fs.Duration("warmup", expirybench.DefaultWarmUp, "simulated before the measured period (the pool fills, the queue settles)")
	durations := durationList{7 * 24 * time.Hour, 24 * time.Hour}
	fs.Var(&durations, "durations", "flex_start_max_duration values to run, comma-separated")
	median := fs.Duration("wait-median", expirybench.DefaultWait.Median, "median capacity wait per resize request (log-normal)")
	sigma := fs.Float64("wait-sigma", expirybench.DefaultWait.Sigma, "σ of the log-normal capacity wait (0: uniform median ± wait-spread)")
	spread := fs.Duration("wait-spread", 0, "half-width of the uniform capacity wait (with -wait-sigma 0)")
	load := fs.Float64("load", expirybench.DefaultLoad, "offered job load as a fraction of the static nodes")
	tick := fs.Duration("tick", expirybench.DefaultTick, "reconcile period")
	boot := fs.Duration("boot", expirybench.DefaultBootTime, "from VM running to node registered in Slurm")
	out := fs.String("out", ".", "directory for the timeline pictures (expiry-timeline-<duration>.<format>)")
	format := fs.String("format", "svg", "picture format: svg or png")
	markdown := fs.Bool("markdown", false, "print the tables as Markdown")
	verbose := fs.Bool("v", false, "also list every interval below min_node_count, with its cause, and with --seeds make-before-break's headline metrics seed by seed")
	lead := fs.Duration("lead", 0, "fix make-before-break's lead time (plan.Policy.LeadTime; default flexslurm's: learnt from the pool's recent waits to registration, docs/design/expiry.md, Make-before-break)")
	direct := fs.Bool("direct-compute", false, "send every Compute read through the apiv1 adapter (no read cache; same results, slower)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: flexslurm bench expiry [--seed S] [--nodes N] [--week D] [--out DIR] [FLAGS]

Simulates, for each max run duration, a warm-up and a week of a static
Flex-Start pool whose VMs all reach their max run duration, with random
capacity waits and a random single-node job workload, against the real
functions (in-memory store, Compute simulator, manual clock), and prints side
by side, from one run of each:

  make-before-break             flexslurm's default policy
  recreate-after-termination    plan.Policy{RecreateAfterTermination: true}
  recreate, no EOL reservation  the same, with Slurm ignoring flexslurm's
                                end-of-life reservations (a system with neither)

Static availability is the fraction of the measured period during which at
least min_node_count nodes were usable (VM running, registered in Slurm, not
drained). Also writes one timeline picture per duration to --out. With
--seeds, the first seed's tables and pictures, then the spread over the
seeds (min / median / max), with the VM time each strategy pays relative to
recreate-after-termination's.`)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if noArgs(fs, stderr) {
		return 2
	}
	if len(durations) == 0 {
		fmt.Fprintln(stderr, "flexslurm bench expiry: --durations: want at least one duration")
		return 2
	}
	if *lead < 0 {
		fmt.Fprintf(stderr, "flexslurm bench expiry: --lead %s: want a duration not negative\n", *lead)
		return 2
	}
	ext := strings.ToLower(*format)
	if ext != "svg" && ext != "png" {
		fmt.Fprintf(stderr, "flexslurm bench expiry: --format %q: want svg or png\n", *format)
		return 2
	}
	seedSet := false
	fs.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	if len(seeds) > 0 && seedSet {
		fmt.Fprintln(stderr, "flexslurm bench expiry: --seed and --seeds: give one of them")
		return 2
	}
	if len(seeds) == 0 {
		seeds = seedList{*seed}
	}
	var cfgs []expirybench.Config
	for _, sd := range seeds {
		for _, d := range durations {
			cfg := expirybench.Config{Seed: sd, Nodes: *nodes, MaxNodes: *maxNodes, MaxRunDuration: d, WarmUp: *warmUp, Period: *week,
				Tick: *tick, BootTime: *boot, Load: *load, DirectCompute: *direct,
				Wait: expirybench.WaitDist{Median: *median, Sigma: *sigma, Spread: *spread}}
			if err := cfg.Validate(); err != nil {
				fmt.Fprintf(stderr, "flexslurm bench expiry: %v\n", err)
				return 2
			}
			cfgs = append(cfgs, cfg)
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "flexslurm bench expiry: %v\n", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	strategies := expirybench.Strategies()
	if *lead > 0 {
		strategies[0].Policy.LeadTime = *lead
		strategies[0].Name += fmt.Sprintf(" (lead %s)", durationName(*lead))
	}
	results, err := expirybench.RunAll(ctx, cfgs, strategies)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm bench expiry: %v\n", err)
		return 1
	}
	wall := time.Since(start)
	all := results
	// The first seed's runs: tables, timelines, episodes.
	results = results[:len(durations)*len(strategies)]
	cfgs = cfgs[:len(durations)]
	if err := expirybench.WriteTable(stdout, results, *markdown); err != nil {
		fmt.Fprintf(stderr, "flexslurm bench expiry: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout)
	for i, cfg := range cfgs {
		group := results[i*len(strategies) : (i+1)*len(strategies)]
		name := filepath.Join(*out, fmt.Sprintf("expiry-timeline-%s.%s", durationName(cfg.MaxRunDuration), ext))
		title := fmt.Sprintf("Static pool of %d nodes, flex_start_max_duration %s, seed %d: one lane per node",
			group[0].Config.Nodes, durationName(cfg.MaxRunDuration), cfg.Seed)
		if err := expirybench.WriteTimeline(name, title, group, expirybench.TimeRange{}); err != nil {
			fmt.Fprintf(stderr, "flexslurm bench expiry: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "timeline: %s\n", name)
		// A long max run duration puts its expiries in a few hours of the
		// week: draw those hours too.
		if first, ok := expirybench.FirstExpiry(group); ok && cfg.MaxRunDuration > 2*24*time.Hour {
			zoom := filepath.Join(*out, fmt.Sprintf("expiry-timeline-%s-zoom.%s", durationName(cfg.MaxRunDuration), ext))
			from := (first - 2*time.Hour).Truncate(time.Hour)
			tr := expirybench.TimeRange{From: from, To: from + 8*time.Hour}
			if err := expirybench.WriteTimeline(zoom, title+fmt.Sprintf(", hours %.0f–%.0f", tr.From.Hours(), tr.To.Hours()), group, tr); err != nil {
				fmt.Fprintf(stderr, "flexslurm bench expiry: %v\n", err)
				return 1
			}
			fmt.Fprintf(stdout, "timeline: %s\n", zoom)
		}
	}
	if *verbose {
		fmt.Fprintln(stdout)
		expirybench.WriteEpisodes(stdout, results)
	}
	if len(seeds) > 1 {
		fmt.Fprintln(stdout)
		if err := expirybench.WriteSpread(stdout, all, *markdown); err != nil {
			fmt.Fprintf(stderr, "flexslurm bench expiry: %v\n", err)
			return 1
		}
		if *verbose {
			fmt.Fprintln(stdout)
			if err := expirybench.WriteSeeds(stdout, all, *markdown); err != nil {
				fmt.Fprintf(stderr, "flexslurm bench expiry: %v\n", err)
				return 1
			}
		}
	}
	if f := expirybench.Findings(all); len(f) > 0 {
		fmt.Fprintf(stdout, "\nmake-before-break intervals below min_node_count that late capacity does not explain (%d):\n", len(f))
		for _, line := range f {
			fmt.Fprintf(stdout, "  %s\n", line)
		}
	}
	fmt.Fprintf(stdout, "\n%d runs in %s\n", len(all), wall.Round(10*time.Millisecond))
	return 0
}

// durationName spells a max run duration for a file name: 7d, 1d, 12h, 90m.
func durationName(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}
