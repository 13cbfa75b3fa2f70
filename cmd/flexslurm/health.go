package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flexslurm/flexslurm/shared/health"
)

func init() {
	commands["health"] = command{
		"check this node's GPUs (health check [--from-dir DIR]); exit 0 PASS, 1 FAIL, 2 INCONCLUSIVE",
		cmdHealth,
	}
	subcommands["health"] = []string{"check"}
}

// healthUsageExit is the exit status of a usage error of `flexslurm
// health`, distinct from the verdicts' 0, 1 and 2 (64 is EX_USAGE in
// sysexits.h).
const healthUsageExit = 64

func cmdHealth(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runHealth(ctx, args, stdout, stderr)
}

func healthUsage(w io.Writer) {
	fmt.Fprintln(w, `usage: flexslurm health check [flags]

Runs the GPU health probes (nvidia-smi GPU query, nvidia-smi nvlink -e, the
kernel log, dcgmi diag -r LEVEL -j) concurrently, each under its own time
budget, and prints the verdict as JSON:
  {"verdict": ..., "reasons": [...], "warnings": [...], "probes": {...}}
Exit status: 0 PASS, 1 FAIL, 2 INCONCLUSIVE, 64 usage error.

--accelerator-count is the pool's GPU count: fewer GPUs visible is FAIL, and
so is a GPU the driver can no longer reach (nvidia-smi cannot get its device
handle, "GPU is lost", "No devices were found").

Depth: the hooks run level 1 of the DCGM diagnostic (seconds). On demand,
--dcgm-level 2 (about two minutes) or 3 (about 15 minutes) runs a deeper one,
and --nccl then runs NCCL's all_reduce_perf (nccl-tests) across the node's
--accelerator-count GPUs with data checking: any wrong value FAILs, and so
does an average bus bandwidth below --nccl-min-busbw GB/s. Both take the
node's GPUs: drain the node first (scontrol update nodename=N state=drain
reason=...). A tool that is not installed makes its probe INCONCLUSIVE,
saying so.

Each tool is the path given by its flag, else the first executable of its name
in --tool-path (default $PATH), then /usr/local/sbin, /usr/local/bin,
/usr/sbin, /usr/bin, /sbin, /bin, /usr/local/nvidia/bin, /var/lib/nvidia/bin
(relative directories are skipped); the kernel log is read with dmesg or, when
there is none, journalctl --dmesg. Tools run with no shell; a missing tool
makes its probe INCONCLUSIVE, naming where it was looked for.
With --from-dir the recorded outputs nvidia-smi-query.csv,
nvidia-smi-nvlink-e.txt, dmesg.txt and dcgmi-diag.json are read instead (a
missing file is a missing tool; FILE.stderr and FILE.exit, when present, are
the tool's standard error and exit status), and all-reduce-perf.txt with
--nccl.

flags:`)
}

// runHealth is cmdHealth with its context.
func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// A usage error exits 64, not 2: 2 is the INCONCLUSIVE verdict.
	if code, ok := subcommand("health", args, stdout, stderr, healthUsage); !ok {
		if code != 0 {
			return healthUsageExit
		}
		return 0
	}
	fs := flag.NewFlagSet("health check", flag.ContinueOnError)
	fromDir := fs.String("from-dir", "", "read recorded tool outputs from `DIR` instead of running the tools")
	count := fs.Int("accelerator-count", 0, "GPUs the node must have (the pool's accelerator_count); 0 skips the count")
	timeout := fs.Duration("timeout", 0, "overall deadline of the check (e.g. 50s); 0 leaves only the per-probe budgets")
	expectNVLink := fs.Bool("expect-nvlink", false, "the GPUs are NVLink-connected: no NVLink counters at all is INCONCLUSIVE")
	replayFailAt := fs.Uint64("nvlink-replay-fail-at", 0, fmt.Sprintf("per-link NVLink replay errors that FAIL (0 = %d)", health.DefaultNVLinkFailAt))
	crcFailAt := fs.Uint64("nvlink-crc-fail-at", 0, fmt.Sprintf("per-link NVLink CRC errors that FAIL (0 = %d)", health.DefaultNVLinkFailAt))
	skip := fs.String("skip", "", "comma-separated probes not to run ("+probeNames()+")")
	budgets := fs.String("budget", "", "per-probe time budgets, e.g. gpu_query=20s,dcgm_diag=90s")
	dcgmLevel := fs.Int("dcgm-level", 1, fmt.Sprintf("level of the DCGM diagnostic, 1 to %d", health.MaxDCGMLevel))
	nccl := fs.Bool("nccl", false, "also run NCCL's all_reduce_perf across the node's GPUs (takes them for a minute or more)")
	ncclMinBusBW := fs.Float64("nccl-min-busbw", 0, "with --nccl, the average bus bandwidth in GB/s below which the check FAILs (0: only wrong values fail)")
	var tools health.ExecSources
	fs.StringVar(&tools.NvidiaSMI, "nvidia-smi", "", "absolute path of nvidia-smi (default: looked up)")
	fs.StringVar(&tools.DCGMI, "dcgmi", "", "absolute path of dcgmi (default: looked up)")
	fs.StringVar(&tools.Dmesg, "dmesg", "", "absolute path of dmesg (default: looked up)")
	fs.StringVar(&tools.Journalctl, "journalctl", "", "absolute path of journalctl, read for the kernel log when there is no dmesg (default: looked up)")
	fs.StringVar(&tools.AllReducePerf, "all-reduce-perf", "", "absolute path of all_reduce_perf, with --nccl (default: looked up)")
	toolPath := fs.String("tool-path", os.Getenv("PATH"), "colon-separated `DIRS` searched for the tools before the system directories")
	fs.Usage = func() {
		healthUsage(fs.Output())
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args[1:], stdout, stderr); done {
		if code != 0 {
			return healthUsageExit
		}
		return 0
	}
	opts, err := healthOptions(*count, *timeout, *skip, *budgets)
	opts.ExpectNVLink, opts.NVLinkReplayFailAt, opts.NVLinkCRCFailAt = *expectNVLink, *replayFailAt, *crcFailAt
	opts.DCGMLevel, opts.NCCL, opts.NCCLMinBusBandwidth = *dcgmLevel, *nccl, *ncclMinBusBW
	tools.DCGMLevel, tools.GPUs = *dcgmLevel, max(*count, 1)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case err != nil:
	case *dcgmLevel < 1 || *dcgmLevel > health.MaxDCGMLevel:
		err = fmt.Errorf("--dcgm-level %d: want 1 to %d (level 4 runs for hours: run dcgmi diag -r 4 by hand)", *dcgmLevel, health.MaxDCGMLevel)
	case *ncclMinBusBW < 0:
		err = fmt.Errorf("--nccl-min-busbw %g is negative", *ncclMinBusBW)
	case *ncclMinBusBW > 0 && !*nccl:
		err = fmt.Errorf("--nccl-min-busbw needs --nccl")
	}
	for name, p := range map[string]string{"--nvidia-smi": tools.NvidiaSMI, "--dcgmi": tools.DCGMI, "--dmesg": tools.Dmesg, "--journalctl": tools.Journalctl, "--all-reduce-perf": tools.AllReducePerf} {
		if err == nil && p != "" && !filepath.IsAbs(p) {
			err = fmt.Errorf("%s %q must be an absolute path", name, p)
		}
	}
	tools.SearchPath = filepath.SplitList(*toolPath)
	var src health.Sources = tools
	if err == nil && *fromDir != "" {
		if st, statErr := os.Stat(*fromDir); statErr != nil || !st.IsDir() {
			err = fmt.Errorf("--from-dir %s is not a readable directory", *fromDir)
		}
		src = health.DirSources{Dir: *fromDir}
	}
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm health check: %v\n", err)
		return healthUsageExit
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	res := health.Check(ctx, src, opts)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		fmt.Fprintf(stderr, "flexslurm health check: writing the result: %v\n", err)
		return health.Inconclusive.ExitCode()
	}
	return res.Verdict.ExitCode()
}

// knownProbes are the default probes and the on-demand one.
var knownProbes = append(slices.Clip(health.AllProbes), health.ProbeNCCL)

func probeNames() string {
	names := make([]string, len(knownProbes))
	for i, p := range knownProbes {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

func parseProbeName(s string) (health.ProbeName, error) {
	p := health.ProbeName(strings.TrimSpace(s))
	if !slices.Contains(knownProbes, p) {
		return "", fmt.Errorf("unknown probe %q (probes: %s)", s, probeNames())
	}
	return p, nil
}

// healthOptions validates the flags and builds the check's options.
func healthOptions(count int, timeout time.Duration, skip, budgets string) (health.Options, error) {
	opts := health.Options{AcceleratorCount: count}
	var problems []error
	if count < 0 {
		problems = append(problems, fmt.Errorf("--accelerator-count %d is negative", count))
	}
	if timeout < 0 {
		problems = append(problems, fmt.Errorf("--timeout %s is negative", timeout))
	}
	if skip != "" {
		for s := range strings.SplitSeq(skip, ",") {
			p, err := parseProbeName(s)
			if err != nil {
				problems = append(problems, fmt.Errorf("--skip: %w", err))
				continue
			}
			opts.Skip = append(opts.Skip, p)
		}
	}
	if budgets != "" {
		opts.Budgets = map[health.ProbeName]time.Duration{}
		for item := range strings.SplitSeq(budgets, ",") {
			name, value, ok := strings.Cut(item, "=")
			if !ok {
				problems = append(problems, fmt.Errorf("--budget: %q is not probe=duration", item))
				continue
			}
			p, err := parseProbeName(name)
			if err != nil {
				problems = append(problems, fmt.Errorf("--budget: %w", err))
				continue
			}
			d, err := time.ParseDuration(strings.TrimSpace(value))
			if err != nil || d <= 0 {
				problems = append(problems, fmt.Errorf("--budget: %s=%s is not a positive duration", p, value))
				continue
			}
			opts.Budgets[p] = d
		}
	}
	return opts, errors.Join(problems...)
}
