package reconcile_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

func tickPayload(t *testing.T, cluster string) []byte {
	t.Helper()
	b, err := json.Marshal(event.Tick{Header: event.Header{Version: 1, Type: event.TypeReconcileTick, Cluster: cluster}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHandleTick: a reconcile tick records the VM Compute created for the
// static node as running.
func TestHandleTick(t *testing.T) {
	h, ctx := functest.New(t, nil)
	c := functest.ExampleSpec(t)
	if err := h.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := h.Advance(ctx, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(h.VMs()) != 1 {
		t.Fatalf("VMs in Compute: %v, want the static node's", h.VMs())
	}
	before, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := before.Nodes["flexvm-a3u-0"].Phase; p != model.PhaseRequested {
		t.Fatalf("before the tick the node is %s, want requested (nothing else may record the VM in this test)", p)
	}
	e := functest.Eventarc(t, config.TopicReconcile, "tick-1", tickPayload(t, ""), nil, time.Now())
	if err := h.Reconcile.Handle(ctx, e); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	after, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := after.Nodes["flexvm-a3u-0"]; n.Phase != model.PhaseRunning || n.VMID == "" {
		t.Errorf("after the tick node flexvm-a3u-0 = %s (vm id %q), want running with the VM's id", n.Phase, n.VMID)
	}
}

// TestHandleMalformedIsAcknowledged: a payload that is no tick or snapshot
// returns nil, so Pub/Sub does not redeliver it.
func TestHandleMalformedIsAcknowledged(t *testing.T) {
	h, ctx := functest.New(t, nil)
	for name, data := range map[string][]byte{
		"not JSON":   []byte("{"),
		"wrong type": []byte(`{"version":1,"type":"job.pending","cluster":"flexvm"}`),
	} {
		if err := h.Reconcile.Handle(ctx, functest.Eventarc(t, config.TopicReconcile, "m-"+name, data, nil, time.Now())); err != nil {
			t.Errorf("%s: Handle = %v, want nil (acknowledged)", name, err)
		}
	}
}

// TestHandleTransientFailureIsRetried: a store outage returns an error, so
// the tick is redelivered.
func TestHandleTransientFailureIsRetried(t *testing.T) {
	outage := errors.New("firestore: unavailable")
	h, ctx := functest.New(t, functest.FailingStore{Store: store.NewMemory(time.Now), Err: outage})
	err := h.Reconcile.Handle(ctx, functest.Eventarc(t, config.TopicReconcile, "tick-1", tickPayload(t, ""), nil, time.Now()))
	if err == nil || !errors.Is(err, outage) {
		t.Fatalf("Handle with the store down = %v, want an error wrapping %v", err, outage)
	}
}
