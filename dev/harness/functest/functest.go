// Package functest holds what the functions' handler tests share: the
// CloudEvent Eventarc delivers for a Pub/Sub message, a store that fails as
// a Firestore outage does, a harness bound to the test, and the example
// cluster spec. It is development tooling (a test helper over
// dev/harness); no production package imports it.
package functest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Eventarc builds the CloudEvent Eventarc delivers for a Pub/Sub message
// (https://github.com/googleapis/google-cloudevents/blob/main/proto/google/events/cloud/pubsub/v1/data.proto):
// type messagePublished, source the topic, and data the push envelope with
// the message's bytes base64-encoded and its attributes.
func Eventarc(t *testing.T, topic, id string, data []byte, attrs map[string]string, published time.Time) cloudevents.Event {
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

// FailingStore fails every transaction and read with Err, as a Firestore
// outage does.
type FailingStore struct {
	store.Store
	Err error
}

// Update fails.
func (f FailingStore) Update(ctx context.Context, s store.Scope, fn func(*model.State) error) error {
	return f.Err
}

// Read fails.
func (f FailingStore) Read(ctx context.Context, s store.Scope) (*model.State, error) {
	return nil, f.Err
}

// Clusters fails.
func (f FailingStore) Clusters(ctx context.Context) ([]string, error) { return nil, f.Err }

// New returns a harness over st, closed when the test ends, and a context
// that ends with it (at most a minute).
func New(t *testing.T, st store.Store) (*harness.Harness, context.Context) {
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

// NewVerifying returns a harness whose functions verify the reports'
// identity tokens as deployed ones do (harness.Options.VerifyTokens), with
// its log, and a context as New's.
func NewVerifying(t *testing.T, log io.Writer) (*harness.Harness, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h, err := harness.New(ctx, harness.Options{VerifyTokens: true, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, ctx
}

// Token returns the identity token attributes that VM name in zone of
// project would send for (cluster, data): signed by the simulator's key,
// as its metadata server signs them.
func Token(t *testing.T, h *harness.Harness, project, zone, name, cluster string, data []byte) map[string]string {
	t.Helper()
	iss, err := h.Sim.Issuer()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := iss.Token(computesim.IdentityVM{Project: project, ProjectNumber: "4242", Zone: zone, Name: name, ID: 1,
		Created: time.Now(), Email: "node@" + project + ".iam.gserviceaccount.com"}, identity.Audience(cluster, data), true)
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := identity.Attributes(tok)
	if err != nil {
		t.Fatal(err)
	}
	return attrs
}

// ExampleSpec parses the repository's examples/cluster_config.json.
func ExampleSpec(t *testing.T) *spec.Cluster {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("functest: no caller information to find the repository root")
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "cluster_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
