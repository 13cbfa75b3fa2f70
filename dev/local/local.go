// Package local runs the whole flexslurm system on one machine — the real
// Firestore and Pub/Sub emulators (started by PID, stopped on exit even on
// Ctrl-C), the Compute Engine simulator on a scaled clock, and the four
// functions, each served by functions-framework in its own process exactly
// as Cloud Functions serves a deployed entry point, with Pub/Sub push
// subscriptions delivering CloudEvents to them as Eventarc would. It backs
// `flexslurm local` and `make demo`.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/emulator"
	"github.com/flexslurm/flexslurm/shared/api"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Options configures a local run.
type Options struct {
	// SpecPath is the cluster spec to apply. Default examples/cluster_config.json.
	SpecPath string
	// Demo drives the node lifecycle README.md describes and checks every
	// outcome.
	Demo bool
	// Speedup is how much faster than the wall clock the simulated clock
	// runs. Default: DemoSpeedup (a week in a minute) for the demo, 1 (the
	// wall clock, which Slurm runs on) otherwise, so that a job of any
	// length up to its partition's MaxTime completes before its VM's max
	// run duration ends it.
	Speedup float64
	// CapacityDelay is the simulated wait for Flex-Start capacity of every
	// resize request (simulated time). Default: 30 min for the demo (0.2 s
	// of wall time), otherwise 20 s of wall time.
	CapacityDelay time.Duration
	// TickEvery is the wall-clock period of the reconcile tick (Cloud
	// Scheduler's stand-in). Default 1 s.
	TickEvery time.Duration
	// StateWatchEvery is how often the timeline reads the stored state to
	// print its changes: every node and active job, one Firestore read
	// each time. Default 150 ms; a benchmark that reads its times
	// elsewhere sets it longer, so that the display does not load the
	// emulator the functions under measurement use.
	StateWatchEvery time.Duration
	// Project is the (emulated) Google Cloud project. Default: the spec's
	// (its name's projects/PROJECT), the project a deployment's functions,
	// topics and node config share.
	Project string
	// RunDir receives logs. Default .run/local.
	RunDir string
	// Exe is the flexslurm binary the function processes run. Default os.Executable().
	Exe string
	// Out receives the timeline.
	Out io.Writer
	// NoSlurm runs without Slurm: no slurmctld, no slurmd per VM; the demo
	// then publishes the job reports the Slurm hooks would.
	NoSlurm bool
	// Slurm is the Slurm release the local cluster runs: "22.05" (the
	// host's, the default) or "24.11" (the Debian 13 chroot that
	// .ci/slurm-chroot.sh builds; dev/localslurm).
	Slurm string
	// IdleTimeout is flexslurm's idle timeout for dynamic nodes, in
	// simulated time (Slurm runs on the wall clock). Default: flexslurm's
	// (plan.DefaultPolicy) in wall time; the demo's is 14 days, so that an idle dynamic node lives
	// to its max run duration.
	IdleTimeout time.Duration
	// MakeBeforeBreak keeps make-before-break on for static nodes. It is
	// off by default here: it sizes its lead time from observed capacity
	// waits, which the scaled clock inflates (each second of wall time the
	// pipeline takes is 2.8 h at the default speed-up), so successors would
	// take dynamic slots hours early.
	MakeBeforeBreak bool
	// ComputeReadings chooses how the Compute simulator behaves on each
	// open point of Compute behaviour (computesim.Readings; the zero value
	// is lenient).
	ComputeReadings computesim.Readings
	// NoApply starts everything but leaves the cluster to be created
	// through the API (the README's curl); not with Demo.
	NoApply bool
}

func (o Options) withDefaults() (Options, error) {
	if o.SpecPath == "" {
		o.SpecPath = "examples/cluster_config.json"
	}
	if o.Speedup <= 0 {
		o.Speedup = 1
		if o.Demo {
			o.Speedup = DemoSpeedup
		}
	}
	if o.CapacityDelay <= 0 {
		o.CapacityDelay = simDuration(20*time.Second, o.Speedup)
		if o.Demo {
			o.CapacityDelay = 30 * time.Minute
		}
	}
	if o.TickEvery <= 0 {
		o.TickEvery = time.Second
	}
	if o.StateWatchEvery <= 0 {
		o.StateWatchEvery = 150 * time.Millisecond
	}
	if o.RunDir == "" {
		o.RunDir = filepath.Join(".run", "local")
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = simDuration(plan.DefaultPolicy().IdleTimeout, o.Speedup)
		if o.Demo {
			o.IdleTimeout = 14 * 24 * time.Hour
		}
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("finding the flexslurm binary: %w", err)
		}
		o.Exe = exe
	}
	return o, nil
}

// jobDir is the directory for the output of your own jobs (mode 1777,
// under the run directory, which the Slurm user can reach): sbatch -D.
func (s *System) jobDir() (string, error) {
	ss := s.slurm.Load()
	dir := filepath.Join(ss.lc.Root, "jobs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("the job output directory: %w", err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		return "", fmt.Errorf("the job output directory: %w", err)
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, dir); err == nil && !strings.HasPrefix(rel, "..") {
			return rel, nil
		}
	}
	return dir, nil
}

// DemoSpeedup is the demo's clock: a week of simulated time per minute of
// wall time, so that VMs reach their max run duration within the demo.
const DemoSpeedup = 10080

// simDuration is the simulated time that wall time takes at speedup,
// whole seconds.
func simDuration(wall time.Duration, speedup float64) time.Duration {
	return time.Duration(float64(wall) * speedup).Round(time.Second)
}

// System is a running local system.
type System struct {
	Opts   Options
	Spec   *spec.Cluster
	Clock  *clock.Scaled
	Emu    *emulator.Env
	Sim    *computesim.Sim
	SimURL string
	PubSub *pubsub.Client
	Store  store.Store
	Funcs  []*Function
	TL     *Timeline
	// Controller is the metadata server of the local Slurm controller's
	// "VM" (a VM outside the simulation): the controller's hooks and the
	// agent fetch its identity tokens there, and the functions accept
	// controller reports only with them (ControllerVM).
	Controller   *computesim.MetadataServer
	ControllerVM string
	// APIURL is where the API function (the modelDevelopmentClusters REST
	// surface, unauthenticated here) listens.
	APIURL  string
	cleanup []func()
	// slurm is the local Slurm (nil with NoSlurm), read by the
	// simulator's hooks from its goroutines.
	slurm atomic.Pointer[slurmSide]
}

// Subscriptions: topic → entry point. ScaleUp reads two topics.
var routes = []struct{ Topic, Entry string }{
	{config.TopicJobs, "ScaleUp"},
	{config.TopicClusterSpec, "ScaleUp"},
	{config.TopicExpiry, "Expiry"},
	{config.TopicHealthFailure, "Repair"},
	{config.TopicReconcile, "Reconcile"},
	{config.TopicSlurmSnapshot, "Reconcile"},
}

// EnvLocal, set (to 1) in the shell the local system's banner prepares,
// tells commands that they run against the local system, not a
// deployment: `flexslurm status` then gives the local system's remedies
// rather than a real controller's.
const EnvLocal = "FLEXSLURM_LOCAL"

// Run starts the system, applies the spec, and then either runs the demo
// (returning its verdict) or waits for ctx to end. Everything it started is
// stopped before it returns.
func Run(ctx context.Context, opts Options) (err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return err
	}
	s, err := Start(ctx, opts)
	if s != nil {
		defer s.Stop()
	}
	if err != nil {
		return err
	}
	if opts.Demo {
		return s.Demo(ctx)
	}
	slurmHelp := fmt.Sprintf("Slurm job reports go to topic %q (see docs/events.md).\n", config.TopicJobs)
	// apply compares a changed spec with the local Slurm's configuration,
	// as with a real controller's (--slurm-conf).
	applyFlags := ""
	if ss := s.slurm.Load(); ss != nil {
		applyFlags = " --slurm-conf " + ss.lc.ConfPath
		jobs, err := s.jobDir()
		if err != nil {
			return err
		}
		slurmHelp = fmt.Sprintf("  sinfo; sbatch -p %s -N 1 --gpus-per-node=8 -t 10 -D %s --wrap 'sleep 300'; squeue   # real Slurm: jobs power nodes up; output in %s\n",
			ss.lc.Nodes()[0].Partition, jobs, jobs)
	}
	exe := opts.Exe
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			exe = rel
		}
	}
	clockHelp := "the wall clock, as Slurm's: a job runs up to its partition's MaxTime, within its VM's max run duration; " +
		"--speedup N runs flexslurm's clock N times faster (--demo: a week per minute)"
	if opts.Speedup != 1 {
		clockHelp = fmt.Sprintf("flexslurm's clock runs ×%g faster than Slurm's: a VM reaches its max run duration after %s of wall time "+
			"and ends the jobs on it; run without --speedup for jobs of your own", opts.Speedup, s.Clock.WallDuration(spec.DefaultFlexStartMaxDuration).Round(time.Second))
	}
	fmt.Fprintf(opts.Out, "\nflexslurm is running. Clock: %s.\nIn another shell:\n"+
		"  export %s=%s FIRESTORE_EMULATOR_HOST=%s PUBSUB_EMULATOR_HOST=%s %s=%s %s=%s %s=1 FLEXSLURM_API_URL=%s\n"+
		"  export CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE=%s/compute/v1/ CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true CLOUDSDK_CORE_PROJECT=%s   # gcloud compute … against the simulator (docs/compute-contract.md)\n"+
		"  %s status --dead-letter   # pools, nodes, requests, backoff, dead letters\n"+
		"  %s apply%s %s   # apply a changed spec (created or resized) through the API ($FLEXSLURM_API_URL)\n"+
		"  curl -X POST -H 'Content-Type: application/json' -d @%s \"$FLEXSLURM_API_URL/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters?model_development_cluster_id=%s\"   # the REST API (unauthenticated here; docs/api.md)\n"+
		"%sCtrl-C stops everything.\n\n",
		clockHelp, config.EnvProject, s.Opts.Project, s.Emu.Firestore.Addr(), s.Emu.PubSub.Addr(),
		config.EnvClock, s.Clock.String(), config.EnvComputeEndpoint, s.SimURL, EnvLocal, s.APIURL, s.SimURL, s.Opts.Project, exe, exe, applyFlags, opts.SpecPath,
		opts.SpecPath, s.Opts.Project, s.Spec.Region, s.Spec.ID, slurmHelp)
	<-ctx.Done()
	s.TL.Flush()
	fmt.Fprintln(opts.Out, "\nstopping: Slurm, functions, Compute simulator, emulators")
	return nil
}

// Start brings the system up and applies the spec. On error, the returned
// System (if any) must still be stopped.
func Start(ctx context.Context, opts Options) (*System, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := spec.Load(opts.SpecPath)
	if err != nil {
		return nil, err
	}
	if opts.Project == "" {
		opts.Project = c.Project
	}
	if _, err := emulator.Locate(); err != nil {
		return nil, fmt.Errorf("the local system needs the Firestore and Pub/Sub emulators: %w", err)
	}
	if err := os.MkdirAll(opts.RunDir, 0o755); err != nil {
		return nil, err
	}
	s := &System{Opts: opts, Spec: c}
	s.TL = NewTimeline(opts.Out)

	// 1. Emulators.
	s.TL.Say("starting the Firestore and Pub/Sub emulators")
	env, err := emulator.Start(ctx, emulator.EnvOptions{Project: opts.Project, LogDir: opts.RunDir})
	if err != nil {
		return s, err
	}
	s.Emu = env
	s.cleanup = append(s.cleanup, func() { _ = env.Stop() })
	s.TL.Say(fmt.Sprintf("emulators up: Firestore %s (pid %d), Pub/Sub %s (pid %d)",
		env.Firestore.Addr(), env.Firestore.PID(), env.PubSub.Addr(), env.PubSub.PID()))
	for _, kv := range env.Vars() {
		k, v, _ := cut(kv)
		os.Setenv(k, v)
	}

	// 2. Pub/Sub topics and the state store (this process reads it for the timeline).
	ps, err := pubsub.New(ctx, opts.Project)
	if err != nil {
		return s, err
	}
	s.PubSub = ps
	s.cleanup = append(s.cleanup, func() { ps.Close() })
	for _, t := range []string{config.TopicJobs, config.TopicClusterSpec, config.TopicExpiry, config.TopicHealthFailure,
		config.TopicReconcile, config.TopicSlurmCommands, config.TopicSlurmSnapshot, config.TopicCommandResults} {
		if err := ps.EnsureTopic(ctx, t); err != nil {
			return s, err
		}
	}
	fs, err := store.NewFirestore(ctx, opts.Project, "")
	if err != nil {
		return s, err
	}
	s.Store = fs
	s.cleanup = append(s.cleanup, func() { fs.Close() })

	// 3. The simulated clock starts now, shared with the function processes;
	// the Compute simulator runs on it and its audit logs go to the expiry
	// topic, as a log sink would deliver them.
	origin := time.Now().UTC().Truncate(time.Second)
	s.Clock = clock.NewScaled(origin, opts.Speedup)
	s.TL.Clock = s.Clock
	s.TL.Origin = origin
	// The watchers poll every 100–150 ms: a line is held 400 ms, so that
	// what they see at different moments is printed in the order it
	// happened.
	s.TL.Hold = 400 * time.Millisecond
	simLog, err := os.Create(filepath.Join(opts.RunDir, "compute-sim.log"))
	if err != nil {
		return s, err
	}
	s.cleanup = append(s.cleanup, func() { simLog.Close() })
	capacity := opts.CapacityDelay
	s.Sim = computesim.New(computesim.Options{
		Project:       opts.Project,
		Readings:      opts.ComputeReadings,
		CapacityDelay: func(zone, machineType string) time.Duration { return capacity },
		AuditSink: func(ctx context.Context, entry []byte, attrs map[string]string) error {
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_, err := ps.Publish(pctx, config.TopicExpiry, entry, attrs)
			return err
		},
		Logger: logx.New(simLog, 0),
		// A VM's guest: its slurmd runs while the VM is RUNNING.
		OnInstanceRunning: func(in computesim.Instance) {
			if ss := s.slurm.Load(); ss != nil {
				ss.vmRunning(in)
			}
		},
		OnInstanceStopping: func(in computesim.Instance) {
			if ss := s.slurm.Load(); ss != nil {
				ss.vmStopping(in, "is shutting down")
			}
		},
		OnInstanceRepairing: func(in computesim.Instance) {
			if ss := s.slurm.Load(); ss != nil {
				ss.vmStopping(in, "moves to a healthy host (host repair)")
			}
		},
	}, s.Clock)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return s, err
	}
	srv := &http.Server{Handler: s.Sim}
	go srv.Serve(ln)
	s.SimURL = "http://" + ln.Addr().String()
	simCtx, stopSim := context.WithCancel(context.WithoutCancel(ctx))
	go s.tickSim(simCtx, 50*time.Millisecond)
	s.cleanup = append(s.cleanup, func() { stopSim(); srv.Close() })
	s.TL.Say(fmt.Sprintf("Compute simulator at %s (clock ×%g, capacity delay %s)", s.SimURL, opts.Speedup, capacity))
	// The controller's identity: a metadata server of its own, signing
	// with the simulator's key, which the functions trust
	// (FLEXSLURM_IDENTITY_CERTS_URL) as deployed ones trust Google's.
	ctl := computesim.StaticVM{Zone: controllerZone(c), Name: c.ID + "-controller", ID: 1}
	if s.Controller, err = s.Sim.StartStaticMetadataServer(ctl, "127.0.0.1:0", nil); err != nil {
		return s, err
	}
	s.cleanup = append(s.cleanup, func() { s.Controller.Close() })
	s.ControllerVM = "zones/" + ctl.Zone + "/instances/" + ctl.Name
	s.TL.Say(fmt.Sprintf("controller %s: metadata server %s (identity tokens for its reports)", s.ControllerVM, s.Controller.Addr()))

	// 4. The four functions, one process each, and push subscriptions to them.
	// Slurm runs on the wall clock, flexslurm on the simulated one: its
	// windows for what Slurm does are about 9 s of wall time (a simulated
	// day in the demo), each at least plan.Policy's own floor below.
	wall9s := simDuration(9*time.Second, opts.Speedup)
	childEnv := append(os.Environ(),
		config.EnvProject+"="+opts.Project,
		config.EnvComputeEndpoint+"="+s.SimURL,
		config.EnvClock+"="+s.Clock.String(),
		// A snapshot is taken every 2 s of wall time (~5.6 h of simulated
		// time in the demo); one is fresh for about 9 s of wall time.
		config.EnvSnapshotMaxAge+"="+max(wall9s, 2*time.Minute).String(),
		config.EnvIdleTimeout+"="+opts.IdleTimeout.String(),
		// An unexpected Slurm × VM combination (a slurmd restarting) is
		// watched for about 9 s of wall time.
		config.EnvObserveGrace+"="+max(wall9s, time.Minute).String(),
		// A health report the node-side hook publishes after its drain is
		// waited for as long (plan.Policy's 10 min is 0.06 s of wall time
		// at the demo's speed-up: on a loaded machine the report came after
		// the reconciler had taken the node for one whose report was lost).
		config.EnvUnreportedDrainGrace+"="+max(wall9s, 10*time.Minute).String(),
		config.EnvRecreateAfterTermination+"="+strconv.FormatBool(!opts.MakeBeforeBreak),
		// Reports are verified as deployed: the controller's against its
		// VM, with the simulator's keys standing in for Google's.
		config.EnvControllerVM+"="+s.ControllerVM,
		config.EnvIdentityCertsURL+"="+s.SimURL+computesim.CertsPath,
	)
	ports := map[string]int{}
	for _, entry := range []string{"ScaleUp", "Expiry", "Repair", "Reconcile"} {
		f, err := StartFunction(ctx, opts.Exe, entry, childEnv, filepath.Join(opts.RunDir, entry+".log"))
		if err != nil {
			return s, err
		}
		s.Funcs = append(s.Funcs, f)
		ports[entry] = f.Port
		s.TL.Say(fmt.Sprintf("function %s served by functions-framework on :%d (pid %d)", entry, f.Port, f.PID()))
	}
	// The API function, with the node settings `flexslurm apply
	// --node-settings` would read. Unauthenticated: anyone who can reach
	// 127.0.0.1 may call it (docs/api.md).
	settingsPath, err := s.writeNodeSettings()
	if err != nil {
		return s, err
	}
	// Its /metrics also serves the decision latencies the functions log
	// to their files here and the dead-letter backlogs (docs/api.md).
	runDir, err := filepath.Abs(opts.RunDir)
	if err != nil {
		return s, err
	}
	apiEnv := append(slices.Clip(childEnv), api.EnvNodeSettings+"="+settingsPath, api.EnvLocalMetrics+"="+runDir)
	apiFn, err := StartFunction(ctx, opts.Exe, "API", apiEnv, filepath.Join(opts.RunDir, "API.log"))
	if err != nil {
		return s, err
	}
	s.Funcs = append(s.Funcs, apiFn)
	s.APIURL = fmt.Sprintf("http://127.0.0.1:%d", apiFn.Port)
	s.TL.Say(fmt.Sprintf("function API (modelDevelopmentClusters, unauthenticated) served by functions-framework at %s (pid %d)", s.APIURL, apiFn.PID()))
	for _, r := range routes {
		endpoint := fmt.Sprintf("http://127.0.0.1:%d/projects/%s/topics/%s", ports[r.Entry], opts.Project, r.Topic)
		if err := ps.EnsurePushSubscription(ctx, "push-"+r.Topic, r.Topic, endpoint, r.Topic+"-dead-letter", 10, 60*time.Second); err != nil {
			return s, err
		}
		// A holding subscription keeps dead letters for `flexslurm status --dead-letter`.
		if err := ps.EnsurePullSubscription(ctx, r.Topic+"-dead-letter", r.Topic+"-dead-letter"); err != nil {
			return s, err
		}
	}
	if err := ps.EnsurePullSubscription(ctx, "local-slurm-commands", config.TopicSlurmCommands); err != nil {
		return s, err
	}

	// 5. Slurm: slurmctld with the spec's partitions, the hooks and the agent.
	if !opts.NoSlurm {
		ss, err := s.startSlurm(ctx)
		if err != nil {
			return s, fmt.Errorf("starting the local Slurm cluster (flexslurm local --no-slurm runs without it): %w", err)
		}
		s.slurm.Store(ss)
		s.cleanup = append(s.cleanup, func() { s.slurm.Store(nil); ss.stop() })
	}

	// 6. Timeline watchers and the reconcile tick (Cloud Scheduler's stand-in).
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	s.cleanup = append(s.cleanup, stopBG)
	go s.TL.WatchState(bg, s.Store, c.ID, opts.StateWatchEvery)
	go s.TL.WatchSim(bg, s.Sim, 100*time.Millisecond)
	go s.TL.WatchSlurm(bg, ps, "local-slurm-commands")
	go s.tickReconcile(bg)

	// 7. Apply the cluster spec (unless it is to be created through the API).
	if opts.NoApply && !opts.Demo {
		s.TL.Say(fmt.Sprintf("cluster %s not applied (--no-apply): create it through the API", c.ID))
		return s, nil
	}
	if err := s.Apply(ctx, c); err != nil {
		return s, err
	}
	return s, nil
}

// controllerZone is the local controller's zone: its first pool's.
func controllerZone(c *spec.Cluster) string {
	for _, p := range c.NodePools {
		if p.Zone != "" {
			return p.Zone
		}
	}
	return "us-central1-a"
}

func cut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

func (s *System) tickSim(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sim.Tick(s.Clock.Now())
		}
	}
}

func (s *System) tickReconcile(ctx context.Context) {
	t := time.NewTicker(s.Opts.TickEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = s.PubSub.Publish(pctx, config.TopicReconcile, []byte(`{"version":1,"type":"reconcile.tick"}`), nil)
			cancel()
		}
	}
}

// Stop stops everything Start started, in reverse order.
func (s *System) Stop() {
	for _, f := range s.Funcs {
		f.Stop()
	}
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
	s.cleanup = nil
}

// Function is one function process.
type Function struct {
	Entry string
	Port  int
	cmd   *exec.Cmd
	done  chan struct{}
}

// PID returns the process id.
func (f *Function) PID() int { return f.cmd.Process.Pid }

// StartFunction runs `exe function serve --target entry` on a free port and
// waits until it accepts connections.
func StartFunction(ctx context.Context, exe, entry string, env []string, logPath string) (*Function, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "function", "serve", "--target", entry, "--port", strconv.Itoa(port))
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group (a Ctrl-C reaches only this process, which
	// stops it), and SIGTERM from the kernel if this process dies first
	// (SIGHUP, SIGPIPE, a crash): no function outlives the local system.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting function %s: %w", entry, err)
	}
	f := &Function{Entry: entry, Port: port, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(f.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return f, nil
		}
		select {
		case <-f.done:
			return nil, fmt.Errorf("function %s exited at start: see %s", entry, logPath)
		case <-ctx.Done():
			f.Stop()
			return nil, ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			f.Stop()
			return nil, fmt.Errorf("function %s did not listen on :%d within 30 s: see %s", entry, port, logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop terminates the process (TERM, then KILL after 5 s).
func (f *Function) Stop() {
	if f == nil || f.cmd.Process == nil {
		return
	}
	select {
	case <-f.done:
		return
	default:
	}
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.done:
	case <-time.After(5 * time.Second):
		_ = f.cmd.Process.Kill()
		<-f.done
	}
}

var errDemo = errors.New("an outcome of the demo differs from the one README.md describes (the [FAIL] lines above)")
