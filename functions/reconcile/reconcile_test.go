package reconcile_test

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
	h, ctx := newHarness(t, nil)
	c := exampleSpec(t)
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
	e := eventarc(t, config.TopicReconcile, "tick-1", tickPayload(t, ""), nil, time.Now())
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
	h, ctx := newHarness(t, nil)
	for name, data := range map[string][]byte{
		"not JSON":   []byte("{"),
		"wrong type": []byte(`{"version":1,"type":"job.pending","cluster":"flexvm"}`),
	} {
		if err := h.Reconcile.Handle(ctx, eventarc(t, config.TopicReconcile, "m-"+name, data, nil, time.Now())); err != nil {
			t.Errorf("%s: Handle = %v, want nil (acknowledged)", name, err)
		}
	}
}

// TestHandleTransientFailureIsRetried: a store outage returns an error, so
// the tick is redelivered.
func TestHandleTransientFailureIsRetried(t *testing.T) {
	outage := errors.New("firestore: unavailable")
	h, ctx := newHarness(t, failingStore{Store: store.NewMemory(time.Now), err: outage})
	err := h.Reconcile.Handle(ctx, eventarc(t, config.TopicReconcile, "tick-1", tickPayload(t, ""), nil, time.Now()))
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
