package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"time"

	"github.com/flexslurm/flexslurm/dev/expirybench"
	"github.com/flexslurm/flexslurm/dev/tracebench"
)

func init() { registerBench("trace", cmdBenchTrace) }

func cmdBenchTrace(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench trace", flag.ContinueOnError)
	from := fs.Float64("from", 0, "replay the tasks created from this day of the trace (days since its start; fractions allowed)")
	days := fs.Float64("days", 0, "replay this many days of the trace (0: to its end)")
	seed := fs.Uint64("seed", 1, "seed of the capacity waits (the same for every strategy)")
	maxNodes := fs.Int("max-nodes", tracebench.DefaultMaxNodes, "the pool's max_node_count (8 GPUs a node, min_node_count 0)")
	maxRun := fs.Duration("max-run-duration", tracebench.DefaultMaxRunDuration, "the pool's flex_start_max_duration (600s–168h)")
	median := fs.Duration("wait-median", expirybench.DefaultWait.Median, "median capacity wait per resize request (log-normal)")
	sigma := fs.Float64("wait-sigma", expirybench.DefaultWait.Sigma, "σ of the log-normal capacity wait (0: uniform median ± wait-spread)")
	spread := fs.Duration("wait-spread", 0, "half-width of the uniform capacity wait (with -wait-sigma 0)")
	tick := fs.Duration("tick", tracebench.DefaultTick, "reconcile period")
	boot := fs.Duration("boot", tracebench.DefaultBootTime, "from VM running to node registered in Slurm")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: flexslurm bench trace [--from DAY] [--days N] [--seed S] [FLAGS] FILE

Replays a GPU pod trace (the columns of Alibaba's cluster-trace-gpu-v2023 pod
lists: name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos,
pod_phase, creation_time, deletion_time, scheduled_time) through the real
functions on a simulated clock (in-memory store, Compute simulator, a model
of Slurm packing the jobs onto a Flex-Start pool's 8-GPU nodes by gres/gpu),
and prints side by side:

  flexslurm default                       flexslurm's default policy
  flexslurm, capacity as long as the job  the pool with use_job_duration: each
                                          job's VM asked for its time limit
                                          plus the boot allowance
  Cluster Toolkit defaults                SuspendTime 300 s, VMs for the pool's
                                          maximum, no replacement ahead of
                                          expiry, no end-of-life reservation
  oracle lower bound                      GPU-hours used + one boot per node start

GPU-hours paid and used, idle VM-hours, jobs killed by a VM's end, jobs
refused as fitting no node, the delay flexslurm adds beyond the capacity
wait, Compute calls and store operations per job, and wall-clock seconds
per simulated day. The report says how it derives what the trace lacks
(time limits, boot time, capacity waits). The whole Alibaba trace (149 days)
takes minutes: --from and --days replay a window.`)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "flexslurm bench trace: want one trace FILE, got %d arguments\n\n", fs.NArg())
		fs.SetOutput(stderr)
		fs.Usage()
		return 2
	}
	if *from < 0 || *days < 0 || math.IsNaN(*from) || math.IsNaN(*days) || *from > 3660 || *days > 3660 {
		fmt.Fprintf(stderr, "flexslurm bench trace: --from %g, --days %g: want days from 0 to 3660\n", *from, *days)
		return 2
	}
	dayDur := func(d float64) time.Duration { return time.Duration(d * float64(24*time.Hour)).Round(time.Second) }
	cfg := tracebench.Config{Seed: *seed, From: dayDur(*from), Length: dayDur(*days), MaxNodes: *maxNodes, MaxRunDuration: *maxRun,
		Tick: *tick, BootTime: *boot, Wait: expirybench.WaitDist{Median: *median, Sigma: *sigma, Spread: *spread}}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "flexslurm bench trace: %v\n", err)
		return 2
	}
	file := fs.Arg(0)
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm bench trace: %v\n", err)
		return 1
	}
	tasks, err := tracebench.ParseTrace(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm bench trace: %s: %v\n", file, err)
		return 1
	}
	length := cfg.Length
	if length == 0 {
		for _, t := range tasks {
			length = max(length, t.Created-cfg.From+time.Second)
		}
		cfg.Length = max(length, 0)
	}
	jobs, skipped := tracebench.Window(tasks, cfg.From, cfg.Length)
	if len(jobs) == 0 {
		fmt.Fprintf(stderr, "flexslurm bench trace: %s: no GPU task that ran was created in the window (day %g for %g days)\n", file, *from, cfg.Length.Hours()/24)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	results, err := tracebench.Compare(ctx, cfg, jobs, tracebench.Strategies())
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm bench trace: %v\n", err)
		return 1
	}
	tracebench.WriteReport(stdout, tracebench.Source{File: file, Tasks: len(tasks), Skipped: skipped}, results)
	return 0
}
