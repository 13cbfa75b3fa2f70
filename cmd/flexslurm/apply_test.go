package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/config"
)

const nodeSettingsJSON = `{
  "image": "projects/schedmd-slurm-public/global/images/family/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570",
  "service_account": "flexslurm-node@p.iam.gserviceaccount.com",
  "conf_server": "flexvm-controller",
  "munge_key_secret": "projects/p/secrets/flexvm-munge-key/versions/latest",
  "home": {"type": "nfs", "source": "10.0.0.2:/home", "dir": "/home"},
  "topics": {"jobs": "job-pending", "health": "health-failure"},
  "binary_url": "gs://flexslurm-releases/flexslurm"
}`

// apply resolves images through the Compute API before it publishes
// anything: a pool's node_image that Compute does not have fails the
// command, naming the pool and the JSON path.
func TestApplyResolvesImagesFirst(t *testing.T) {
	sim := computesim.New(computesim.Options{}, clock.NewManual(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Setenv(config.EnvComputeEndpoint, srv.URL)
	dir := t.TempDir()
	settings := filepath.Join(dir, "node.json")
	if err := os.WriteFile(settings, []byte(nodeSettingsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	withImage := strings.Replace(string(spec), `"id": "a3u",`, `"id": "a3u", "node_image": "projects/mine/global/images/family/gpu",`, 1)
	if withImage == string(spec) {
		t.Fatal("the example has no pool a3u to give a node_image")
	}
	specPath := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specPath, []byte(withImage), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	rc := run([]string{"apply", "--project", "p", "--node-settings", settings, specPath}, &stdout, &stderr)
	if rc != 1 || !strings.Contains(stderr.String(), "pool a3u: node_pools[") || !strings.Contains(stderr.String(), "projects/mine/global/images/family/gpu") {
		t.Fatalf("rc %d, stderr:\n%s", rc, stderr.String())
	}

	// Bad settings are refused, naming the field.
	if err := os.WriteFile(settings, []byte(strings.Replace(nodeSettingsJSON, `"10.0.0.2:/home"`, `""`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if rc := run([]string{"apply", "--project", "p", "--node-settings", settings, "../../examples/cluster_config.json"}, &stdout, &stderr); rc != 1 || !strings.Contains(stderr.String(), "home.source") {
		t.Errorf("rc %d, stderr:\n%s", rc, stderr.String())
	}
}

// Cluster Toolkit's public slurm-gcp images do not carry flexslurm: with no
// binary_url to install it from, their VMs would bill and never join Slurm,
// so apply refuses such settings before it calls anything.
func TestApplyRefusesAnImageWithoutTheBinary(t *testing.T) {
	t.Setenv(config.EnvComputeEndpoint, "http://127.0.0.1:1") // never called
	dir := t.TempDir()
	settings := filepath.Join(dir, "node.json")
	noURL := strings.Replace(nodeSettingsJSON, `"gs://flexslurm-releases/flexslurm"`, `""`, 1)
	if err := os.WriteFile(settings, []byte(noURL), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	rc := run([]string{"apply", "--project", "p", "--node-settings", settings, "../../examples/cluster_config.json"}, &stdout, &stderr)
	if rc != 1 || !strings.Contains(stderr.String(), "binary_url: empty") || !strings.Contains(stderr.String(), "schedmd-slurm-public") {
		t.Fatalf("rc %d, stderr:\n%s", rc, stderr.String())
	}
	// Another image may carry the binary.
	own := strings.Replace(noURL, "projects/schedmd-slurm-public/global/images/family/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570", "projects/mine/global/images/family/gpu", 1)
	if err := os.WriteFile(settings, []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if rc := run([]string{"apply", "--project", "p", "--node-settings", settings, "../../examples/cluster_config.json"}, &stdout, &stderr); strings.Contains(stderr.String(), "binary_url") {
		t.Errorf("rc %d: an image outside schedmd-slurm-public refused for its binary:\n%s", rc, stderr.String())
	}
}

func TestApplyUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"apply", "-h"}, &stdout, &stderr); rc != 0 || !strings.Contains(stdout.String(), "--node-settings FILE") {
		t.Errorf("-h: rc %d, stdout %q", rc, stdout.String())
	}
	stdout.Reset()
	if rc := run([]string{"apply", "--project", "p", "../../examples/cluster_config.json"}, &stdout, &stderr); rc != 2 {
		t.Errorf("without --node-settings: rc %d", rc)
	}
}

// apply to a project the deployment is not in fails naming the project and
// the topic it tried, and what to check.
func TestApplyWrongProjectNamesProjectAndTopic(t *testing.T) {
	if os.Getenv("PUBSUB_EMULATOR_HOST") == "" {
		t.Skip("SKIP (loud): no Pub/Sub emulator (PUBSUB_EMULATOR_HOST); run under `flexslurm emulators run`")
	}
	sim := computesim.New(computesim.Options{}, clock.NewManual(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Setenv(config.EnvComputeEndpoint, srv.URL)
	settings := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(settings, []byte(nodeSettingsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	rc := run([]string{"apply", "--project", "no-such-flexslurm-project", "--topic", "no-such-topic", "--node-settings", settings,
		"../../examples/cluster_config.json"}, &stdout, &stderr)
	if rc != 1 || !strings.Contains(stderr.String(), `topic "no-such-topic" of project "no-such-flexslurm-project"`) ||
		!strings.Contains(stderr.String(), "projects/no-such-flexslurm-project/topics/no-such-topic") || !strings.Contains(stderr.String(), "check --project") {
		t.Errorf("rc %d, stderr:\n%s", rc, stderr.String())
	}
}
