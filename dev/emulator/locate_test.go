package emulator

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeLocator sees only the files in files and the variables in env, and
// has no dpkg and no gcloud.
func fakeLocator(env map[string]string, files ...string) *locator {
	set := make(map[string]bool)
	for _, f := range files {
		set[f] = true
	}
	return &locator{
		getenv:   func(k string) string { return env[k] },
		lookPath: func(string) (string, error) { return "", exec.ErrNotFound },
		output: func([]string, string, ...string) ([]byte, error) {
			return nil, exec.ErrNotFound
		},
		isFile:  func(p string) bool { return set[p] },
		sdkRoot: func() string { return "" },
	}
}

func TestLocateNothingInstalled(t *testing.T) {
	_, err := fakeLocator(nil).locate()
	if err == nil {
		t.Fatal("locate() = nil error, want one naming every missing piece")
	}
	for _, sentinel := range []error{ErrFirestoreNotFound, ErrPubSubNotFound, ErrJavaNotFound} {
		if !errors.Is(err, sentinel) {
			t.Errorf("locate() error does not match %v: %v", sentinel, err)
		}
	}
	want := []string{
		"Firestore emulator not found: install the Debian package google-cloud-cli-firestore-emulator (part of the Google Cloud CLI; its apt source must be enabled) or set FLEXSLURM_FIRESTORE_EMULATOR_JAR",
		"Pub/Sub emulator not found: install the Debian package google-cloud-cli-pubsub-emulator (part of the Google Cloud CLI; its apt source must be enabled) or set FLEXSLURM_PUBSUB_EMULATOR_BIN",
		"java not found: apt-get install openjdk-17-jre-headless (or set JAVA_HOME)",
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("locate() error lines (-want +got):\n%s", diff)
	}
}

func TestLocateOverrides(t *testing.T) {
	env := map[string]string{
		EnvFirestoreJar: "/opt/fs.jar",
		EnvPubSubBin:    "/opt/ps/bin/cloud-pubsub-emulator",
		"JAVA_HOME":     "/opt/jdk",
	}
	got, err := fakeLocator(env, "/opt/fs.jar", "/opt/ps/bin/cloud-pubsub-emulator", "/opt/jdk/bin/java").locate()
	if err != nil {
		t.Fatalf("locate() error = %v", err)
	}
	want := Paths{FirestoreJar: "/opt/fs.jar", PubSubBin: "/opt/ps/bin/cloud-pubsub-emulator", Java: "/opt/jdk/bin/java"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("locate() (-want +got):\n%s", diff)
	}
}

func TestLocateOverrideToMissingFile(t *testing.T) {
	l := fakeLocator(map[string]string{EnvFirestoreJar: "/nope/fs.jar"},
		"/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar")
	_, err := l.firestoreJar()
	if !errors.Is(err, ErrFirestoreNotFound) || !strings.Contains(err.Error(), "FLEXSLURM_FIRESTORE_EMULATOR_JAR=/nope/fs.jar is not a file") {
		t.Errorf("firestoreJar() error = %v, want it to reject the override by name", err)
	}
}

func TestLocateFromDpkgAndSDKRoot(t *testing.T) {
	l := fakeLocator(nil, "/sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator", "/x/cloud-firestore-emulator.jar")
	l.output = func(_ []string, name string, args ...string) ([]byte, error) {
		if name == "dpkg" && args[1] == firestorePackage {
			return []byte("/x\n/x/cloud-firestore-emulator.jar\n/x/cloud_firestore_emulator\n"), nil
		}
		return nil, errors.New("dpkg-query: package is not installed")
	}
	l.sdkRoot = func() string { return "/sdk" }
	fs, err := l.firestoreJar()
	if err != nil || fs != "/x/cloud-firestore-emulator.jar" {
		t.Errorf("firestoreJar() = %q, %v; want the dpkg path", fs, err)
	}
	ps, err := l.pubsubBin()
	if err != nil || ps != "/sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator" {
		t.Errorf("pubsubBin() = %q, %v; want the SDK-root path", ps, err)
	}
}

func TestLocateJavaUnderJVMRootPrefers17(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"temurin-25-jdk-amd64", "java-17-openjdk-amd64"} {
		bin := filepath.Join(root, dir, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "java"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l := fakeLocator(nil)
	l.isFile = isRegularFile
	l.jvmRoot = root
	got, err := l.java()
	if want := filepath.Join(root, "java-17-openjdk-amd64", "bin", "java"); err != nil || got != want {
		t.Errorf("java() = %q, %v; want %q", got, err, want)
	}
}

func TestChildEnvReplaces(t *testing.T) {
	got := childEnv([]string{"A=1", "CLOUDSDK_CONFIG=/home/u/.config/gcloud", "B=2"}, []string{"CLOUDSDK_CONFIG=/tmp/x", "C=3"})
	want := []string{"A=1", "B=2", "CLOUDSDK_CONFIG=/tmp/x", "C=3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("childEnv (-want +got):\n%s", diff)
	}
}

func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 40 {
		b.WriteString(strings.Repeat("x", i%7) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(logTail(path, 25, 4096), "\n"); got != 24 {
		t.Errorf("logTail kept %d lines, want 25", got+1)
	}
	if got := len(logTail(path, 25, 10)); got > 10 {
		t.Errorf("logTail returned %d bytes, want at most 10", got)
	}
	if got := logTail(filepath.Join(t.TempDir(), "missing"), 5, 100); !strings.HasPrefix(got, "(log unavailable") {
		t.Errorf("logTail(missing) = %q", got)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8686": "127.0.0.1:8686",
		"my project":     "'my project'",
		"it's":           `'it'\''s'`,
		"":               "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLocateViaGcloudInfo exercises the SDK-root fallback with the real
// gcloud, as on a machine whose emulators are not Debian packages.
func TestLocateViaGcloudInfo(t *testing.T) {
	if _, err := exec.LookPath("gcloud"); err != nil {
		t.Skip("SKIP (loud): gcloud is not on PATH; the `gcloud info` fallback of Locate is untested here")
	}
	l := systemLocator()
	orig := l.output
	l.output = func(env []string, name string, args ...string) ([]byte, error) {
		if name == "dpkg" {
			return nil, errors.New("dpkg: not available")
		}
		return orig(env, name, args...)
	}
	root := l.sdk()
	if root == "" {
		t.Fatal("gcloud info reported no SDK root")
	}
	jar, err := l.firestoreJar()
	if err != nil {
		t.Skipf("SKIP (loud): the Firestore emulator is not under the SDK root %s: %v", root, err)
	}
	if !strings.HasPrefix(jar, root+"/") {
		t.Errorf("firestoreJar() = %q, want a path under the SDK root %q", jar, root)
	}
}
