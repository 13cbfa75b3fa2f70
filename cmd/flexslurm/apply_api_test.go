package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/shared/api"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// pushToScaleUp delivers what the API publishes to ScaleUp at once, as a
// push subscription would.
type pushToScaleUp struct{ h *harness.Harness }

func (p pushToScaleUp) Publish(ctx context.Context, topic string, data []byte, _ map[string]string) (string, error) {
	id := p.h.NewID()
	return id, p.h.Deliver(ctx, topic, id, data)
}

func apiServer(t *testing.T, project string) (*httptest.Server, *harness.Harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h, err := harness.New(ctx, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	srv := httptest.NewServer(api.New(api.Deps{
		Store: h.Store, State: store.NewMemoryAPIState(), Publisher: pushToScaleUp{h}, Project: project,
		NodeSettings: func(_ context.Context, c *spec.Cluster) (nodeconfig.Settings, error) {
			return harness.NodeSettings(c), nil
		},
		Repair: api.RunnerRepair(h.Runner),
		Log:    slog.New(slog.DiscardHandler),
	}))
	t.Cleanup(srv.Close)
	return srv, h
}

// apply --api creates the cluster through the API, then updates it, and
// waits each time for the operation that ScaleUp's application completes.
func TestApplyThroughTheAPI(t *testing.T) {
	srv, h := apiServer(t, "flexslurm-demo")
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"apply", "--api", srv.URL, "--wait", "30s", "../../examples/cluster_config.json"}, &stdout, &stderr); rc != 0 {
		t.Fatalf("apply --api: rc %d\nstdout: %s\nstderr: %s", rc, stdout.String(), stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "cluster flexvm: create started, operation projects/flexslurm-demo/locations/us-central1/operations/") ||
		!strings.Contains(out, "cluster flexvm: create done") {
		t.Fatalf("stdout: %s", out)
	}
	st, err := h.Store.Read(context.Background(), store.Scope{Cluster: "flexvm"})
	if err != nil || st.Cluster == nil {
		t.Fatalf("no cluster record after apply --api: %v", err)
	}
	stdout.Reset()
	if rc := run([]string{"apply", "--api", srv.URL, "../../examples/cluster_config.json"}, &stdout, &stderr); rc != 0 || !strings.Contains(stdout.String(), "update done") {
		t.Fatalf("second apply --api: rc %d\nstdout: %s\nstderr: %s", rc, stdout.String(), stderr.String())
	}
}

// The API's refusal is reported with its status and message.
func TestApplyThroughTheAPIRefused(t *testing.T) {
	srv, _ := apiServer(t, "another-project")
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"apply", "--api", srv.URL, "../../examples/cluster_config.json"}, &stdout, &stderr); rc != 1 || !strings.Contains(stderr.String(), "NOT_FOUND") {
		t.Fatalf("rc %d, stderr %s", rc, stderr.String())
	}
	if rc := run([]string{"apply", "--api", srv.URL, "--node-settings", "x.json", "../../examples/cluster_config.json"}, &stdout, &stderr); rc != 2 {
		t.Fatalf("--api with --node-settings: rc %d", rc)
	}
}
