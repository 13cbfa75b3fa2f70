package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flexslurm/flexslurm/shared/agent"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/install"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/node"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func init() {
	commands["agent"] = command{"run beside slurmctld: apply Slurm commands, publish Slurm snapshots", cmdAgent}
}

func cmdAgent(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	var o agent.Options
	specPath := fs.String("spec", "", "cluster spec (cluster_config.json); the agent acts on its Flex-Start nodes only (required)")
	fs.StringVar(&o.Project, "project", os.Getenv(config.EnvProject), "Google Cloud project of the topics (default $"+config.EnvProject+")")
	fs.StringVar(&o.Subscription, "subscription", agent.DefaultSubscription, "pull subscription on the commands topic (the one deploy/pubsub.tf creates)")
	fs.BoolVar(&o.CreateSubscription, "create-subscription", false, "create the subscription and the topics when missing (local system and tests only: on Google Cloud deploy/ creates them and the agent's role cannot)")
	fs.StringVar(&o.CommandsTopic, "commands-topic", config.TopicSlurmCommands, "topic of slurm.command messages")
	fs.StringVar(&o.ResultsTopic, "results-topic", config.TopicCommandResults, "topic for slurm.command_result messages")
	fs.StringVar(&o.SnapshotTopic, "snapshot-topic", config.TopicSlurmSnapshot, "topic for slurm.snapshot messages")
	fs.DurationVar(&o.SnapshotEvery, "snapshot-every", agent.DefaultSnapshotEvery, "snapshot period (negative: none)")
	fs.DurationVar(&o.PromptSnapshot, "prompt-snapshot", agent.DefaultPromptSnapshot, "also publish a snapshot this long after a command that changed a node's state (a drain, a power down, …), at most one per this period (negative: none)")
	fs.StringVar(&o.LedgerPath, "ledger", agent.DefaultLedgerPath, "file recording the command ids already handled")
	fs.StringVar(&o.JobsTopic, "jobs-topic", config.TopicJobs, "topic of the controller hooks' job and node events, published from the spool")
	fs.StringVar(&o.SpoolDir, "spool", "", "the hooks' spool directory, published every snapshot tick (e.g. /var/spool/flexslurm)")
	slurmBin := fs.String("slurm-bin", slurm.DefaultBinDir, "directory of scontrol, squeue and sinfo")
	emulator := fs.String("pubsub-emulator-host", os.Getenv("PUBSUB_EMULATOR_HOST"), "Pub/Sub emulator host:port")
	level := fs.String("log-level", "INFO", "DEBUG, INFO, WARN or ERROR")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm agent --spec FILE --project P [flags]\n\nRuns beside slurmctld (as root or the SlurmUser): applies the slurm.command\nmessages of the functions through scontrol, idempotently, reporting each as a\nslurm.command_result, and publishes a slurm.snapshot of the cluster's nodes\nand jobs every --snapshot-every. With each snapshot it compares the spec with\nthe configuration slurmctld runs with and, when Slurm cannot serve the spec,\nlogs at error level the slurm.conf lines to change (`flexslurm status` shows\nthem too). Stops on SIGINT/SIGTERM.\n\nIt consumes the subscription deploy/ creates (--subscription) and creates\nnothing unless --create-subscription is given. A missing subscription or a\nmissing role (roles/pubsub.subscriber on the subscription) stops it with an\nerror naming them; a publish refused for lack of roles/pubsub.publisher is\nlogged naming the topic. `flexslurm install controller` installs it as a\nsystemd service.")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if noArgs(fs, stderr) {
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil || *specPath == "" || o.Project == "" {
		fmt.Fprintln(stderr, "flexslurm agent: --spec and --project are required; --log-level is DEBUG, INFO, WARN or ERROR")
		fs.Usage()
		return 2
	}
	c, err := spec.Load(*specPath)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm agent: %v\n", err)
		return 2
	}
	if *emulator != "" {
		os.Setenv("PUBSUB_EMULATOR_HOST", *emulator)
	}
	o.Spec = c
	o.Log = logx.New(stderr, lvl).With("component", "agent", "cluster", c.ID)
	o.Slurm = &slurm.Runner{BinDir: *slurmBin, Log: o.Log}
	// The lines `flexslurm slurm-conf SPEC` prints, for the fixes it names.
	o.SlurmConf = slurm.GenOptions{HookDir: install.HookDir, NodeHookDir: node.DefaultHookDir, DefaultTime: time.Hour}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx, o); err != nil {
		fmt.Fprintf(stderr, "flexslurm agent: %v\n", err)
		return 1
	}
	return 0
}
