package scaleup_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/harness"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// TestHandleClusterApplied: a cluster.applied event commits the cluster, its
// pools and static nodes, and asks Compute for the static node's VM; the
// same event redelivered changes nothing.
func TestHandleClusterApplied(t *testing.T) {
	h, ctx := newHarness(t, nil)
	c := exampleSpec(t)
	e := eventarc(t, config.TopicClusterSpec, "m-1", appliedPayload(t, h, c), map[string]string{"type": event.TypeClusterApply}, time.Now())
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
	h, ctx := newHarness(t, nil)
	for name, data := range map[string][]byte{
		"not JSON":     []byte("{"),
		"unknown type": []byte(`{"version":1,"type":"job.exploded","cluster":"flexvm"}`),
	} {
		e := eventarc(t, config.TopicJobs, "m-"+name, data, nil, time.Now())
		if err := h.ScaleUp.Handle(ctx, e); err != nil {
			t.Errorf("%s: Handle = %v, want nil (acknowledged)", name, err)
		}
	}
	wrongType := eventarc(t, config.TopicJobs, "m-ce", []byte(`{}`), nil, time.Now())
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
	h, ctx := newHarness(t, failingStore{Store: store.NewMemory(time.Now), err: outage})
	c := exampleSpec(t)
	e := eventarc(t, config.TopicClusterSpec, "m-1", appliedPayload(t, h, c), nil, time.Now())
	err := h.ScaleUp.Handle(ctx, e)
	if err == nil || !errors.Is(err, outage) {
		t.Fatalf("Handle with the store down = %v, want an error wrapping %v", err, outage)
	}
}

// eventarc builds the CloudEvent Eventarc delivers for a Pub/Sub message
// (https://github.com/googleapis/google-cloudevents/blob/main/proto/google/events/cloud/pubsub/v1/data.proto):
// type messagePublished, source the topic, and data the push envelope with
// the message's bytes base64-encoded and its attributes.
func eventarc(t *testing.T, topic, id string, data []byte, attrs map[string]string, published time.Time) cloudevents.Event {
	t.Helper()
	env, err := json.Marshal(map[string]any{
		"message": map[string]any{
			"@type":       "type.googleapis.com/google.pubsub.v1.PubsubMessage",
			"data":        base64.StdEncoding.EncodeToString(data),
			"attributes":  attrs,
			"messageId":   id,
			"publishTime": published.UTC().Format(time.RFC3339Nano),
		},
		"subscription": "projects/" + harness.Project + "/subscriptions/eventarc-" + topic,
	})
	if err != nil {
		t.Fatal(err)
	}
	e := cloudevents.New()
	e.SetID(id)
	e.SetType("google.cloud.pubsub.topic.v1.messagePublished")
	e.SetSource("//pubsub.googleapis.com/projects/" + harness.Project + "/topics/" + topic)
	e.SetTime(published)
	if err := e.SetData(cloudevents.ApplicationJSON, json.RawMessage(env)); err != nil {
		t.Fatal(err)
	}
	return e
}

// failingStore fails every transaction and read, as a Firestore outage does.
type failingStore struct {
	store.Store
	err error
}

func (f failingStore) Update(ctx context.Context, s store.Scope, fn func(*model.State) error) error {
	return f.err
}
func (f failingStore) Read(ctx context.Context, s store.Scope) (*model.State, error) {
	return nil, f.err
}
func (f failingStore) Clusters(ctx context.Context) ([]string, error) { return nil, f.err }

func newHarness(t *testing.T, st store.Store) (*harness.Harness, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h, err := harness.New(ctx, harness.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, ctx
}

func exampleSpec(t *testing.T) *spec.Cluster {
	t.Helper()
	data, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
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
