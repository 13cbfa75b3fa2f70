package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/api/option"

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
