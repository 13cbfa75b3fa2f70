package expiry_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/model"
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
	h.TakeAudit()
	// Compute ends the VM (STOPPING, then gone): the entry is corroborated.
	if err := h.Sim.ExpireNow("us-central1-a", "flexvm-a3u-0-g1"); err != nil {
		t.Fatal(err)
	}
	e := functest.Eventarc(t, config.TopicExpiry, "a-1", auditEntry(t, "flexvm-a3u-0-g1", h.Clock.Now()), map[string]string{"logging.googleapis.com/timestamp": h.Clock.Now().Format(time.RFC3339Nano)}, time.Now())
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
	h, ctx := functest.New(t, nil)
	for name, data := range map[string][]byte{
		"not JSON":          []byte("{"),
		"not a compute VM":  []byte(`{"protoPayload":{"serviceName":"storage.googleapis.com","methodName":"storage.objects.delete","resourceName":"projects/_/buckets/b"}}`),
		"someone else's VM": auditEntry(t, "web-server-1", time.Now()),
	} {
		if err := h.Expiry.Handle(ctx, functest.Eventarc(t, config.TopicExpiry, "m-"+name, data, nil, time.Now())); err != nil {
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
	h, ctx := functest.New(t, functest.FailingStore{Store: store.NewMemory(time.Now), Err: outage})
	err := h.Expiry.Handle(ctx, functest.Eventarc(t, config.TopicExpiry, "a-1", auditEntry(t, "flexvm-a3u-0-g1", time.Now()), nil, time.Now()))
	if err == nil || !errors.Is(err, outage) {
		t.Fatalf("Handle with the store down = %v, want an error wrapping %v", err, outage)
	}
}

// TestAttackForgedAuditLogEntry: the node account holds
// roles/logging.logWriter on the whole project (deploy/node.tf), so the
// root of any node VM can write a log entry of its choosing. An entry
// shaped as Compute's system event for another node's VM (here its max run
// duration) reaches the expiry sink if Cloud Logging accepts a
// user-written entry under the log name
// cloudaudit.googleapis.com%2Fsystem_event with an AuditLog protoPayload
// (not settled by the pages read). The Expiry asks Compute first
// (apply.CorroborateEnd): the VM runs, so the entry is refused and the
// node keeps its generation and its VM.
func TestAttackForgedAuditLogEntry(t *testing.T) {
	h, ctx := functest.New(t, nil)
	c := functest.ExampleSpec(t)
	if err := h.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := h.Advance(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := h.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	n0 := before.Nodes["flexvm-a3u-0"]
	if n0 == nil || n0.VMName != "flexvm-a3u-0-g1" {
		t.Fatalf("setup: static node %+v, want its VM flexvm-a3u-0-g1", n0)
	}
	// The VM runs; the entry says Compute deleted it.
	e := functest.Eventarc(t, config.TopicExpiry, "forged-1", auditEntry(t, "flexvm-a3u-0-g1", h.Clock.Now()), nil, time.Now())
	if err := h.Expiry.Handle(ctx, e); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	after, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := after.Nodes["flexvm-a3u-0"]; n.Generation != n0.Generation || n.Phase != n0.Phase {
		t.Errorf("a forged audit entry about a running VM moved its node from generation %d %s to generation %d %s", n0.Generation, n0.Phase, n.Generation, n.Phase)
	}
}
