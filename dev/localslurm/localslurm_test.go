package localslurm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReachable(t *testing.T) {
	dir := t.TempDir() // mode 0700: the slurm user could not enter it
	exe := filepath.Join(dir, "flexslurm")
	if err := os.WriteFile(exe, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Reachable(exe, true); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("Reachable(%s) under a 0700 directory = %v, want an error", exe, err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} { // both made 0700 by t.TempDir
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := Reachable(exe, true); err != nil {
		t.Errorf("Reachable(%s) = %v", exe, err)
	}
	if err := os.Chmod(exe, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Reachable(exe, true); err == nil {
		t.Errorf("Reachable(%s) of a 0700 binary = nil, want an error", exe)
	}
}

// TestClearDir empties slurmctld's state directory for a clean start (-c
// alone keeps the reservations), keeping the directory and its mode.
func TestClearDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(filepath.Join(dir, "hash.1"), 0o750); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"resv_state", "resv_state.old", filepath.Join("hash.1", "job.1")} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := clearDir(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("after clearDir: %v entries, error %v; want an empty directory", len(entries), err)
	}
	if err := clearDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("clearDir of a missing directory: want an error")
	}
}

func TestOutermost(t *testing.T) {
	got := outermost([]string{"/tmp/x/root", "/tmp/x", "", "/tmp/x/root/hooks", "/work/bin/", "/tmp/xy", "/tmp/x"})
	want := []string{"/tmp/x", "/tmp/xy", "/work/bin"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outermost (-want +got):\n%s", diff)
	}
}

func TestLookupUserInChroot(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	passwd := "root:x:0:0:root:/root:/bin/bash\nslurm:x:64030:64030::/nonexistent:/usr/sbin/nologin\n" +
		"munge:x:100:101::/nonexistent:/usr/sbin/nologin\nbad:x:x:1::/:/bin/sh\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	inst := Installation{Name: "24.11", Root: root}
	for _, tc := range []struct {
		user     string
		uid, gid int
	}{{"slurm", 64030, 64030}, {"munge", 100, 101}} {
		uid, gid, err := inst.LookupUser(tc.user)
		if err != nil || uid != tc.uid || gid != tc.gid {
			t.Errorf("LookupUser(%s) = %d, %d, %v; want %d, %d", tc.user, uid, gid, err, tc.uid, tc.gid)
		}
	}
	if _, _, err := inst.LookupUser("nobody"); !errorsIs(err, ErrUnavailable) || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("LookupUser(nobody) = %v, want ErrUnavailable naming the user", err)
	}
	if _, _, err := inst.LookupUser("bad"); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("LookupUser(bad) = %v, want an error naming the user", err)
	}
	if err := inst.Installed(); !errorsIs(err, ErrUnavailable) || !strings.Contains(err.Error(), filepath.Join(root, "usr/sbin/slurmctld")) {
		t.Errorf("Installed() of an empty chroot = %v, want ErrUnavailable naming %s/usr/sbin/slurmctld", err, root)
	}
}

func TestInstallationPath(t *testing.T) {
	if got := Host().Path("/etc/slurm/slurm.conf"); got != "/etc/slurm/slurm.conf" {
		t.Errorf("Host().Path = %s", got)
	}
	c := Installation{Name: "24.11", Root: "/var/lib/x"}
	if got := c.Path("/etc/slurm/slurm.conf"); got != "/var/lib/x/etc/slurm/slurm.conf" || !c.Chrooted() || Host().Chrooted() {
		t.Errorf("chroot Path = %s, Chrooted %v", got, c.Chrooted())
	}
	t.Setenv(EnvChroot2411, "/srv/trixie")
	if got := Slurm2411(); got.Root != "/srv/trixie" || got.Name != "24.11" {
		t.Errorf("Slurm2411() with %s set = %+v", EnvChroot2411, got)
	}
}

// TestChrootBinScripts runs a client script twice: where the chroot's
// command exists (the host's view) it goes through chroot(8), where it does
// not (the view from inside the chroot) it runs the command directly. A
// fake chroot(8) cannot be put in /usr/sbin, so the test checks the script
// text for the first case and runs the second.
func TestChrootBinScripts(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(t.TempDir(), "chroot")
	if err := writeChrootBin(dir, root); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "scontrol"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "exec /usr/sbin/chroot '"+root+"' /usr/bin/scontrol \"$@\"") {
		t.Errorf("scontrol script lacks the chroot line:\n%s", b)
	}
	if _, err := os.Stat("/usr/bin/scontrol"); err == nil {
		out, err := exec.Command(filepath.Join(dir, "scontrol"), "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "slurm") {
			t.Errorf("scontrol script outside the chroot's view: %q, %v", out, err)
		}
	}
	if err := writeChrootBin(dir, "/it's"); err == nil {
		t.Error("writeChrootBin with a quote in the root: want an error")
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{"slurm 22.05.8\n": "22.05.8", "slurm-wlm 24.11.5\n": "24.11.5", "slurm 23.11.0-0rc1": "23.11.0-0rc1"} {
		if got, err := parseVersion(in); err != nil || got != want {
			t.Errorf("parseVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "slurmctld: error: x", "slurm 24"} {
		if got, err := parseVersion(in); err == nil {
			t.Errorf("parseVersion(%q) = %q, want an error", in, got)
		}
	}
}

// TestNodeProcessesOnlyThisCluster starts three processes that look like
// jobs of node n1: one of this cluster, one of another cluster on the same
// host, one of another node. Only the first is this node's.
func TestNodeProcessesOnlyThisCluster(t *testing.T) {
	start := func(env ...string) int {
		cmd := exec.Command("sleep", "60")
		cmd.Env = append(os.Environ(), env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	ours := start("SLURMD_NODENAME=np-n1-0", "SLURM_CLUSTER_NAME=np-ours")
	start("SLURMD_NODENAME=np-n1-0", "SLURM_CLUSTER_NAME=np-other")
	start("SLURMD_NODENAME=np-n1-1", "SLURM_CLUSTER_NAME=np-ours")
	if got := nodeProcesses("np-ours", "np-n1-0"); !slices.Equal(got, []int{ours}) {
		t.Errorf("nodeProcesses(np-ours, np-n1-0) = %v, want [%d]", got, ours)
	}
	if got := nodeProcesses("", "np-n1-0"); got != nil {
		t.Errorf("nodeProcesses with no cluster = %v, want none", got)
	}
}
