// Package slurmtest gives integration tests a real single-host Slurm
// cluster (dev/localslurm LocalCluster): munged, slurmctld and one slurmd
// per node the test starts, configured for a small test cluster spec, with
// the hooks linked to a flexslurm binary built from this module.
//
// Run runs a test body once per Slurm release (localslurm.Installations:
// the host's 22.05 and the 24.11 chroot), each in a subtest named
// "slurm-<release>" on a cluster of that release. One cluster runs per host
// (slurm.conf and the Slurm ports are machine-wide), so Setup waits for the
// host lock of localslurm (held by test binaries of other packages, or a
// running `flexslurm local`); the kernel releases it when the process ends.
// Where a release cannot be installed or started (not root, no apt-get, no
// chroot, a daemon failing), Require skips the test loudly — or fails it
// when FLEXSLURM_REQUIRE_SLURM=1 (22.05, the host's) or
// FLEXSLURM_REQUIRE_SLURM2411=1 (the 24.11 chroot) is set (CI). Teardown
// cancels every job, then stops every daemon it started, by PID.
package slurmtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/localslurm"
	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// EnvRequire, set to "1", turns Require's skips of the host's Slurm (22.05)
// into failures; EnvRequire2411 those of the Slurm 24.11 chroot.
const (
	EnvRequire     = "FLEXSLURM_REQUIRE_SLURM"
	EnvRequire2411 = "FLEXSLURM_REQUIRE_SLURM2411"
)

// RequireEnv returns the variable that, set to "1", makes a missing inst
// fail tests instead of skipping them: EnvRequire or EnvRequire2411.
func RequireEnv(inst localslurm.Installation) string {
	if inst.Chrooted() {
		return EnvRequire2411
	}
	return EnvRequire
}

// ClusterID is the id of the test cluster.
const ClusterID = "flexci"

// SpecJSON is the test cluster spec: Flex-Start pool "gpu" with 4 nodes (the
// first static) in partition "gpu", Flex-Start pool "big" with 64 dynamic
// nodes in partition "big" (never started: it gives ResumeProgram a 64-node
// hostlist), and an on-demand login pool that Slurm does not manage.
const SpecJSON = `{
  "display_name": "flexci",
  "name": "projects/flexslurm-test/locations/us-central1/modelDevelopmentClusters/",
  "network": {"network": "projects/flexslurm-test/global/networks/default"},
  "node_pools": [
    {"id": "login", "machine_spec": {"machine_type": "n2-standard-8"},
     "scaling_spec": {"min_node_count": 1, "max_node_count": 1}, "zone": "us-central1-a",
     "boot_disk": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 50}},
    {"id": "gpu", "machine_spec": {"machine_type": "a3-ultragpu-8g", "accelerator_type": "NVIDIA_H200_141GB", "accelerator_count": 8},
     "provisioning_model": "FLEX_START", "flex_start_max_duration": "3600s",
     "scaling_spec": {"min_node_count": 1, "max_node_count": 4}, "zone": "us-central1-a",
     "boot_disk": {"boot_disk_type": "hyperdisk-balanced", "boot_disk_size_gb": 200}},
    {"id": "big", "machine_spec": {"machine_type": "a3-ultragpu-8g", "accelerator_type": "NVIDIA_H200_141GB", "accelerator_count": 8},
     "provisioning_model": "FLEX_START",
     "scaling_spec": {"min_node_count": 0, "max_node_count": 64}, "zone": "us-central1-a",
     "boot_disk": {"boot_disk_type": "hyperdisk-balanced", "boot_disk_size_gb": 200}}
  ],
  "orchestrator_spec": {"slurm_spec": {
    "home_directory_storage": "projects/flexslurm-test/locations/us-central1-a/instances/home",
    "partitions": [{"id": "gpu", "node_pool_ids": ["gpu"]}, {"id": "big", "node_pool_ids": ["big"]}],
    "login_node_pool_id": "login"}}
}`

// Options tunes Setup.
type Options struct {
	// Config is passed to WriteConfig; Exe is filled in. Zero durations
	// get test-friendly values: SuspendTime 5 s, SuspendTimeout 3 s,
	// HealthCheckInterval disabled, ResumeTimeout the production default.
	Config slurm.ConfigOptions
	// Hooks, when not nil, is written as hooks.json beside the hook links
	// before slurmctld starts; nil writes BaseHookConfig.
	Hooks *hooks.Config
	// Log receives the cluster's life events; nil discards.
	Log *slog.Logger
	// PubSub makes the cluster's hooks publish to a Pub/Sub emulator
	// (PUBSUB_EMULATOR_HOST, or one started for the test binary), on the
	// topics JobsTopic and HealthTopic. Without one, Require skips.
	PubSub bool

	// exe is a flexslurm binary already built (by Run, once for every
	// release); empty: Setup builds one.
	exe string
}

// Cluster is the running test cluster.
type Cluster struct {
	*localslurm.LocalCluster
	// Inst is the Slurm installation the cluster runs.
	Inst localslurm.Installation
	// Version is its release as slurmctld reports it ("24.11.5"); "" when
	// not installed.
	Version string
	// Spec is the test cluster spec (SpecJSON).
	Spec *spec.Cluster
	// Topology is Spec's topology.
	Topology *slurm.Topology
	// Exe is the flexslurm binary the hooks run (in Dir, or one that Run
	// built for every release).
	Exe string
	// Dir is the scratch directory (Exe, Root).
	Dir string
	// R runs the client commands.
	R *slurm.Runner
	// Err is why the cluster is not available; nil when it runs.
	Err error
	// JobsTopic and HealthTopic are the hooks' topics, unique to this test
	// binary.
	JobsTopic, HealthTopic string

	stopPubSub func()

	metaOnce sync.Once
	meta     *computesim.MetadataServer // the controller's metadata server (MetadataHost)
}

// MetadataHost is the address of the test controller's metadata server,
// started on first use: the hooks fetch the identity tokens of their
// reports there, as a real controller's hooks do from Compute Engine's.
// "" when it could not start (the hooks then keep their reports spooled).
func (c *Cluster) MetadataHost() string {
	c.metaOnce.Do(func() {
		sim := computesim.New(computesim.Options{Project: testenv.Project()}, clock.Real{})
		ms, err := sim.StartStaticMetadataServer(computesim.StaticVM{Zone: "us-central1-a", Name: ClusterID + "-controller", ID: 1}, "127.0.0.1:0", nil)
		if err != nil {
			fmt.Fprintf(os.Stderr, "slurmtest: the controller's metadata server: %v\n", err)
			return
		}
		c.meta = ms
	})
	if c.meta == nil {
		return ""
	}
	return c.meta.Addr()
}

// Run runs body once per Slurm installation (localslurm.Installations),
// each in a subtest named "slurm-<release>" ("slurm-22.05",
// "slurm-24.11") with a cluster of that installation set up before and torn
// down after. A release that cannot run here skips its subtest loudly (or
// fails it: EnvRequire, EnvRequire2411).
func Run(t *testing.T, o Options, body func(t *testing.T, c *Cluster)) {
	t.Helper()
	// One flexslurm binary for every release (a build takes most of a
	// minute on a loaded machine).
	if os.Geteuid() == 0 {
		dir, err := os.MkdirTemp("", "flexslurm-slurmtest-exe-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		o.exe = filepath.Join(dir, "flexslurm")
		err = build(ctx, o.exe)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	// One Pub/Sub emulator for every release, too.
	if o.PubSub && os.Geteuid() == 0 {
		stop, err := startPubSub()
		defer stop()
		if err != nil {
			t.Logf("SKIP (loud): %v", err) // each release's Setup says so again, and Require skips
		}
	}
	for _, inst := range localslurm.Installations() {
		t.Run("slurm-"+inst.Name, func(t *testing.T) {
			c, teardown := Setup(o, inst)
			defer teardown()
			c.Require(t)
			t.Logf("Slurm %s (%s)", c.Version, installationPlace(inst))
			body(t, c)
		})
	}
}

func installationPlace(inst localslurm.Installation) string {
	if inst.Chrooted() {
		return "chroot " + inst.Root
	}
	return "host"
}

// Setup prepares a test cluster of installation inst — Run calls it; a
// benchmark may call it and call the returned teardown after. It takes the
// host lock, installs Slurm when missing and possible, builds flexslurm,
// writes the configuration and starts munged and slurmctld. When Slurm
// cannot run here, the returned Cluster has Err set (and a loud note is
// printed) so that Require skips.
func Setup(o Options, inst localslurm.Installation) (*Cluster, func()) {
	c := &Cluster{Inst: inst}
	c.Err = c.setup(o)
	switch {
	case Unavailable(c.Err):
		fmt.Fprintf(os.Stderr, "SKIP (loud): Slurm %s integration tests cannot run: %v\n", inst.Name, c.Err)
	case c.Err != nil:
		fmt.Fprintf(os.Stderr, "FAIL: setting up the Slurm %s test cluster: %v\n", inst.Name, c.Err)
	}
	return c, c.teardown
}

func (c *Cluster) setup(o Options) error {
	sp, err := spec.Parse([]byte(SpecJSON))
	if err != nil {
		return fmt.Errorf("test spec: %w", err)
	}
	c.Spec, c.Topology = sp, slurm.TopologyOf(sp)
	if os.Geteuid() != 0 {
		if err := c.Inst.Installed(); err != nil {
			return err
		}
		return fmt.Errorf("%w: the tests start munged, slurmctld and slurmd, which needs root", localslurm.ErrUnavailable)
	}
	c.Dir, err = os.MkdirTemp("", "flexslurm-slurmtest-")
	if err != nil {
		return err
	}
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		return err
	}
	lc, err := localslurm.New(filepath.Join(c.Dir, "root"), c.Inst)
	if err != nil {
		return err
	}
	// Topics of this binary alone: never the real topic ids, which other
	// packages' tests may read on a shared emulator.
	c.JobsTopic, c.HealthTopic = Topic("jobs"), Topic("health")
	if o.PubSub {
		stop, err := startPubSub()
		c.stopPubSub = stop
		if err != nil {
			return fmt.Errorf("%w: %w", localslurm.ErrUnavailable, err)
		}
	}
	lc.Log = o.Log
	if lc.Log == nil && os.Getenv("FLEXSLURM_SLURMTEST_LOG") != "" {
		lc.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	// One cluster per host: wait for test binaries of other packages (and
	// `flexslurm local`) to finish with it.
	if err := lc.Lock(context.Background(), false); errors.Is(err, localslurm.ErrBusy) {
		fmt.Fprintf(os.Stderr, "waiting for the host's local Slurm cluster (%s, held by another process)…\n", localslurm.HostLockPath)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		err = lc.Lock(ctx, true)
		cancel()
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	c.LocalCluster = lc
	c.R = lc.Runner()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := lc.Install(ctx); err != nil {
		return err
	}
	if c.Version, err = c.Inst.Version(ctx); err != nil {
		return fmt.Errorf("%w: %v", localslurm.ErrUnavailable, err)
	}
	if c.Exe = o.exe; c.Exe == "" {
		c.Exe = filepath.Join(c.Dir, "flexslurm")
		if err := build(ctx, c.Exe); err != nil {
			return err
		}
	}
	cfg := o.Config
	cfg.Exe = c.Exe
	// The tests exercise Slurm's own SuspendProgram path on idle dynamic
	// nodes.
	cfg.SuspendStaticOnly = true
	if cfg.SuspendTime == 0 {
		cfg.SuspendTime = 5 * time.Second
	}
	if cfg.SuspendTimeout == 0 {
		cfg.SuspendTimeout = 3 * time.Second
	}
	if cfg.HealthCheckInterval == 0 {
		cfg.HealthCheckInterval = -1
	}
	if err := lc.WriteConfig(sp, cfg); err != nil {
		return err
	}
	hc := c.BaseHookConfig()
	if o.Hooks != nil {
		hc = *o.Hooks
	}
	if err := c.WriteHooks(hc); err != nil {
		return err
	}
	return lc.Start(ctx)
}

// build compiles cmd/flexslurm into out.
func build(ctx context.Context, out string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building flexslurm needs the go command on PATH: %w", err)
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, "github.com/flexslurm/flexslurm/cmd/flexslurm")
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("building flexslurm for the Slurm hooks: %v: %s", err, b)
	}
	fmt.Fprintf(os.Stderr, "slurmtest: built %s in %v\n", out, time.Since(start).Round(time.Millisecond))
	return os.Chmod(out, 0o755)
}

// HookConfigPath is where the hooks find their configuration: hooks.json
// beside the hook links.
func (c *Cluster) HookConfigPath() string { return filepath.Join(c.HookDir(), hooks.ConfigFileName) }

// BaseHookConfig is the hooks' configuration for this cluster: the test
// project (testenv.Project), a publish timeout of 5 s (generous, for loaded
// test machines; 300 ms without an emulator), the cluster's spec (written beside the hooks), spool
// and log directories under Root, and the Pub/Sub emulator of
// PUBSUB_EMULATOR_HOST — or a closed port, so that events are spooled.
func (c *Cluster) BaseHookConfig() hooks.Config {
	host, timeout := os.Getenv("PUBSUB_EMULATOR_HOST"), 5*time.Second
	if host == "" {
		host, timeout = "127.0.0.1:9", 300*time.Millisecond
	}
	return hooks.Config{
		Cluster:            ClusterID,
		Project:            testenv.Project(),
		Spec:               filepath.Join(c.HookDir(), "cluster_config.json"),
		SpoolDir:           c.SpoolDir(),
		SpoolSenders:       c.SpoolSenders(),
		LogDir:             c.HookLogDir(),
		PubSubEmulatorHost: host,
		MetadataHost:       c.MetadataHost(),
		PublishTimeout:     hooks.Duration(timeout),
		Topics:             hooks.Topics{Jobs: c.JobsTopic, Health: c.HealthTopic},
		SlurmBinDir:        c.BinDir,
	}
}

// WriteHooks replaces hooks.json (and the spec beside it) atomically; the
// hooks read them at every run.
func (c *Cluster) WriteHooks(cfg hooks.Config) error {
	if err := os.WriteFile(filepath.Join(c.HookDir(), "cluster_config.json"), []byte(SpecJSON), 0o644); err != nil {
		return err
	}
	return hooks.WriteConfig(c.HookConfigPath(), cfg)
}

func (c *Cluster) teardown() {
	if c == nil {
		return
	}
	if c.LocalCluster != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "slurmtest: stopping the Slurm cluster: %v\n", err)
		}
	}
	if c.Dir != "" && os.Getenv("FLEXSLURM_KEEP_SLURMTEST") == "" {
		os.RemoveAll(c.Dir)
	}
	if c.stopPubSub != nil {
		c.stopPubSub()
	}
	if c.meta != nil {
		c.meta.Close()
	}
}

// Require skips t loudly when the cluster's Slurm cannot run here (Err
// wraps localslurm.ErrUnavailable), or fails it when FLEXSLURM_REQUIRE_SLURM=1
// (the host's Slurm) or FLEXSLURM_REQUIRE_SLURM2411=1 (the 24.11 chroot); any
// other setup failure (flexslurm does not build, a broken configuration)
// fails t.
func (c *Cluster) Require(t testing.TB) {
	t.Helper()
	if c == nil || c.Err == nil {
		return
	}
	if !Unavailable(c.Err) {
		t.Fatalf("setting up the Slurm test cluster: %v", c.Err)
	}
	if env := RequireEnv(c.Inst); os.Getenv(env) == "1" {
		t.Fatalf("FAIL: Slurm %s is required (%s=1) but not available: %v", c.Inst.Name, env, c.Err)
	}
	t.Skipf("SKIP (loud): Slurm %s integration test cannot run here: %v", c.Inst.Name, c.Err)
}

// Unavailable reports whether err means Slurm cannot run here.
func Unavailable(err error) bool { return errors.Is(err, localslurm.ErrUnavailable) }

// Sbatch submits a batch job (sbatch --parsable ARGS --wrap SCRIPT) and
// returns its id.
func (c *Cluster) Sbatch(t testing.TB, script string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := append([]string{"--parsable", "-o", filepath.Join(c.Root, "log", "job-%j.out")}, args...)
	a = append(a, "--wrap", script)
	// The job inherits sbatch's environment: give it a PATH.
	r := *c.R
	r.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := r.Run(ctx, "sbatch", a...)
	if err != nil {
		t.Fatalf("sbatch: %v", err)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	return id
}

// Scontrol runs scontrol ARGS and fails t on error.
func (c *Cluster) Scontrol(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.R.Scontrol(ctx, args...)
	if err != nil {
		t.Fatalf("scontrol %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// WaitNode polls node name until cond holds or timeout passes (failing t),
// and returns the last state seen.
func (c *Cluster) WaitNode(t testing.TB, name string, timeout time.Duration, what string, cond func(slurm.NodeInfo) bool) slurm.NodeInfo {
	t.Helper()
	last, ok, err := poll(timeout, func(ctx context.Context) (slurm.NodeInfo, error) { return c.R.ShowNode(ctx, name) }, cond)
	if !ok {
		t.Fatalf("node %s: not %s within %v: last state %s reason %q (error %v)", name, what, timeout, last.StateString(), last.Reason, err)
	}
	return last
}

// WaitJob polls job id until cond holds or timeout passes (failing t), and
// returns the last state seen.
func (c *Cluster) WaitJob(t testing.TB, id string, timeout time.Duration, what string, cond func(slurm.JobInfo) bool) slurm.JobInfo {
	t.Helper()
	last, ok, err := poll(timeout, func(ctx context.Context) (slurm.JobInfo, error) { return c.R.ShowJob(ctx, id) }, cond)
	if !ok {
		t.Fatalf("job %s: not %s within %v: last state %s reason %q (error %v)", id, what, timeout, last.State, last.Reason, err)
	}
	return last
}

// poll calls get every 100 ms (each call bounded by 10 s) until cond holds
// of what it returns without error, or timeout passes. It returns the last
// value seen, whether cond held, and the last error.
func poll[T any](timeout time.Duration, get func(context.Context) (T, error), cond func(T) bool) (T, bool, error) {
	var last T
	var lastErr error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		last, lastErr = get(ctx)
		cancel()
		if lastErr == nil && cond(last) {
			return last, true, nil
		}
	}
	return last, false, lastErr
}

// Cancel cancels jobs, ignoring errors (cleanup), and waits (up to 20 s)
// until those running on nodes that still run have ended, so that the next
// test finds their nodes free.
func (c *Cluster) Cancel(ids ...string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _ = c.R.Run(ctx, "scancel", ids...)
	for _, id := range ids {
		for ctx.Err() == nil {
			j, err := c.R.ShowJob(ctx, id)
			if err != nil || j.Finished() || j.Pending() || !c.anyRunning(j.Nodes) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (c *Cluster) anyRunning(nodes []string) bool {
	for _, n := range nodes {
		if c.NodeRunning(n) {
			return true
		}
	}
	return false
}
