package scaleup_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/store"
)

const zone = "us-central1-a" // the example spec's pools' zone and the harness controller's

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// upAndRunning applies the example spec on a verifying harness and lets
// the static node flexvm-a3u-0 come up.
func upAndRunning(t *testing.T, logs *lockedBuffer) (*harness.Harness, context.Context) {
	t.Helper()
	h, ctx := functest.NewVerifying(t, logs)
	if err := h.Apply(ctx, functest.ExampleSpec(t)); err != nil {
		t.Fatal(err)
	}
	if err := h.Advance(ctx, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := h.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	h.Publisher.Take(config.TopicSlurmCommands)
	return h, ctx
}

// TestAttackForgedControllerReport: job and node power reports are
// accepted only with the identity token of the cluster's Slurm controller
// VM: without one, with a node's token, with a token for another payload,
// or from a VM of the controller's name elsewhere, they are refused (logged,
// counted, acknowledged) and Compute is asked for nothing.
func TestAttackForgedControllerReport(t *testing.T) {
	ctlName := strings.TrimPrefix(harness.ControllerVM, "zones/"+zone+"/instances/")
	pending := marshal(t, event.Job{Header: event.Header{Version: 1, Type: event.TypeJobPending, Cluster: "flexvm"},
		JobID: "77", Partition: "a3u", NodeCount: 2})
	suspend := marshal(t, event.Node{Header: event.Header{Version: 1, Type: event.TypeNodeSuspend, Cluster: "flexvm"},
		Nodes: []string{"flexvm-a3u-0"}, Reason: "forged"})
	for _, tc := range []struct {
		name  string
		data  []byte
		attrs func(h *harness.Harness) map[string]string
	}{
		{"job.pending without a token", pending, func(*harness.Harness) map[string]string { return nil }},
		{"job.pending with a node's token", pending, func(h *harness.Harness) map[string]string {
			return functest.Token(t, h, harness.Project, zone, "flexvm-a3u-0-g1", "flexvm", pending)
		}},
		{"job.pending with the controller's name in another zone", pending, func(h *harness.Harness) map[string]string {
			return functest.Token(t, h, harness.Project, "us-east1-b", ctlName, "flexvm", pending)
		}},
		{"job.pending with the controller's name in another project", pending, func(h *harness.Harness) map[string]string {
			return functest.Token(t, h, "attacker", zone, ctlName, "flexvm", pending)
		}},
		{"job.pending under the controller's token for another report", pending, func(h *harness.Harness) map[string]string {
			return functest.Token(t, h, harness.Project, zone, ctlName, "flexvm", suspend)
		}},
		{"node.suspend without a token", suspend, func(*harness.Harness) map[string]string { return nil }},
		{"node.suspend with the node's own token", suspend, func(h *harness.Harness) map[string]string {
			return functest.Token(t, h, harness.Project, zone, "flexvm-a3u-0-g1", "flexvm", suspend)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			h, ctx := upAndRunning(t, &logs)
			before, vms := len(h.Sim.ResizeRequestHistory()), strings.Join(h.VMs(), ",")
			e := functest.Eventarc(t, config.TopicJobs, "forged", tc.data, tc.attrs(h), time.Now())
			if err := h.ScaleUp.Handle(ctx, e); err != nil {
				t.Fatalf("Handle = %v, want nil (refused, acknowledged)", err)
			}
			if n := len(h.Sim.ResizeRequestHistory()); n != before {
				t.Errorf("a refused report created %d resize requests", n-before)
			}
			if now := strings.Join(h.VMs(), ","); now != vms {
				t.Errorf("a refused report changed the VMs: %s → %s", vms, now)
			}
			st, _ := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", Jobs: []string{"77"}})
			if st.Jobs["77"] != nil {
				t.Errorf("a refused job.pending was recorded: %+v", st.Jobs["77"])
			}
			if out := logs.String(); !strings.Contains(out, "report refused") || !strings.Contains(out, `"metric":"`+identity.MetricRefused+`"`) {
				t.Errorf("the refusal is not logged and counted:\n%s", out)
			}
		})
	}
	t.Run("genuine job.pending from the controller", func(t *testing.T) {
		h, ctx := upAndRunning(t, &lockedBuffer{})
		before := len(h.Sim.ResizeRequestHistory())
		e := functest.Eventarc(t, config.TopicJobs, "genuine", pending, functest.Token(t, h, harness.Project, zone, ctlName, "flexvm", pending), time.Now())
		if err := h.ScaleUp.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
		if n := len(h.Sim.ResizeRequestHistory()); n == before {
			t.Error("the controller's job.pending created no resize request")
		}
	})
}

// TestAttackForgedBootstrapFailure: a node.bootstrap_failed (which, counted,
// replaces the VM and trips the pool's bootstrap breaker) is accepted only
// from the VM it names.
func TestAttackForgedBootstrapFailure(t *testing.T) {
	data := marshal(t, event.Bootstrap{Header: event.Header{Version: 1, Type: event.TypeBootstrapFail, Cluster: "flexvm"},
		Node: "flexvm-a3u-0", VMName: "flexvm-a3u-0-g1", Step: event.BootstrapStepSlurmd, Error: "forged"})
	for name, attrs := range map[string]func(h *harness.Harness) map[string]string{
		"no token": func(*harness.Harness) map[string]string { return nil },
		"another VM's token": func(h *harness.Harness) map[string]string {
			return functest.Token(t, h, harness.Project, zone, "flexvm-a3u-1-g1", "flexvm", data)
		},
		"the controller": func(h *harness.Harness) map[string]string {
			return functest.Token(t, h, harness.Project, zone, "flexvm-controller", "flexvm", data)
		},
		"token for other data": func(h *harness.Harness) map[string]string {
			return functest.Token(t, h, harness.Project, zone, "flexvm-a3u-0-g1", "flexvm", []byte("{}"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			var logs lockedBuffer
			h, ctx := upAndRunning(t, &logs)
			vms := strings.Join(h.VMs(), ",")
			if err := h.ScaleUp.Handle(ctx, functest.Eventarc(t, config.TopicJobs, "forged", data, attrs(h), time.Now())); err != nil {
				t.Fatal(err)
			}
			if now := strings.Join(h.VMs(), ","); now != vms {
				t.Errorf("a refused bootstrap report changed the VMs: %s → %s", vms, now)
			}
			if !strings.Contains(logs.String(), "report refused") {
				t.Errorf("no refusal logged:\n%s", logs.String())
			}
		})
	}
	t.Run("genuine", func(t *testing.T) {
		var logs lockedBuffer
		h, ctx := upAndRunning(t, &logs)
		if err := h.ScaleUp.Handle(ctx, functest.Eventarc(t, config.TopicJobs, "genuine", data, functest.Token(t, h, harness.Project, zone, "flexvm-a3u-0-g1", "flexvm", data), time.Now())); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(logs.String(), "report refused") {
			t.Errorf("the VM's own report was refused:\n%s", logs.String())
		}
		st, _ := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true})
		if p := st.Pools["a3u"]; p == nil || p.BootstrapFailures == 0 {
			t.Errorf("the VM's own bootstrap failure was not counted: %+v", p)
		}
	})
}
