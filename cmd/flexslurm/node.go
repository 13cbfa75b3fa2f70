package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"cloud.google.com/go/compute/metadata"

	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/node"
	"github.com/flexslurm/flexslurm/shared/version"
)

func init() {
	commands["node"] = command{"bootstrap this node VM (node boot): munge key, home, munged, slurmd, hooks", cmdNode}
	subcommands["node"] = []string{"boot"}
}

// Environment of `flexslurm node boot`: the endpoints, the only difference
// between a VM and a simulated one.
const (
	// EnvMetadataHost is read by cloud.google.com/go/compute/metadata.
	envMetadataHost = "GCE_METADATA_HOST"
	// envSecretManagerEndpoint points Secret Manager calls elsewhere than
	// https://secretmanager.googleapis.com/.
	envSecretManagerEndpoint = "FLEXSLURM_SECRETMANAGER_ENDPOINT"
	envPubSubEmulatorHost    = "PUBSUB_EMULATOR_HOST"
)

func nodeUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, `usage: flexslurm node boot [flags]

Bootstraps this node VM, as root, from its metadata server: reads the VM's
name (<cluster>-<pool>-<index>-g<generation>), zone, project and the
flexslurm-node attribute; lets only root reach the metadata server
(iptables); installs the munge key from Secret Manager (0400 munge:munge);
mounts the cluster's home directories; starts munged and slurmd
(configless: --conf-server, -N NODE); installs the node-side hooks. Every
step checks before it acts, so it is safe to run at every boot and again.
A failed step is reported (node.bootstrap_failed on the job-pending topic)
and exits 1. docs/node.md describes it.

environment:
  GCE_METADATA_HOST                 metadata server (default 169.254.169.254:80)
  FLEXSLURM_SECRETMANAGER_ENDPOINT  Secret Manager endpoint (default https://secretmanager.googleapis.com/)
  PUBSUB_EMULATOR_HOST              Pub/Sub emulator, for the report and the hooks

flags:`)
	if fs != nil {
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

func cmdNode(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("node boot", flag.ContinueOnError)
	root := fs.String("root", "/", "`DIR` under which the node's own files are written (several simulated VMs on one host)")
	exe := fs.String("exe", "", "the flexslurm binary the hooks link to (default: this program)")
	hookDir := fs.String("hook-dir", "", "`DIR` of the node-side hook links and hooks.json (default ROOT/etc/flexslurm/hooks)")
	reportBoot := fs.Bool("report-boot", false, "start slurmd with -b (its start is the node's boot time), for a VM that does not really boot")
	ownHostname := fs.Bool("own-hostname", false, "start slurmd in a UTS namespace named after the node, so that its jobs see the node's host name (simulated VMs sharing one host)")
	healthFromDir := fs.String("health-from-dir", "", "the hooks' health check reads recorded GPU outputs from `DIR`/NODE (local system)")
	clk := fs.String("clock", "", "the hooks' simulated clock (local system)")
	slurmRoot := fs.String("slurm-root", "/", "`DIR` of the Slurm and munge installation: munged and slurmd run chrooted in it unless it is / (the local system's Slurm 24.11 chroot)")
	publishTimeout := fs.Duration("hooks-publish-timeout", 0, "the hooks' publish_timeout (0: their default)")
	timeout := fs.Duration("timeout", 5*time.Minute, "deadline of the whole bootstrap")
	fs.Usage = func() { nodeUsage(fs.Output(), fs) }
	if code, ok := subcommand("node", args, stdout, stderr, func(w io.Writer) { nodeUsage(w, fs) }); !ok {
		return code
	}
	if code, done := parseFlags(fs, args[1:], stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flexslurm node boot: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *exe == "" {
		p, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm node boot: --exe: %v\n", err)
			return 2
		}
		*exe = p
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "flexslurm node boot: --timeout %s: want a positive duration\n", *timeout)
		return 2
	}
	abs := func(p string) string {
		if p == "" {
			return ""
		}
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		return a
	}
	log := logx.New(stderr, slog.LevelInfo)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	sm, err := node.NewSecretManager(ctx, os.Getenv(envSecretManagerEndpoint))
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm node boot: %v\n", err)
		return 1
	}
	res, err := node.Boot(ctx, node.Options{
		Root: abs(*root), Exe: abs(*exe), HookDir: abs(*hookDir), MetadataHost: os.Getenv(envMetadataHost),
		ReportBoot: *reportBoot, OwnHostname: *ownHostname, PubSubEmulatorHost: os.Getenv(envPubSubEmulatorHost), Clock: *clk,
		HealthFromDir: abs(*healthFromDir), PublishTimeout: *publishTimeout, SlurmRoot: abs(*slurmRoot),
		Version:  version.Get().ID(),
		Metadata: metadata.NewClient(nil), Secrets: sm, Reporter: node.PubSubReporter{}, Host: node.OSHost{}, Log: log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm node boot: %s: %v\n", res.VM, err)
		return 1
	}
	fmt.Fprintf(stdout, "node %s (VM %s) booted; changed: %d\n", res.Node, res.VM, len(res.Did))
	if res.VersionMismatch {
		fmt.Fprintf(stdout, "WARNING: this node runs flexslurm %s, the functions that built its template run %s (deploy/README.md, \"Versions\")\n",
			version.Get().ID(), res.FunctionsVersion)
	}
	return 0
}
