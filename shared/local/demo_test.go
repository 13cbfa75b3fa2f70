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

	"github.com/flexslurm/flexslurm/shared/emulator"
	"github.com/flexslurm/flexslurm/shared/localslurm"
	"github.com/flexslurm/flexslurm/shared/slurm/slurmtest"
)

// demo runs `flexslurm local --demo` end to end, in process, on the real
// emulators, and checks the timeline.
func demo(t *testing.T, noSlurm bool, want ...string) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err = Run(ctx, Options{
		SpecPath: filepath.Join("..", "..", "examples", "cluster_config.json"),
		Demo:     true,
		Exe:      exe,
		RunDir:   filepath.Join(dir, "run"),
		Out:      &out,
		NoSlurm:  noSlurm,
	})
	t.Log("\n" + out.String())
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

// TestDemo is `make demo`: the whole system with a real Slurm cluster,
// driven by sbatch jobs, so CI proves the main job.
func TestDemo(t *testing.T) {
	if err := slurmPossible(); err != nil {
		if os.Getenv(slurmtest.EnvRequire) == "1" {
			t.Fatalf("FAIL: Slurm is required (%s=1): %v", slurmtest.EnvRequire, err)
		}
		t.Skipf("SKIP (loud): the demo runs a real Slurm cluster, which cannot run here: %v", err)
	}
	demo(t, false,
		"[PASS] flexvm-a3u-0 generation 2 is running",
		"is pending and held after the prolog failure",
		"runs again (RUNNING",
		"with real Slurm jobs")
}

// TestDemoWithoutSlurm is `flexslurm local --demo --no-slurm`: the demo
// publishes the hooks' job reports itself.
func TestDemoWithoutSlurm(t *testing.T) {
	demo(t, true, "[PASS] flexvm-a3u-0 generation 2 is running")
}

// slurmPossible reports why a local Slurm cluster cannot run here (nil when
// it can: root, and Slurm installed or installable with apt-get).
func slurmPossible() error {
	if os.Geteuid() != 0 {
		return errors.New("the local Slurm cluster starts munged, slurmctld and slurmd, which needs root")
	}
	if err := localslurm.Host().Installed(); err != nil {
		if _, aerr := os.Stat("/usr/bin/apt-get"); aerr != nil {
			return err
		}
	}
	return nil
}
