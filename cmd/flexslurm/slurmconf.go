package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flexslurm/flexslurm/shared/install"
	"github.com/flexslurm/flexslurm/shared/node"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func init() {
	commands["slurm-conf"] = command{"print the slurm.conf lines (or gres.conf) of a cluster spec's Flex-Start pools", cmdSlurmConf}
}

func slurmConfUsage(w io.Writer) {
	fmt.Fprintf(w, `usage: flexslurm slurm-conf [flags] SPEC
       flexslurm slurm-conf --gres-conf [flags] SPEC
       flexslurm slurm-conf --check SLURM_CONF [flags] SPEC

Prints the slurm.conf lines that let Slurm serve the cluster spec's Flex-Start
pools: power saving (CLOUD nodes, SuspendExcNodes for the static nodes,
ResumeTimeout), EnforcePartLimits=ALL, the hooks as `+"`flexslurm install controller`"+`
installs them, one NodeName line per pool (every index below max_node_count,
the machine type's CPUs and memory, its GPUs as GRES) and one PartitionName
line per partition (MaxTime: the pools' max run duration; MaxNodes: the
largest pool's max_node_count), so that Slurm refuses at submission a job
that no pool can serve. --gres-conf prints gres.conf (each GPU node's device
files). --check compares an existing slurm.conf with the spec and prints
what to change (exit 1 when it differs).

Add the lines to slurm.conf and write gres.conf beside it, then restart
slurmctld (new nodes need it; `+"`scontrol reconfigure`"+` is enough when only
PartitionName lines change).

flags:
`)
}

func cmdSlurmConf(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("slurm-conf", flag.ContinueOnError)
	gres := fs.Bool("gres-conf", false, "print gres.conf instead of the slurm.conf lines")
	check := fs.String("check", "", "compare this slurm.conf with the spec instead of printing")
	hookDir := fs.String("hook-dir", install.HookDir, "directory of the controller-side hook links")
	nodeHookDir := fs.String("node-hook-dir", node.DefaultHookDir, "directory of the node-side hook links on each node")
	resume := fs.Duration("resume-timeout", slurm.DefaultResumeTimeout, "ResumeTimeout: how long Slurm waits for a powered-up node (Flex-Start capacity may queue for hours)")
	defTime := fs.Duration("default-time", slurm.DefaultDefaultTime, "DefaultTime of each partition: the limit of a job without --time (capped at MaxTime)")
	health := fs.Duration("health-check-interval", slurm.DefaultHealthCheckInterval, "HealthCheckInterval; negative leaves HealthCheckProgram out")
	fs.Usage = func() {
		slurmConfUsage(fs.Output())
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "flexslurm slurm-conf: want one SPEC, got %d argument(s) %q\n", fs.NArg(), fs.Args())
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "flexslurm slurm-conf: %v\n", joinLines(err.Error()))
		return 1
	}
	c, err := spec.Load(fs.Arg(0))
	if err != nil {
		return fail(err)
	}
	g, err := slurm.Generate(c, slurm.GenOptions{HookDir: *hookDir, NodeHookDir: *nodeHookDir, ResumeTimeout: *resume,
		DefaultTime: *defTime, HealthCheckInterval: *health, Configless: true})
	if err != nil {
		return fail(err)
	}
	if *check != "" {
		ds, err := checkSlurmConf(g, c.ID, *check)
		if err != nil {
			return fail(err)
		}
		if len(ds) == 0 {
			fmt.Fprintf(stdout, "%s serves cluster %s's Flex-Start pools\n", *check, c.ID)
			return 0
		}
		printDivergences(stdout, *check, ds)
		return 1
	}
	if *gres {
		if len(g.GresConf) == 0 {
			return fail(errors.New("no node pool of the spec has GPUs: no gres.conf is needed"))
		}
		stdout.Write(g.GresConf)
		return 0
	}
	stdout.Write(g.SlurmConf)
	return 0
}

// checkSlurmConf compares the slurm.conf at path with g.
func checkSlurmConf(g *slurm.Generated, cluster, path string) ([]slurm.Divergence, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading Slurm's configuration: %w", err)
	}
	have, err := slurm.ParseConfView(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return slurm.Diverge(g, cluster, have), nil
}

func printDivergences(w io.Writer, path string, ds []slurm.Divergence) {
	fmt.Fprintf(w, "%s cannot serve the spec:\n", path)
	for _, d := range ds {
		fmt.Fprintf(w, "  - %s\n    fix: %s\n", d.Problem, d.Fix)
	}
	fmt.Fprintln(w, "`flexslurm slurm-conf SPEC` prints every line.")
}

// specDivergences compares the slurm.conf at path with what spec c needs
// (the lines `flexslurm slurm-conf` prints by default).
func specDivergences(c *spec.Cluster, path string) ([]slurm.Divergence, error) {
	g, err := slurm.Generate(c, slurm.GenOptions{HookDir: install.HookDir, NodeHookDir: node.DefaultHookDir, Configless: true,
		DefaultTime: time.Hour})
	if err != nil {
		return nil, err
	}
	return checkSlurmConf(g, c.ID, path)
}
