package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/emulator"
	"github.com/flexslurm/flexslurm/dev/local"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/plan"
)

func cmdLocal(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	o := local.Options{Out: stdout}
	fs.StringVar(&o.SpecPath, "spec", "examples/cluster_config.json", "cluster spec to apply")
	fs.BoolVar(&o.Demo, "demo", false, "drive the node lifecycle README.md describes, print the timeline and check every outcome (exit 1 if any differs)")
	fs.Float64Var(&o.Speedup, "speedup", 0, "simulated clock speed-up over wall time (default: 1, the wall clock Slurm runs on, so your jobs complete; with --demo 10080, a week per minute, so VMs reach their max run duration within the demo)")
	fs.DurationVar(&o.CapacityDelay, "capacity-delay", 0, "simulated wait for Flex-Start capacity per resize request (default: 20 s of wall time; 30m with --demo)")
	fs.DurationVar(&o.TickEvery, "tick", time.Second, "wall-clock period of the reconcile tick")
	fs.StringVar(&o.Project, "project", "", "emulated Google Cloud project (default: the spec's)")
	fs.StringVar(&o.RunDir, "run-dir", ".run/local", "directory for the logs of the emulators, simulator, functions and Slurm")
	fs.BoolVar(&o.NoSlurm, "no-slurm", false, "run without Slurm (no slurmctld or slurmd; the demo publishes the hooks' job reports itself)")
	fs.StringVar(&o.Slurm, "slurm", "22.05", "Slurm `release` of the local cluster: 22.05 (this host's) or 24.11 (the Debian 13 chroot that .ci/slurm-chroot.sh build makes)")
	fs.BoolVar(&o.MakeBeforeBreak, "make-before-break", false, "request static nodes' successors ahead of their end (its lead time is inflated by the scaled clock)")
	fs.BoolVar(&o.NoApply, "no-apply", false, "do not apply the spec: create the cluster through the API (the banner's curl); not with --demo")
	readings := fs.String("compute-readings", "lenient", computeReadingsHelp)
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", 0, fmt.Sprintf("simulated time an idle dynamic node is kept before flexslurm releases it (default: %s of wall time; 336h with --demo)", plan.DefaultPolicy().IdleTimeout))
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm local [--demo] [flags]\n\nRuns the whole system on this machine: the Firestore and Pub/Sub emulators, the\nCompute Engine simulator, the four functions served by functions-framework,\nwired by Pub/Sub push subscriptions, the API function (the\nmodelDevelopmentClusters REST surface, unauthenticated: docs/api.md), and a real Slurm cluster (munged,\nslurmctld, the hooks and the agent; one slurmd per running VM), installed\nwith apt-get when missing. Ctrl-C stops everything.")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if noArgs(fs, stderr) {
		return 2
	}
	r, err := computesim.ParseReadings(*readings)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm local: --compute-readings: %v\n", err)
		return 2
	}
	o.ComputeReadings = r
	if _, err := local.SlurmInstallation(o.Slurm); err != nil {
		fmt.Fprintf(stderr, "flexslurm local: --slurm: %v\n", err)
		return 2
	}
	// SIGHUP too: closing the terminal stops everything, as Ctrl-C does.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := local.Run(ctx, o); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "flexslurm local: interrupted; everything it started is stopped")
			return 130
		}
		if errors.Is(err, emulator.ErrFirestoreNotFound) || errors.Is(err, emulator.ErrPubSubNotFound) || errors.Is(err, emulator.ErrJavaNotFound) {
			fmt.Fprintf(stderr, "flexslurm local: a prerequisite is missing:\n%s\n", joinLines(err.Error()))
			return 3
		}
		fmt.Fprintf(stderr, "flexslurm local: %v\n", err)
		return 1
	}
	return 0
}

// quotaMetric is the form of a Compute quota metric (Quota.metric).
var quotaMetric = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

func cmdComputeSim(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compute-sim", flag.ContinueOnError)
	quotas := map[string]float64{}
	fs.Func("quota", "METRIC=LIMIT: a quota limit the simulator enforces and regions.get and projects.get report, e.g. INSTANCE_GROUP_MANAGERS=20 (repeatable); only metrics of the discovery document's Quota.metric enum whose usage the simulator counts are listed (INSTANCE_GROUP_MANAGERS, INSTANCES, INSTANCE_TEMPLATES, GPUS_ALL_REGIONS, the enum's GPU quotas), so preflight reports the others as unknown", func(v string) error {
		metric, limit, ok := strings.Cut(v, "=")
		n, err := strconv.ParseFloat(limit, 64)
		if !ok || !quotaMetric.MatchString(metric) || err != nil || n < 0 {
			return fmt.Errorf("%q is not METRIC=LIMIT (an upper-case quota metric such as PREEMPTIBLE_NVIDIA_H100_GPUS, and a limit ≥ 0)", v)
		}
		quotas[metric] = n
		return nil
	})
	addr := fs.String("addr", "127.0.0.1:8787", "address to listen on")
	speedup := fs.Float64("speedup", 1, "simulated clock speed-up over wall time")
	project := fs.String("project", "", "only serve this project (default: any)")
	capacity := fs.Duration("capacity-delay", 0, "simulated wait for capacity per resize request")
	readings := fs.String("compute-readings", "lenient", computeReadingsHelp)
	style := fs.String("expiry-log", computesim.ExpiryLogDeferredDelete, "how an expiry is logged: deferredDelete or migDelete")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm compute-sim [flags]\n\nServes the Compute Engine REST paths flexslurm uses (instance templates, zonal\nMIGs, resize requests, instances, operations) with the real wire format. Point\nclients at it with option.WithEndpoint(\"http://ADDR\") and\noption.WithoutAuthentication().")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if noArgs(fs, stderr) {
		return 2
	}
	r, err := computesim.ParseReadings(*readings)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm compute-sim: --compute-readings: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	clk := clock.NewScaled(time.Now().UTC(), *speedup)
	cd := *capacity
	opts := computesim.Options{Project: *project, ExpiryLogStyle: *style, Readings: r,
		CapacityDelay: func(string, string) time.Duration { return cd }}
	fmt.Fprintf(stdout, "Compute simulator on http://%s (clock ×%g)\n", *addr, *speedup)
	opts.Quotas = quotas
	if err := computesim.ListenAndServe(ctx, *addr, opts, clk); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "flexslurm compute-sim: %v\n", err)
		return 1
	}
	return 0
}

func cmdEmulators(args []string, stdout, stderr io.Writer) int {
	return emulator.Main(args, stdout, stderr)
}
