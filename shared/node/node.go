// Package node is the bootstrap of a node pool's VM (`flexslurm node
// boot`): it learns the VM's identity and its pool's settings from the
// metadata server, restricts the metadata server to root, installs the
// munge key from Secret Manager, mounts the cluster's home directories,
// starts munged and slurmd (configless), installs the node-side hooks, and
// reports a failure (node.bootstrap_failed) instead of hanging. Every step
// checks before it acts, so a re-run or a reboot converges. docs/node.md
// describes it.
//
// External programs, processes and ownership go through Host, the
// metadata server through Metadata, Secret Manager through Secrets and
// the failure report through Reporter, so the logic is tested without
// root; files are written under Options.Root with the os package.
//
// This package imports shared/event, shared/hooks, shared/naming,
// shared/nodeconfig and shared/slurm only; no Google client (see
// clients.go for the production adapters).
package node

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/slurm"
)

// DefaultHookDir is where a node's bootstrap installs the node-side hook
// links (Prolog, Epilog, HealthCheckProgram) and their hooks.json; the
// controller's slurm.conf names them there (shared/install prints those
// lines), since in configless mode every node reads the controller's
// slurm.conf.
const DefaultHookDir = "/etc/flexslurm/hooks"

// Metadata is what the bootstrap reads from the metadata server;
// *metadata.Client (cloud.google.com/go/compute/metadata) satisfies it.
type Metadata interface {
	InstanceNameWithContext(ctx context.Context) (string, error)
	ZoneWithContext(ctx context.Context) (string, error)
	ProjectIDWithContext(ctx context.Context) (string, error)
	InstanceAttributeValueWithContext(ctx context.Context, attr string) (string, error)
}

// Secrets reads the payload of a Secret Manager secret version
// ("projects/P/secrets/S/versions/V").
type Secrets interface {
	Access(ctx context.Context, version string) ([]byte, error)
}

// Reporter publishes a failed bootstrap to topic in project.
type Reporter interface {
	BootstrapFailed(ctx context.Context, project, topic string, ev event.Bootstrap) error
}

// VersionReporter publishes a VM's report that its flexslurm binary is not
// the version of the functions that built its template; a Reporter that
// also implements it is used for that report.
type VersionReporter interface {
	VersionMismatch(ctx context.Context, project, topic string, ev event.VersionMismatch) error
}

// Host is the machine: programs, processes, mounts and file ownership.
type Host interface {
	// Run runs program (an absolute path) to completion and returns its
	// exit status and combined output; err is for a program that could
	// not run or was stopped by ctx.
	Run(ctx context.Context, program string, args ...string) (status int, out []byte, err error)
	// Start starts program as a daemon in a session of its own, its
	// output appended to logPath, and returns its PID. It does not wait.
	Start(program string, args []string, logPath string) (pid int, err error)
	// Running reports whether process pid runs program name
	// (/proc/PID/comm), a zombie being dead.
	Running(pid int, name string) bool
	// Stop ends process pid: TERM, then KILL after grace.
	Stop(pid int, grace time.Duration)
	// Mounted reports whether dir is a mount point.
	Mounted(dir string) (bool, error)
	// LookupUser returns the uid and gid of a user.
	LookupUser(name string) (uid, gid int, err error)
	// Owner returns the uid and gid that own path.
	Owner(path string) (uid, gid int, err error)
	// Chown changes the owner of path.
	Chown(path string, uid, gid int) error
}

// DefaultMetadataHost is Compute Engine's metadata server
// (https://cloud.google.com/compute/docs/metadata/querying-metadata:
// 169.254.169.254, also reached as metadata.google.internal, port 80).
const DefaultMetadataHost = "169.254.169.254:80"

// Programs, by absolute path (hooks and boot scripts run without PATH).
const (
	IptablesPath  = "/usr/sbin/iptables"
	Ip6tablesPath = "/usr/sbin/ip6tables"
	MountPath     = "/usr/bin/mount"
	RunuserPath   = "/usr/sbin/runuser"
	MungedPath    = "/usr/sbin/munged"
	SlurmdPath    = "/usr/sbin/slurmd"
	ChrootPath    = "/usr/sbin/chroot"
	UnsharePath   = "/usr/bin/unshare"
	HostnamePath  = "/usr/bin/hostname"
)

// Options configures a bootstrap. Paths are absolute; per-node files are
// written under Root, so several simulated VMs can share one host. The
// munge key, munged and the metadata-server rule are the machine's own
// (simulated VMs share one kernel and one munged).
type Options struct {
	// Root prefixes every per-node path ("/" on a VM).
	Root string
	// Exe is the flexslurm binary the hook links point to.
	Exe string
	// MetadataHost is the metadata server as host:port (GCE_METADATA_HOST
	// or DefaultMetadataHost); only root may reach it afterwards
	// (MetadataFirewall).
	MetadataHost string
	// Ip6tables and IfInet6 are ip6tables and the kernel's list of IPv6
	// addresses: Ip6tablesPath and /proc/net/if_inet6 when empty
	// (MetadataFirewall's IPv6 rule, for Google's metadata server only).
	Ip6tables, IfInet6 string
	// SlurmRoot is the root of the Slurm and munge installation whose
	// munged and slurmd the node runs: "/" (the machine's) when empty. The
	// local system's Slurm 24.11 lives in a chroot (dev/localslurm):
	// munged and slurmd then run chrooted in it (`chroot DIR …`), munged
	// as the chroot's munge user, with the chroot's key, PID file and
	// socket; every other path (Root, Exe, HookDir) must mean the same
	// inside the chroot (the local cluster binds them at the same paths).
	SlurmRoot string
	// MungeKeyPath, MungedPidFile and MungeSocket: /etc/munge/munge.key,
	// /run/munge/munged.pid and /run/munge/munge.socket.2 (under
	// SlurmRoot) when empty.
	MungeKeyPath, MungedPidFile, MungeSocket string
	// HookDir holds the node-side hook links and their hooks.json:
	// Root/etc/flexslurm/hooks when empty. The controller's slurm.conf
	// names its links (Prolog, Epilog, HealthCheckProgram).
	HookDir string
	// ReportBoot starts slurmd with -b (its start is the node's boot
	// time): needed when the "VM" does not really boot, as in the local
	// system.
	ReportBoot bool
	// OwnHostname starts slurmd in a UTS namespace of its own whose host
	// name is the node's (`unshare --uts`, then `hostname NODE`), so that
	// its jobs see the node's name as on a VM: for the local system, whose
	// simulated VMs share one host.
	OwnHostname bool
	// PubSubEmulatorHost and Clock go into the hooks' configuration (local
	// system only).
	PubSubEmulatorHost, Clock string
	// HealthFromDir, when set, makes the hooks' health check read recorded
	// GPU outputs from HealthFromDir/NODE (local system only).
	HealthFromDir string
	// PublishTimeout is the hooks' publish_timeout; their default when
	// zero.
	PublishTimeout time.Duration
	// MungedWait and SlurmdSettle bound the waits for munged's socket and
	// for slurmd to stay up: 10 s and 5 s when zero.
	MungedWait, SlurmdSettle time.Duration
	// Version is this binary's flexslurm version (shared/version.Info.ID),
	// compared with the one the instance template records
	// (nodeconfig.AttrVersion); "" when the build recorded none, and then
	// nothing is compared.
	Version string

	Metadata Metadata
	Secrets  Secrets
	Reporter Reporter
	Host     Host
	Log      *slog.Logger
	Now      func() time.Time
}

// Result is what a bootstrap found and did.
type Result struct {
	VM, Node, Zone, Project string
	Config                  nodeconfig.Config
	// Did lists what was changed ("firewall rule added", "munge key
	// written", ...); empty when everything was already in place.
	Did []string
	// FunctionsVersion is the version the instance template records
	// (nodeconfig.AttrVersion), "" when none; VersionMismatch is set when
	// it and Options.Version are both known and differ.
	FunctionsVersion string
	VersionMismatch  bool
}

// StepError is a failed step.
type StepError struct {
	Step string // event.BootstrapStep*
	Err  error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

func stepErr(step string, format string, a ...any) error {
	return &StepError{Step: step, Err: fmt.Errorf(format, a...)}
}

func (o Options) withDefaults() Options {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.Root, "/")
	def(&o.MetadataHost, DefaultMetadataHost)
	def(&o.Ip6tables, Ip6tablesPath)
	def(&o.IfInet6, "/proc/net/if_inet6")
	def(&o.SlurmRoot, "/")
	def(&o.MungeKeyPath, filepath.Join(o.SlurmRoot, "/etc/munge/munge.key"))
	def(&o.MungedPidFile, filepath.Join(o.SlurmRoot, "/run/munge/munged.pid"))
	def(&o.MungeSocket, filepath.Join(o.SlurmRoot, "/run/munge/munge.socket.2"))
	def(&o.HookDir, filepath.Join(o.Root, DefaultHookDir))
	if o.MungedWait <= 0 {
		o.MungedWait = 10 * time.Second
	}
	if o.SlurmdSettle <= 0 {
		o.SlurmdSettle = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// path returns p (absolute) under the root.
func (o Options) path(p string) string { return filepath.Join(o.Root, p) }

// Per-node paths, under Root.
const (
	vmNameDir  = "run/flexslurm/vm"
	spoolDir   = "var/spool/flexslurm"
	logDir     = "var/log/flexslurm"
	nodeHookFS = 0o755
)

// NodeHooks are the hooks slurmd runs on a node, as root.
var NodeHooks = []string{slurm.HookProlog, slurm.HookEpilog, slurm.HookHealth}

// Boot runs the bootstrap. On failure it returns a *StepError and, once
// the node's configuration is known (the project and topic to publish
// to), reports node.bootstrap_failed; a VM that cannot even read its
// configuration is left to the reconciler, which sees it never register.
func Boot(ctx context.Context, o Options) (Result, error) {
	o = o.withDefaults()
	var errs []error
	if !filepath.IsAbs(o.Root) {
		errs = append(errs, fmt.Errorf("root %q: want an absolute directory", o.Root))
	}
	if !filepath.IsAbs(o.Exe) {
		errs = append(errs, fmt.Errorf("exe %q: want the flexslurm binary's absolute path", o.Exe))
	}
	if !filepath.IsAbs(o.SlurmRoot) {
		errs = append(errs, fmt.Errorf("slurm root %q: want an absolute directory", o.SlurmRoot))
	}
	if o.Metadata == nil || o.Secrets == nil || o.Host == nil {
		errs = append(errs, errors.New("metadata, secrets and host are required"))
	}
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	b := &booter{o: o}
	err := b.run(ctx)
	if b.res.VersionMismatch {
		b.reportVersion(ctx)
	}
	if err != nil && b.res.Config.Project != "" && o.Reporter != nil {
		step := event.BootstrapStepIdentity
		var se *StepError
		if errors.As(err, &se) {
			step = se.Step
		}
		msg := err.Error()
		if len(msg) > event.MaxHealthReasonBytes {
			msg = msg[:event.MaxHealthReasonBytes-3] + "..."
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		ev := event.Bootstrap{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeBootstrapFail, Cluster: b.cluster},
			Node: b.res.Node, VMName: b.res.VM, Step: step, Error: msg, FailedAt: o.Now().UTC()}
		if rerr := o.Reporter.BootstrapFailed(rctx, b.res.Config.Project, b.res.Config.Topics.Jobs, ev); rerr != nil {
			o.Log.Error("reporting the failed bootstrap", "error", rerr)
			err = errors.Join(err, fmt.Errorf("reporting the failure: %w", rerr))
		} else {
			o.Log.Info("failed bootstrap reported", "node", ev.Node, "vm", ev.VMName, "step", step)
		}
	}
	return b.res, err
}

type booter struct {
	o       Options
	res     Result
	cluster string // of the VM's name
}

func (b *booter) did(what string) {
	b.res.Did = append(b.res.Did, what)
	b.o.Log.Info(what, "node", b.res.Node)
}

func (b *booter) run(ctx context.Context) error {
	// 1. Identity and settings.
	if err := b.identity(ctx); err != nil {
		return err
	}
	// 2. Only root may reach the metadata server (the node service
	// account's token), before anything a user could run.
	if err := b.firewall(ctx); err != nil {
		return err
	}
	// 3. The munge key.
	keyChanged, err := b.mungeKey(ctx)
	if err != nil {
		return err
	}
	// 4. Home directories.
	if err := b.home(ctx); err != nil {
		return err
	}
	// 5. munged, with this key.
	if err := b.munged(ctx, keyChanged); err != nil {
		return err
	}
	// 6. The node-side hooks, before slurmd runs its first health check.
	if err := b.hooks(); err != nil {
		return err
	}
	// 7. slurmd, configless.
	return b.slurmd(ctx)
}

func (b *booter) identity(ctx context.Context) error {
	m := b.o.Metadata
	name, err := m.InstanceNameWithContext(ctx)
	if err != nil {
		return stepErr(event.BootstrapStepIdentity, "instance name from the metadata server: %w", err)
	}
	node, cluster, pool, _, ok := naming.ParseVMName(name)
	if !ok {
		return stepErr(event.BootstrapStepIdentity, "instance name %q is not a flexslurm node VM (<cluster>-<pool>-<index>-g<generation>)", name)
	}
	b.res.VM, b.res.Node = name, node
	if b.res.Zone, err = m.ZoneWithContext(ctx); err != nil {
		return stepErr(event.BootstrapStepIdentity, "zone from the metadata server: %w", err)
	}
	if b.res.Project, err = m.ProjectIDWithContext(ctx); err != nil {
		return stepErr(event.BootstrapStepIdentity, "project from the metadata server: %w", err)
	}
	raw, err := m.InstanceAttributeValueWithContext(ctx, nodeconfig.AttrConfig)
	if err != nil {
		return stepErr(event.BootstrapStepIdentity, "instance attribute %s: %w", nodeconfig.AttrConfig, err)
	}
	cfg, err := nodeconfig.Decode(raw)
	if err != nil {
		return stepErr(event.BootstrapStepIdentity, "%w", err)
	}
	b.res.Config, b.cluster = cfg, cluster
	if cfg.Cluster != cluster || cfg.Pool != pool {
		return stepErr(event.BootstrapStepIdentity, "VM %s is a VM of cluster %s pool %s, but its %s attribute is for cluster %s pool %s",
			name, cluster, pool, nodeconfig.AttrConfig, cfg.Cluster, cfg.Pool)
	}
	b.o.Log.Info("identity", "vm", name, "node", node, "zone", b.res.Zone, "project", b.res.Project, "pool", pool)
	b.checkVersion(ctx)
	return nil
}

// checkVersion compares this binary's version with the one of the
// functions that built the VM's template. A mismatch does not stop the
// bootstrap (either side may be the newer one, and most releases work
// together): it is logged as a warning and reported once the bootstrap
// ends, for status.
func (b *booter) checkVersion(ctx context.Context) {
	fv, err := b.o.Metadata.InstanceAttributeValueWithContext(ctx, nodeconfig.AttrVersion)
	fv = strings.TrimSpace(fv)
	switch {
	case err != nil || fv == "":
		b.o.Log.Info("flexslurm version not compared: the instance template records no version of the functions that built it",
			"attribute", nodeconfig.AttrVersion, "node_version", cmp.Or(b.o.Version, "unknown"))
	case b.o.Version == "":
		b.res.FunctionsVersion = fv
		b.o.Log.Info("flexslurm version not compared: this binary records no version", "functions_version", fv)
	case b.o.Version != fv:
		b.res.FunctionsVersion, b.res.VersionMismatch = fv, true
		b.o.Log.Warn(fmt.Sprintf("flexslurm version mismatch: this node runs flexslurm %s, the functions that built its instance template run %s; "+
			"install the functions' release on the node image or at the node settings' binary_url, or publish the spec again after upgrading the functions (deploy/README.md, \"Versions\")",
			b.o.Version, fv), "node", b.res.Node, "vm", b.res.VM, "node_version", b.o.Version, "functions_version", fv)
	default:
		b.res.FunctionsVersion = fv
		b.o.Log.Info("flexslurm version matches the functions'", "version", fv)
	}
}

// reportVersion publishes node.version_mismatch (at most once per boot),
// when the Reporter can and the versions can travel in the event.
func (b *booter) reportVersion(ctx context.Context) {
	vr, ok := b.o.Reporter.(VersionReporter)
	if !ok || b.res.Config.Project == "" {
		return
	}
	ev := event.VersionMismatch{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeVersionMismatch, Cluster: b.cluster},
		Node: b.res.Node, VMName: b.res.VM, NodeVersion: b.o.Version, FunctionsVersion: b.res.FunctionsVersion, ReportedAt: b.o.Now().UTC()}
	data, err := json.Marshal(ev)
	if err == nil {
		_, err = event.DecodeVersionMismatch(data)
	}
	if err != nil {
		b.o.Log.Error("the version mismatch cannot be reported", "error", err)
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := vr.VersionMismatch(rctx, b.res.Config.Project, b.res.Config.Topics.Jobs, ev); err != nil {
		b.o.Log.Error("reporting the version mismatch", "error", err)
		return
	}
	b.o.Log.Info("version mismatch reported", "node", ev.Node, "vm", ev.VMName)
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

func (b *booter) mungeKey(ctx context.Context) (changed bool, err error) {
	const step = event.BootstrapStepMungeKey
	key, err := b.o.Secrets.Access(ctx, b.res.Config.MungeKeySecret)
	if err != nil {
		return false, stepErr(step, "reading secret %s: %w", b.res.Config.MungeKeySecret, err)
	}
	// munged requires at least 32 bytes (mungekey(8): the default is 1024
	// bits, the minimum 256).
	if len(key) < 32 {
		return false, stepErr(step, "secret %s holds %d bytes: a munge key has at least 32", b.res.Config.MungeKeySecret, len(key))
	}
	uid, gid, err := b.mungeUser()
	if err != nil {
		return false, stepErr(step, "user munge: %w", err)
	}
	path := b.o.MungeKeyPath
	cur, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, stepErr(step, "reading %s: %w", path, err)
	}
	if !bytes.Equal(cur, key) {
		if err := b.writeKey(path, key, uid, gid); err != nil {
			return false, stepErr(step, "%w", err)
		}
		b.did("munge key written")
		return true, nil
	}
	// Same key: check and fix its mode and owner.
	st, err := os.Lstat(path)
	if err != nil {
		return false, stepErr(step, "%w", err)
	}
	if !st.Mode().IsRegular() {
		return false, stepErr(step, "%s is not a regular file", path)
	}
	if st.Mode().Perm() != 0o400 {
		if err := os.Chmod(path, 0o400); err != nil {
			return false, stepErr(step, "%w", err)
		}
		b.did(fmt.Sprintf("munge key mode %v set to 0400", st.Mode().Perm()))
	}
	if ou, og, err := b.o.Host.Owner(path); err != nil {
		return false, stepErr(step, "%w", err)
	} else if ou != uid || og != gid {
		if err := b.o.Host.Chown(path, uid, gid); err != nil {
			return false, stepErr(step, "giving %s to munge: %w", path, err)
		}
		b.did("munge key given to munge:munge")
	}
	return false, nil
}

// writeKey replaces path with key, mode 0400 owned by uid:gid, through a
// rename in the same directory: munged never sees a partial key.
func (b *booter) writeKey(path string, key []byte, uid, gid int) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".munge.key.*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o400); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := b.o.Host.Chown(tmp, uid, gid); err != nil {
		return fmt.Errorf("giving %s to munge: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func (b *booter) home(ctx context.Context) error {
	const step = event.BootstrapStepHome
	m := b.res.Config.Home
	dir := b.o.path(m.Dir)
	mounted, err := b.o.Host.Mounted(dir)
	if err != nil {
		return stepErr(step, "%w", err)
	}
	if mounted {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return stepErr(step, "%w", err)
	}
	args := MountArgs(m, dir)
	st, out, err := b.o.Host.Run(ctx, MountPath, args...)
	if err != nil || st != 0 {
		return stepErr(step, "mount %s: exit %d: %s%s", strings.Join(args, " "), st, bytes.TrimSpace(out), errOrEmpty(err))
	}
	b.did(fmt.Sprintf("%s mounted on %s (%s)", m.Source, dir, m.Type))
	return nil
}

// MountArgs are mount(8)'s arguments that mount m on dir. "--" ends the
// options before the source and the mount point (util-linux mount parses
// its options with getopt_long, which stops at "--"), so that a source
// such as "-oexec" is a source, never an option; nodeconfig.Validate has
// already refused it (inputs.NFSSource: no leading "-", no ",").
func MountArgs(m nodeconfig.Mount, dir string) []string {
	switch m.Type {
	case nodeconfig.MountNFS:
		return []string{"-t", "nfs", "-o", "hard,timeo=600,retrans=3", "--", m.Source, dir}
	case nodeconfig.MountBind:
		return []string{"--bind", "--", m.Source, dir}
	}
	return nil
}

func (b *booter) pidFrom(path string) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	return pid
}

func (b *booter) munged(ctx context.Context, keyChanged bool) error {
	const step = event.BootstrapStepMunged
	pid := b.pidFrom(b.o.MungedPidFile)
	if pid > 0 && b.o.Host.Running(pid, "munged") {
		if !keyChanged {
			return nil
		}
		b.o.Host.Stop(pid, 5*time.Second)
		b.did("munged stopped: its key changed")
	}
	prog, args := b.inSlurmRoot(RunuserPath, "-u", "munge", "--", MungedPath)
	st, out, err := b.o.Host.Run(ctx, prog, args...)
	if err != nil || st != 0 {
		return stepErr(step, "starting munged: exit %d: %s%s", st, bytes.TrimSpace(out), errOrEmpty(err))
	}
	deadline := time.Now().Add(b.o.MungedWait)
	for {
		if _, err := os.Stat(b.o.MungeSocket); err == nil {
			if pid := b.pidFrom(b.o.MungedPidFile); pid > 0 && b.o.Host.Running(pid, "munged") {
				break
			}
		}
		if time.Now().After(deadline) {
			return stepErr(step, "munged did not come up within %s (no socket %s or no live PID in %s)", b.o.MungedWait, b.o.MungeSocket, b.o.MungedPidFile)
		}
		select {
		case <-ctx.Done():
			return stepErr(step, "waiting for munged: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	b.did("munged started")
	return nil
}

// HooksConfig is the node-side hooks' configuration for this node.
func (b *booter) hooksConfig() hooks.Config {
	c := b.res.Config
	check := []string{b.o.Exe, "health", "check", "--accelerator-count", strconv.Itoa(c.GPUCount)}
	if b.o.HealthFromDir != "" {
		check = append(check, "--from-dir", filepath.Join(b.o.HealthFromDir, "%n"))
	}
	return hooks.Config{
		Cluster: c.Cluster, Project: c.Project,
		SpoolDir: b.o.path(spoolDir), LogDir: b.o.path(logDir), VMNameDir: b.o.path(vmNameDir),
		PubSubEmulatorHost: b.o.PubSubEmulatorHost,
		Topics:             hooks.Topics{Jobs: c.Topics.Jobs, Health: c.Topics.Health},
		SpoolSenders:       NodeSpoolSenders(),
		CheckCmd:           check,
		Clock:              b.o.Clock,
		PublishTimeout:     hooks.Duration(b.o.PublishTimeout),
	}
}

// hooksMetadataHost is the metadata server the node hooks fetch their
// identity tokens from: "" (Compute Engine's) unless the bootstrap was
// pointed at another (GCE_METADATA_HOST).
func (b *booter) hooksMetadataHost() string {
	if b.o.MetadataHost == "" || b.o.MetadataHost == DefaultMetadataHost {
		return ""
	}
	return metadataHostPort(b.o.MetadataHost)
}

func (b *booter) hooks() error {
	const step = event.BootstrapStepHooks
	cfg := b.hooksConfig()
	if err := cfg.Validate(); err != nil {
		return stepErr(step, "hooks configuration: %w", err)
	}
	// Only root runs hooks on a node: their log directory is root's (a
	// world-writable one would let a user plant a link where root
	// appends), and so is the spool.
	for _, d := range []struct {
		path string
		mode fs.FileMode
	}{{b.o.HookDir, nodeHookFS}, {cfg.VMNameDir, 0o755}, {cfg.LogDir, 0o755}} {
		if err := ensureDir(d.path, d.mode); err != nil {
			return stepErr(step, "%w", err)
		}
	}
	if err := b.spool(cfg.SpoolDir); err != nil {
		return stepErr(step, "%w", err)
	}
	for _, h := range NodeHooks {
		link := filepath.Join(b.o.HookDir, slurm.HookLinkPrefix+h)
		if cur, err := os.Readlink(link); err == nil && cur == b.o.Exe {
			continue
		}
		tmp := link + ".new"
		os.Remove(tmp)
		if err := os.Symlink(b.o.Exe, tmp); err != nil {
			return stepErr(step, "linking hook %s: %w", h, err)
		}
		if err := os.Rename(tmp, link); err != nil {
			return stepErr(step, "linking hook %s: %w", h, err)
		}
		b.did("hook linked: " + link)
	}
	path := filepath.Join(b.o.HookDir, hooks.ConfigFileName)
	if cur, err := hooks.LoadConfig(path); err != nil || !equalConfig(cur, cfg) {
		if err := hooks.WriteConfig(path, cfg); err != nil {
			return stepErr(step, "%w", err)
		}
		b.did("hooks configuration written: " + path)
	}
	vmFile := filepath.Join(cfg.VMNameDir, b.res.Node)
	if cur, err := os.ReadFile(vmFile); err != nil || strings.TrimSpace(string(cur)) != b.res.VM {
		if err := writeFileAtomic(vmFile, []byte(b.res.VM+"\n"), 0o644); err != nil {
			return stepErr(step, "%w", err)
		}
		b.did("VM name recorded for the hooks")
	}
	// The metadata server the node hooks sign their reports at, when not
	// Compute Engine's: recorded per node, not in the shared hooks.json,
	// since the local system's simulated VMs share one root.
	mdFile := vmFile + hooks.MetadataHostSuffix
	if md := b.hooksMetadataHost(); md != "" {
		if cur, err := os.ReadFile(mdFile); err != nil || strings.TrimSpace(string(cur)) != md {
			if err := writeFileAtomic(mdFile, []byte(md+"\n"), 0o644); err != nil {
				return stepErr(step, "%w", err)
			}
			b.did("metadata server recorded for the hooks")
		}
	} else if err := os.Remove(mdFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return stepErr(step, "%w", err)
	}
	return nil
}

func equalConfig(a, c hooks.Config) bool {
	return a.Cluster == c.Cluster && a.Project == c.Project && a.SpoolDir == c.SpoolDir && a.LogDir == c.LogDir &&
		a.VMNameDir == c.VMNameDir && a.PubSubEmulatorHost == c.PubSubEmulatorHost && a.MetadataHost == c.MetadataHost && a.Topics == c.Topics &&
		slices.Equal(a.CheckCmd, c.CheckCmd) && a.Clock == c.Clock && a.Spec == c.Spec && a.SlurmBinDir == c.SlurmBinDir &&
		a.PublishTimeout == c.PublishTimeout && a.CheckTimeout == c.CheckTimeout && a.PrologCtldWaitReady == c.PrologCtldWaitReady &&
		a.LogLevel == c.LogLevel && a.SpoolSenders.Equal(c.SpoolSenders)
}

// NodeSpoolSenders is a node's spool_senders: root, the only user that
// runs hooks there, sends what the node-side hooks send.
func NodeSpoolSenders() hooks.SpoolSenders { return hooks.SpoolSenders{0: {hooks.RoleNode}} }

// spool makes the hooks' spool dir root's, 0755, holding root's own
// directory (0700), the only one the hooks publish on a node. A spool left
// world-writable by an older version is tightened; a directory named for
// root that is not root's real directory (made by another user while the
// spool was world-writable) is set aside, and other users' directories are
// left alone (the hooks ignore them) with a log line.
func (b *booter) spool(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("spool %s is not a directory (%v)", dir, st.Mode().Type())
	}
	if uid, gid, err := b.o.Host.Owner(dir); err != nil {
		return err
	} else if uid != 0 || gid != 0 {
		if err := b.o.Host.Chown(dir, 0, 0); err != nil {
			return fmt.Errorf("giving spool %s to root: %w", dir, err)
		}
		b.did(fmt.Sprintf("spool %s given to root (was %d:%d)", dir, uid, gid))
	}
	if m := st.Mode() & (fs.ModePerm | fs.ModeSticky); m != 0o755 {
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		b.did(fmt.Sprintf("spool %s mode %v set to 0755", dir, m))
	}
	own := filepath.Join(dir, "0")
	if st, err := os.Lstat(own); err == nil {
		uid, _, oerr := b.o.Host.Owner(own)
		if !st.IsDir() || oerr != nil || uid != 0 {
			aside := filepath.Join(dir, fmt.Sprintf(".foreign-0-%d", b.o.Now().UnixNano()))
			if err := os.Rename(own, aside); err != nil {
				return fmt.Errorf("setting aside %s, which is not root's: %w", own, err)
			}
			b.did(fmt.Sprintf("spool directory %s was not root's (owner %d, %v): set aside as %s", own, uid, st.Mode().Type(), aside))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Mkdir(own, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if uid, gid, err := b.o.Host.Owner(own); err != nil {
		return err
	} else if uid != 0 || gid != 0 {
		if err := b.o.Host.Chown(own, 0, 0); err != nil {
			return err
		}
	}
	if st, err := os.Lstat(own); err != nil {
		return err
	} else if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(own, 0o700); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != "0" && !strings.HasPrefix(e.Name(), ".foreign-") {
			b.o.Log.Warn("spool entry of another user left alone: the hooks never publish it", "path", filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

func ensureDir(path string, mode fs.FileMode) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Mode()&(fs.ModePerm|fs.ModeSticky) != mode {
		return os.Chmod(path, mode)
	}
	return nil
}

func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SlurmdArgs are slurmd's arguments for node in configless mode: in the
// foreground (the bootstrap detaches it and knows its PID), fetching its
// configuration from confServer. slurmd takes no operand, only options:
// confServer and node are the arguments of --conf-server and -N, which
// getopt_long takes as they are even when they start with "-", so there
// is no "--" to add; both are held to strict patterns instead
// (inputs.ConfServer in nodeconfig.Validate, the node name parsed from the
// VM's name by naming.ParseVMName).
func SlurmdArgs(node, confServer string, reportBoot bool) []string {
	args := []string{"-D", "--conf-server", confServer, "-N", node}
	if reportBoot {
		args = append(args, "-b")
	}
	return args
}

// OwnHostnameCommand runs program with args in a UTS namespace of its own
// named node: unshare(1) makes the namespace and runs a shell there, which
// sets the host name and execs the program, all in one process (the PID
// the bootstrap records is the program's). node is a node name
// (naming.ParseVMName), passed as the shell's $0, never in its script.
func OwnHostnameCommand(node, program string, args []string) (string, []string) {
	return UnsharePath, append([]string{"--uts", "--", "/bin/sh", "-c", HostnamePath + ` "$0" && exec "$@"`, node, program}, args...)
}

// slurmdPidPath and slurmdLogPath are per node, so that the simulated VMs
// of the local system can share one root.
func slurmdPidPath(root, node string) string {
	return filepath.Join(root, "run/flexslurm", "slurmd-"+node+".pid")
}

func slurmdLogPath(root, node string) string {
	return filepath.Join(root, logDir, "slurmd-"+node+".log")
}

func (b *booter) slurmd(ctx context.Context) error {
	const step = event.BootstrapStepSlurmd
	pidPath := slurmdPidPath(b.o.Root, b.res.Node)
	if pid := b.pidFrom(pidPath); pid > 0 && b.o.Host.Running(pid, "slurmd") {
		return nil
	}
	logPath := slurmdLogPath(b.o.Root, b.res.Node)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return stepErr(step, "%w", err)
	}
	prog, args := b.inSlurmRoot(SlurmdPath, SlurmdArgs(b.res.Node, b.res.Config.ConfServer, b.o.ReportBoot)...)
	if b.o.OwnHostname {
		prog, args = OwnHostnameCommand(b.res.Node, prog, args)
	}
	pid, err := b.o.Host.Start(prog, args, logPath)
	if err != nil {
		return stepErr(step, "starting slurmd: %w", err)
	}
	if err := writeFileAtomic(pidPath, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		b.o.Host.Stop(pid, 5*time.Second)
		return stepErr(step, "%w", err)
	}
	// slurmd fetches its configuration from the controller and registers
	// within a second; one that exits within the settle time (no
	// configuration, a rejected credential, a bad node name) has failed.
	select {
	case <-ctx.Done():
		return stepErr(step, "waiting for slurmd: %w", ctx.Err())
	case <-time.After(b.o.SlurmdSettle):
	}
	if !b.o.Host.Running(pid, "slurmd") {
		tail, _ := os.ReadFile(logPath)
		if len(tail) > 400 {
			tail = tail[len(tail)-400:]
		}
		return stepErr(step, "slurmd -N %s exited within %s: %s", b.res.Node, b.o.SlurmdSettle, bytes.TrimSpace(tail))
	}
	b.did(fmt.Sprintf("slurmd started (pid %d, --conf-server %s)", pid, b.res.Config.ConfServer))
	return nil
}

// SlurmdPID returns the PID the bootstrap recorded for node's slurmd under
// root (0 when none): the local system stops a simulated VM's slurmd by it.
func SlurmdPID(root, node string) int {
	b := &booter{}
	return b.pidFrom(slurmdPidPath(root, node))
}
