package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/config"
)

// fakePolicyServer answers GetProject for project p (number 42) and
// GetIamPolicy with policy (a JSON Policy), or 403 when policy is "".
func fakePolicyServer(t *testing.T, policy string) []option.ClientOption {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v3/projects/p":
			io.WriteString(w, `{"name":"projects/42","projectId":"p"}`)
		case r.Method == http.MethodPost && r.URL.Path == "/v3/projects/p:getIamPolicy" && policy != "":
			io.WriteString(w, policy)
		default:
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return []option.ClientOption{option.WithEndpoint(srv.URL), option.WithoutAuthentication()}
}

func TestPreflightCommand(t *testing.T) {
	t.Setenv(config.EnvProject, "")
	t.Setenv(config.EnvUniverseDomain, "")
	const agent = "serviceAccount:42@cloudservices.gserviceaccount.com"
	tests := []struct {
		name   string
		args   []string
		policy string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{name: "no project", args: nil, code: preflightUsage, stderr: "no project"},
		{name: "stray argument", args: []string{"--project", "p", "x"}, code: preflightUsage, stderr: `unexpected argument "x"`},
		{name: "bad number", args: []string{"--project", "p", "--project-number", "x1"}, policy: `{}`, code: preflightUsage, stderr: "not a number"},
		{
			name: "editor", args: []string{"--project", "p"}, code: preflightOK,
			policy: `{"version":3,"bindings":[{"role":"roles/editor","members":["` + agent + `"]}]}`,
			stdout: "OK: the service agent holds roles/editor",
		},
		{
			name: "missing", args: []string{"--project", "p"}, code: preflightMissing,
			policy: `{"version":3,"bindings":[{"role":"roles/compute.instanceAdmin.v1","members":["` + agent + `"]}]}`,
			stdout: "gcloud projects add-iam-policy-binding p --member=" + agent + " --role=roles/iam.serviceAccountUser --condition=None",
		},
		{name: "denied", args: []string{"--project", "p"}, code: preflightCantTell, stderr: "could not check"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := runPreflight(tc.args, &stdout, &stderr, fakePolicyServer(t, tc.policy)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, stdout.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr.String())
			}
		})
	}
}

func TestCommandsRegistered(t *testing.T) {
	for _, name := range []string{"preflight", "status"} {
		if c, ok := commands[name]; !ok || c.run == nil || c.summary == "" {
			t.Errorf("command %q is not registered", name)
		}
	}
}

// quotaSpec is the example cluster with its Flex-Start pool on H100
// (a3-highgpu-8g: 8 GPUs, 208 vCPUs) at max_node_count max.
func quotaSpec(t *testing.T, max int) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer(
		`"machine_type": "a3-ultragpu-8g",
        "accelerator_type": "NVIDIA_H200_141GB",`, `"machine_type": "a3-highgpu-8g",
        "accelerator_type": "NVIDIA_H100_80GB",`,
		`"max_node_count": 3`, fmt.Sprintf(`"max_node_count": %d`, max),
		`"boot_disk_type": "hyperdisk-balanced"`, `"boot_disk_type": "pd-ssd"`,
	).Replace(string(b))
	if !strings.Contains(s, "a3-highgpu-8g") {
		t.Fatal("example spec changed: the H100 substitution no longer applies")
	}
	path := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// preflight --spec reads the quotas from Compute (the simulator: limits
// set, usage from what it holds) and reports each, end to end.
func TestPreflightQuotas(t *testing.T) {
	t.Setenv(config.EnvProject, "")
	t.Setenv(config.EnvUniverseDomain, "")
	const editor = `{"version":3,"bindings":[{"role":"roles/editor","members":["serviceAccount:42@cloudservices.gserviceaccount.com"]}]}`
	computeAt := func(t *testing.T, quotas map[string]float64) []option.ClientOption {
		sim := computesim.New(computesim.Options{Project: "p", Quotas: quotas, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
			clock.NewManual(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)))
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		return []option.ClientOption{option.WithEndpoint(srv.URL), option.WithoutAuthentication()}
	}
	tests := []struct {
		name   string
		max    int
		quotas map[string]float64
		code   int
		stdout []string
		not    []string
	}{
		{
			name: "enough", max: 4, quotas: map[string]float64{"PREEMPTIBLE_NVIDIA_H100_GPUS": 32, "INSTANCE_GROUP_MANAGERS": 10},
			code: preflightOK,
			stdout: []string{
				"OK: the service agent holds roles/editor",
				"  region us-central1   PREEMPTIBLE_NVIDIA_H100_GPUS             32          0         32         32  ok",
				"  region us-central1   INSTANCE_GROUP_MANAGERS                  10          0         10          4  ok",
				"unknown: resize requests in flight in region us-central1 (need 4: a3u: 4)",
			},
			not: []string{"WARNING", "SHORT"},
		},
		{
			name: "the maximum could exceed the GPUs and MIGs", max: 10, quotas: map[string]float64{"PREEMPTIBLE_NVIDIA_H100_GPUS": 16, "INSTANCE_GROUP_MANAGERS": 5},
			code: preflightOK,
			stdout: []string{
				"WARNING: PREEMPTIBLE_NVIDIA_H100_GPUS in region us-central1: the spec's maximums could need 80 (a3u: 10 × 8), 16 free (limit 16, usage 0)",
				"WARNING: INSTANCE_GROUP_MANAGERS in region us-central1: the spec's maximums could need 10 (a3u: 10), 5 free",
			},
		},
		{
			name: "below one node", max: 2, quotas: map[string]float64{"PREEMPTIBLE_NVIDIA_H100_GPUS": 4},
			code:   preflightQuota,
			stdout: []string{"SHORT: PREEMPTIBLE_NVIDIA_H100_GPUS in region us-central1: limit 4 is below one node's 8 (a3u: 2 × 8)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := runPreflightWith([]string{"--project", "p", "--spec", quotaSpec(t, tc.max)}, &stdout, &stderr,
				fakePolicyServer(t, editor), computeAt(t, tc.quotas))
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range tc.not {
				if strings.Contains(stdout.String(), s) {
					t.Errorf("stdout has %q:\n%s", s, stdout.String())
				}
			}
		})
	}
	var stdout, stderr strings.Builder
	if code := runPreflightWith([]string{"--project", "p", "--spec", "/nonexistent.json"}, &stdout, &stderr, fakePolicyServer(t, editor), nil); code != preflightUsage {
		t.Errorf("a missing spec: exit %d, want %d", code, preflightUsage)
	}
	// The IAM policy cannot be read (no getIamPolicy), and Compute is the
	// simulator named by FLEXSLURM_COMPUTE_ENDPOINT, as for the local
	// system: the quotas are still checked, and the exit status says the
	// IAM check could not tell.
	sim := computesim.New(computesim.Options{Project: "p", Quotas: map[string]float64{"INSTANCE_GROUP_MANAGERS": 3},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, clock.NewManual(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)))
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Setenv(config.EnvComputeEndpoint, srv.URL)
	stdout.Reset()
	stderr.Reset()
	code := runPreflightWith([]string{"--project", "p", "--spec", quotaSpec(t, 4)}, &stdout, &stderr, fakePolicyServer(t, ""), nil)
	if code != preflightCantTell || !strings.Contains(stdout.String(), "WARNING: INSTANCE_GROUP_MANAGERS in region us-central1") ||
		!strings.Contains(stderr.String(), "could not check") {
		t.Errorf("IAM policy unreadable: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, preflightCantTell, stdout.String(), stderr.String())
	}
}
