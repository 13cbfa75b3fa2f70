package scaleup_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// TestHandleClusterApplied: a cluster.applied event commits the cluster, its
// pools and static nodes, and asks Compute for the static node's VM; the
// same event redelivered changes nothing.
func TestHandleClusterApplied(t *testing.T) {
	h, ctx := functest.New(t, nil)
	c := functest.ExampleSpec(t)
	e := functest.Eventarc(t, config.TopicClusterSpec, "m-1", appliedPayload(t, h, c), map[string]string{"type": event.TypeClusterApply}, time.Now())
	if err := h.ScaleUp.Handle(ctx, e); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	n := st.Nodes["flexvm-a3u-0"]
	if st.Pools["a3u"] == nil || n == nil || n.Phase != model.PhaseRequested || n.ResizeRequest != "rr-flexvm-a3u-0-g1" {
		t.Fatalf("after cluster.applied: pool %+v, node %+v; want pool a3u and node flexvm-a3u-0 requested by rr-flexvm-a3u-0-g1", st.Pools["a3u"], n)
	}
	rrs := h.Sim.ResizeRequestHistory()
	if len(rrs) != 1 || rrs[0].Name != "rr-flexvm-a3u-0-g1" || rrs[0].MIG != "fs-flexvm-a3u" {
		t.Fatalf("resize requests in Compute after cluster.applied: %+v, want rr-flexvm-a3u-0-g1 in fs-flexvm-a3u", rrs)
	}
	if err := h.ScaleUp.Handle(ctx, e); err != nil {
		t.Fatalf("redelivery: %v", err)
	}
	if again := h.Sim.ResizeRequestHistory(); len(again) != 1 {
		t.Errorf("resize requests after a redelivery: %v, want the same one", again)
	}
}

// TestHandleMalformedIsAcknowledged: what can never succeed returns nil, so
// Pub/Sub does not redeliver it, and commits nothing.
func TestHandleMalformedIsAcknowledged(t *testing.T) {
	h, ctx := functest.New(t, nil)
	for name, data := range map[string][]byte{
		"not JSON":     []byte("{"),
		"unknown type": []byte(`{"version":1,"type":"job.exploded","cluster":"flexvm"}`),
	} {
		e := functest.Eventarc(t, config.TopicJobs, "m-"+name, data, nil, time.Now())
		if err := h.ScaleUp.Handle(ctx, e); err != nil {
			t.Errorf("%s: Handle = %v, want nil (acknowledged)", name, err)
		}
	}
	wrongType := functest.Eventarc(t, config.TopicJobs, "m-ce", []byte(`{}`), nil, time.Now())
	wrongType.SetType("google.cloud.storage.object.v1.finalized")
	if err := h.ScaleUp.Handle(ctx, wrongType); err != nil {
		t.Errorf("a CloudEvent that is not a Pub/Sub message: Handle = %v, want nil", err)
	}
	if ids, _ := h.Store.Clusters(ctx); len(ids) != 0 {
		t.Errorf("malformed events committed clusters %v", ids)
	}
}

// TestHandleTransientFailureIsRetried: a store outage returns an error, so
// the event is redelivered.
func TestHandleTransientFailureIsRetried(t *testing.T) {
	outage := errors.New("firestore: unavailable")
	h, ctx := functest.New(t, functest.FailingStore{Store: store.NewMemory(time.Now), Err: outage})
	c := functest.ExampleSpec(t)
	e := functest.Eventarc(t, config.TopicClusterSpec, "m-1", appliedPayload(t, h, c), nil, time.Now())
	err := h.ScaleUp.Handle(ctx, e)
	if err == nil || !errors.Is(err, outage) {
		t.Fatalf("Handle with the store down = %v, want an error wrapping %v", err, outage)
	}
}

func appliedPayload(t *testing.T, h *harness.Harness, c *spec.Cluster) []byte {
	t.Helper()
	eff, err := c.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	node := harness.NodeSettings(c)
	b, err := json.Marshal(event.Cluster{Header: event.Header{Version: 1, Type: event.TypeClusterApply, Cluster: c.ID}, Spec: eff, Node: &node, AppliedAt: h.Clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
