package expiry_test

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
	"github.com/flexslurm/flexslurm/shared/harness"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// auditEntry is a LogEntry as a Logging sink publishes it
// (https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry):
// the system event logged when Compute deletes a VM at its max run duration.
func auditEntry(t *testing.T, vm string, at time.Time) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"protoPayload": map[string]any{
			"@type":              "type.googleapis.com/google.cloud.audit.AuditLog",
			"serviceName":        "compute.googleapis.com",
			"methodName":         "compute.instances.deferredDelete",
			"resourceName":       "projects/" + harness.Project + "/zones/us-central1-a/instances/" + vm,
			"authenticationInfo": map[string]any{"principalEmail": "system@google.com"},
		},
		"insertId":  "e-" + vm,
		"resource":  map[string]any{"type": "gce_instance", "labels": map[string]any{"instance_id": "123", "zone": "us-central1-a", "project_id": harness.Project}},
		"timestamp": at.UTC().Format(time.RFC3339Nano),
		"logName":   "projects/" + harness.Project + "/logs/cloudaudit.googleapis.com%2Fsystem_event",
		"operation": map[string]any{"id": "systemevent-1", "producer": "compute.instances.deferredDelete", "first": true, "last": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHandleExpiry: the end-of-run deletion of the static node's VM ends
// its generation and asks for the next one.
func TestHandleExpiry(t *testing.T) {
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
	h.TakeAudit()
	e := eventarc(t, config.TopicExpiry, "a-1", auditEntry(t, "flexvm-a3u-0-g1", h.Clock.Now()), map[string]string{"logging.googleapis.com/timestamp": h.Clock.Now().Format(time.RFC3339Nano)}, time.Now())
	if err := h.Expiry.Handle(ctx, e); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Nodes["flexvm-a3u-0"]; n.Generation != 2 || n.Phase != model.PhaseRequested {
		t.Errorf("after its VM expired the static node is generation %d %s, want generation 2 requested", n.Generation, n.Phase)
	}
}

// TestHandleMalformedIsAcknowledged: entries that can never succeed, and
// entries about VMs that are not flexslurm's, return nil.
func TestHandleMalformedIsAcknowledged(t *testing.T) {
	h, ctx := newHarness(t, nil)
	for name, data := range map[string][]byte{
		"not JSON":          []byte("{"),
		"not a compute VM":  []byte(`{"protoPayload":{"serviceName":"storage.googleapis.com","methodName":"storage.objects.delete","resourceName":"projects/_/buckets/b"}}`),
		"someone else's VM": auditEntry(t, "web-server-1", time.Now()),
	} {
		if err := h.Expiry.Handle(ctx, eventarc(t, config.TopicExpiry, "m-"+name, data, nil, time.Now())); err != nil {
			t.Errorf("%s: Handle = %v, want nil (acknowledged)", name, err)
		}
	}
	if ids, _ := h.Store.Clusters(ctx); len(ids) != 0 {
		t.Errorf("ignored entries committed clusters %v", ids)
	}
}

// TestHandleTransientFailureIsRetried: a store outage returns an error, so
// the entry is redelivered.
func TestHandleTransientFailureIsRetried(t *testing.T) {
	outage := errors.New("firestore: unavailable")
	h, ctx := newHarness(t, failingStore{Store: store.NewMemory(time.Now), err: outage})
	err := h.Expiry.Handle(ctx, eventarc(t, config.TopicExpiry, "a-1", auditEntry(t, "flexvm-a3u-0-g1", time.Now()), nil, time.Now()))
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
