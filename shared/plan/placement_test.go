package plan

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// appliedCompact is applied with the example's a3u pool asking for compact
// placement with max_topology_distance distance ("" for none).
func appliedCompact(t *testing.T, distance string) (*model.State, []Action) {
	t.Helper()
	st := model.NewState()
	actions := applyCompact(t, st, distance)
	st.Pools["a3u"].Ready = true
	return st, actions
}

// applyCompact applies to st the example with the a3u pool asking for
// compact placement with max_topology_distance distance ("" for none),
// and returns the actions; distance "-" asks for no compact placement.
func applyCompact(t *testing.T, st *model.State, distance string) []Action {
	t.Helper()
	data, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	cp := map[string]any{}
	if distance != "" {
		cp["max_topology_distance"] = distance
	}
	for _, p := range doc["node_pools"].([]any) {
		if p.(map[string]any)["id"] == "a3u" && distance != "-" {
			p.(map[string]any)["flexslurm"] = map[string]any{"compact_placement": cp}
		}
	}
	data, _ = json.Marshal(doc)
	c, err := spec.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	eff, err := c.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	actions := ClusterApplied(st, c, testNode, built(t, c, testNode), eff, t0, Policy{})
	Apply(st, actions)
	return actions
}

// requests returns the CreateResizeRequests among actions.
func requests(actions []Action) []CreateResizeRequest {
	var out []CreateResizeRequest
	for _, a := range actions {
		if r, ok := a.(CreateResizeRequest); ok {
			out = append(out, r)
		}
	}
	return out
}

// TestCompactPlacementMultiNodeRequestsOnly: with compact placement the
// pool records its workload policy; a two-node job's request references
// it, a one-node job's and the static node's do not; without the setting
// no request references one.
func TestCompactPlacementMultiNodeRequestsOnly(t *testing.T) {
	for _, tc := range []struct {
		distance, policy string
	}{
		{"", "fs-flexvm-a3u-wp-any"},
		{"BLOCK", "fs-flexvm-a3u-wp-block"},
	} {
		st, first := appliedCompact(t, tc.distance)
		if p := st.Pools["a3u"]; p.WorkloadPolicy != tc.policy || p.PlacementDistance != tc.distance {
			t.Errorf("%q: pool records policy %q distance %q, want %q %q", tc.distance, p.WorkloadPolicy, p.PlacementDistance, tc.policy, tc.distance)
		}
		got := requests(mustJob(t, st, jobEv(event.TypeJobPending, "7", 2)))
		if len(got) != 1 || len(got[0].VMs) != 2 || got[0].WorkloadPolicy != tc.policy {
			t.Errorf("%q: two-node job's requests = %+v, want one of two VMs with policy %s", tc.distance, got, tc.policy)
		}
		st, _ = appliedCompact(t, tc.distance)
		got = requests(mustJob(t, st, jobEv(event.TypeJobPending, "8", 1)))
		if len(got) != 1 || got[0].WorkloadPolicy != "" {
			t.Errorf("%q: one-node job's requests = %+v, want one without a policy", tc.distance, got)
		}
		// The static node (min_node_count 1) is requested alone: no
		// policy.
		if len(requests(first)) == 0 {
			t.Errorf("%q: applying the cluster requested no static node", tc.distance)
		}
		for _, r := range requests(first) {
			if r.WorkloadPolicy != "" {
				t.Errorf("%q: a request of %d VM(s) references %s", tc.distance, len(r.VMs), r.WorkloadPolicy)
			}
		}
	}
	st, _ := applied(t)
	if p := st.Pools["a3u"]; p.WorkloadPolicy != "" {
		t.Errorf("a pool without compact_placement records policy %q", p.WorkloadPolicy)
	}
	for _, r := range requests(mustJob(t, st, jobEv(event.TypeJobPending, "7", 2))) {
		if r.WorkloadPolicy != "" {
			t.Errorf("a pool without compact_placement requested %v with policy %s", r.VMs, r.WorkloadPolicy)
		}
	}
}

// TestCompactPlacementReplayTakesThePoolsPolicy: a stored request replayed
// after the pool's placement changed references the pool's policy now, or
// none once the pool asks for no compact placement.
func TestCompactPlacementReplayTakesThePoolsPolicy(t *testing.T) {
	st, _ := appliedCompact(t, "BLOCK")
	acts := mustJob(t, st, jobEv(event.TypeJobPending, "7", 2))
	Apply(st, acts)
	stored := requests(acts)
	if len(stored) != 1 || stored[0].WorkloadPolicy != "fs-flexvm-a3u-wp-block" {
		t.Fatalf("stored requests %+v", stored)
	}
	for _, tc := range []struct{ policy, distance string }{
		{"fs-flexvm-a3u-wp-cluster", "CLUSTER"},
		{"", ""},
	} {
		st.Pools["a3u"].WorkloadPolicy, st.Pools["a3u"].PlacementDistance = tc.policy, tc.distance
		got := requests(Replay(st, []Action{stored[0]}, true))
		if len(got) != 1 || got[0].WorkloadPolicy != tc.policy {
			t.Errorf("pool policy %q: replayed %+v", tc.policy, got)
		}
	}
}

// TestWorkloadPolicyRefused: Compute refusing a request's MIG because of
// the pool's workload policy (FailWorkloadPolicy) ends that request
// without backing the pool off, records the refusal on the pool, tells
// the operator (one Alert per refused policy, a metric per refusal), and
// makes the pool's later multi-node requests without the policy until
// its compact_placement changes.
func TestWorkloadPolicyRefused(t *testing.T) {
	const policy, code = "fs-flexvm-a3u-wp-block", "invalid"
	if got := Respond(Failure{Action: CreateResizeRequest{}, Class: FailWorkloadPolicy}); got != RecordProvisioningFailed {
		t.Errorf("Respond(workload policy refused) = %s, want %s", got, RecordProvisioningFailed)
	}
	if got := FailWorkloadPolicy.Provisioning(); got != ClassWorkloadPolicy {
		t.Errorf("FailWorkloadPolicy.Provisioning() = %q", got)
	}
	count := func(acts []Action) (alerts, metrics int) {
		for _, a := range acts {
			switch a := a.(type) {
			case Alert:
				alerts++
			case Metric:
				if a.Name == MetricWorkloadPolicyRefused && a.Labels["pool"] == "a3u" && a.Labels["policy"] == policy && a.Labels["code"] == code {
					metrics++
				}
			}
		}
		return alerts, metrics
	}
	refuse := func(t *testing.T, st *model.State, job string) []Action {
		t.Helper()
		acts := mustJob(t, st, jobEv(event.TypeJobPending, job, 2))
		Apply(st, acts)
		rs := requests(acts)
		if len(rs) != 1 || rs[0].WorkloadPolicy != policy {
			t.Fatalf("job %s: requests %+v, want one with policy %s", job, rs, policy)
		}
		out, err := ProvisioningFailed(st, "a3u", rs[0].Name, ClassWorkloadPolicy, code, t0, Policy{})
		if err != nil {
			t.Fatal(err)
		}
		Apply(st, out)
		for _, n := range st.Nodes {
			if n.ResizeRequest == rs[0].Name && n.Phase != model.PhaseReleased {
				t.Errorf("node %s of the refused request is %s, want released", n.Name, n.Phase)
			}
		}
		return out
	}
	// nextPolicy is the policy of the request the reconciler makes next
	// for the released nodes of the refused job.
	nextPolicy := func(t *testing.T, st *model.State) string {
		t.Helper()
		now := t0.Add(time.Minute)
		obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, ListedAt: now, MIGsListed: true}}}
		rs := requests(Reconcile(st, obs, now, Policy{}))
		if len(rs) != 1 || len(rs[0].VMs) != 2 {
			t.Fatalf("reconcile requests %+v, want one of two VMs", rs)
		}
		return rs[0].WorkloadPolicy
	}
	for _, tc := range []struct {
		name string
		// after runs after the first refusal; it returns the policy the
		// next two-node request must carry.
		after func(t *testing.T, st *model.State) string
	}{
		{"next request carries none", func(t *testing.T, st *model.State) string { return "" }},
		{"a second refusal alerts no more", func(t *testing.T, st *model.State) string {
			// A request made with the policy before the first refusal
			// was recorded, refused in turn.
			out, err := ProvisioningFailed(st, "a3u", "rr-other", ClassWorkloadPolicy, code, t0, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if a, m := count(out); a != 0 || m != 1 {
				t.Errorf("a refusal of the policy already refused: %d alerts, %d metrics, want 0, 1", a, m)
			}
			Apply(st, out)
			return ""
		}},
		{"same spec applied again keeps the refusal", func(t *testing.T, st *model.State) string {
			applyCompact(t, st, "BLOCK")
			return ""
		}},
		{"a new distance tries its policy", func(t *testing.T, st *model.State) string {
			applyCompact(t, st, "CLUSTER")
			if p := st.Pools["a3u"]; p.WorkloadPolicyRefused != "" || p.WorkloadPolicyError != "" {
				t.Errorf("after a new distance the pool still records refusal %q (%q)", p.WorkloadPolicyRefused, p.WorkloadPolicyError)
			}
			return "fs-flexvm-a3u-wp-cluster"
		}},
		{"compact placement dropped then asked again tries it", func(t *testing.T, st *model.State) string {
			applyCompact(t, st, "-")
			applyCompact(t, st, "BLOCK")
			return policy
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := appliedCompact(t, "BLOCK")
			out := refuse(t, st, "7")
			if a, m := count(out); a != 1 || m != 1 {
				t.Errorf("first refusal: %d alerts, %d metrics, want 1, 1: %v", a, m, out)
			}
			p := st.Pools["a3u"]
			if p.WorkloadPolicyRefused != policy || p.WorkloadPolicyError != code {
				t.Errorf("pool records refusal %q (%q), want %q (%q)", p.WorkloadPolicyRefused, p.WorkloadPolicyError, policy, code)
			}
			if !p.BackoffUntil.IsZero() || p.BackoffAttempts != 0 {
				t.Errorf("pool backed off after a refused policy: until %s, attempts %d", p.BackoffUntil, p.BackoffAttempts)
			}
			want := tc.after(t, st)
			if got := nextPolicy(t, st); got != want {
				t.Errorf("next two-node request carries policy %q, want %q", got, want)
			}
		})
	}
}
