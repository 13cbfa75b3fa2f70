package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/dev/computesim"
)

func runProbeCapture(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runProbe(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// noGoogle makes any call to a Google API fail: no credentials, and every
// HTTPS connection through a proxy that does not exist.
func noGoogle(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("NO_PROXY", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "none.json"))
}

// --dry-run prints every call (Compute and Cloud Logging) as it would be
// sent, calls nothing outside this process, and writes no settings.
func TestProbeDryRunPrintsEveryCall(t *testing.T) {
	noGoogle(t)
	settings := filepath.Join(t.TempDir(), "probe.auto.tfvars.json")
	code, stdout, stderr := runProbeCapture(t, "", "--project", "p1", "--zone", "us-central1-a", "--dry-run", "--settings", settings)
	if code != probeSettled {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	for _, want := range []string{
		"US$", // the cost basis
		"call: POST https://compute.googleapis.com/compute/v1/projects/p1/global/instanceTemplates?requestId=",
		`"provisioningModel":"FLEX_START"`,
		"call: POST https://compute.googleapis.com/compute/v1/projects/p1/zones/us-central1-a/instanceGroupManagers?requestId=",
		`"updatePolicy":{"type":"OPPORTUNISTIC"}`,
		`"defaultActionOnFailure":"DO_NOTHING"`,
		"/instanceGroupManagers/fs-probe-",
		"/resizeRequests?requestId=",
		"/deleteInstances?requestId=",
		"/resizeRequests/probe-second/cancel",
		"call: GET https://compute.googleapis.com/compute/v1/projects/p1/zones/us-central1-a/instances?filter=",
		"call: POST https://logging.googleapis.com/v2/entries:list",
		"call: DELETE https://compute.googleapis.com/compute/v1/projects/p1/global/instanceTemplates/fs-probe-",
		"OPEN POINT",
		"Listed again: nothing of run",
		`Dry run: would write ` + settings + ` with resize_request_api = "v1"`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(stdout, "Make these VMs") {
		t.Errorf("a dry run asked to make VMs")
	}
	if _, err := os.Stat(settings); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote %s (%v)", settings, err)
	}
	if t.Failed() {
		t.Logf("output:\n%s", stdout)
	}
}

// The strict readings take the other branches (beta, a refused
// deleteInstances and its retry) and yield the strict verdicts.
func TestProbeDryRunStrict(t *testing.T) {
	noGoogle(t)
	code, stdout, stderr := runProbeCapture(t, "", "--project", "p1", "--zone", "us-central1-a", "--dry-run", "--compute-readings", "strict")
	if code != probeSettled {
		t.Fatalf("exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	for _, want := range []string{
		"call: POST https://compute.googleapis.com/compute/beta/projects/p1/zones/us-central1-a/instanceGroupManagers/",
		"-> 400",
		`resize_request_api = "beta"`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", stdout)
	}
}

// Without --yes the probe asks; anything but y makes nothing. It asks once
// its clients are made (with credentials that would be used: nothing is
// sent before the answer), and the next output starts on a line of its
// own when the answer came from a pipe.
func TestProbeAsksFirst(t *testing.T) {
	noGoogle(t)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", fakeServiceAccountKey(t))
	for _, answer := range []string{"", "n\n", "no\n", "maybe\n"} {
		code, stdout, stderr := runProbeCapture(t, answer, "--project", "p1", "--zone", "us-central1-a", "--settings", filepath.Join(t.TempDir(), "s.json"))
		if code != probeSettled || !strings.Contains(stdout, "[y/N] \nNothing was made.") || stderr != "" {
			t.Errorf("answer %q: exit %d, stdout %q, stderr %q", answer, code, stdout, stderr)
		}
	}
}

// TestProbeNamesMissingCredentialsBeforeAsking: without credentials the
// probe says so and asks nothing.
func TestProbeNamesMissingCredentialsBeforeAsking(t *testing.T) {
	noGoogle(t)
	code, stdout, stderr := runProbeCapture(t, "y\n", "--project", "p1", "--zone", "us-central1-a", "--settings", filepath.Join(t.TempDir(), "s.json"))
	if code != probeSetupError || strings.Contains(stdout, "[y/N]") || !strings.Contains(stderr, "none.json") {
		t.Errorf("exit %d, stdout %q, stderr %q: want the missing credentials named before any question", code, stdout, stderr)
	}
}

// fakeServiceAccountKey writes a service account key file that client
// libraries accept without calling Google (its private key is made here).
func fakeServiceAccountKey(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(key))})
	body, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p1", "private_key_id": "k1", "private_key": string(pemKey),
		"client_email": "probe@p1.iam.gserviceaccount.com", "client_id": "1",
		"token_uri": "https://oauth2.googleapis.com/token",
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestProbeUsageErrors(t *testing.T) {
	t.Setenv("GOOGLE_CLOUD_PROJECT", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--zone", "us-central1-a"}, "no project"},
		{[]string{"--project", "p"}, "no zone"},
		{[]string{"--project", "p", "--zone", "us-central1"}, `--zone "us-central1"`},
		{[]string{"--project", "p", "--zone", "us-central1-a", "--timeout", "5m"}, "--timeout 5m0s"},
		{[]string{"--project", "p", "--zone", "us-central1-a", "--dry-run", "--compute-readings", "strict,Nope"}, "--compute-readings"},
		{[]string{"--project", "p", "--zone", "us-central1-a", "--settings", "/no/such/dir/x.json"}, "--settings /no/such/dir/x.json: no directory /no/such/dir"},
		{[]string{"--project", "p", "--zone", "us-central1-a", "--settings", os.DevNull, "--compute-readings", "strict"}, "--compute-readings chooses the simulator's behaviour, so it needs --dry-run"},
	} {
		code, stdout, stderr := runProbeCapture(t, "", tc.args...)
		if code != probeUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d naming %q", tc.args, code, stdout, stderr, probeUsage, tc.want)
		}
	}
}

// A cleanup that leaves something exits 1 and names it on stderr.
func TestProbeExitsNonZeroWhenSomethingIsLeft(t *testing.T) {
	noGoogle(t)
	dryRunSimHook = func(sim *computesim.Sim) {
		sim.Inject(computesim.Injection{
			Match:  computesim.Match{Method: "DELETE", Path: `/instanceGroupManagers/fs-probe-[0-9a-f]+-n$`},
			Status: 403, Reason: "forbidden", Message: "injected: may not delete",
		})
	}
	t.Cleanup(func() { dryRunSimHook = nil })
	code, stdout, stderr := runProbeCapture(t, "", "--project", "p1", "--zone", "us-central1-a", "--dry-run")
	if code != probeLeft {
		t.Errorf("exit %d, want %d", code, probeLeft)
	}
	for _, want := range []string{"the cleanup left these behind", "managed instance group fs-probe-", "-n in us-central1-a", "injected: may not delete"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stdout, "nothing of run") {
		t.Errorf("stdout says nothing is left")
	}
}
