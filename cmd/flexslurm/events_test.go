package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/store"
)

// flexslurm events reads a cluster's events through the API, filtered,
// and --follow prints an event stored later, once.
func TestEventsThroughTheAPI(t *testing.T) {
	srv, h := apiServer(t, "flexslurm-demo")
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"apply", "--api", srv.URL, "--wait", "30s", "../../examples/cluster_config.json"}, &stdout, &stderr); rc != 0 {
		t.Fatalf("apply --api: rc %d: %s", rc, stderr.String())
	}
	args := []string{"events", "--api", srv.URL, "--project", "flexslurm-demo", "--location", "us-central1", "--cluster", "flexvm"}
	stdout.Reset()
	if rc := run(args, &stdout, &stderr); rc != 0 {
		t.Fatalf("events: rc %d: %s", rc, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "VM_REQUESTED") || !strings.Contains(out, "flexvm-a3u-0-g1") {
		t.Fatalf("events printed:\n%s", out)
	}
	stdout.Reset()
	if rc := run(append(args, "--type", "VM_EXPIRED"), &stdout, &stderr); rc != 0 || stdout.Len() != 0 {
		t.Fatalf("--type VM_EXPIRED: rc %d, printed %q", rc, stdout.String())
	}
	if rc := run(append(args, "--type", "NO_SUCH"), &stdout, &stderr); rc != 1 || !strings.Contains(stderr.String(), "INVALID_ARGUMENT") {
		t.Fatalf("--type NO_SUCH: rc %d, stderr %q", rc, stderr.String())
	}

	// --follow: an event stored while it polls is printed once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan int)
	go func() {
		done <- runEvents(ctx, append(args[1:], "--follow", "--every", "10ms", "--node", "flexvm-a3u-0"), out, &stderr)
	}()
	at := h.Clock.Now().Add(time.Hour)
	e := store.ClusterEvent{ID: store.ClusterEventID("flexvm", at, "later", 0), Cluster: "flexvm", Type: "VM_EXPIRED", Time: at,
		Node: "flexvm-a3u-0", VM: "flexvm-a3u-0-g1", Message: "VM flexvm-a3u-0-g1 ended at its run duration"}
	waitFor(t, out, "VM_REQUESTED")
	if err := h.Store.(store.EventLog).AddEvents(context.Background(), []store.ClusterEvent{e}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, "VM_EXPIRED")
	cancel()
	if rc := <-done; rc != 0 {
		t.Fatalf("--follow ended with rc %d: %s", rc, stderr.String())
	}
	if got := out.String(); strings.Count(got, "VM_EXPIRED") != 1 || strings.Count(got, "VM_REQUESTED") != 1 {
		t.Fatalf("--follow printed:\n%s", got)
	}
}

func TestEventsUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"events", "-h"}, &stdout, &stderr); rc != 0 || !strings.Contains(stdout.String(), "usage: flexslurm events") {
		t.Fatalf("-h: rc %d, stdout %q", rc, stdout.String())
	}
	if rc := run([]string{"events", "--project", "p"}, &stdout, &stderr); rc != 2 || !strings.Contains(stderr.String(), "--cluster") {
		t.Fatalf("no --cluster: rc %d, stderr %q", rc, stderr.String())
	}
	if rc := run([]string{"events", "--project", "p", "--cluster", "c", "--api", "http://127.0.0.1:1"}, &stdout, &stderr); rc != 2 || !strings.Contains(stderr.String(), "--location") {
		t.Fatalf("--api without --location: rc %d, stderr %q", rc, stderr.String())
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until out holds want (polling; a generous bound only
// keeps a broken --follow from hanging the test).
func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%q never printed; got:\n%s", want, out.String())
		}
	}
}
