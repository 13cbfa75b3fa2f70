package local

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/localslurm"
	"github.com/flexslurm/flexslurm/shared/agent"
	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// gpuFiles are recorded outputs of the GPU tools of a healthy eight-GPU
// node (nvidia-smi-query.csv, nvidia-smi-nvlink-e.txt, dmesg.txt,
// dcgmi-diag.json), and dmesg-xid79.txt, the kernel log of a GPU that has
// fallen off the bus. Each node's health check reads its own copy
// (`flexslurm health check --from-dir HEALTH/NODE`), so a fault can be put
// on one node's host.
//
//go:embed gpu
var gpuFiles embed.FS

// Local Slurm settings: slurm.conf is the same as a production one but for
// these timings, chosen so that the lifecycle shows within seconds.
const (
	// localSuspendTimeout is how long a powered-down node shows
	// POWERING_DOWN.
	localSuspendTimeout = 3 * time.Second
	// localCredExpire shortens the wait before a requeued job may start
	// again (cred_expire + 1 s; Slurm's default is 120 s).
	localCredExpire = 10
	// localPrologWait is how long PrologSlurmctld waits for the job's nodes
	// to register, so that a job starts at once on freshly resumed nodes.
	localPrologWait = 60 * time.Second
	// localSchedInterval is how often slurmctld tests every pending job
	// (Slurm's default is 60 s): a requeued job starts again soon after
	// its begin time.
	localSchedInterval = 2 * time.Second
	// localSnapshotEvery is the agent's snapshot period (wall time).
	localSnapshotEvery = 2 * time.Second
)

// slurmSide is the local system's Slurm: munged, slurmctld (configless)
// with one CLOUD partition per partition of the spec's Flex-Start pools,
// the controller-side hooks (linked to the flexslurm binary and configured
// to publish to the Pub/Sub emulator), the agent, and the guests of the
// running VMs: when the Compute simulator shows a VM RUNNING, its guest
// runs `flexslurm node boot` (guests), which starts the node's slurmd and
// installs the node-side hooks; when it stops, so does its slurmd.
type slurmSide struct {
	lc        *localslurm.LocalCluster
	g         *guests
	r         *slurm.Runner
	tl        *Timeline
	healthDir string
	cluster   string
	log       *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	agent  chan error // Run's result

	mu     sync.Mutex
	vms    map[string]string              // node → the VM its slurmd runs for (or starts for)
	insts  map[string]computesim.Instance // node → that VM
	locks  map[string]*sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

// startSlurm installs Slurm when it is missing (and possible), writes
// slurm.conf and the hooks' configuration, starts munged, slurmctld and the
// agent. On error, what was started is stopped.
func (s *System) startSlurm(ctx context.Context) (*slurmSide, error) {
	o := s.Opts
	logf, err := os.Create(filepath.Join(o.RunDir, "slurm.log"))
	if err != nil {
		return nil, err
	}
	log := logx.New(logf, 0)
	// The Slurm user runs the hooks from the cluster's root: under the run
	// directory when it can reach it, else under /tmp (a clone in /root).
	root, err := filepath.Abs(filepath.Join(o.RunDir, "slurm"))
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		logf.Close()
		return nil, err
	}
	if err := localslurm.Reachable(root, false); err != nil {
		fallback := filepath.Join(os.TempDir(), "flexslurm-local-slurm")
		s.TL.Say(fmt.Sprintf("Slurm's directory is %s: the slurm user cannot reach %s (%v)", fallback, root, err))
		root = fallback
	}
	inst, err := SlurmInstallation(o.Slurm)
	if err != nil {
		logf.Close()
		return nil, err
	}
	lc, err := localslurm.New(root, inst)
	if err != nil {
		logf.Close()
		return nil, err
	}
	lc.Log = log
	if err := lc.Lock(ctx, false); errors.Is(err, localslurm.ErrBusy) {
		s.TL.Say("waiting for this host's local Slurm cluster (" + localslurm.HostLockPath + ", held by another flexslurm local or a Slurm test)")
		wctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		err = lc.Lock(wctx, true)
		cancel()
		if err != nil {
			logf.Close()
			return nil, err
		}
	} else if err != nil {
		logf.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ss := &slurmSide{lc: lc, r: lc.Runner(), tl: s.TL, cluster: s.Spec.ID, log: log, ctx: sctx, cancel: cancel,
		healthDir: filepath.Join(lc.Root, "health"), vms: map[string]string{}, insts: map[string]computesim.Instance{},
		locks: map[string]*sync.Mutex{}}
	ok := false
	defer func() {
		if !ok {
			ss.stop()
			logf.Close()
		}
	}()

	if err := lc.Inst.Installed(); err != nil {
		s.TL.Say("installing Slurm and munge with apt-get (" + err.Error() + ")")
	}
	if err := lc.Install(ctx); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(lc.Root, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(lc.Root, 0o755); err != nil {
		return nil, err
	}
	// The hooks run a copy of this binary that the Slurm user can reach.
	exe := filepath.Join(lc.Root, "flexslurm")
	if err := copyExe(o.Exe, exe); err != nil {
		return nil, fmt.Errorf("copying the flexslurm binary for the hooks: %w", err)
	}
	if err := lc.WriteConfig(s.Spec, localSlurmConfig(lc.Root, exe)); err != nil {
		return nil, err
	}
	specPath := filepath.Join(lc.HookDir(), "cluster_config.json")
	raw, err := os.ReadFile(o.SpecPath)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(specPath, raw, 0o644); err != nil {
		return nil, err
	}
	if err := ss.writeHealthy(); err != nil {
		return nil, err
	}
	if err := hooks.WriteConfig(filepath.Join(lc.HookDir(), hooks.ConfigFileName), hooks.Config{
		Cluster: s.Spec.ID, Project: o.Project, Spec: specPath,
		SpoolDir: lc.SpoolDir(), SpoolSenders: lc.SpoolSenders(), LogDir: lc.HookLogDir(), VMNameDir: lc.VMNameDir(),
		PubSubEmulatorHost: s.Emu.PubSub.Addr(), PublishTimeout: hooks.Duration(5 * time.Second),
		MetadataHost:        s.Controller.Addr(),
		CheckCmd:            []string{exe, "health", "check", "--from-dir", filepath.Join(ss.healthDir, "%n")},
		PrologCtldWaitReady: hooks.Duration(localPrologWait),
		Clock:               s.Clock.String(),
	}); err != nil {
		return nil, err
	}
	if err := lc.Start(ctx); err != nil {
		return nil, err
	}
	if ss.g, err = newGuests(s.Sim, exe, lc.Root, inst, filepath.Join(lc.Root, "log"), ss.healthDir, s.Emu.PubSub.Addr(), s.Clock.String()); err != nil {
		return nil, err
	}
	s.TL.Say(fmt.Sprintf("Slurm %s up: munged and slurmctld, slurm.conf %s, partitions %v; hooks in %s", inst.Name, lc.ConfPath, partitions(lc), lc.HookDir()))

	// The agent: a fresh ledger, since the emulators start empty and
	// command ids are deterministic.
	ledger := filepath.Join(lc.Root, "agent-ledger.json")
	os.Remove(ledger)
	agentLog, err := os.Create(filepath.Join(o.RunDir, "agent.log"))
	if err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	ss.agent = make(chan error, 1)
	go func() {
		defer agentLog.Close()
		ss.agent <- agent.Run(sctx, agent.Options{
			Spec: s.Spec, Project: o.Project, CreateSubscription: true, LedgerPath: ledger, SpoolDir: lc.SpoolDir(), SpoolSenders: lc.SpoolSenders(),
			SnapshotEvery: localSnapshotEvery, Slurm: ss.r, Log: logx.New(agentLog, 0), Now: s.Clock.Now,
			MetadataHost: s.Controller.Addr(),
			Ready:        func() { close(ready) },
		})
	}()
	select {
	case <-ready:
	case err := <-ss.agent:
		ss.agent <- err
		return nil, fmt.Errorf("the Slurm agent did not start: %w", err)
	case <-time.After(30 * time.Second):
		return nil, errors.New("the Slurm agent did not subscribe to its commands within 30 s: see agent.log")
	}
	s.TL.Say("Slurm agent running (applies flexslurm's commands with scontrol, snapshots every " + localSnapshotEvery.String() + ")")
	ss.wg.Add(1)
	go func() { defer ss.wg.Done(); ss.watchPowerUps(time.Second) }()
	ok = true
	return ss, nil
}

// localSlurmConfig is the local system's slurm.conf (hooks linked to exe,
// cluster directory root): production's, with the short timings above.
func localSlurmConfig(root, exe string) slurm.ConfigOptions {
	return slurm.ConfigOptions{
		Exe: exe, SuspendTimeout: localSuspendTimeout, HealthCheckInterval: -1, DefaultTime: time.Hour,
		SchedInterval: localSchedInterval,
		// Nodes fetch slurm.conf from slurmctld; their hooks are where
		// each VM's bootstrap links them.
		Configless: true, NodeHookDir: guestHookDir(root),
		Extra: []string{fmt.Sprintf("AuthInfo=cred_expire=%d", localCredExpire)},
	}
}

// copyExe copies the program src to dst (mode 0755), through a rename.
func copyExe(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// SlurmInstallation returns the Slurm installation of release name ("" is
// the host's 22.05), or an error naming the releases there are.
func SlurmInstallation(name string) (localslurm.Installation, error) {
	if name == "" {
		return localslurm.Host(), nil
	}
	var names []string
	for _, inst := range localslurm.Installations() {
		if inst.Name == name {
			return inst, nil
		}
		names = append(names, inst.Name)
	}
	return localslurm.Installation{}, fmt.Errorf("--slurm %q: want one of %s", name, strings.Join(names, ", "))
}

func partitions(lc *localslurm.LocalCluster) []string {
	var out []string
	for _, n := range lc.Nodes() {
		if len(out) == 0 || out[len(out)-1] != n.Partition {
			out = append(out, n.Partition)
		}
	}
	return out
}

// writeHealthy gives every node a healthy host: the recorded outputs of a
// healthy node in HEALTH/NODE.
func (ss *slurmSide) writeHealthy() error {
	for _, n := range ss.lc.Nodes() {
		if err := ss.setHost(n.Name, false); err != nil {
			return err
		}
	}
	return nil
}

// setHost writes node's recorded GPU outputs: a healthy host, or one whose
// kernel log shows Xid 79 (GPU fallen off the bus).
func (ss *slurmSide) setHost(node string, faulty bool) error {
	dir := filepath.Join(ss.healthDir, node)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return fs.WalkDir(gpuFiles, "gpu", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "dmesg-xid79.txt" {
			return err
		}
		src := path
		if faulty && d.Name() == "dmesg.txt" {
			src = "gpu/dmesg-xid79.txt"
		}
		b, err := gpuFiles.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, d.Name()), b, 0o644)
	})
}

// InjectGPUFault gives node's current host a GPU that has fallen off the
// bus (Xid 79): its next health check fails. A host repair (the VM moved to
// another host) or a new VM gives it a healthy host again.
func (s *System) InjectGPUFault(node string) error {
	ss := s.slurm.Load()
	if ss == nil {
		return errors.New("no local Slurm: GPU faults are injected through the node's health check")
	}
	return ss.setHost(node, true)
}

// nodeOf returns the Slurm node a VM of this cluster runs, "" for others.
func (ss *slurmSide) nodeOf(vm string) string {
	node, cl, _, _, ok := naming.ParseVMName(vm)
	if !ok || cl != ss.cluster {
		return ""
	}
	for _, n := range ss.lc.Nodes() {
		if n.Name == node {
			return node
		}
	}
	return ""
}

// do runs f for node in the background, one at a time per node.
func (ss *slurmSide) do(node string, f func()) {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return
	}
	l := ss.locks[node]
	if l == nil {
		l = &sync.Mutex{}
		ss.locks[node] = l
	}
	ss.wg.Add(1)
	ss.mu.Unlock()
	go func() {
		defer ss.wg.Done()
		l.Lock()
		defer l.Unlock()
		if ss.ctx.Err() == nil {
			f()
		}
	}()
}

// vmRunning boots a VM that became RUNNING (created, or back from a host
// repair) — `flexslurm node boot`, which starts the node's slurmd —
// MinNodeStartDelay later: a VM's slurmd registers after the resume
// request that powered the node up.
func (ss *slurmSide) vmRunning(in computesim.Instance) {
	node := ss.nodeOf(in.Name)
	if node == "" {
		return
	}
	seen := time.Now()
	ss.do(node, func() {
		ss.mu.Lock()
		prev := ss.vms[node]
		ss.mu.Unlock()
		if prev != "" && prev != in.Name && ss.g.slurmdRunning(node) {
			ss.stopNode(node, prev, "its VM was replaced")
		}
		// A VM that (re)starts runs on a host with healthy GPUs.
		if err := ss.setHost(node, false); err != nil {
			ss.log.Error("writing the node's GPU outputs", "node", node, "error", err)
		}
		if err := ss.lc.SetNodeVM(node, in.Name); err != nil {
			ss.log.Error("recording the node's VM", "node", node, "vm", in.Name, "error", err)
			return
		}
		ss.mu.Lock()
		ss.vms[node] = in.Name
		ss.insts[node] = in
		ss.mu.Unlock()
		// A node Slurm is still powering down (the previous VM's end)
		// ignores a registration: a real VM boots for longer than
		// SuspendTimeout, so its slurmd comes up once Slurm is done.
		for deadline := time.Now().Add(localSuspendTimeout + 30*time.Second); time.Now().Before(deadline); {
			n, err := ss.node(ss.ctx, node)
			if err == nil && !n.Has(slurmstate.FlagPoweringDown) && !n.Has(slurmstate.FlagPowerDown) {
				break
			}
			select {
			case <-ss.ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			seen = time.Now()
		}
		if err := ss.bootAfter(node, in, seen); err != nil {
			ss.log.Error("booting the VM", "node", node, "vm", in.Name, "error", err)
			if ss.ctx.Err() == nil && !errors.Is(err, errVMGone) {
				ss.tl.Say(fmt.Sprintf("VM %s did not boot: %v", in.Name, err))
			}
			return
		}
		ss.tl.Say(fmt.Sprintf("VM %s booted (flexslurm node boot): slurmd -N %s --conf-server started", in.Name, node))
	})
}

// vmStopping stops the node's slurmd (and what runs on it) when its VM is
// deleted, reaches its max run duration or goes to host repair.
func (ss *slurmSide) vmStopping(in computesim.Instance, why string) {
	node := ss.nodeOf(in.Name)
	if node == "" {
		return
	}
	ss.do(node, func() {
		ss.mu.Lock()
		cur := ss.vms[node]
		ss.mu.Unlock()
		if cur != in.Name {
			return // another generation runs the node now
		}
		ss.stopNode(node, in.Name, why)
	})
}

// bootAfter runs the VM's bootstrap once MinNodeStartDelay has passed since
// resumedAt.
func (ss *slurmSide) bootAfter(node string, in computesim.Instance, resumedAt time.Time) error {
	if wait := time.Until(resumedAt.Add(localslurm.MinNodeStartDelay)); wait > 0 {
		select {
		case <-ss.ctx.Done():
			return ss.ctx.Err()
		case <-time.After(wait):
		}
	}
	return ss.g.boot(ss.ctx, in)
}

func (ss *slurmSide) stopNode(node, vm, why string) {
	// The VM's end: its slurmd, then what still runs for the node (jobs,
	// slurmstepd), then its metadata server and the rule that guarded it.
	ss.g.stopSlurmd(node)
	if err := ss.lc.StopNode(node); err != nil {
		ss.log.Error("stopping slurmd", "node", node, "vm", vm, "error", err)
	}
	if err := ss.g.shutdown(vm); err != nil {
		ss.log.Error("ending the VM's guest", "node", node, "vm", vm, "error", err)
	}
	ss.mu.Lock()
	if ss.vms[node] == vm {
		delete(ss.vms, node)
		delete(ss.insts, node)
	}
	ss.mu.Unlock()
	ss.tl.Say(fmt.Sprintf("VM %s %s: slurmd of %s stopped", vm, why, node))
}

// watchPowerUps plays the part of a VM's boot that the simulator leaves
// out: a VM boots for minutes, so its slurmd registers after Slurm has
// powered the node down and after any power_up. Here a slurmd may
// register within the second before a power_up; Slurm then waits for a
// registration that comes later than the resume request, and the node
// stays POWERING_UP until ResumeTimeout. A node POWERING_UP whose slurmd
// has run for longer than MinNodeStartDelay + 1 s gets its slurmd
// restarted, as a booting VM's would register.
func (ss *slurmSide) watchPowerUps(every time.Duration) {
	started := map[string]time.Time{} // node → when its slurmd was first seen running
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ss.ctx.Done():
			return
		case <-t.C:
		}
		ss.mu.Lock()
		var nodes []string
		for n := range ss.vms {
			nodes = append(nodes, n)
		}
		ss.mu.Unlock()
		for _, name := range nodes {
			if !ss.g.slurmdRunning(name) {
				delete(started, name)
				continue
			}
			if _, ok := started[name]; !ok {
				started[name] = time.Now()
			}
			n, err := ss.node(ss.ctx, name)
			if err != nil || !n.Has(slurmstate.FlagPoweringUp) || time.Since(started[name]) < localslurm.MinNodeStartDelay+time.Second {
				continue
			}
			delete(started, name)
			ss.mu.Lock()
			vm := ss.vms[name]
			in := ss.insts[name]
			ss.mu.Unlock()
			node := name
			ss.do(node, func() {
				ss.g.stopSlurmd(node)
				// The bootstrap again: every other step is in place, so it
				// only starts slurmd.
				if err := ss.bootAfter(node, in, time.Now()); err != nil {
					ss.log.Error("restarting slurmd", "node", node, "error", err)
					return
				}
				ss.tl.Say(fmt.Sprintf("%s: Slurm powers %s up again while its slurmd runs: slurmd restarted so that it registers", vm, node))
			})
		}
	}
}

// stop stops the agent, then every job and daemon (by PID), and releases
// the host.
func (ss *slurmSide) stop() {
	ss.mu.Lock()
	ss.closed = true
	ss.mu.Unlock()
	ss.cancel()
	ss.wg.Wait()
	if ss.agent != nil {
		select {
		case <-ss.agent:
		case <-time.After(15 * time.Second):
			ss.log.Error("the agent did not stop within 15 s")
		}
	}
	if ss.g != nil {
		ss.mu.Lock()
		running := map[string]string{}
		for n, vm := range ss.vms {
			running[n] = vm
		}
		ss.mu.Unlock()
		for n, vm := range running {
			ss.stopNode(n, vm, "stops with the local system")
		}
	}
	if err := ss.lc.Stop(); err != nil {
		ss.log.Error("stopping Slurm", "error", err)
	}
	if ss.g != nil {
		if err := ss.g.close(); err != nil {
			ss.log.Error("ending the VMs' guests", "error", err)
		}
	}
}
