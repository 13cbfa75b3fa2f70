package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/scenario"
)

func init() {
	commands["scenario"] = command{"run scenario files in-process on a virtual clock (scenario run FILE...)", cmdScenario}
	subcommands["scenario"] = []string{"run"}
}

func cmdScenario(args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: flexslurm scenario run [-v] [-trace] [-log FILE] [--compute-readings R] FILE...\n\nRuns each scenario file (docs/scenarios.md) against the four functions, the\nin-memory store and the Compute Engine simulator on a virtual clock, and\nprints every failed assertion (every assertion with -v). A FILE may be a\ndirectory: its *.yaml files are run. The exit status is 1 when an assertion\nfails or a file does not run, 2 on a usage error.")
	}
	if code, ok := subcommand("scenario", args, stdout, stderr, usage); !ok {
		return code
	}
	fs := flag.NewFlagSet("scenario run", flag.ContinueOnError)
	verbose := fs.Bool("v", false, "print every assertion, not only failures")
	trace := fs.Bool("trace", false, "print the timeline of each run (deliveries, crashes, commands)")
	logPath := fs.String("log", "", "append the functions' structured logs to this file")
	readings := fs.String("compute-readings", "", computeReadingsHelp+"; default: each file's simulator.compute_readings, else lenient")
	fs.Usage = func() { usage(fs.Output()); fs.PrintDefaults() }
	if code, done := parseFlags(fs, args[1:], stdout, stderr); done {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "flexslurm scenario run: no FILE given")
		fs.Usage()
		return 2
	}
	files, err := scenarioFiles(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm scenario run: %v\n", err)
		return 2
	}
	if *readings != "" {
		if _, err := computesim.ParseReadings(*readings); err != nil {
			fmt.Fprintf(stderr, "flexslurm scenario run: --compute-readings: %v\n", err)
			return 2
		}
	}
	opts := scenario.RunOptions{Trace: *trace, ComputeReadings: *readings}
	if *logPath != "" {
		lf, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm scenario run: %v\n", err)
			return 2
		}
		defer lf.Close()
		opts.Log = lf
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	status, failed := 0, 0
	for _, path := range files {
		f, err := scenario.Load(path)
		if err != nil {
			fmt.Fprintf(stdout, "%v\n", err)
			status, failed = 1, failed+1
			continue
		}
		rep, err := scenario.RunFile(ctx, f, opts)
		rep.File = path
		rep.Write(stdout, *verbose || *trace)
		if err != nil {
			fmt.Fprintf(stdout, "  error: %v\n", err)
		}
		if err != nil || rep.Failed() {
			status, failed = 1, failed+1
		}
	}
	if len(files) > 1 {
		fmt.Fprintf(stdout, "%d scenario(s), %d failed\n", len(files), failed)
	}
	return status
}

// computeReadingsHelp describes --compute-readings (chaos, scenario run,
// local).
const computeReadingsHelp = "how the Compute simulator behaves on each open point of Compute behaviour (docs/compute-contract.md, \"Open points\"): lenient, strict, or a comma list such as strict,-IgnoreLabelFilter or lenient,RefuseNamedRequestsOnV1,RunEndAudit=migDelete (switches: RefuseTargetSizeWhileAccepted, RefuseNamedRequestsOnV1, RefuseNamedRequestsOnBeta, RunEndAudit, IgnoreLabelFilter, KeepTargetSizeAtRunEnd)"

// scenarioFiles expands directories into their *.yaml files.
func scenarioFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		m, err := filepath.Glob(filepath.Join(a, "*.yaml"))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s has no *.yaml file", a)
		}
		out = append(out, m...)
	}
	return out, nil
}
