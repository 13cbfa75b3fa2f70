package localslurm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flexslurm/flexslurm/shared/node"
	"github.com/flexslurm/flexslurm/shared/text"
)

// Installation is one Slurm installation (daemons, client commands, munge)
// that a LocalCluster runs: the host's own packages, or a chroot — a root
// file system of another distribution release holding another Slurm
// release, whose daemons run chrooted (SysProcAttr.Chroot) and whose client
// commands run through `chroot DIR CMD` scripts (ChrootBinDir).
type Installation struct {
	// Name is the Slurm release it is expected to hold ("22.05",
	// "24.11"): tests name their subtests "slurm-"+Name.
	Name string
	// Root is "" for the host's file system; otherwise the chroot's
	// directory (absolute).
	Root string
	// Setup says how to install it when it is missing (shown in the
	// ErrUnavailable error).
	Setup string
	// CgroupConf, when set, is written as cgroup.conf beside slurm.conf.
	CgroupConf string
}

// cgroupDisabled is the 24.11 cluster's cgroup.conf. From 23.02 on slurmd
// initialises its cgroup plugin at start even with proctrack/linuxproc and
// task/none ("No filesystem mounted on /sys/fs/cgroup", "Unable to
// initialize cgroup plugin", then slurmd exits); a local cluster shares the
// host's cgroups, so it opts out (CgroupPlugin=disabled, in cgroup.conf(5)
// since 23.02: https://slurm.schedmd.com/cgroup.conf.html). Real clusters
// keep cgroups.
const cgroupDisabled = "# flexslurm's local cluster: slurmd must not touch the host's cgroups\nCgroupPlugin=disabled\n"

// DefaultChroot2411 is where the Slurm 24.11 chroot lives: a Debian 13
// (trixie) root file system with slurmctld, slurmd, slurm-client and munge,
// built by .ci/slurm-chroot.sh.
const DefaultChroot2411 = "/var/lib/flexslurm/slurm-24.11"

// EnvChroot2411 names another directory for the Slurm 24.11 chroot.
const EnvChroot2411 = "FLEXSLURM_SLURM2411_ROOT"

// Host is the host's own Slurm: Debian 12's 22.05 packages, installed with
// apt-get when missing.
func Host() Installation {
	return Installation{Name: "22.05", Setup: "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y " +
		"--no-install-recommends " + strings.Join(Packages, " ")}
}

// Slurm2411 is Debian 13's Slurm 24.11 in the chroot at DefaultChroot2411
// (or $FLEXSLURM_SLURM2411_ROOT).
func Slurm2411() Installation {
	dir := os.Getenv(EnvChroot2411)
	if dir == "" {
		dir = DefaultChroot2411
	}
	return Installation{Name: "24.11", Root: dir, CgroupConf: cgroupDisabled,
		Setup: "build it (as root, a few minutes, needs mmdebstrap and a Debian mirror): .ci/slurm-chroot.sh build " + dir}
}

// Installations are the Slurm installations the integration tests run on,
// oldest first.
func Installations() []Installation { return []Installation{Host(), Slurm2411()} }

// Chrooted reports whether the installation is a chroot.
func (i Installation) Chrooted() bool { return i.Root != "" && i.Root != "/" }

// Path returns the host path of path p inside the installation.
func (i Installation) Path(p string) string {
	if !i.Chrooted() {
		return p
	}
	return filepath.Join(i.Root, p)
}

// requiredFiles are what a local cluster needs installed.
var requiredFiles = []string{"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/scontrol",
	"/usr/bin/sinfo", "/usr/bin/squeue", "/usr/bin/sbatch", "/usr/bin/scancel", "/etc/munge/munge.key"}

// Installed reports, as an error wrapping ErrUnavailable, what is missing
// for a local cluster; nil when everything is there.
func (i Installation) Installed() error {
	var missing []string
	if i.Chrooted() {
		if _, err := os.Stat("/usr/sbin/chroot"); err != nil {
			missing = append(missing, "/usr/sbin/chroot (on the host)")
		}
	}
	files := requiredFiles
	if i.Chrooted() {
		// The client commands resolve SlurmctldHost=localhost there.
		files = append(slices.Clone(files), "/etc/hosts")
	}
	for _, f := range files {
		if _, err := os.Stat(i.Path(f)); err != nil {
			missing = append(missing, i.Path(f))
		}
	}
	for _, u := range []string{"slurm", "munge"} {
		if _, _, err := i.LookupUser(u); err != nil {
			missing = append(missing, "user "+u)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: Slurm %s: missing %s (%s)", ErrUnavailable, i.Name, strings.Join(missing, ", "), i.Setup)
	}
	return nil
}

// Install installs Slurm and munge when they are missing: on the host with
// apt-get (root and apt-get needed); a chroot is not built here (it takes
// minutes: .ci/slurm-chroot.sh). When it cannot, it returns an error
// wrapping ErrUnavailable that says what to do.
func (i Installation) Install(ctx context.Context, log *slog.Logger) error {
	if i.Installed() == nil {
		return nil
	}
	if i.Chrooted() {
		return i.Installed()
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: Slurm is not installed and installing it needs root; run as root: %s",
			ErrUnavailable, i.Setup)
	}
	const aptGet = "/usr/bin/apt-get"
	if _, err := os.Stat(aptGet); err != nil {
		return fmt.Errorf("%w: Slurm is not installed and there is no %s to install it (%v); install Slurm 22.05+ "+
			"(slurmctld, slurmd, client commands) and munge by other means", ErrUnavailable, aptGet, err)
	}
	env := []string{"DEBIAN_FRONTEND=noninteractive", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, args := range [][]string{{"update", "-q"}, append([]string{"install", "-y", "-q", "--no-install-recommends"}, Packages...)} {
		start := time.Now()
		cmd := exec.CommandContext(ctx, aptGet, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		log.Info("apt-get", "args", args, "elapsed_ms", time.Since(start).Milliseconds(), "error", err)
		if err != nil {
			return fmt.Errorf("%w: apt-get %s: %v: %s", ErrUnavailable, strings.Join(args, " "), err, tail(out, 1500))
		}
	}
	return i.Installed()
}

// LookupUser returns the uid and gid of user name in the installation's
// /etc/passwd (the host's user database for the host). A missing user is
// an error wrapping ErrUnavailable.
func (i Installation) LookupUser(name string) (uid, gid int, err error) {
	if !i.Chrooted() {
		u, err := user.Lookup(name)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: no %s user: %v", ErrUnavailable, name, err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		return uid, gid, nil
	}
	f, err := os.Open(i.Path("/etc/passwd"))
	if err != nil {
		return 0, 0, fmt.Errorf("%w: no %s user in Slurm %s: %v", ErrUnavailable, name, i.Name, err)
	}
	defer f.Close()
	uid, gid, err = node.ParsePasswd(f, name, i.Path("/etc/passwd"))
	if errors.Is(err, node.ErrNoSuchUser) {
		return 0, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return uid, gid, err
}

var versionRE = regexp.MustCompile(`^slurm(?:-wlm)? (\d+)\.(\d+)\.(\S+)`)

// Version runs `slurmctld -V` of the installation and returns its release
// ("24.11.5").
func (i Installation) Version(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "/usr/sbin/slurmctld", "-V")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: i.Root}
	if !i.Chrooted() {
		cmd.SysProcAttr = nil
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("slurmctld -V of Slurm %s: %w", i.Name, err)
	}
	v, err := parseVersion(string(out))
	if err != nil {
		return "", fmt.Errorf("slurmctld -V of Slurm %s: %w", i.Name, err)
	}
	return v, nil
}

// parseVersion reads `slurmctld -V` ("slurm 22.05.8", "slurm-wlm 24.11.5").
func parseVersion(out string) (string, error) {
	m := versionRE.FindStringSubmatch(strings.TrimSpace(out))
	if m == nil {
		return "", fmt.Errorf("printed %q, not \"slurm X.Y.Z\"", strings.TrimSpace(out))
	}
	return m[1] + "." + m[2] + "." + m[3], nil
}

// ChrootClients are the client commands a chroot installation's BinDir
// scripts run.
var ChrootClients = []string{"scontrol", "squeue", "sinfo", "sbatch", "scancel", "srun", "sacct", "sprio", "sdiag"}

// writeChrootBin writes, in dir, one script per client command that runs
// the chroot's command — through `chroot ROOT` on the host, directly when it
// already runs inside the chroot (the hooks, which slurmctld and slurmd run
// there, see ROOT as a missing path). The command's arguments and
// environment pass unchanged; its working directory is the chroot's /.
func writeChrootBin(dir, root string) error {
	if strings.ContainsAny(root, "'\n") || strings.ContainsAny(dir, "'\n") {
		return fmt.Errorf("chroot %q or client directory %q holds a quote or a line break", root, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", dir, err)
	}
	for _, c := range ChrootClients {
		script := fmt.Sprintf("#!/bin/sh\n# %s of the Slurm chroot %s (written by flexslurm's local cluster)\n"+
			"if [ -x '%s/usr/bin/%s' ]; then exec /usr/sbin/chroot '%s' /usr/bin/%s \"$@\"; fi\n"+
			"exec /usr/bin/%s \"$@\"\n", c, root, root, c, root, c, c)
		if err := writeFileAtomic(filepath.Join(dir, c), []byte(script), 0o755); err != nil {
			return fmt.Errorf("writing the %s script: %w", c, err)
		}
	}
	return nil
}

// chrootSystemMounts are the host file systems bound into a chroot: the
// daemons need /proc (slurmd, munged), /dev (/dev/null, /dev/urandom) and
// /sys (hwloc's topology).
var chrootSystemMounts = []string{"/proc", "/dev", "/sys"}

// mountChroot binds the system file systems, Root, the flexslurm binary's
// directory and Binds at the same paths inside the chroot, after removing
// whatever a crashed run left mounted there (the host lock is held).
func (l *LocalCluster) mountChroot() error {
	if err := l.unmountStale(); err != nil {
		return err
	}
	l.mu.Lock()
	binds := append([]string{l.Root}, l.Binds...)
	if l.exeDir != "" {
		binds = append(binds, l.exeDir)
	}
	l.mu.Unlock()
	binds = outermost(binds)
	for _, src := range append(slices.Clone(chrootSystemMounts), binds...) {
		if err := Reachable(src, false); err != nil && !slices.Contains(chrootSystemMounts, src) {
			return fmt.Errorf("binding %s into the Slurm %s chroot: %w", src, l.Inst.Name, err)
		}
		target := l.Inst.Path(src)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("creating mount point %s: %w", target, err)
		}
		if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %s to %s: %w", src, target, err)
		}
		l.mu.Lock()
		l.mounts = append(l.mounts, target)
		l.mu.Unlock()
		l.log().Info("bound into the chroot", "source", src, "target", target)
	}
	return nil
}

// outermost returns the cleaned, distinct directories of dirs that are not
// under another one of them, shortest first.
func outermost(dirs []string) []string {
	var clean []string
	for _, d := range dirs {
		if d != "" {
			clean = append(clean, filepath.Clean(d))
		}
	}
	slices.SortFunc(clean, func(a, b string) int { return len(a) - len(b) })
	var out []string
	for _, d := range clean {
		covered := false
		for _, o := range out {
			if d == o || strings.HasPrefix(d, o+"/") {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, d)
		}
	}
	return out
}

// unmountChroot detaches what mountChroot mounted, innermost first.
func (l *LocalCluster) unmountChroot() error {
	l.mu.Lock()
	mounts := l.mounts
	l.mounts = nil
	l.mu.Unlock()
	var errs []error
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mounts[i], err))
		}
	}
	return errors.Join(errs...)
}

// unmountStale detaches every mount under the chroot's directory (found in
// /proc/self/mountinfo), deepest first.
func (l *LocalCluster) unmountStale() error {
	points, err := MountsUnder(l.Inst.Root)
	if err != nil {
		return err
	}
	for _, p := range points {
		l.log().Warn("unmounting a mount left in the chroot by an earlier run", "target", p)
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("unmounting %s left by an earlier run: %w", p, err)
		}
	}
	return nil
}

// MountsUnder lists the mount points strictly under dir, deepest first.
func MountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	dir = filepath.Clean(dir)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := text.UnescapeMount(f[4])
		if strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out, nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory and a rename, so readers never see a partial file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
