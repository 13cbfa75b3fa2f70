package testenv

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder is a testing.TB that records Skip and Fatal instead of stopping.
type recorder struct {
	testing.TB
	skipped, fatal string
}

func (r *recorder) Helper()           {}
func (r *recorder) Skip(args ...any)  { r.skipped = args[0].(string) }
func (r *recorder) Fatal(args ...any) { r.fatal = args[0].(string) }
func (r *recorder) Name() string      { return "TestX" }

func TestHostSet(t *testing.T) {
	t.Setenv(EnvFirestoreHost, "127.0.0.1:1111")
	t.Setenv(EnvPubSubHost, "127.0.0.1:2222")
	if got := Firestore(t); got != "127.0.0.1:1111" {
		t.Errorf("Firestore = %q", got)
	}
	if got := PubSub(t); got != "127.0.0.1:2222" {
		t.Errorf("PubSub = %q", got)
	}
}

func TestHostUnsetSkipsLoudly(t *testing.T) {
	t.Setenv(EnvFirestoreHost, "")
	t.Setenv(EnvRequire, "")
	r := &recorder{}
	if got := Firestore(r); got != "" {
		t.Errorf("Firestore = %q, want empty", got)
	}
	if r.fatal != "" || !strings.HasPrefix(r.skipped, "SKIP (loud): FIRESTORE_EMULATOR_HOST is unset — run `make test`") {
		t.Errorf("skip = %q, fatal = %q; want a loud skip", r.skipped, r.fatal)
	}
}

func TestHostUnsetRequiredFails(t *testing.T) {
	t.Setenv(EnvPubSubHost, "")
	t.Setenv(EnvRequire, "1")
	r := &recorder{}
	PubSub(r)
	if r.skipped != "" || !strings.Contains(r.fatal, "PUBSUB_EMULATOR_HOST is unset") || !strings.Contains(r.fatal, "FLEXSLURM_REQUIRE_EMULATORS=1") {
		t.Errorf("skip = %q, fatal = %q; want a failure", r.skipped, r.fatal)
	}
}

func TestProject(t *testing.T) {
	t.Setenv(EnvProject, "")
	if got := Project(); got != DefaultProject {
		t.Errorf("Project() = %q, want %q", got, DefaultProject)
	}
	t.Setenv(EnvProject, "p-1")
	if got := Project(); got != "p-1" {
		t.Errorf("Project() = %q, want p-1", got)
	}
}

var validID = regexp.MustCompile(`^[a-z][a-z0-9-]{1,46}[0-9]$`)

func TestUniqueID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := UniqueID(t)
		if !validID.MatchString(id) {
			t.Fatalf("UniqueID = %q, want lowercase, letter first, digit last, at most 48 chars", id)
		}
		if seen[id] {
			t.Fatalf("UniqueID repeated %q", id)
		}
		seen[id] = true
	}
	t.Run("Sub Test/With Odd_Chars", func(t *testing.T) {
		id := UniqueID(t)
		if !strings.HasPrefix(id, "uniqueid-sub-test-wi-") || !validID.MatchString(id) {
			t.Errorf("UniqueID in subtest = %q", id)
		}
	})
}

func TestSlug(t *testing.T) {
	got := map[string]string{}
	for _, name := range []string{"TestFoo", "Test", "Test_9lives", "TestA/B c", "TestVeryLongNameThatGoesOnAndOn/sub"} {
		got[name] = slug(name)
	}
	want := map[string]string{
		"TestFoo":                             "foo",
		"Test":                                "t",
		"Test_9lives":                         "t9lives",
		"TestA/B c":                           "a-b-c",
		"TestVeryLongNameThatGoesOnAndOn/sub": "verylongnamethatgoes",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slug (-want +got):\n%s", diff)
	}
}
