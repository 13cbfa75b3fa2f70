package repair_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
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
	h, ctx := newHarness(t, nil)
	c := exampleSpec(t)
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
	e := eventarc(t, config.TopicHealthFailure, "h-1", healthPayload(t, c.ID, "flexvm-a3u-0"), nil, time.Now())
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
	h, ctx := newHarness(t, nil)
	for name, data := range map[string][]byte{
		"not JSON":        []byte("{"),
		"not a node name": healthPayload(t, "flexvm", "nonode"),
	} {
		if err := h.Repair.Handle(ctx, eventarc(t, config.TopicHealthFailure, "m-"+name, data, nil, time.Now())); err != nil {
			t.Errorf("%s: Handle = %v, want nil (acknowledged)", name, err)
		}
	}
}

// TestHandleTransientFailureIsRetried: a store outage returns an error, so
// the event is redelivered.
func TestHandleTransientFailureIsRetried(t *testing.T) {
	outage := errors.New("firestore: unavailable")
	h, ctx := newHarness(t, failingStore{Store: store.NewMemory(time.Now), err: outage})
	err := h.Repair.Handle(ctx, eventarc(t, config.TopicHealthFailure, "h-1", healthPayload(t, "flexvm", "flexvm-a3u-0"), nil, time.Now()))
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
