// Package testenv tells tests where the local emulators are and gives them
// ids that keep their data apart. Tests that need the Firestore or Pub/Sub
// emulator call Firestore or PubSub first: the test is skipped, loudly, when
// the emulator's variable is unset, and fails instead when
// FLEXSLURM_REQUIRE_EMULATORS=1 (CI), so that a missing emulator never
// passes silently. `make test` runs the tests under
// `flexslurm emulators run`, which starts both emulators and sets the
// variables.
//
// This package imports no other flexslurm package.
package testenv

import (
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// Environment variables read by this package.
const (
	EnvFirestoreHost = "FIRESTORE_EMULATOR_HOST"
	EnvPubSubHost    = "PUBSUB_EMULATOR_HOST"
	EnvProject       = "GOOGLE_CLOUD_PROJECT"
	// EnvRequire, set to "1", turns the skips of Firestore and PubSub into
	// failures.
	EnvRequire = "FLEXSLURM_REQUIRE_EMULATORS"
)

// DefaultProject is the project id Project returns when
// GOOGLE_CLOUD_PROJECT is unset. The emulators accept any id.
const DefaultProject = "flexslurm-test"

// Firestore returns the Firestore emulator's host:port from
// FIRESTORE_EMULATOR_HOST. When that is unset it skips the test, or fails it
// when FLEXSLURM_REQUIRE_EMULATORS=1.
func Firestore(t testing.TB) string {
	t.Helper()
	return host(t, EnvFirestoreHost)
}

// PubSub returns the Pub/Sub emulator's host:port from
// PUBSUB_EMULATOR_HOST. When that is unset it skips the test, or fails it
// when FLEXSLURM_REQUIRE_EMULATORS=1.
func PubSub(t testing.TB) string {
	t.Helper()
	return host(t, EnvPubSubHost)
}

func host(t testing.TB, env string) string {
	t.Helper()
	if h := os.Getenv(env); h != "" {
		return h
	}
	why := env + " is unset — run `make test`, which starts the emulators " +
		"(flexslurm emulators run -- go test ./...), or start them with " +
		"`flexslurm emulators start` and eval its export lines"
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal("FAIL: " + why + " (" + EnvRequire + "=1 forbids skipping)")
		return ""
	}
	t.Skip("SKIP (loud): " + why)
	return ""
}

// Project returns the project id to use with the emulators:
// GOOGLE_CLOUD_PROJECT, or DefaultProject when that is unset.
func Project() string {
	if p := os.Getenv(EnvProject); p != "" {
		return p
	}
	return DefaultProject
}

// runID tells this test process's ids from those of earlier runs against
// the same long-lived emulator.
var runID = newRunID()

var seq atomic.Uint64

func newRunID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails on Linux; zeros would still be usable
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// maxSlug bounds the part of UniqueID taken from the test name.
const maxSlug = 20

// UniqueID returns a short id unique to this test, this process and this
// call, such as "pushdelivery-k3x9ab-7": the test's name in lowercase
// letters and digits (at most 20 characters), the run id and a counter,
// joined by hyphens. It starts with a letter, ends with a digit and is at
// most 48 characters long, so it is a valid Pub/Sub topic or subscription
// id, Firestore collection or document id, and Compute Engine name.
func UniqueID(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("%s-%s-%d", slug(t.Name()), runID, seq.Add(1))
}

// slug keeps the lowercase letters and digits of name, turning every other
// run of characters into one hyphen, drops a leading "test", and makes
// sure the result starts with a letter.
func slug(name string) string {
	name = strings.ToLower(name)
	var b strings.Builder
	hyphen := false
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			hyphen = false
		} else if !hyphen && b.Len() > 0 {
			b.WriteByte('-')
			hyphen = true
		}
	}
	s := strings.TrimPrefix(b.String(), "test")
	s = strings.Trim(s, "-")
	if len(s) > maxSlug {
		s = strings.TrimRight(s[:maxSlug], "-")
	}
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = "t" + s
	}
	return s
}
