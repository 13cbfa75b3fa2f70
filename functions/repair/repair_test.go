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
	b, err := json.Marshal(event.Health{Header: event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: cluster},
		Node: node, Generation: 1, VMName: node + "-g1", Verdict: event.VerdictFail, Reasons: []string{"GPU 3: XID 79 (fallen off the bus)"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHandleHealthFailure: a FAIL verdict on a running node records the
// repair and asks the agent to drain the node.
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
	e := functest.Eventarc(t, config.TopicHealthFailure, "h-1", healthPayload(t, c.ID, "flexvm-a3u-0"), nil, time.Now())
	if err := h.Repair.Handle(ctx, e); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Nodes["flexvm-a3u-0"]; n.Repair == model.RepairNone {
		t.Errorf("after a FAIL verdict node flexvm-a3u-0 is not under repair: %+v", n)
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
