package wire

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// TestPolicyFromEnvironment: every Policy override of the environment lands
// in the Policy the functions hand their decisions, the maximum event age
// included; what the environment leaves unset stays zero, for
// plan.DefaultPolicy to fill.
func TestPolicyFromEnvironment(t *testing.T) {
	env := map[string]string{
		config.EnvProject:                  "p",
		config.EnvMaxEventAge:              "2h",
		config.EnvSnapshotMaxAge:           "3m",
		config.EnvIdleTimeout:              "4m",
		config.EnvObserveGrace:             "5m",
		config.EnvUnreportedDrainGrace:     "6m",
		config.EnvRecreateAfterTermination: "true",
	}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := plan.Policy{
		MaxEventAge: 2 * time.Hour, SnapshotMaxAge: 3 * time.Minute, IdleTimeout: 4 * time.Minute,
		ObserveGrace: 5 * time.Minute, UnreportedDrainGrace: 6 * time.Minute, RecreateAfterTermination: true,
	}
	if d := cmp.Diff(want, Policy(cfg)); d != "" {
		t.Errorf("Policy (-want +got):\n%s", d)
	}
	cfg, err = config.FromEnv(func(k string) string { return map[string]string{config.EnvProject: "p"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(plan.Policy{}, Policy(cfg)); d != "" {
		t.Errorf("Policy of an environment without overrides (-want +got):\n%s", d)
	}
}

// TestResizeRequestAPIValuesAgree: every value config accepts for
// FLEXSLURM_RESIZE_REQUEST_API is one the Compute client accepts.
func TestResizeRequestAPIValuesAgree(t *testing.T) {
	cc, err := gce.New(context.Background(), "p", option.WithEndpoint("http://127.0.0.1:9"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for _, v := range []string{"", config.ResizeRequestAPIV1, config.ResizeRequestAPIBeta, config.ResizeRequestAPIAuto} {
		cfg, err := config.FromEnv(func(k string) string {
			return map[string]string{config.EnvProject: "p", config.EnvResizeRequestAPI: v}[k]
		})
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if err := cc.SetResizeRequestAPI(cfg.ResizeRequestAPI); err != nil {
			t.Errorf("config accepts %q (%q) but the client refuses it: %v", v, cfg.ResizeRequestAPI, err)
		}
	}
}

// TestEndSignalsAreTheEventsSignals: the signals FLEXSLURM_END_SIGNAL may
// name are the ones a signal command may carry.
func TestEndSignalsAreTheEventsSignals(t *testing.T) {
	for _, s := range event.Signals {
		if _, err := config.FromEnv(func(k string) string {
			if k == config.EnvEndSignal {
				return s
			}
			return ""
		}); err != nil && strings.Contains(err.Error(), config.EnvEndSignal) {
			t.Errorf("%s=%s refused: %v", config.EnvEndSignal, s, err)
		}
	}
	cfg, err := config.FromEnv(func(k string) string {
		return map[string]string{config.EnvEndSignal: "KILL"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), config.EnvEndSignal) {
		t.Errorf("%s=KILL: %v (config %+v), want a refusal naming the variable", config.EnvEndSignal, err, cfg.EndSignal)
	}
	pol := Policy(config.Config{EndWarning: 10 * time.Minute, EndSignal: "USR2", RepairNodeLimit: -1, RepairNodeWindow: 48 * time.Hour})
	if pol.EndWarning != 10*time.Minute || pol.EndSignal != "USR2" || pol.RepairNodeLimit != -1 || pol.RepairNodeWindow != 48*time.Hour {
		t.Errorf("policy %v %q %d %v", pol.EndWarning, pol.EndSignal, pol.RepairNodeLimit, pol.RepairNodeWindow)
	}
}
