package main

import (
	"bytes"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/install"
)

// TestInstallController runs `flexslurm install controller` into a
// temporary root, twice, then uninstalls.
func TestInstallController(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	// The SlurmUser comes from the root's slurm.conf.
	if err := os.MkdirAll(filepath.Join(root, "etc/slurm"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/slurm/slurm.conf"), []byte("ClusterName=flexvm\nSlurmUser="+me.Username+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"install", "controller", "--project", "my-project-1", "--spec", "../../examples/cluster_config.json",
		"--binary", exe, "--root", root}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range append([]string{"created    " + install.UnitPath, "created    " + install.HookPath("resume")}, install.SlurmConfLines()...) {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	unit, err := os.ReadFile(filepath.Join(root, install.UnitPath))
	if err != nil || !strings.Contains(string(unit), "\nUser="+me.Username+"\n") || !strings.Contains(string(unit), "ExecStart="+exe+" agent ") {
		t.Errorf("unit (%v):\n%s", err, unit)
	}
	if target, err := os.Readlink(filepath.Join(root, install.HookPath("epilog-ctld"))); err != nil || target != exe {
		t.Errorf("epilog-ctld link -> %q (%v)", target, err)
	}

	stdout.Reset()
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, stderr.String())
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(line, "created") || strings.HasPrefix(line, "updated") {
			t.Errorf("second run changed something: %s", line)
		}
	}

	stdout.Reset()
	// An uninstall needs no slurm.conf: the operator may have restored it.
	if err := os.Remove(filepath.Join(root, "etc/slurm/slurm.conf")); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"install", "controller", "--uninstall", "--root", root}, &stdout, &stderr); code != 0 {
		t.Fatalf("uninstall: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "HealthCheckProgram=/etc/flexslurm/hooks/flexslurm-hook-healthcheck") {
		t.Errorf("uninstall does not list every slurm.conf line to remove:\n%s", stdout.String())
	}
	for _, p := range []string{install.UnitPath, install.HooksConfigPath, install.HookDir, install.SpoolDir} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s is still there after --uninstall", p)
		}
	}
}

func TestInstallUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"install", "controller", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "usage: flexslurm install controller") {
		t.Errorf("-h: exit %d, stdout %q", code, stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	root := t.TempDir()
	code := run([]string{"install", "controller", "--root", root, "--slurm-user", "root", "--binary", "/nonexistent/flexslurm"}, &stdout, &stderr)
	for _, want := range []string{"--project is required", "--spec is required", "--binary /nonexistent/flexslurm is not an executable file"} {
		if code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("exit %d, stderr %q lacks %q", code, stderr.String(), want)
		}
	}
	stderr.Reset()
	if code := run([]string{"install", "controller", "--root", root, "--project", "my-project-1"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "for its SlurmUser") {
		t.Errorf("no slurm.conf: exit %d, stderr %q", code, stderr.String())
	}
	if code := run([]string{"install"}, &stdout, &stderr); code != 2 {
		t.Errorf("no subcommand: exit %d", code)
	}
}

func TestAgentHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"agent", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "--create-subscription") {
		t.Errorf("agent -h: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestMetadataFirewallDryRun: the command prints the controller's rule
// (root and the SlurmUser, every port but DNS) and changes nothing.
func TestMetadataFirewallDryRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"metadata-firewall", "--dry-run", "--metadata-host", "127.83.0.1:80", "--allow-uid", "990"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	want := "would apply: /usr/sbin/iptables -w -I OUTPUT -d 127.83.0.1/32 -p tcp ! --dport 53 -m owner ! --uid-owner 0 -m owner ! --uid-owner 990 -j REJECT --reject-with tcp-reset\n"
	if stdout.String() != want {
		t.Errorf("stdout %q; want %q", stdout.String(), want)
	}
	if code := run([]string{"metadata-firewall", "--allow-uid", "-1"}, &stdout, &stderr); code != 2 {
		t.Errorf("a negative uid: exit %d, want 2", code)
	}
}
