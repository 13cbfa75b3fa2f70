package local

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/emulator"
	"github.com/flexslurm/flexslurm/dev/localslurm"
	"github.com/flexslurm/flexslurm/dev/slurmtest"
)

// demo runs `flexslurm local --demo` end to end, in process, on the real
// emulators, and checks the timeline.
func demo(t *testing.T, noSlurm bool, release string, want ...string) {
	if testing.Short() {
		t.Skip("SKIP (loud): the end-to-end demo takes minutes; run without -short")
	}
	if _, err := emulator.Locate(); err != nil {
		if os.Getenv(emulator.EnvRequire) == "1" {
			t.Fatalf("the demo needs the emulators: %v", err)
		}
		t.Skipf("SKIP (loud): the demo needs the Firestore and Pub/Sub emulators: %v", err)
	}
	// The Slurm user runs the hooks: the binary and the run directory must
	// be reachable by it (t.TempDir is 0700).
	dir, err := os.MkdirTemp("", "flexslurm-demo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s (run/ has every process's log, run/slurm/log Slurm's)", dir)
			return
		}
		os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "flexslurm")
	build := exec.Command("go", "build", "-o", exe, "./cmd/flexslurm")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building flexslurm: %v\n%s", err, out)
	}
	// The demo must end, and stop every process it started, before the
	// test binary's own timeout (go test -timeout) kills the binary with
	// them still running: a slurmctld left behind answers on Slurm's ports
	// and fails every later Slurm test on this host.
	deadline := time.Now().Add(20 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-demoStopMargin).Before(deadline) {
		deadline = d.Add(-demoStopMargin)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var out bytes.Buffer
	err = Run(ctx, Options{
		SpecPath: filepath.Join("..", "..", "examples", "cluster_config.json"),
		Demo:     true,
		Exe:      exe,
		RunDir:   filepath.Join(dir, "run"),
		Out:      &out,
		NoSlurm:  noSlurm,
		Slurm:    release,
	})
	t.Log("\n" + out.String())
	if ctx.Err() != nil {
		t.Fatalf("demo stopped at its deadline, %v before the test binary's timeout: give go test more time (make test uses -timeout 30m): %v", demoStopMargin, err)
	}
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	for _, w := range append(want, "demo finished: every outcome is the one README.md describes") {
		if !strings.Contains(out.String(), w) {
			t.Errorf("timeline lacks %q", w)
		}
	}
	if strings.Contains(out.String(), "[FAIL]") {
		t.Error("a demo check failed")
	}
}

// demoStopMargin is how long before the test binary's timeout the demo is
// stopped: enough for Run to stop Slurm, the functions and the emulators.
const demoStopMargin = 90 * time.Second

// TestDemo is `make demo`: the whole system with a real Slurm cluster,
// driven by sbatch jobs, so CI proves the main job — on each Slurm release
// (TestDemo/slurm-22.05, TestDemo/slurm-24.11, as slurmtest.Run names
// them). A release that cannot run here skips loudly, or fails when
// required (FLEXSLURM_REQUIRE_SLURM=1, FLEXSLURM_REQUIRE_SLURM2411=1).
func TestDemo(t *testing.T) {
	for _, inst := range localslurm.Installations() {
		t.Run("slurm-"+inst.Name, func(t *testing.T) {
			if err := slurmPossible(inst); err != nil {
				if env := slurmtest.RequireEnv(inst); os.Getenv(env) == "1" {
					t.Fatalf("FAIL: Slurm %s is required (%s=1): %v", inst.Name, env, err)
				}
				t.Skipf("SKIP (loud): the demo runs a real Slurm %s cluster, which cannot run here: %v", inst.Name, err)
			}
			demo(t, false, inst.Name,
				"Slurm "+inst.Name+" up",
				"[PASS] flexvm-a3u-0 generation 2 is running",
				"is pending and held after the prolog failure",
				"runs again (RUNNING",
				"with real Slurm jobs")
		})
	}
}

// TestDemoWithoutSlurm is `flexslurm local --demo --no-slurm`: the demo
// publishes the hooks' job reports itself.
func TestDemoWithoutSlurm(t *testing.T) {
	demo(t, true, "", "[PASS] flexvm-a3u-0 generation 2 is running")
}

// slurmPossible reports why a local Slurm cluster of inst cannot run here
// (nil when it can: root, and Slurm installed, or the host's installable
// with apt-get).
func slurmPossible(inst localslurm.Installation) error {
	if os.Geteuid() != 0 {
		return errors.New("the local Slurm cluster starts munged, slurmctld and slurmd, which needs root")
	}
	if err := inst.Installed(); err != nil {
		if _, aerr := os.Stat("/usr/bin/apt-get"); aerr != nil || inst.Chrooted() {
			return err
		}
	}
	return nil
}
