package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flexslurm/flexslurm/shared/proc"
	"github.com/flexslurm/flexslurm/shared/text"
)

// OSHost is the real machine.
type OSHost struct{}

var _ Host = OSHost{}

// hostEnv is the environment of the programs the bootstrap runs: a boot
// script's PATH may be empty.
var hostEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}

// Run implements Host.
func (OSHost) Run(ctx context.Context, program string, args ...string) (int, []byte, error) {
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = hostEnv
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		return ee.ExitCode(), out, nil
	}
	if err != nil {
		return -1, out, fmt.Errorf("running %s: %w", program, err)
	}
	return 0, out, nil
}

// Start implements Host: the daemon runs in its own session with no
// controlling terminal, and outlives the bootstrap.
func (OSHost) Start(program string, args []string, logPath string) (int, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("starting %s: %w", program, err)
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	cmd := exec.Command(program, args...)
	cmd.Dir = "/"
	cmd.Env = hostEnv
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", program, err)
	}
	pid := cmd.Process.Pid
	// Reap it should it exit while the bootstrap still runs, so that it
	// shows as gone rather than as a zombie.
	go func() { _ = cmd.Wait() }()
	return pid, nil
}

// Running implements Host.
func (OSHost) Running(pid int, name string) bool {
	if !proc.Alive(pid) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.TrimSpace(string(b)) == name
}

// Stop implements Host.
func (OSHost) Stop(pid int, grace time.Duration) {
	if pid <= 1 || !proc.Alive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !proc.Alive(pid) {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// Mounted implements Host from /proc/self/mountinfo.
func (OSHost) Mounted(dir string) (bool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	return mountedIn(bufio.NewScanner(f), abs)
}

// mountedIn reports whether a mountinfo table lists dir as a mount point
// (field 5, with spaces and the like escaped as \ooo).
func mountedIn(sc *bufio.Scanner, dir string) (bool, error) {
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 4 && text.UnescapeMount(f[4]) == dir {
			return true, nil
		}
	}
	return false, sc.Err()
}

// LookupUser implements Host.
func (OSHost) LookupUser(name string) (int, int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, err
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("user %s: %w", name, err)
	}
	return uid, gid, nil
}

// Owner implements Host.
func (OSHost) Owner(path string) (int, int, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return 0, 0, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("%s: no owner information", path)
	}
	return int(sys.Uid), int(sys.Gid), nil
}

// Chown implements Host.
func (OSHost) Chown(path string, uid, gid int) error { return os.Lchown(path, uid, gid) }
