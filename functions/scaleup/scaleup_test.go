package scaleup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
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
	if len(rrs) != 1 || rrs[0].Name != "rr-flexvm-a3u-0-g1" || rrs[0].MIG != n.MIG || n.MIG != naming.RequestMIG("flexvm", "a3u", "rr-flexvm-a3u-0-g1") {
		t.Fatalf("resize requests in Compute after cluster.applied: %+v, want rr-flexvm-a3u-0-g1 in its own MIG %s", rrs, n.MIG)
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

// TestHandleUnbuildableTemplateIsMalformed: a cluster.applied whose pool's
// instance template cannot be built from the spec and settings it carries
// (here a node_image with no resolved image) is malformed: acknowledged,
// logged naming the pool, nothing committed and nothing asked of Compute.
func TestHandleUnbuildableTemplateIsMalformed(t *testing.T) {
	var logs lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h, err := harness.New(ctx, harness.Options{Log: &logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	c := functest.ExampleSpec(t)
	for i := range c.NodePools {
		if c.NodePools[i].ID == "a3u" {
			c.NodePools[i].NodeImage = "projects/mine/global/images/family/gpu"
		}
	}
	e := functest.Eventarc(t, config.TopicClusterSpec, "m-1", appliedPayload(t, h, c), map[string]string{"type": event.TypeClusterApply}, time.Now())
	if err := h.ScaleUp.Handle(ctx, e); err != nil {
		t.Fatalf("Handle = %v, want nil (acknowledged)", err)
	}
	if ids, _ := h.Store.Clusters(ctx); len(ids) != 0 {
		t.Errorf("an unbuildable template committed clusters %v", ids)
	}
	if migs := h.Sim.MIGs(); len(migs) != 0 {
		t.Errorf("an unbuildable template created MIGs %v", migs)
	}
	if out := logs.String(); !strings.Contains(out, "malformed event acknowledged") || !strings.Contains(out, "instance template of pool a3u") {
		t.Errorf("log does not say the event is malformed for pool a3u's template:\n%s", out)
	}
}

// lockedBuffer is a log destination safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
