package plan

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

func bootstrapEvent(node, vm string) *event.Bootstrap {
	return &event.Bootstrap{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeBootstrapFail, Cluster: "flexvm"},
		Node: node, VMName: vm, Step: event.BootstrapStepMungeKey, Error: "secret not found"}
}

func TestNodeBootstrapFailed(t *testing.T) {
	dynamic := func(st *model.State) {
		st.Nodes["flexvm-a3u-1"] = &model.Node{Name: "flexvm-a3u-1", Pool: "a3u", Index: 1, Kind: model.NodeDynamic,
			Generation: 1, Phase: model.PhaseRunning, VMName: "flexvm-a3u-1-g1", JobID: "7"}
	}
	for _, tc := range []struct {
		name     string
		setup    func(*model.State)
		ev       *event.Bootstrap
		want     []string
		failures int
	}{{
		name:  "static node: VM deleted, powered down in Slurm, next generation requested, failure counted",
		setup: func(st *model.State) { st.Nodes["flexvm-a3u-0"].Phase = model.PhaseRunning },
		ev:    bootstrapEvent("flexvm-a3u-0", "flexvm-a3u-0-g1"),
		want: []string{"Metric:bootstrap_failures", "PutPool:a3u", "DeleteVMs:flexvm-a3u-0-g1", "Slurm:power_down_force:flexvm-a3u-0", "PutNode:flexvm-a3u-0/requested",
			"CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		failures: 1,
	}, {
		name:  "VM whose node is still recorded requested",
		setup: func(*model.State) {},
		ev:    bootstrapEvent("flexvm-a3u-0", "flexvm-a3u-0-g1"),
		want: []string{"Metric:bootstrap_failures", "PutPool:a3u", "DeleteVMs:flexvm-a3u-0-g1", "Slurm:power_down_force:flexvm-a3u-0", "PutNode:flexvm-a3u-0/requested",
			"CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		failures: 1,
	}, {
		name:     "dynamic node: VM deleted, Slurm powers the node down",
		setup:    dynamic,
		ev:       bootstrapEvent("flexvm-a3u-1", "flexvm-a3u-1-g1"),
		want:     []string{"Metric:bootstrap_failures", "PutPool:a3u", "DeleteVMs:flexvm-a3u-1-g1", "Slurm:power_down_force:flexvm-a3u-1", "PutNode:flexvm-a3u-1/deleting"},
		failures: 1,
	}, {
		name:  "an earlier generation's report changes nothing",
		setup: func(st *model.State) { st.Nodes["flexvm-a3u-0"].Phase = model.PhaseRunning },
		ev:    bootstrapEvent("flexvm-a3u-0", "flexvm-a3u-0-g0"),
	}, {
		name: "a registered node's report changes nothing",
		setup: func(st *model.State) {
			st.Nodes["flexvm-a3u-0"].Phase, st.Nodes["flexvm-a3u-0"].Registered = model.PhaseRunning, true
		},
		ev: bootstrapEvent("flexvm-a3u-0", "flexvm-a3u-0-g1"),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			tc.setup(st)
			got, err := NodeBootstrapFailed(st, tc.ev, t0.Add(time.Minute), Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Fatalf("actions (-want +got):\n%s", d)
			}
			Apply(st, got)
			if n := st.Pools["a3u"].BootstrapFailures; n != tc.failures {
				t.Errorf("bootstrap failures %d, want %d", n, tc.failures)
			}
			// The same report delivered again changes nothing.
			if again, err := NodeBootstrapFailed(st, tc.ev, t0.Add(2*time.Minute), Policy{}); err != nil || len(again) != 0 {
				t.Errorf("redelivery: %v, %v; want no action", kinds(again), err)
			}
		})
	}
}

func TestNodeBootstrapFailuresOpenTheBreaker(t *testing.T) {
	st, _ := applied(t)
	for gen := 1; gen <= 3; gen++ {
		n := st.Nodes["flexvm-a3u-0"]
		n.Phase = model.PhaseRunning
		acts, err := NodeBootstrapFailed(st, bootstrapEvent(n.Name, n.VMName), t0.Add(time.Duration(gen)*time.Minute), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		Apply(st, acts)
	}
	p := st.Pools["a3u"]
	if p.BootstrapFailures != 3 || p.BreakerOpenedAt.IsZero() || !strings.HasPrefix(p.Condition, "BootstrapFailures") {
		t.Fatalf("after 3 failed bootstraps: %d failures, breaker opened at %v, condition %q", p.BootstrapFailures, p.BreakerOpenedAt, p.Condition)
	}
	if n := st.Nodes["flexvm-a3u-0"]; n.Phase.Serving() {
		t.Errorf("node provisioned again while the breaker is open: %s", n.Phase)
	}
}

func TestNodeBootstrapFailedRejectsForeignNodes(t *testing.T) {
	st, _ := applied(t)
	for _, ev := range []*event.Bootstrap{bootstrapEvent("other-a3u-0", "other-a3u-0-g1"), bootstrapEvent("flexvm-zzz-0", "flexvm-zzz-0-g1")} {
		if _, err := NodeBootstrapFailed(st, ev, t0, Policy{}); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: %v, want ErrRejected", ev.Node, err)
		}
	}
}

// TestNodeVersionMismatch: the report is recorded on the node's current
// generation and nothing else happens; a report of another VM, or the same
// one again, changes nothing.
func TestNodeVersionMismatch(t *testing.T) {
	st, _ := applied(t)
	n := st.Nodes["flexvm-a3u-0"]
	n.Phase, n.Registered = model.PhaseRunning, true
	ev := &event.VersionMismatch{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeVersionMismatch, Cluster: "flexvm"},
		Node: "flexvm-a3u-0", VMName: "flexvm-a3u-0-g1", NodeVersion: "v1.1.0", FunctionsVersion: "v1.2.0"}
	got, err := NodeVersionMismatch(st, ev, t0.Add(time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"PutNode:flexvm-a3u-0/running"}, kinds(got)); d != "" {
		t.Fatalf("actions (-want +got):\n%s", d)
	}
	Apply(st, got)
	n = st.Nodes["flexvm-a3u-0"]
	if n.VersionMismatchVM != "flexvm-a3u-0-g1" || !strings.Contains(n.VersionMismatch, "runs flexslurm v1.1.0") || !strings.Contains(n.VersionMismatch, "run v1.2.0") {
		t.Errorf("node records %q of %q", n.VersionMismatch, n.VersionMismatchVM)
	}
	if again, err := NodeVersionMismatch(st, ev, t0.Add(2*time.Minute), Policy{}); err != nil || len(again) != 0 {
		t.Errorf("redelivery: %v, %v; want no action", kinds(again), err)
	}
	old := *ev
	old.VMName = "flexvm-a3u-0-g0"
	if acts, err := NodeVersionMismatch(st, &old, t0.Add(2*time.Minute), Policy{}); err != nil || len(acts) != 0 {
		t.Errorf("an earlier VM's report: %v, %v; want no action", kinds(acts), err)
	}
	foreign := *ev
	foreign.Node, foreign.VMName = "other-a3u-0", "other-a3u-0-g1"
	if _, err := NodeVersionMismatch(st, &foreign, t0, Policy{}); !errors.Is(err, ErrRejected) {
		t.Errorf("another cluster's node: %v, want ErrRejected", err)
	}
}
