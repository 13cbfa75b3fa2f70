package hooks

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flexslurm/flexslurm/shared/cli"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// Usage is the help of `flexslurm hook`.
const Usage = `usage: flexslurm hook NAME [flags] [HOSTLIST]

Runs one Slurm hook. slurm.conf names each hook by the absolute path of a link
named flexslurm-hook-NAME to the flexslurm binary (Slurm passes no arguments of
our choosing), e.g.
  ResumeProgram=/usr/local/lib/flexslurm/flexslurm-hook-resume

Hooks: resume, suspend, resume-fail (take the HOSTLIST Slurm passes),
prolog-ctld, epilog-ctld, prolog, epilog, healthcheck (read Slurm's
environment).

Settings come from a JSON file (flags override it): --config, else
$FLEXSLURM_HOOKS_CONFIG, else hooks.json beside the flexslurm-hook-NAME link,
else /etc/flexslurm/hooks.json. Fields: cluster, project (required), spec,
spool_dir, log_dir, pubsub_emulator_host, publish_timeout, slurm_bin_dir,
topics {jobs, health}, check_cmd, check_timeout, vm_name_dir,
prolog_ctld_wait_ready, log_level (docs/slurm.md).

flags:`

// Command runs `flexslurm hook NAME …`: args starts with the hook name,
// argv0 is the program's argv[0] (to find hooks.json beside a hook link),
// getenv reads the environment. The usage asked for (-h) goes to stdout,
// everything else to stderr. It returns the exit status.
func Command(ctx context.Context, args []string, argv0 string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, Usage)
		return cli.ExitUsage
	}
	if cli.IsHelp(args[0]) {
		fmt.Fprintln(stdout, Usage)
		return 0
	}
	name := args[0]
	if !slices.Contains(slurm.HookNames, name) {
		fmt.Fprintf(stderr, "flexslurm hook: unknown hook %q (hooks: %s)\n", name, strings.Join(slurm.HookNames, ", "))
		return 2
	}
	fs := flag.NewFlagSet("hook "+name, flag.ContinueOnError)
	var f Config
	configPath := fs.String("config", "", "hook config file (default: see above)")
	fs.StringVar(&f.Cluster, "cluster", "", "cluster id")
	fs.StringVar(&f.Project, "project", "", "Google Cloud project of the Pub/Sub topics")
	fs.StringVar(&f.Spec, "spec", "", "cluster spec (cluster_config.json) to check node names against")
	fs.StringVar(&f.SpoolDir, "spool", "", "spool directory for unpublished messages (default "+DefaultSpoolDir+")")
	fs.StringVar(&f.LogDir, "log-dir", "", "directory for hooks-<user>.log")
	fs.StringVar(&f.PubSubEmulatorHost, "pubsub-emulator-host", "", "Pub/Sub emulator host:port")
	fs.StringVar(&f.VMNameDir, "vm-name-dir", "", "directory of per-node files naming each node's VM")
	publishTimeout := fs.Duration("publish-timeout", 0, "bound on publishing (default 700ms)")
	checkCmd := fs.String("check-cmd", "", "health check command: absolute program path and arguments separated by spaces (no shell)")
	vmName := fs.String("vm-name", "", "VM this node-side hook runs on (<node>-g<generation>)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), Usage)
		fs.PrintDefaults()
	}
	if code, done := cli.Parse(fs, args[1:], stdout, stderr); done {
		return code
	}
	path := ConfigPath(*configPath, argv0, getenv)
	cfg, err := LoadConfig(path)
	if err != nil && slices.Contains(slurm.NodeHooks(), name) && *configPath == "" && errors.Is(err, os.ErrNotExist) && f.Cluster == "" && f.Project == "" {
		// slurmd runs Prolog, Epilog and HealthCheckProgram on every node
		// of the cluster; only a flexslurm node's bootstrap writes
		// hooks.json. Elsewhere the hook checks, drains and reports nothing.
		fmt.Fprintf(stderr, "flexslurm hook %s: no %s: not a flexslurm node, nothing checked\n", name, path)
		return 0
	}
	if err != nil && (*configPath != "" || !errors.Is(err, os.ErrNotExist) || f.Cluster == "" || f.Project == "") {
		fmt.Fprintf(stderr, "flexslurm hook %s: %v\n", name, err)
		return 2
	}
	cfg = overlay(cfg, f)
	if *publishTimeout > 0 {
		cfg.PublishTimeout = Duration(*publishTimeout)
	}
	if *checkCmd != "" {
		cfg.CheckCmd = strings.Fields(*checkCmd)
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "flexslurm hook %s: config %s:\n%v\n", name, path, err)
		return 2
	}
	log, closeLog := hookLogger(cfg, stderr)
	defer closeLog()
	log = log.With("hook", name, "cluster", cfg.Cluster, "pid", os.Getpid())
	for _, k := range []string{"SLURMD_NODENAME", "SLURM_JOB_ID"} {
		if v := getenv(k); v != "" {
			log = log.With(strings.ToLower(k), v)
		}
	}
	rt, cleanup, err := NewRuntime(ctx, cfg, getenv, log)
	if err != nil {
		log.Error("hook not run", "error", err)
		return 2
	}
	defer cleanup()
	rt.VMName = *vmName
	return rt.Run(ctx, name, fs.Args())
}

// overlay sets the fields given as flags over the file's.
func overlay(c, f Config) Config {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&c.Cluster, f.Cluster)
	set(&c.Project, f.Project)
	set(&c.Spec, f.Spec)
	set(&c.SpoolDir, f.SpoolDir)
	set(&c.LogDir, f.LogDir)
	set(&c.PubSubEmulatorHost, f.PubSubEmulatorHost)
	set(&c.VMNameDir, f.VMNameDir)
	return c
}

// hookLogger logs JSON lines to stderr and, with a log_dir, to
// <log_dir>/hooks-<user>.log.
func hookLogger(cfg Config, stderr io.Writer) (*slog.Logger, func()) {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	w := stderr
	closeFn := func() {}
	if cfg.LogDir != "" {
		who := "uid" + fmt.Sprint(os.Geteuid())
		if u, err := user.Current(); err == nil {
			who = u.Username
		}
		// Never through a link, never into a FIFO or device another user
		// put there, nor into a file another user owns (left by a log
		// directory that was world-writable) or a hard link to another
		// file: a regular file of this user with one link, or stderr
		// alone.
		if f, err := os.OpenFile(filepath.Join(cfg.LogDir, "hooks-"+who+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644); err == nil {
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && ownLog(st) {
				w = io.MultiWriter(stderr, f)
				closeFn = func() { f.Close() }
			} else {
				f.Close()
			}
		}
	}
	return logx.New(w, level), closeFn
}

// ownLog reports whether an open log file is this user's, with one link.
func ownLog(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == os.Geteuid() && sys.Nlink == 1
}

// NewRuntime builds a hook Runtime from a configuration (defaults are
// filled in): the topology (from the spec when configured), the Slurm runner (with
// SLURM_CONF passed on when the hook's environment has it), the health
// check, and an Outbox publishing through a Pub/Sub client. The returned
// cleanup closes the client without waiting for unacknowledged messages,
// which stay spooled.
func NewRuntime(ctx context.Context, cfg Config, getenv func(string) string, log *slog.Logger) (*Runtime, func(), error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	topo := slurm.ClusterTopology(cfg.Cluster)
	if cfg.Spec != "" {
		c, err := spec.Load(cfg.Spec)
		if err != nil {
			return nil, nil, err
		}
		if c.ID != cfg.Cluster {
			return nil, nil, fmt.Errorf("spec %s is cluster %q, the hook config says %q", cfg.Spec, c.ID, cfg.Cluster)
		}
		topo = slurm.TopologyOf(c)
	}
	runner := &slurm.Runner{BinDir: cfg.SlurmBinDir, Log: log}
	if sc := getenv("SLURM_CONF"); sc != "" {
		runner.Env = []string{"SLURM_CONF=" + sc}
	}
	checkEnv := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, k := range []string{"SLURMD_NODENAME", "SLURM_JOB_ID", "SLURM_CONF"} {
		if v := getenv(k); v != "" {
			checkEnv = append(checkEnv, k+"="+v)
		}
	}
	var check CheckFunc = PassCheck
	if len(cfg.CheckCmd) > 0 {
		check = CommandCheck(ExpandNodeName(cfg.CheckCmd, getenv("SLURMD_NODENAME")), checkEnv, time.Duration(cfg.CheckTimeout))
	}
	if cfg.PubSubEmulatorHost != "" {
		os.Setenv("PUBSUB_EMULATOR_HOST", cfg.PubSubEmulatorHost)
	}
	var pub Publisher
	closeFn := func() {}
	client, err := pubsub.New(ctx, cfg.Project)
	if err != nil {
		log.Error("no Pub/Sub client: events stay spooled", "error", err)
	} else {
		pub = SigningPublisher{Pub: client, Signer: NodeSigner{Config: cfg}}
		closeFn = func() { closeWithin(client, 200*time.Millisecond) }
	}
	rt := &Runtime{
		Config:   cfg,
		Topology: topo,
		Slurm:    runner,
		Outbox:   &Outbox{Spool: &Spool{Dir: cfg.SpoolDir, Policy: cfg.SpoolPolicy(), Log: log}, Pub: pub, Timeout: time.Duration(cfg.PublishTimeout), Log: log},
		Check:    check,
		Getenv:   getenv,
		Log:      log,
	}
	if cfg.Clock != "" {
		if clk, err := clock.ParseScaled(cfg.Clock); err == nil {
			rt.Now = clk.Now
		}
	}
	return rt, closeFn, nil
}

// closeWithin closes c but waits at most d: a publisher with messages
// Pub/Sub never acknowledged would otherwise retry for a minute, and those
// messages are spooled anyway.
func closeWithin(c io.Closer, d time.Duration) {
	done := make(chan struct{})
	go func() { c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// ExpandNodeName returns argv with "%n" in its arguments (not the program)
// replaced by node, as slurm.conf expands %n: a check can then read
// per-node inputs (`flexslurm health check --from-dir /x/%n`). An empty or
// invalid node name leaves argv as it is.
func ExpandNodeName(argv []string, node string) []string {
	if len(argv) < 2 || !event.ValidNodeName(node) {
		return argv
	}
	out := append([]string{argv[0]}, argv[1:]...)
	for i := 1; i < len(out); i++ {
		out[i] = strings.ReplaceAll(out[i], "%n", node)
	}
	return out
}
