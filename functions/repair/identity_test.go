package repair_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// runningNode brings flexvm-a3u-0 up (generation 1) on a harness that
// verifies identity tokens, and returns its pool's zone.
func runningNode(t *testing.T, h *harness.Harness, ctx context.Context) string {
	t.Helper()
	c := functest.ExampleSpec(t)
	if err := h.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := h.Advance(ctx, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := h.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	h.Publisher.Take(config.TopicSlurmCommands)
	p, _ := c.Pool("a3u")
	return p.Zone
}

// untouched fails unless flexvm-a3u-0 is neither under repair nor drained
// and its VM is alive.
func untouched(t *testing.T, h *harness.Harness, ctx context.Context) {
	t.Helper()
	st, err := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Nodes["flexvm-a3u-0"]; n == nil || n.Repair != model.RepairNone || n.Generation != 1 {
		t.Errorf("a refused report changed node flexvm-a3u-0: %+v", n)
	}
	for _, m := range h.Publisher.Take(config.TopicSlurmCommands) {
		t.Errorf("a refused report sent Slurm a command: %s", m.Data)
	}
	alive := false
	for _, vm := range h.VMs() {
		alive = alive || vm == "flexvm-a3u-0-g1"
	}
	if !alive {
		t.Errorf("a refused report deleted VM flexvm-a3u-0-g1: VMs %v", h.VMs())
	}
}

// TestAttackForgedHealthFailure: a FAIL claiming drained (which, accepted,
// deletes the VM at once) that its VM did not send is refused — logged
// with the reason and counted, acknowledged — and the node and its VM are
// left alone; the VM's own report is acted on.
func TestAttackForgedHealthFailure(t *testing.T) {
	fail := func(drained bool, gen int64, vm string) []byte {
		return mustJSON(t, event.Health{Header: event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: "flexvm"},
			Node: "flexvm-a3u-0", Generation: gen, VMName: vm, Verdict: event.VerdictFail, Drained: drained, Reasons: []string{"forged"}})
	}
	genuineData := fail(false, 1, "flexvm-a3u-0-g1")
	forgedData := fail(true, 1, "flexvm-a3u-0-g1")
	for _, tc := range []struct {
		name  string
		data  []byte
		attrs func(h *harness.Harness, zone string) map[string]string
	}{
		{"no token", forgedData, func(*harness.Harness, string) map[string]string { return nil }},
		{"another node's VM", forgedData, func(h *harness.Harness, zone string) map[string]string {
			return functest.Token(t, h, harness.Project, zone, "flexvm-a3u-1-g1", "flexvm", forgedData)
		}},
		{"another node's VM, report naming no VM", fail(true, 0, ""), func(h *harness.Harness, zone string) map[string]string {
			return functest.Token(t, h, harness.Project, zone, "flexvm-a3u-1-g1", "flexvm", fail(true, 0, ""))
		}},
		// The report names node flexvm-a3u-0 but, as its VM, the sender's
		// own: the token matches the VM named, which is not the node's.
		{"another node's VM, named as the report's VM", fail(true, 0, "flexvm-a3u-1-g1"), func(h *harness.Harness, zone string) map[string]string {
			return functest.Token(t, h, harness.Project, zone, "flexvm-a3u-1-g1", "flexvm", fail(true, 0, "flexvm-a3u-1-g1"))
		}},
		{"the controller", forgedData, func(h *harness.Harness, zone string) map[string]string {
			return functest.Token(t, h, harness.Project, zone, "flexvm-controller", "flexvm", forgedData)
		}},
		{"same VM name in another project", forgedData, func(h *harness.Harness, zone string) map[string]string {
			return functest.Token(t, h, "attacker", zone, "flexvm-a3u-0-g1", "flexvm", forgedData)
		}},
		{"same VM name in another zone", forgedData, func(h *harness.Harness, zone string) map[string]string {
			return functest.Token(t, h, harness.Project, "europe-west4-b", "flexvm-a3u-0-g1", "flexvm", forgedData)
		}},
		{"genuine token, payload swapped to drained", forgedData, func(h *harness.Harness, zone string) map[string]string {
			return functest.Token(t, h, harness.Project, zone, "flexvm-a3u-0-g1", "flexvm", genuineData)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			h, ctx := functest.NewVerifying(t, &syncWriter{w: &logs})
			zone := runningNode(t, h, ctx)
			e := functest.Eventarc(t, config.TopicHealthFailure, "forged", tc.data, tc.attrs(h, zone), time.Now())
			if err := h.Repair.Handle(ctx, e); err != nil {
				t.Fatalf("Handle = %v, want nil (refused and acknowledged)", err)
			}
			untouched(t, h, ctx)
			out := logs.String()
			if !strings.Contains(out, "report refused") || !strings.Contains(out, `"metric":"`+identity.MetricRefused+`"`) {
				t.Errorf("the refusal is not logged and counted:\n%s", out)
			}
			if strings.Contains(out, "eyJ") {
				t.Errorf("the log holds a token:\n%s", out)
			}
		})
	}
	t.Run("genuine", func(t *testing.T) {
		h, ctx := functest.NewVerifying(t, nil)
		zone := runningNode(t, h, ctx)
		e := functest.Eventarc(t, config.TopicHealthFailure, "genuine", genuineData, functest.Token(t, h, harness.Project, zone, "flexvm-a3u-0-g1", "flexvm", genuineData), time.Now())
		if err := h.Repair.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
		st, _ := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true})
		if n := st.Nodes["flexvm-a3u-0"]; n.Repair == model.RepairNone {
			t.Errorf("the VM's own FAIL was not acted on: %+v", n)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syncWriter serialises writes to a log destination.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
