package hooks

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/clock"
)

func TestExpandNodeName(t *testing.T) {
	argv := []string{"/usr/bin/%n", "health", "check", "--from-dir", "/run/health/%n", "x%n%n"}
	got := ExpandNodeName(argv, "flexvm-a3u-2")
	want := []string{"/usr/bin/%n", "health", "check", "--from-dir", "/run/health/flexvm-a3u-2", "xflexvm-a3u-2flexvm-a3u-2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expanded (-want +got):\n%s", diff)
	}
	if argv[4] != "/run/health/%n" {
		t.Errorf("the configured argv was changed: %q", argv)
	}
	for _, node := range []string{"", "../etc", "a b"} {
		if got := ExpandNodeName(argv, node); !cmp.Equal(got, argv) {
			t.Errorf("node %q: %q, want argv unchanged", node, got)
		}
	}
}

// TestRuntimeClock: with the local system's clock configured, the hooks
// stamp events on it; a malformed clock is a configuration error.
func TestRuntimeClock(t *testing.T) {
	// NewRuntime points this process at the configured emulator: restore
	// PUBSUB_EMULATOR_HOST for the other tests of this binary.
	t.Setenv("PUBSUB_EMULATOR_HOST", os.Getenv("PUBSUB_EMULATOR_HOST"))
	origin := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewScaled(origin, 10080)
	cfg := Config{Cluster: "flexvm", Project: "p", Clock: clk.String(), SpoolDir: t.TempDir(),
		PubSubEmulatorHost: "127.0.0.1:9"}.withDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rt, closeFn, err := NewRuntime(context.Background(), cfg, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if got := rt.now(); got.Before(origin) || got.After(origin.Add(30*24*time.Hour)) {
		t.Errorf("runtime clock reads %v, want the simulated clock (from %v)", got, origin)
	}
	cfg.Clock = "yesterday"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `clock "yesterday"`) {
		t.Errorf("Validate with clock %q = %v, want an error naming it", cfg.Clock, err)
	}
}
