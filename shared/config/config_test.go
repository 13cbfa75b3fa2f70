package config

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPolicyOverrides(t *testing.T) {
	c, err := FromEnv(env(map[string]string{EnvProject: "p", EnvSnapshotMaxAge: "24h", EnvIdleTimeout: "336h", EnvObserveGrace: "2h", EnvUnreportedDrainGrace: "3h", EnvRecreateAfterTermination: "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.SnapshotMaxAge != 24*time.Hour || c.IdleTimeout != 336*time.Hour || c.ObserveGrace != 2*time.Hour || c.UnreportedDrainGrace != 3*time.Hour || !c.RecreateAfterTermination {
		t.Errorf("SnapshotMaxAge %v IdleTimeout %v ObserveGrace %v UnreportedDrainGrace %v, want 24h, 336h, 2h and 3h", c.SnapshotMaxAge, c.IdleTimeout, c.ObserveGrace, c.UnreportedDrainGrace)
	}
	c, err = FromEnv(env(map[string]string{EnvProject: "p"}))
	if err != nil || c.SnapshotMaxAge != 0 || c.IdleTimeout != 0 || c.RecreateAfterTermination {
		t.Errorf("unset: %v %v %v, want zero (policy defaults)", c.SnapshotMaxAge, c.IdleTimeout, err)
	}
}

func TestPolicyOverridesRejected(t *testing.T) {
	for _, v := range []string{"soon", "0s", "500ms", "2161h", "-1m"} {
		for _, name := range []string{EnvIdleTimeout, EnvUnreportedDrainGrace} {
			_, err := FromEnv(env(map[string]string{EnvProject: "p", name: v}))
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), v) {
				t.Errorf("%s=%q: error %v, want one naming the variable and the value", name, v, err)
			}
		}
	}
	if _, err := FromEnv(env(map[string]string{EnvProject: "p", EnvRecreateAfterTermination: "sometimes"})); err == nil ||
		!strings.Contains(err.Error(), EnvRecreateAfterTermination) {
		t.Errorf("%s=sometimes: error %v, want one naming the variable", EnvRecreateAfterTermination, err)
	}
}

func TestIdentitySettings(t *testing.T) {
	c, err := FromEnv(env(map[string]string{EnvProject: "p", EnvControllerVM: "zones/us-central1-a/instances/c1-controller", EnvIdentityCertsURL: "http://127.0.0.1:9/oauth2/v3/certs"}))
	if err != nil || c.ControllerVM != "zones/us-central1-a/instances/c1-controller" || c.IdentityCertsURL == "" {
		t.Fatalf("%+v %v", c, err)
	}
	for k, v := range map[string]string{
		EnvControllerVM:     "c1-controller",
		EnvIdentityCertsURL: "file:///etc/certs",
	} {
		if _, err := FromEnv(env(map[string]string{EnvProject: "p", k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: error %v, want one naming the variable", k, v, err)
		}
	}
	for _, bad := range []string{"zones/us-central1-a/instances/x\nNodeName=evil", "zones/us-central1-a/instances/", "zones//instances/x"} {
		if _, err := FromEnv(env(map[string]string{EnvProject: "p", EnvControllerVM: bad})); err == nil {
			t.Errorf("%s=%q accepted", EnvControllerVM, bad)
		}
	}
}

func TestResizeRequestAPISetting(t *testing.T) {
	c, err := FromEnv(env(map[string]string{EnvProject: "p"}))
	if err != nil || c.ResizeRequestAPI != ResizeRequestAPIAuto {
		t.Fatalf("default: %q %v, want auto", c.ResizeRequestAPI, err)
	}
	for _, v := range []string{"v1", "beta", "auto", " beta "} {
		c, err := FromEnv(env(map[string]string{EnvProject: "p", EnvResizeRequestAPI: v}))
		if err != nil || c.ResizeRequestAPI != strings.TrimSpace(v) {
			t.Errorf("%s=%q: %q %v", EnvResizeRequestAPI, v, c.ResizeRequestAPI, err)
		}
	}
	for _, v := range []string{"v2", "BETA", "alpha"} {
		_, err := FromEnv(env(map[string]string{EnvProject: "p", EnvResizeRequestAPI: v}))
		if err == nil || !strings.Contains(err.Error(), EnvResizeRequestAPI) || !strings.Contains(err.Error(), `"`+v+`"`) {
			t.Errorf("%s=%q: error %v, want one naming the variable and the value", EnvResizeRequestAPI, v, err)
		}
	}
}

// TestRepairLimitSettings: the operator sets the per-node repair limit and
// its window (docs/design/repair-limit.md); a bad value is refused with an
// error naming the variable and the value.
func TestRepairLimitSettings(t *testing.T) {
	for _, tc := range []struct {
		limit, window string
		wantLimit     int
		wantWindow    time.Duration
	}{
		{"", "", 0, 0},
		{"5", "48h", 5, 48 * time.Hour},
		{"none", "", -1, 0},
		{" none ", "1h", -1, time.Hour},
	} {
		c, err := FromEnv(env(map[string]string{EnvProject: "p", EnvRepairNodeLimit: tc.limit, EnvRepairNodeWindow: tc.window}))
		if err != nil || c.RepairNodeLimit != tc.wantLimit || c.RepairNodeWindow != tc.wantWindow {
			t.Errorf("%q %q: limit %d window %v err %v, want %d %v", tc.limit, tc.window, c.RepairNodeLimit, c.RepairNodeWindow, err, tc.wantLimit, tc.wantWindow)
		}
	}
	for _, v := range []string{"0", "-1", "101", "three", "2.5", "NONE"} {
		_, err := FromEnv(env(map[string]string{EnvProject: "p", EnvRepairNodeLimit: v}))
		if err == nil || !strings.Contains(err.Error(), EnvRepairNodeLimit) || !strings.Contains(err.Error(), v) {
			t.Errorf("%s=%q: error %v, want one naming the variable and the value", EnvRepairNodeLimit, v, err)
		}
	}
	for _, v := range []string{"30m", "721h", "a day", "0", "1h30m", "60m"} {
		_, err := FromEnv(env(map[string]string{EnvProject: "p", EnvRepairNodeWindow: v}))
		if err == nil || !strings.Contains(err.Error(), EnvRepairNodeWindow) || !strings.Contains(err.Error(), v) {
			t.Errorf("%s=%q: error %v, want one naming the variable and the value", EnvRepairNodeWindow, v, err)
		}
	}
}
