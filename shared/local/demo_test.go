package local

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/emulator"
)

// TestDemo runs `flexslurm local --demo` end to end, in process, on the
// real emulators: the same run as `make demo`, so CI proves the main job.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP (loud): the end-to-end demo takes about two minutes; run without -short")
	}
	if _, err := emulator.Locate(); err != nil {
		if os.Getenv(emulator.EnvRequire) == "1" {
			t.Fatalf("the demo needs the emulators: %v", err)
		}
		t.Skipf("SKIP (loud): the demo needs the Firestore and Pub/Sub emulators: %v", err)
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "flexslurm")
	build := exec.Command("go", "build", "-o", exe, "./cmd/flexslurm")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building flexslurm: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, Options{
		SpecPath: filepath.Join("..", "..", "examples", "cluster_config.json"),
		Demo:     true,
		Exe:      exe,
		RunDir:   filepath.Join(dir, "run"),
		Out:      &out,
	})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	for _, want := range []string{"[PASS] flexvm-a3u-0 generation 2 is running", "demo finished: every outcome matches the seed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "[FAIL]") {
		t.Error("a demo check failed")
	}
}
