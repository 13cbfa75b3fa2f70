package repair_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

func healthPayload(t *testing.T, cluster, node string) []byte {
	t.Helper()
	return hookPayload(t, cluster, node, event.HealthHookEpilog)
}

func hookPayload(t *testing.T, cluster, node, hook string) []byte {
	t.Helper()
	b, err := json.Marshal(event.Health{Header: event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: cluster}, Hook: hook,
		Node: node, Generation: 1, VMName: node + "-g1", Verdict: event.VerdictFail, Reasons: []string{"GPU 3: XID 79 (fallen off the bus)"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHandleHealthFailure: a FAIL verdict of the epilog on a running node
// records the repair, which names the epilog, asks the agent to drain the
// node, and stores a HEALTH_CHECK_FAILED naming the epilog.
func TestHandleHealthFailure(t *testing.T) {
	h, ctx := functest.New(t, nil)
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
	// A hook that is none of the node-side hooks is a malformed report:
	// acknowledged, acted on in nothing.
	bad := functest.Eventarc(t, config.TopicHealthFailure, "h-0", hookPayload(t, c.ID, "flexvm-a3u-0", "prolog-ctld"), nil, time.Now())
	if err := h.Repair.Handle(ctx, bad); err != nil {
		t.Fatalf("Handle of an unknown hook's report = %v, want nil (acknowledged)", err)
	}
	if st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true}); err != nil || st.Nodes["flexvm-a3u-0"].Repair != model.RepairNone {
		t.Fatalf("after an unknown hook's report: %v, node %+v, want no repair", err, st.Nodes["flexvm-a3u-0"])
	}
	e := functest.Eventarc(t, config.TopicHealthFailure, "h-1", healthPayload(t, c.ID, "flexvm-a3u-0"), nil, time.Now())
	if err := h.Repair.Handle(ctx, e); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Nodes["flexvm-a3u-0"]; n.Repair == model.RepairNone || n.RepairCheck != event.HealthHookEpilog {
		t.Errorf("after a FAIL verdict of the epilog node flexvm-a3u-0 is not under repair by it: %+v", n)
	}
	evs, err := h.Store.(store.EventLog).Events(ctx, c.ID, store.EventFilter{Type: "HEALTH_CHECK_FAILED"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Check != event.HealthHookEpilog || !strings.HasPrefix(evs[0].Message, "epilog health check failed on flexvm-a3u-0-g1: GPU 3") {
		t.Errorf("HEALTH_CHECK_FAILED events %+v, want one naming the epilog", evs)
	}
	drained := false
	for _, m := range h.Publisher.Take(config.TopicSlurmCommands) {
		if strings.Contains(string(m.Data), `"drain"`) && strings.Contains(string(m.Data), "flexvm-a3u-0") {
			drained = true
		}
	}
	if !drained {
		t.Error("no drain of flexvm-a3u-0 was published to the agent")
	}
}

// TestHandleMalformedIsAcknowledged: what can never succeed returns nil.
func TestHandleMalformedIsAcknowledged(t *testing.T) {
	h, ctx := functest.New(t, nil)
	for name, data := range map[string][]byte{
		"not JSON":        []byte("{"),
		"not a node name": healthPayload(t, "flexvm", "nonode"),
		"an unknown hook": hookPayload(t, "flexvm", "flexvm-a3u-0", "prolog-ctld"),
	} {
		if err := h.Repair.Handle(ctx, functest.Eventarc(t, config.TopicHealthFailure, "m-"+name, data, nil, time.Now())); err != nil {
			t.Errorf("%s: Handle = %v, want nil (acknowledged)", name, err)
		}
	}
}

// TestHandleTransientFailureIsRetried: a store outage returns an error, so
// the event is redelivered.
func TestHandleTransientFailureIsRetried(t *testing.T) {
	outage := errors.New("firestore: unavailable")
	h, ctx := functest.New(t, functest.FailingStore{Store: store.NewMemory(time.Now), Err: outage})
	err := h.Repair.Handle(ctx, functest.Eventarc(t, config.TopicHealthFailure, "h-1", healthPayload(t, "flexvm", "flexvm-a3u-0"), nil, time.Now()))
	if err == nil || !errors.Is(err, outage) {
		t.Fatalf("Handle with the store down = %v, want an error wrapping %v", err, outage)
	}
}
