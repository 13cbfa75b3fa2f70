package plan

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// TestZeroPolicyTakesTheDefaultsTable: a zero Policy is exactly
// DefaultPolicy, and DefaultPolicy sets every field but those whose zero
// value means something.
func TestZeroPolicyTakesTheDefaultsTable(t *testing.T) {
	if d := cmp.Diff(DefaultPolicy(), Policy{}.withDefaults()); d != "" {
		t.Errorf("Policy{}.withDefaults() (-DefaultPolicy +got):\n%s", d)
	}
	if d := cmp.Diff(DefaultPolicy(), DefaultPolicy().withDefaults()); d != "" {
		t.Errorf("the defaults table is not a fixed point of withDefaults (-want +got):\n%s", d)
	}
	zeroMeans := map[string]bool{
		"RecreateAfterTermination": true, // make-before-break on
		"DisableHostRepair":        true, // host repair on
		"LeadTime":                 true, // learnt from the pool's waits
		"OneNodePerRequest":        true, // a job's nodes in one request
	}
	v := reflect.ValueOf(DefaultPolicy())
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if v.Field(i).IsZero() != zeroMeans[name] {
			t.Errorf("DefaultPolicy().%s = %v: every field has a default in the table, except %v", name, v.Field(i), zeroMeans)
		}
	}
}

// TestPolicyOverridesOneFieldAtATime: a set field is kept, whatever the
// others; out-of-range values are clamped or mean what Policy says.
func TestPolicyOverridesOneFieldAtATime(t *testing.T) {
	tests := []struct {
		name string
		in   Policy
		want func(p *Policy)
	}{
		{"a set duration is kept", Policy{IdleTimeout: time.Hour}, func(p *Policy) { p.IdleTimeout = time.Hour }},
		{"a negative duration is unset", Policy{QueueTimeout: -time.Hour}, func(*Policy) {}},
		{"a set count is kept", Policy{BreakerThreshold: 7}, func(p *Policy) { p.BreakerThreshold = 7 }},
		{"a negative inconclusive limit never escalates", Policy{InconclusiveLimit: -1}, func(p *Policy) { p.InconclusiveLimit = -1 }},
		{"target availability at most 1", Policy{TargetAvailability: 2}, func(p *Policy) { p.TargetAvailability = 1 }},
		{"lead share at most one half", Policy{LeadMaxShare: 0.9}, func(p *Policy) { p.LeadMaxShare = 0.5 }},
		{"a negative lead time is learnt", Policy{LeadTime: -time.Hour}, func(*Policy) {}},
		{"a fixed lead time is kept", Policy{LeadTime: time.Hour}, func(p *Policy) { p.LeadTime = time.Hour }},
		{"a set event age is kept", Policy{MaxEventAge: 3 * time.Hour}, func(p *Policy) { p.MaxEventAge = 3 * time.Hour }},
		{"switches are kept", Policy{RecreateAfterTermination: true, DisableHostRepair: true},
			func(p *Policy) { p.RecreateAfterTermination, p.DisableHostRepair = true, true }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := DefaultPolicy()
			tc.want(&want)
			if d := cmp.Diff(want, tc.in.withDefaults()); d != "" {
				t.Errorf("withDefaults (-want +got):\n%s", d)
			}
		})
	}
}

// TestEveryEntryPointHonoursPolicy runs each decision that can provision
// capacity on a pool whose breaker opened 45 minutes ago: the default
// cool-down (30 min) has passed, so it provisions; a Policy with a 2 h
// cool-down must keep it from provisioning (NodeBootstrapFailed: a closed
// breaker, which a BreakerThreshold of 1 opens). A decision that ignored
// its Policy would provision in both.
func TestEveryEntryPointHonoursPolicy(t *testing.T) {
	c, eff := example(t)
	tmpls := built(t, c, testNode)
	now := t0.Add(time.Hour)
	breakerOpen := func(st *model.State) {
		p := st.Pools["a3u"]
		p.BreakerOpenedAt, p.BootstrapFailures = now.Add(-45*time.Minute), 3
	}
	// staticGone leaves static node 0 with no VM (its generation ended).
	staticGone := func(st *model.State) {
		n := st.Nodes["flexvm-a3u-0"]
		n.Phase, n.LastEnd = model.PhaseReleased, model.EndLost
	}
	tests := []struct {
		name    string
		prepare func(t *testing.T, st *model.State)
		decide  func(st *model.State, pol Policy) ([]Action, error)
		// bootstrap: the pool has no bootstrap failure and its breaker is
		// closed; the non-default Policy is BreakerThreshold 1, whose one
		// failure opens it.
		bootstrap bool
	}{
		{
			name:    "ClusterApplied",
			prepare: func(t *testing.T, st *model.State) { staticGone(st) },
			decide: func(st *model.State, pol Policy) ([]Action, error) {
				return ClusterApplied(st, c, testNode, tmpls, eff, now, pol), nil
			},
		},
		{
			name: "Job",
			decide: func(st *model.State, pol Policy) ([]Action, error) {
				return Job(st, c, jobEv(event.TypeJobPending, "7", 1), now, pol)
			},
		},
		{
			name: "JobNarrow",
			decide: func(st *model.State, pol Policy) ([]Action, error) {
				return JobNarrow(st, c, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1"), now, pol)
			},
		},
		{
			name:    "NodePower",
			prepare: func(t *testing.T, st *model.State) { running(st, "flexvm-a3u-0", now.Add(farEnd)) },
			decide: func(st *model.State, pol Policy) ([]Action, error) {
				return NodePower(st, nodeEv(event.TypeResumeFailed, "flexvm-a3u-0"), now, pol)
			},
		},
		{
			name: "NodeBootstrapFailed",
			prepare: func(t *testing.T, st *model.State) {
				running(st, "flexvm-a3u-0", now.Add(farEnd))
				st.Nodes["flexvm-a3u-0"].Registered = false
			},
			decide: func(st *model.State, pol Policy) ([]Action, error) {
				return NodeBootstrapFailed(st, bootstrapEvent("flexvm-a3u-0", "flexvm-a3u-0-g1"), now, pol)
			},
			bootstrap: true,
		},
		{
			name:    "Expiry",
			prepare: func(t *testing.T, st *model.State) { running(st, "flexvm-a3u-0", now) },
			decide: func(st *model.State, pol Policy) ([]Action, error) {
				a := audit(event.AuditDeferredDelete, "flexvm-a3u-0-g1")
				a.Timestamp = now
				return Expiry(st, a, now, pol)
			},
		},
		{
			name:    "Reconcile",
			prepare: func(t *testing.T, st *model.State) { staticGone(st) },
			decide: func(st *model.State, pol Policy) ([]Action, error) {
				return Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true}}}, now, pol), nil
			},
		},
		{
			// The FAIL waits for the drain; the snapshot confirming it
			// takes the repair step (Snapshot is an entry point too).
			name:    "Repair, then Snapshot",
			prepare: func(t *testing.T, st *model.State) { running(st, "flexvm-a3u-0", now.Add(farEnd)) },
			decide: func(st *model.State, pol Policy) ([]Action, error) {
				h := fail("flexvm-a3u-0", 1, "", "", true)
				h.CheckedAt = now
				acts, err := Repair(st, h, now, pol)
				if err != nil {
					return nil, err
				}
				Apply(st, acts)
				more, err := Snapshot(st, confirmSnapshot(now.Add(time.Second), map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"}), now.Add(2*time.Second), pol)
				return append(acts, more...), err
			},
		},
		{
			name: "HostRepairFailed",
			prepare: func(t *testing.T, st *model.State) {
				running(st, "flexvm-a3u-0", now.Add(farEnd))
				n := st.Nodes["flexvm-a3u-0"]
				n.Repair, n.RepairSince = model.RepairHost, now.Add(-time.Minute)
			},
			decide: func(st *model.State, pol Policy) ([]Action, error) {
				return HostRepairFailed(st, "flexvm-a3u-0", 1, "UNSUPPORTED_OPERATION", now, pol)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := func(pol Policy) []Action {
				st, _ := applied(t)
				if tc.prepare != nil {
					tc.prepare(t, st)
				}
				if !tc.bootstrap {
					breakerOpen(st)
				}
				acts, err := tc.decide(st, pol)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				return acts
			}
			if got := run(Policy{}); !hasResizeRequest(got) {
				t.Fatalf("default policy: the breaker's cool-down has passed, want a resize request; got %v", kinds(got))
			}
			nonDefault := Policy{BreakerCooldown: 2 * time.Hour}
			if tc.bootstrap {
				nonDefault = Policy{BreakerThreshold: 1}
			}
			if got := run(nonDefault); hasResizeRequest(got) {
				t.Errorf("%+v: the breaker is open, want no resize request; got %v", nonDefault, kinds(got))
			}
		})
	}
}

// TestProvisioningFailedHonoursPolicy: the backoff a refused request starts
// is Policy's.
func TestProvisioningFailedHonoursPolicy(t *testing.T) {
	for _, tc := range []struct {
		pol  Policy
		want time.Duration
	}{
		{Policy{}, DefaultPolicy().BackoffBase},
		{Policy{BackoffBase: 7 * time.Minute}, 7 * time.Minute},
	} {
		st, _ := applied(t)
		acts, err := ProvisioningFailed(st, "a3u", "rr-flexvm-a3u-0-g1", ClassCapacity, "ZONE_RESOURCE_POOL_EXHAUSTED", t0, tc.pol)
		if err != nil {
			t.Fatal(err)
		}
		var until time.Time
		for _, a := range acts {
			if p, ok := a.(PutPool); ok {
				until = p.Pool.BackoffUntil
			}
		}
		if got := until.Sub(t0); got != tc.want {
			t.Errorf("%+v: backoff %s, want %s", tc.pol, got, tc.want)
		}
	}
}

// TestEventTooOld: an event is dropped when it was published longer ago than
// the Policy's MaxEventAge (the default table's 1 h when unset); an unknown
// publish time, or one ahead of now, never is.
func TestEventTooOld(t *testing.T) {
	now := t0
	tests := []struct {
		name      string
		published time.Time
		pol       Policy
		tooOld    bool
		maxAge    time.Duration
	}{
		{"fresh", now.Add(-time.Minute), Policy{}, false, time.Hour},
		{"exactly the default age", now.Add(-time.Hour), Policy{}, false, time.Hour},
		{"just beyond the default age", now.Add(-time.Hour - time.Second), Policy{}, true, time.Hour},
		{"within a longer policy age", now.Add(-90 * time.Minute), Policy{MaxEventAge: 2 * time.Hour}, false, 2 * time.Hour},
		{"beyond a shorter policy age", now.Add(-20 * time.Minute), Policy{MaxEventAge: 15 * time.Minute}, true, 15 * time.Minute},
		{"a negative age is unset", now.Add(-90 * time.Minute), Policy{MaxEventAge: -time.Minute}, true, time.Hour},
		{"publish time unknown", time.Time{}, Policy{}, false, time.Hour},
		{"published ahead of now", now.Add(time.Hour), Policy{}, false, time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tooOld, maxAge := EventTooOld(tc.published, now, tc.pol)
			if tooOld != tc.tooOld || maxAge != tc.maxAge {
				t.Errorf("EventTooOld = %t, %s; want %t, %s", tooOld, maxAge, tc.tooOld, tc.maxAge)
			}
		})
	}
}
