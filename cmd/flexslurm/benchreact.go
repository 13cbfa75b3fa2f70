package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/flexslurm/flexslurm/dev/local"
	"github.com/flexslurm/flexslurm/dev/reactbench"
)

func init() { registerBench("react", cmdBenchReact) }

func cmdBenchReact(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench react", flag.ContinueOnError)
	events := fs.Int("events", 50, "events of each kind driven one at a time (and at most this many faults and expiries in the burst)")
	burst := fs.Int("burst", 200, "jobs the burst submits at once (0: no burst)")
	burstNodes := fs.Int("burst-nodes", 50, "dynamic nodes of the pool")
	staticNodes := fs.Int("static-nodes", 6, "static nodes of the pool (the expiries' VMs, in turn)")
	spec := fs.String("spec", "examples/cluster_config.json", "cluster spec whose first Flex-Start pool is resized to static-nodes + burst-nodes")
	runDir := fs.String("run-dir", filepath.Join(".run", "reactbench"), "directory for the spec, the local system's logs and Slurm's")
	slurmRel := fs.String("slurm", "22.05", "local Slurm release (flexslurm local --slurm)")
	out := fs.String("out", "", "also write the report (Markdown) to this file")
	verbose := fs.Bool("v", false, "print progress and the local system's timeline on stderr")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: flexslurm bench react [--events N] [--burst N] [FLAGS]

Measures flexslurm's reaction times on the real local path (the local system
of 'flexslurm local': Firestore and Pub/Sub emulators, push subscriptions
into the four functions over HTTP, the Compute simulator, real Slurm with its
hooks and the agent), on the wall clock:

  resume    slurmctld powers a node up (ResumeProgram) → resize request in Compute
  register  VM RUNNING → slurmd registered, minus the simulated boot
  health    prolog health failure published → node drained and replacement requested
  expiry    expiry audit log published → successor requested

first one event at a time, then within a burst of jobs, and prints p50, p99
and max of each, against the 3 s target and the peers' polling periods
(Cluster Toolkit slurmsync 30 s, ParallelCluster clustermgtd 60 s).
Needs root, Slurm and the emulators (as 'make demo'); docs/reaction-time.md
says where each end is read.`)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if noArgs(fs, stderr) {
		return 2
	}
	if *events < 1 || *burst < 0 || *burstNodes < 1 || *staticNodes < 1 {
		fmt.Fprintln(stderr, "flexslurm bench react: --events, --burst-nodes and --static-nodes want at least 1, --burst at least 0")
		return 2
	}
	if _, err := local.SlurmInstallation(*slurmRel); err != nil {
		fmt.Fprintln(stderr, "flexslurm bench react:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := reactbench.Options{Events: *events, Burst: *burst, BurstNodes: *burstNodes, StaticNodes: *staticNodes,
		SpecPath: *spec, RunDir: *runDir, Slurm: *slurmRel}
	if *burst == 0 {
		o.Burst = -1
	}
	if *verbose {
		o.Log = stderr
	}
	res, err := reactbench.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "flexslurm bench react:", err)
		return 1
	}
	var b bytes.Buffer
	reactbench.WriteReport(&b, res, strings.TrimSpace("flexslurm bench react "+strings.Join(args, " ")))
	stdout.Write(b.Bytes())
	if *out != "" {
		if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
			fmt.Fprintln(stderr, "flexslurm bench react:", err)
			return 1
		}
	}
	return 0
}
