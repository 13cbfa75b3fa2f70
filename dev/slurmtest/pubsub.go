package slurmtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/emulator"
	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/pubsub"
)

// startPubSub makes PUBSUB_EMULATOR_HOST point at a Pub/Sub emulator:
// the one already named there (`make test` starts one), or one started for
// this test binary. It returns the stop function of what it started.
func startPubSub() (func(), error) {
	if os.Getenv(testenv.EnvPubSubHost) != "" {
		return func() {}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := emulator.StartPubSub(ctx, emulator.Options{Project: testenv.Project()})
	if err != nil {
		return func() {}, fmt.Errorf("PUBSUB_EMULATOR_HOST is unset and no Pub/Sub emulator could start: %w", err)
	}
	os.Setenv(testenv.EnvPubSubHost, p.Addr())
	fmt.Fprintf(os.Stderr, "slurmtest: Pub/Sub emulator pid %d at %s\n", p.PID(), p.Addr())
	return func() { p.Stop(); os.Unsetenv(testenv.EnvPubSubHost) }, nil
}

// runSuffix keeps this test binary's topics apart from others' on a shared
// emulator.
var runSuffix = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// Topic returns a topic id unique to this test binary: "<base>-<random>".
func Topic(base string) string { return base + "-" + runSuffix }

// PubSubClient returns a client of the emulator for this test, closed at
// the end of the test.
func (c *Cluster) PubSubClient(t testing.TB) *pubsub.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps, err := pubsub.New(ctx, testenv.Project())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	return ps
}

// Inbox collects the messages of one topic through a pull subscription of
// its own, created when the Inbox is.
type Inbox struct {
	ps  *pubsub.Client
	sub string

	mu   sync.Mutex
	msgs []pubsub.Message
}

// NewInbox subscribes to topic (creating it when needed).
func (c *Cluster) NewInbox(t testing.TB, topic string) *Inbox {
	t.Helper()
	ps := c.PubSubClient(t)
	sub := testenv.UniqueID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ps.EnsurePullSubscription(ctx, sub, topic); err != nil {
		t.Fatal(err)
	}
	return &Inbox{ps: ps, sub: sub}
}

// pull adds what arrives within wait.
func (in *Inbox) pull(t testing.TB, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait+10*time.Second)
	defer cancel()
	msgs, err := in.ps.Pull(ctx, in.sub, 100, wait)
	if err != nil {
		t.Fatalf("pulling %s: %v", in.sub, err)
	}
	in.mu.Lock()
	in.msgs = append(in.msgs, msgs...)
	in.mu.Unlock()
}

// Wait returns the first message (received so far or within timeout) that
// match accepts, removing it from the inbox; it fails t on timeout, listing
// what arrived.
func (in *Inbox) Wait(t testing.TB, timeout time.Duration, what string, match func(data []byte) bool) []byte {
	t.Helper()
	data, ok := in.Poll(t, timeout, match)
	if !ok {
		t.Fatalf("no %s within %v; received: %q", what, timeout, in.Received())
	}
	return data
}

// Poll is Wait that reports a timeout (false) instead of failing t.
func (in *Inbox) Poll(t testing.TB, timeout time.Duration, match func(data []byte) bool) ([]byte, bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		in.mu.Lock()
		for i, m := range in.msgs {
			if match(m.Data) {
				in.msgs = append(in.msgs[:i:i], in.msgs[i+1:]...)
				in.mu.Unlock()
				return m.Data, true
			}
		}
		in.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return nil, false
		}
		in.pull(t, min(left, time.Second))
	}
}

// Received returns the messages in the inbox, leaving them there.
func (in *Inbox) Received() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var got []string
	for _, m := range in.msgs {
		got = append(got, string(m.Data))
	}
	return got
}

// Drain returns every message that arrives within wait, emptying the inbox.
func (in *Inbox) Drain(t testing.TB, wait time.Duration) [][]byte {
	t.Helper()
	in.pull(t, wait)
	in.mu.Lock()
	defer in.mu.Unlock()
	var out [][]byte
	for _, m := range in.msgs {
		out = append(out, m.Data)
	}
	in.msgs = nil
	return out
}
