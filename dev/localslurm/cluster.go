package localslurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/proc"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// ErrUnavailable marks a machine where a local Slurm cluster cannot run:
// Slurm is not installed and cannot be (not root, no apt-get), or its
// daemons do not start. Tests skip on it.
var ErrUnavailable = errors.New("Slurm is not available on this machine") //lint:ignore ST1005 a product name

// Packages is what Install installs (Debian/Ubuntu names).
var Packages = []string{"slurmctld", "slurmd", "slurm-client", "munge"}

// MinNodeStartDelay is how long after ResumeProgram was called a slurmd may
// start: slurmd -b reports its start as the node's boot time in whole
// seconds, and slurmctld ignores a registration whose boot time is not
// later than the resume request, leaving the node POWERING_UP until
// ResumeTimeout.
const MinNodeStartDelay = 2 * time.Second

// LocalCluster runs a whole Slurm cluster on this host: munged, slurmctld,
// and one slurmd per node (slurmd -D -b -N NODE on its own port), each
// started and stopped by PID, from one Installation (the host's packages,
// or a chroot). It backs `flexslurm local` and the integration tests. Only
// one can run per host: it owns slurm.conf and the Slurm ports. Methods are
// safe for concurrent use.
type LocalCluster struct {
	// Root holds everything but slurm.conf: state/, log/, run/, spool/,
	// hooks/. Absolute; the SlurmUser must be able to reach it. In a
	// chroot installation it is bind-mounted at the same path inside the
	// chroot, so every path means the same on both sides.
	Root string
	// Inst is the Slurm installation the daemons and commands come from.
	Inst Installation
	// ConfPath is where slurm.conf is written, as a host path: the
	// installation's slurm.DefaultConfPath.
	ConfPath string
	// BinDir holds the client commands (a host path): /usr/bin for the
	// host installation; for a chroot, Root/slurm-bin, whose scripts run
	// the chroot's commands (ChrootBinDir). SbinDir holds the daemons, as
	// seen inside the installation: /usr/sbin.
	BinDir, SbinDir string
	// Binds are more host directories that a chroot installation's
	// daemons and hooks must see at the same path (Root, and the
	// directories of the flexslurm binary and of the hooks, are bound
	// without being listed).
	Binds []string
	// KeepState starts slurmctld without -c, keeping jobs and node states
	// from an earlier run in Root/state.
	KeepState bool
	// Log receives the cluster's life events; nil discards them.
	Log *slog.Logger

	mu        sync.Mutex
	nodes     map[string]slurm.LocalNode
	hookDir   string
	daemons   map[string]*daemon // "munged", "slurmctld", "slurmd:NODE"
	mungeOurs bool
	clusterID string // ClusterName of the slurm.conf WriteConfig wrote
	slurmUID  int    // the SlurmUser's uid (WriteConfig), 0 before
	lockFile  *os.File
	exeDir    string   // the directory of the hooks' flexslurm binary
	mounts    []string // chroot mount points, in mount order
}

// HostLockPath is the lock that allows one LocalCluster per host: it owns
// /etc/slurm/slurm.conf and the Slurm ports.
const HostLockPath = "/tmp/flexslurm-localcluster.lock"

// ErrBusy reports that another LocalCluster holds the host.
var ErrBusy = errors.New("another local Slurm cluster runs on this host")

// Lock takes the host lock (HostLockPath), waiting for it when wait is set
// (until ctx ends), failing with ErrBusy otherwise. WriteConfig and Start
// take it without waiting when it is not held yet; Stop releases it. The
// kernel releases it when the process ends.
func (l *LocalCluster) Lock(ctx context.Context, wait bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lockFile != nil {
		return nil
	}
	f, err := os.OpenFile(HostLockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("opening the host lock %s: %w", HostLockPath, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			l.lockFile = f
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("locking %s: %w", HostLockPath, err)
		}
		if !wait {
			f.Close()
			return fmt.Errorf("%w (%s is locked: `flexslurm local` or a Slurm integration test)", ErrBusy, HostLockPath)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("waiting for %s: %w", HostLockPath, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (l *LocalCluster) unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lockFile != nil {
		l.lockFile.Close()
		l.lockFile = nil
	}
}

// New returns a LocalCluster of installation inst rooted at root (made
// absolute).
func New(root string, inst Installation) (*LocalCluster, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local Slurm root %s: %w", root, err)
	}
	if inst.Name == "" {
		return nil, fmt.Errorf("local Slurm root %s: the installation has no name", root)
	}
	bin := slurm.DefaultBinDir
	if inst.Chrooted() {
		bin = filepath.Join(abs, "slurm-bin")
	}
	return &LocalCluster{Root: abs, Inst: inst, ConfPath: inst.Path(slurm.DefaultConfPath), BinDir: bin, SbinDir: "/usr/sbin",
		daemons: map[string]*daemon{}}, nil
}

func (l *LocalCluster) log() *slog.Logger {
	if l.Log != nil {
		return l.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Runner returns a Runner for this cluster's client commands.
func (l *LocalCluster) Runner() *slurm.Runner { return &slurm.Runner{BinDir: l.BinDir, Log: l.Log} }

// HookDir returns the directory of the hook links (after WriteConfig).
func (l *LocalCluster) HookDir() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hookDir == "" {
		return filepath.Join(l.Root, "hooks")
	}
	return l.hookDir
}

// SpoolDir is the hooks' message spool (hooks.Spool), as on a controller
// that is also a node: root's, 0755, with a directory (0700) for root (the
// node-side hooks, an agent run as root) and one for the SlurmUser (the
// controller hooks), created by WriteConfig.
func (l *LocalCluster) SpoolDir() string { return filepath.Join(l.Root, "flexslurm-spool") }

// SpoolSenders is the hooks' spool_senders for SpoolDir: root sends what a
// node and a controller send, the SlurmUser what the controller sends.
// Call it after WriteConfig.
func (l *LocalCluster) SpoolSenders() hooks.SpoolSenders {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := hooks.SpoolSenders{0: {hooks.RoleNode, hooks.RoleController}}
	if l.slurmUID > 0 {
		s[l.slurmUID] = []hooks.Role{hooks.RoleController}
	}
	return s
}

// ensureSpoolUserDir makes path a directory of uid:gid, 0700, replacing
// anything else there (a directory of another owner, left by an older
// layout where every user could create one, is removed with its content).
func ensureSpoolUserDir(path string, uid, gid int) error {
	if st, err := os.Lstat(path); err == nil {
		sys, _ := st.Sys().(*syscall.Stat_t)
		if !st.IsDir() || sys == nil || int(sys.Uid) != uid {
			if err := os.RemoveAll(path); err != nil {
				return fmt.Errorf("replacing spool directory %s: %w", path, err)
			}
		}
	}
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating spool directory %s: %w", path, err)
	}
	if err := os.Lchown(path, uid, gid); err != nil {
		return fmt.Errorf("giving spool directory %s to user %d: %w", path, uid, err)
	}
	return os.Chmod(path, 0o700)
}

// HookLogDir is a directory every hook can write (mode 1777), for the
// hooks' logs.
func (l *LocalCluster) HookLogDir() string { return filepath.Join(l.Root, "hook-log") }

// VMNameDir holds one file per node naming the VM that runs it (hooks
// config vm_name_dir): SetNodeVM writes them.
func (l *LocalCluster) VMNameDir() string { return filepath.Join(l.Root, "vm") }

// SetNodeVM records that node name runs on VM vm ("<node>-g<generation>"),
// for the node-side hooks to report with a health failure. Call it before
// StartNode.
func (l *LocalCluster) SetNodeVM(name, vm string) error {
	if err := os.MkdirAll(l.VMNameDir(), 0o755); err != nil {
		return fmt.Errorf("recording the VM of node %s: %w", name, err)
	}
	if err := writeFileAtomic(filepath.Join(l.VMNameDir(), name), []byte(vm+"\n"), 0o644); err != nil {
		return fmt.Errorf("recording the VM of node %s: %w", name, err)
	}
	return nil
}

// Nodes returns the nodes of the written configuration, in spec order.
func (l *LocalCluster) Nodes() []slurm.LocalNode {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]slurm.LocalNode, 0, len(l.nodes))
	for _, n := range l.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Port < out[j].Port })
	return out
}

// Install makes sure the cluster's installation has Slurm and munge: see
// Installation.Install.
func (l *LocalCluster) Install(ctx context.Context) error { return l.Inst.Install(ctx, l.log()) }

func tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// WriteConfig writes slurm.conf for cluster c (slurm.BuildConfig) to
// ConfPath, creates Root's directories with the owners the daemons need,
// and links every hook name in the hook directory to o.Exe. It checks that
// the SlurmUser can reach Root and run o.Exe. For a chroot installation it
// also writes the client command scripts of BinDir.
func (l *LocalCluster) WriteConfig(c *spec.Cluster, o slurm.ConfigOptions) error {
	if err := l.Lock(context.Background(), false); err != nil {
		return err
	}
	hookDir := o.HookDir
	if hookDir == "" {
		hookDir = filepath.Join(l.Root, "hooks")
	}
	conf, nodes, err := slurm.BuildConfig(c, o, l.Root, hookDir)
	if err != nil {
		return fmt.Errorf("writing slurm.conf for cluster %s: %w", c.ID, err)
	}
	l.mu.Lock()
	l.clusterID = c.ID
	l.mu.Unlock()
	uid, gid, err := l.Inst.LookupUser("slurm")
	if err != nil {
		return fmt.Errorf("%w: no slurm user: %w", ErrUnavailable, err)
	}
	l.mu.Lock()
	l.slurmUID = uid
	l.mu.Unlock()
	if err := Reachable(l.Root, false); err != nil {
		return fmt.Errorf("local Slurm root: %w", err)
	}
	if err := Reachable(o.Exe, true); err != nil {
		return fmt.Errorf("flexslurm binary for the hooks: %w", err)
	}
	dirs := []struct {
		path  string
		mode  fs.FileMode
		owned bool // by the SlurmUser
	}{
		{l.Root, 0o755, false},
		{filepath.Join(l.Root, "state"), 0o755, true},
		{filepath.Join(l.Root, "log"), 0o755, true},
		{filepath.Join(l.Root, "run"), 0o755, true},
		{filepath.Join(l.Root, "spool"), 0o755, false},
		{hookDir, 0o755, false},
		{l.SpoolDir(), 0o755, false},
		{l.HookLogDir(), 0o777 | fs.ModeSticky, false},
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d.path, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d.path, err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return fmt.Errorf("setting the mode of %s: %w", d.path, err)
		}
		if d.owned {
			if err := os.Chown(d.path, uid, gid); err != nil {
				return fmt.Errorf("giving %s to the slurm user: %w", d.path, err)
			}
		}
	}
	for _, u := range []struct{ uid, gid int }{{0, 0}, {uid, gid}} {
		if err := ensureSpoolUserDir(filepath.Join(l.SpoolDir(), strconv.Itoa(u.uid)), u.uid, u.gid); err != nil {
			return err
		}
	}
	if l.Inst.Chrooted() {
		if err := writeChrootBin(l.BinDir, l.Inst.Root); err != nil {
			return err
		}
	}
	for _, h := range slurm.HookNames {
		link := filepath.Join(hookDir, slurm.HookLinkPrefix+h)
		tmp := link + ".new"
		os.Remove(tmp)
		if err := os.Symlink(o.Exe, tmp); err != nil {
			return fmt.Errorf("linking hook %s: %w", h, err)
		}
		if err := os.Rename(tmp, link); err != nil {
			return fmt.Errorf("linking hook %s: %w", h, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(l.ConfPath), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(l.ConfPath), err)
	}
	if err := writeFileAtomic(l.ConfPath, conf, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", l.ConfPath, err)
	}
	if l.Inst.CgroupConf != "" {
		p := filepath.Join(filepath.Dir(l.ConfPath), "cgroup.conf")
		if err := writeFileAtomic(p, []byte(l.Inst.CgroupConf), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	if err := writeLocalGres(c, o, l.Root, hookDir, l.ConfPath); err != nil {
		return err
	}
	l.mu.Lock()
	l.hookDir = hookDir
	l.exeDir = filepath.Dir(o.Exe)
	l.Binds = append(l.Binds, hookDir)
	if o.NodeHookDir != "" {
		l.Binds = append(l.Binds, o.NodeHookDir)
	}
	l.nodes = map[string]slurm.LocalNode{}
	for _, n := range nodes {
		l.nodes[n.Name] = n
	}
	l.mu.Unlock()
	l.log().Info("slurm.conf written", "path", l.ConfPath, "slurm", l.Inst.Name, "cluster", c.ID, "nodes", len(nodes), "hooks", hookDir)
	return nil
}

// Reachable checks that every directory above path (and path itself when it
// is a directory) is world-searchable, and that a file is world-readable
// and executable, so that the SlurmUser can use it.
func Reachable(path string, isExe bool) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if isExe {
		st, err := os.Stat(abs)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o005 != 0o005 {
			return fmt.Errorf("%s has mode %v: the slurm user cannot run it (want o+rx)", abs, st.Mode().Perm())
		}
		abs = filepath.Dir(abs)
	}
	for d := abs; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil && st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("directory %s has mode %v: the slurm user cannot reach %s (want o+x on every directory above it)",
				d, st.Mode().Perm(), path)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// daemon is one process this LocalCluster started.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// Start starts munged (unless one already runs) and slurmctld, and waits
// until slurmctld answers. Leftover daemons of an earlier run under the same
// Root (recorded PID files whose process is still that daemon) are stopped
// first. A slurmctld that is not this cluster's and already answers is an
// error.
func (l *LocalCluster) Start(ctx context.Context) error {
	if err := l.Inst.Installed(); err != nil {
		return err
	}
	if err := l.Lock(ctx, false); err != nil {
		return err
	}
	l.stopLeftovers()
	if l.Inst.Chrooted() {
		if err := l.mountChroot(); err != nil {
			l.unmountChroot()
			return err
		}
	}
	if err := l.startMunge(ctx); err != nil {
		return err
	}
	r := l.Runner()
	r.Timeout = 3 * time.Second
	if out, err := r.Scontrol(ctx, "ping"); err == nil && strings.Contains(string(out), "is UP") {
		return fmt.Errorf("a slurmctld that this cluster did not start already answers (%s): stop it first",
			strings.TrimSpace(string(out)))
	}
	args := []string{"-D", "-i"}
	if !l.KeepState {
		// -c clears jobs and node states, but 22.05 still recovers the
		// reservations (resv_state): start from an empty state directory.
		if err := clearDir(filepath.Join(l.Root, "state")); err != nil {
			return fmt.Errorf("clearing slurmctld's state: %w", err)
		}
		args = append(args, "-c")
	}
	d, err := l.spawn("slurmctld", filepath.Join(l.SbinDir, "slurmctld"), args, nil)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := r.Scontrol(ctx, "ping")
		if err == nil && strings.Contains(string(out), "is UP") {
			break
		}
		if !d.running() {
			return fmt.Errorf("%w: slurmctld exited at start: %s", ErrUnavailable, l.logTail("slurmctld"))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			l.stopDaemon(d, 5*time.Second)
			return fmt.Errorf("%w: slurmctld did not answer within 20 s: %s", ErrUnavailable, l.logTail("slurmctld"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	l.log().Info("slurmctld up", "pid", d.pid(), "conf", l.ConfPath, "slurm", l.Inst.Name)
	return nil
}

// clearDir removes what directory dir holds, keeping dir itself (its owner
// and mode).
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (l *LocalCluster) logTail(name string) string {
	var parts []string
	for _, f := range []string{filepath.Join(l.Root, "log", name+".stdout"), filepath.Join(l.Root, "log", name+".log")} {
		if b, err := os.ReadFile(f); err == nil && len(bytes.TrimSpace(b)) > 0 {
			parts = append(parts, f+": "+tail(b, 800))
		}
	}
	return strings.Join(parts, "; ")
}

func (l *LocalCluster) startMunge(ctx context.Context) error {
	runDir := l.Inst.Path("/run/munge")
	if b, err := os.ReadFile(filepath.Join(runDir, "munged.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pidAlive(pid) && procName(pid) == "munged" {
			l.log().Info("munged already running", "pid", pid)
			return nil
		}
	}
	uid, gid, err := l.Inst.LookupUser("munge")
	if err != nil {
		return fmt.Errorf("%w: no munge user: %w", ErrUnavailable, err)
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", runDir, err)
	}
	if err := os.Chown(runDir, uid, gid); err != nil {
		return fmt.Errorf("giving %s to munge: %w", runDir, err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	d, err := l.spawn("munged", filepath.Join(l.SbinDir, "munged"), []string{"-F", "--force"}, cred)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(filepath.Join(runDir, "munge.socket.2")); err == nil {
			break
		}
		if !d.running() || time.Now().After(deadline) || ctx.Err() != nil {
			l.stopDaemon(d, 2*time.Second)
			return fmt.Errorf("%w: munged did not start: %s", ErrUnavailable, l.logTail("munged"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	l.mu.Lock()
	l.mungeOurs = true
	l.mu.Unlock()
	l.log().Info("munged up", "pid", d.pid())
	return nil
}

// spawn starts a daemon in its own session (in the installation's chroot,
// path being a path inside it), logging to Root/log/NAME.stdout, recording
// its PID in Root/run/NAME.bgpid; the kernel sends it SIGTERM if this
// process dies without stopping it.
func (l *LocalCluster) spawn(name, path string, args []string, cred *syscall.Credential) (*daemon, error) {
	logPath := filepath.Join(l.Root, "log", strings.ReplaceAll(name, ":", "-")+".stdout")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = l.Root
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGTERM, Credential: cred, Chroot: l.Inst.Root}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(d.done) }()
	_ = os.WriteFile(l.pidFile(name), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	l.mu.Lock()
	l.daemons[name] = d
	l.mu.Unlock()
	return d, nil
}

func (l *LocalCluster) pidFile(name string) string {
	return filepath.Join(l.Root, "run", strings.ReplaceAll(name, ":", "-")+".bgpid")
}

// stopLeftovers stops the daemons an earlier run under Root recorded and
// left running (after a crash), checking each PID's program name first.
func (l *LocalCluster) stopLeftovers() {
	files, _ := filepath.Glob(filepath.Join(l.Root, "run", "*.bgpid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		name := procName(pid)
		if err == nil && pidAlive(pid) && (name == "slurmctld" || name == "slurmd" || name == "munged") {
			l.log().Warn("stopping a daemon left by an earlier run", "pid", pid, "program", name)
			stopPID(pid, 10*time.Second)
		}
		os.Remove(f)
	}
}

// StartNode starts `slurmd -D -b -N name`, as the VM of node name would.
// The caller must let MinNodeStartDelay pass after the ResumeProgram call
// that powered the node up (StartNodeAfter does). Starting a node that
// runs is a no-op.
func (l *LocalCluster) StartNode(ctx context.Context, name string) error {
	l.mu.Lock()
	_, known := l.nodes[name]
	d := l.daemons["slurmd:"+name]
	l.mu.Unlock()
	if l.nodes != nil && !known {
		return fmt.Errorf("starting node %s: %w: not in slurm.conf", name, slurm.ErrNotFound)
	}
	if d != nil && d.running() {
		return nil
	}
	d, err := l.spawn("slurmd:"+name, filepath.Join(l.SbinDir, "slurmd"), []string{"-D", "-b", "-N", name}, nil)
	if err != nil {
		return fmt.Errorf("starting node %s: %w", name, err)
	}
	l.log().Info("slurmd started", "node", name, "pid", d.pid())
	return nil
}

// StartNodeAfter waits until MinNodeStartDelay has passed since resumedAt,
// then starts the node.
func (l *LocalCluster) StartNodeAfter(ctx context.Context, name string, resumedAt time.Time) error {
	if wait := time.Until(resumedAt.Add(MinNodeStartDelay)); wait > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("starting node %s: %w", name, ctx.Err())
		case <-time.After(wait):
		}
	}
	return l.StartNode(ctx, name)
}

// NodeRunning reports whether this LocalCluster runs node name's slurmd.
func (l *LocalCluster) NodeRunning(name string) bool {
	l.mu.Lock()
	d := l.daemons["slurmd:"+name]
	l.mu.Unlock()
	return d != nil && d.running()
}

// StopNode stops node name's slurmd (TERM, KILL after 10 s) and then kills
// what still runs for that node — slurmstepd and job processes, which
// survive their slurmd in a session of their own — as the end of its VM
// would. Stopping a node that does not run is a no-op.
func (l *LocalCluster) StopNode(name string) error {
	// A VM that ends reports nothing: freeze the node's job steps first, so
	// that no slurmstepd tells slurmctld its job was killed (which would end
	// the job FAILED instead of letting Slurm requeue it when the node goes
	// DOWN) while slurmd shuts down or the processes are killed one by one.
	l.mu.Lock()
	cluster := l.clusterID
	l.mu.Unlock()
	frozen := nodeProcesses(cluster, name)
	for _, pid := range frozen {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	l.mu.Lock()
	d := l.daemons["slurmd:"+name]
	delete(l.daemons, "slurmd:"+name)
	l.mu.Unlock()
	if d != nil {
		l.stopDaemon(d, 10*time.Second)
		l.log().Info("slurmd stopped", "node", name, "pid", d.pid())
	}
	pids := frozen
	for _, pid := range nodeProcesses(cluster, name) {
		if !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		l.log().Info("killing a process of the stopped node", "node", name, "pid", pid, "program", procName(pid))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	os.Remove(l.pidFile("slurmd:" + name))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var left []int
		for _, pid := range pids {
			if pidAlive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stopping node %s: processes %v still run 5 s after SIGKILL", name, left)
		}
	}
}

// Stop cancels every job (and waits, up to 30 s, until the running nodes
// have ended them), then stops every slurmd, slurmctld, and munged if this
// cluster started it — each by PID, TERM then KILL —, unmounts what Start
// mounted in a chroot, and releases the host lock.
func (l *LocalCluster) Stop() error {
	l.mu.Lock()
	ctld := l.daemons["slurmctld"]
	var nodes []string
	for k := range l.daemons {
		if n, ok := strings.CutPrefix(k, "slurmd:"); ok {
			nodes = append(nodes, n)
		}
	}
	l.mu.Unlock()
	var errs []error
	if ctld != nil && ctld.running() {
		if err := l.cancelAllJobs(); err != nil {
			errs = append(errs, err)
		}
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		if err := l.StopNode(n); err != nil {
			errs = append(errs, err)
		}
	}
	if ctld != nil {
		l.stopDaemon(ctld, 15*time.Second)
		os.Remove(l.pidFile("slurmctld"))
		l.log().Info("slurmctld stopped", "pid", ctld.pid())
	}
	l.mu.Lock()
	munge := l.daemons["munged"]
	ours := l.mungeOurs
	l.daemons = map[string]*daemon{}
	l.mungeOurs = false
	l.mu.Unlock()
	if munge != nil && ours {
		l.stopDaemon(munge, 5*time.Second)
		os.Remove(l.pidFile("munged"))
		l.log().Info("munged stopped", "pid", munge.pid())
	}
	if l.Inst.Chrooted() {
		if err := l.unmountChroot(); err != nil {
			errs = append(errs, err)
		}
	}
	l.unlock()
	return errors.Join(errs...)
}

func (l *LocalCluster) cancelAllJobs() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := l.Runner()
	r.Timeout = 5 * time.Second
	out, err := r.Run(ctx, "squeue", "-h", "--all", "-o", "%A")
	if err != nil {
		return fmt.Errorf("listing jobs to cancel: %w", err)
	}
	ids := strings.Fields(string(out))
	if len(ids) > 0 {
		if _, err := r.Run(ctx, "scancel", ids...); err != nil {
			l.log().Warn("scancel", "error", err)
		}
	}
	// Wait until the running slurmds have ended their jobs' processes.
	// Jobs on nodes already stopped cannot complete, and need not: their
	// processes went with the node (StopNode).
	var running []string
	l.mu.Lock()
	for k, d := range l.daemons {
		if n, ok := strings.CutPrefix(k, "slurmd:"); ok && d.running() {
			running = append(running, n)
		}
	}
	l.mu.Unlock()
	if len(running) == 0 {
		return nil
	}
	var left []slurm.JobInfo
	for ctx.Err() == nil {
		left, err = r.JobsOnNodes(ctx, running, "RUNNING,COMPLETING,CONFIGURING,SUSPENDED")
		if err == nil && len(left) == 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%d jobs still run 30 s after scancel", len(left))
}

// stopDaemon sends TERM, waits up to grace for the process to exit (and be
// reaped), then sends KILL.
func (l *LocalCluster) stopDaemon(d *daemon, grace time.Duration) {
	if !d.running() {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(grace):
		l.log().Warn("daemon ignored TERM; killing it", "daemon", d.name, "pid", d.pid())
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// stopPID stops a process this program did not start (TERM, KILL after
// grace), judging liveness from /proc/PID/status.
func stopPID(pid int, grace time.Duration) {
	if pid <= 1 || !pidAlive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !pidAlive(pid) {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// procName returns the program name of pid (/proc/PID/comm), or "".
func procName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// nodeProcesses returns the live processes that run for node name of
// cluster on this host: those whose environment holds
// SLURMD_NODENAME=name and SLURM_CLUSTER_NAME=cluster (job tasks and batch
// scripts: Slurm sets both in every job's environment, see sbatch(1)
// "OUTPUT ENVIRONMENT VARIABLES"), and the slurmstepd processes that are
// their parents (a slurmstepd's own environment does not name its node).
// A job of another cluster on the same host (one left by a killed run)
// whose node has the same name is not touched. An empty cluster (no
// slurm.conf written by this LocalCluster) matches nothing.
func nodeProcesses(cluster, name string) []int {
	if cluster == "" {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	want := []byte("\x00SLURMD_NODENAME=" + name + "\x00")
	wantCluster := []byte("\x00SLURM_CLUSTER_NAME=" + cluster + "\x00")
	self := os.Getpid()
	var pids []int
	seen := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid <= 1 {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		env = append([]byte{0}, env...)
		if !bytes.Contains(env, want) || !bytes.Contains(env, wantCluster) || !pidAlive(pid) {
			continue
		}
		if !seen[pid] {
			seen[pid] = true
			pids = append(pids, pid)
		}
		if pp := parentPID(pid); pp > 1 && !seen[pp] && procName(pp) == "slurmstepd" {
			seen[pp] = true
			pids = append(pids, pp)
		}
	}
	return pids
}

// parentPID reads the parent of pid from /proc/PID/stat; 0 when unknown.
func parentPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// "PID (comm) STATE PPID …": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(f[1])
	return pp
}

func pidAlive(pid int) bool { return proc.Alive(pid) }

// writeLocalGres writes gres.conf beside slurm.conf at confPath and the
// stand-in GPU devices it names under root (slurm.LocalGPUDir): character
// devices (standInGPU), so that slurmd gives a job their indexes in
// CUDA_VISIBLE_DEVICES.
func writeLocalGres(c *spec.Cluster, o slurm.ConfigOptions, root, hookDir, confPath string) error {
	gres, gpus, err := slurm.BuildLocalGres(c, o, root, hookDir)
	if err != nil {
		return err
	}
	if gpus > 0 {
		dir := slurm.LocalGPUDir(root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating the stand-in GPU devices: %w", err)
		}
		for i := range gpus {
			if err := standInGPU(filepath.Join(dir, fmt.Sprintf("nvidia%d", i))); err != nil {
				return fmt.Errorf("creating the stand-in GPU devices: %w", err)
			}
		}
	}
	path := filepath.Join(filepath.Dir(confPath), "gres.conf")
	if err := writeFileAtomic(path, gres, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// standInGPU makes path a character device with /dev/null's numbers (1, 3):
// slurmd takes a gres.conf File= that is not a character or block device
// for no device ("is not a valid character or block device"), and then
// sets no CUDA_VISIBLE_DEVICES for a job's GPUs. Its index is in its name
// (nvidiaN), as on a VM.
func standInGPU(path string) error {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeCharDevice != 0 {
			return nil
		}
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	// Linux's device number of major 1, minor 3 (makedev(3): minor's low
	// byte, then the major above it).
	const devNull = 1<<8 | 3
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, devNull); err != nil {
		return fmt.Errorf("mknod %s: %w", path, err)
	}
	return nil
}
