package pubsub

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flexslurm/flexslurm/dev/emulator"
)

const testProject = "flexslurm-pubsub-test"

// skipReason is why the emulator tests cannot run; empty when they can.
var skipReason string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

// runTests starts a Pub/Sub emulator for the package when
// PUBSUB_EMULATOR_HOST is unset and the emulator is installed.
func runTests(m *testing.M) int {
	if os.Getenv(emulator.EnvPubSubHost) == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		p, err := emulator.StartPubSub(ctx, emulator.Options{Project: testProject})
		cancel()
		switch {
		case errors.Is(err, emulator.ErrPubSubNotFound), errors.Is(err, emulator.ErrJavaNotFound),
			errors.Is(err, emulator.ErrUnsupportedPlatform):
			skipReason = fmt.Sprintf("PUBSUB_EMULATOR_HOST is unset and the Pub/Sub emulator cannot run here: %v", err)
			// Printed whether or not -v is given.
			fmt.Fprintf(os.Stderr, "SKIP (loud): shared/pubsub emulator tests: %s\n", skipReason)
		case err != nil:
			fmt.Fprintln(os.Stderr, "starting the Pub/Sub emulator for the tests:", err)
			return 1
		default:
			defer p.Stop()
			fmt.Fprintf(os.Stderr, "Pub/Sub emulator pid %d at %s, ready in %v\n", p.PID(), p.Addr(), p.StartupTime().Round(time.Millisecond))
			os.Setenv(emulator.EnvPubSubHost, p.Addr())
		}
	}
	return m.Run()
}

// newClient returns a Client connected to the emulator, or skips (fails
// under FLEXSLURM_REQUIRE_EMULATORS=1) when there is none.
func newClient(t *testing.T) *Client {
	t.Helper()
	if skipReason != "" {
		if os.Getenv("FLEXSLURM_REQUIRE_EMULATORS") == "1" {
			t.Fatal("FAIL (FLEXSLURM_REQUIRE_EMULATORS=1): " + skipReason)
		}
		t.Skip("SKIP (loud): " + skipReason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := New(ctx, testProject)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var idSeq atomic.Int64

// uniqueID returns a valid Pub/Sub id unique to this test, run and call.
func uniqueID(t *testing.T, role string) string {
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	return fmt.Sprintf("%s-%s-%d-%d", strings.TrimPrefix(name, "test-"), role, time.Now().UnixNano()%1e9, idSeq.Add(1))
}

func TestValidateID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want string // substring of the error; "" for valid
	}{
		{"abc", ""},
		{"flex.scaleup-requests_v1~x+y%20", ""},
		{"A" + strings.Repeat("b", 254), ""},
		{"ab", "must be 3–255 characters long"},
		{"a" + strings.Repeat("b", 255), "must be 3–255 characters long"},
		{"1abc", "must start with a letter"},
		{"-abc", "must start with a letter"},
		{"google-things", `must not start with "goog"`},
		{"has space", `contains ' '`},
		{"slash/inside", `contains '/'`},
		{"projects/p/topics/t", "is a full resource name"},
		{"", "must be 3–255 characters long"},
	} {
		err := ValidateTopicID(tc.id)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ValidateTopicID(%q) = %v, want nil", tc.id, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalidID) || !strings.Contains(fmt.Sprint(err), tc.want)):
			t.Errorf("ValidateTopicID(%q) = %v, want ErrInvalidID mentioning %q", tc.id, err, tc.want)
		}
	}
	if err := ValidateSubscriptionID("x"); err == nil || !strings.Contains(err.Error(), `subscription id "x"`) {
		t.Errorf("ValidateSubscriptionID(x) = %v, want it to name the kind", err)
	}
}

func TestPushSubscriptionArguments(t *testing.T) {
	c := &Client{project: "p"}
	const ep = "http://127.0.0.1:1/projects/p/topics/top"
	for _, tc := range []struct {
		name                 string
		sub, topic, endpoint string
		dlq                  string
		attempts             int
		ack                  time.Duration
		want                 []string // substrings of the error; nil for valid
	}{
		{name: "defaults", sub: "sub", topic: "top", endpoint: ep},
		{name: "full", sub: "sub", topic: "top", endpoint: "https://x.run.app/projects/p/topics/top", dlq: "dlq", attempts: 100, ack: 600 * time.Second},
		{name: "bad ids", sub: "s", topic: "9t", endpoint: ep, want: []string{`subscription id "s"`, `topic id "9t"`}},
		{name: "relative endpoint", sub: "sub", topic: "top", endpoint: "/projects/p/topics/top", want: []string{"not an absolute http(s) URL"}},
		{name: "attempts without dlq", sub: "sub", topic: "top", endpoint: ep, attempts: 5, want: []string{"without a dead-letter topic"}},
		{name: "too few attempts", sub: "sub", topic: "top", endpoint: ep, dlq: "dlq", attempts: 4, want: []string{"maxDeliveryAttempts 4 outside 5–100"}},
		{name: "dlq is topic", sub: "sub", topic: "top", endpoint: ep, dlq: "top", want: []string{"is the subscription's own topic"}},
		{name: "short ack", sub: "sub", topic: "top", endpoint: ep, ack: 5 * time.Second, want: []string{"ack deadline 5s"}},
		{name: "fractional ack", sub: "sub", topic: "top", endpoint: ep, ack: 10500 * time.Millisecond, want: []string{"ack deadline 10.5s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.pushSubscription(tc.sub, tc.topic, tc.endpoint, tc.dlq, tc.attempts, tc.ack)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("pushSubscription: %v", err)
				}
				if s.GetName() != "projects/p/subscriptions/"+tc.sub || s.GetTopic() != "projects/p/topics/"+tc.topic ||
					s.GetPushConfig().GetPushEndpoint() != tc.endpoint || s.GetAckDeadlineSeconds() < 10 {
					t.Errorf("pushSubscription built %v", s)
				}
				if tc.dlq != "" && (s.GetDeadLetterPolicy().GetDeadLetterTopic() != "projects/p/topics/"+tc.dlq ||
					s.GetDeadLetterPolicy().GetMaxDeliveryAttempts() != int32(tc.attempts)) {
					t.Errorf("dead-letter policy = %v", s.GetDeadLetterPolicy())
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("pushSubscription error = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestClosedClient(t *testing.T) {
	c := newClient(t)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ctx := context.Background()
	if _, err := c.Publish(ctx, "some-topic", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Publish after Close = %v, want ErrClosed", err)
	}
	if err := c.EnsureTopic(ctx, "some-topic"); !errors.Is(err, ErrClosed) {
		t.Errorf("EnsureTopic after Close = %v, want ErrClosed", err)
	}
}

func TestPublishPullRoundTrip(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic, sub := uniqueID(t, "topic"), uniqueID(t, "sub")

	for range 2 { // the second round checks AlreadyExists → nil
		if err := c.EnsurePullSubscription(ctx, sub, topic); err != nil {
			t.Fatalf("EnsurePullSubscription: %v", err)
		}
		if err := c.EnsureTopic(ctx, topic); err != nil {
			t.Fatalf("EnsureTopic: %v", err)
		}
	}
	sent := []Message{
		{Data: []byte("first"), Attributes: map[string]string{"kind": "scaleup", "pool": "a3u"}},
		{Data: []byte(`{"n":2}`), Attributes: map[string]string{"kind": "expiry"}},
	}
	for i := range sent {
		id, err := c.Publish(ctx, topic, sent[i].Data, sent[i].Attributes)
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
		if id == "" {
			t.Fatal("Publish returned an empty id")
		}
		sent[i].ID = id
	}

	var got []Message
	for len(got) < len(sent) && ctx.Err() == nil {
		msgs, err := c.Pull(ctx, sub, 10, 5*time.Second)
		if err != nil {
			t.Fatalf("Pull: %v", err)
		}
		got = append(got, msgs...)
	}
	for _, m := range got {
		if m.PublishTime.IsZero() || time.Since(m.PublishTime) > time.Minute {
			t.Errorf("message %s has publish time %v", m.ID, m.PublishTime)
		}
	}
	opts := []cmp.Option{
		cmpopts.IgnoreFields(Message{}, "PublishTime"),
		cmpopts.SortSlices(func(a, b Message) bool { return a.ID < b.ID }),
	}
	if diff := cmp.Diff(sent, got, opts...); diff != "" {
		t.Errorf("pulled messages (-sent +got):\n%s", diff)
	}

	// Everything was acknowledged, so nothing comes back.
	again, err := c.Pull(ctx, sub, 10, 500*time.Millisecond)
	if err != nil || len(again) != 0 {
		t.Errorf("second Pull = %v, %v; want nothing", again, err)
	}
}

func TestPublishToMissingTopic(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Publish(ctx, uniqueID(t, "nope"), []byte("x"), nil)
	if status.Code(err) != codes.NotFound {
		t.Errorf("Publish to a missing topic = %v, want NotFound", err)
	}
}

// push is one request received by the push endpoint.
type push struct {
	method, path, contentType string
	body                      []byte
}

// pushServer is an httptest server recording pushes and answering with
// status.
func pushServer(t *testing.T, status int) (*httptest.Server, <-chan push) {
	ch := make(chan push, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- push{r.Method, r.URL.Path, r.Header.Get("Content-Type"), b}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func TestPushDelivery(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic, sub := uniqueID(t, "topic"), uniqueID(t, "sub")
	srv, pushes := pushServer(t, http.StatusOK)
	path := "/projects/" + testProject + "/topics/" + topic

	if err := c.EnsurePushSubscription(ctx, sub, topic, srv.URL+path, "", 0, 0); err != nil {
		t.Fatalf("EnsurePushSubscription: %v", err)
	}
	if err := c.EnsurePushSubscription(ctx, sub, topic, srv.URL+path, "", 0, 0); err != nil {
		t.Fatalf("EnsurePushSubscription again: %v", err)
	}
	began := time.Now()
	id, err := c.Publish(ctx, topic, []byte("hello"), map[string]string{"kind": "scaleup"})
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}

	var p push
	select {
	case p = <-pushes:
	case <-ctx.Done():
		t.Fatal("no push delivery within a minute")
	}
	t.Logf("push arrived %v after publish", time.Since(began))
	if p.method != http.MethodPost || p.path != path {
		t.Errorf("push request = %s %s, want POST %s", p.method, p.path, path)
	}
	if !strings.HasPrefix(p.contentType, "application/json") {
		t.Errorf("push Content-Type = %q, want application/json", p.contentType)
	}

	// The exact envelope: {"subscription": …, "message": {data, attributes,
	// messageId, message_id, publishTime, publish_time}}.
	var env map[string]json.RawMessage
	if err := json.Unmarshal(p.body, &env); err != nil {
		t.Fatalf("push body %s: %v", p.body, err)
	}
	if diff := cmp.Diff([]string{"message", "subscription"}, sortedKeys(env)); diff != "" {
		t.Errorf("push body keys (-want +got):\n%s\nbody: %s", diff, p.body)
	}
	var gotSub string
	_ = json.Unmarshal(env["subscription"], &gotSub)
	if want := "projects/" + testProject + "/subscriptions/" + sub; gotSub != want {
		t.Errorf("subscription = %q, want %q", gotSub, want)
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(env["message"], &msg); err != nil {
		t.Fatalf("push message: %v", err)
	}
	wantKeys := []string{"attributes", "data", "messageId", "message_id", "publishTime", "publish_time"}
	if diff := cmp.Diff(wantKeys, sortedKeys(msg)); diff != "" {
		t.Errorf("push message keys (-want +got):\n%s\nbody: %s", diff, p.body)
	}
	var decoded struct {
		Data        string            `json:"data"`
		Attributes  map[string]string `json:"attributes"`
		MessageID   string            `json:"messageId"`
		MessageID2  string            `json:"message_id"`
		PublishTime time.Time         `json:"publishTime"`
		PublishTim2 time.Time         `json:"publish_time"`
	}
	if err := json.Unmarshal(env["message"], &decoded); err != nil {
		t.Fatalf("push message fields: %v", err)
	}
	want := decoded
	want.Data = base64.StdEncoding.EncodeToString([]byte("hello"))
	want.Attributes = map[string]string{"kind": "scaleup"}
	want.MessageID, want.MessageID2 = id, id
	want.PublishTim2 = decoded.PublishTime
	if diff := cmp.Diff(want, decoded); diff != "" {
		t.Errorf("push message (-want +got):\n%s", diff)
	}
	if decoded.PublishTime.IsZero() {
		t.Error("publishTime is missing")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestPushDeadLetter(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic, sub := uniqueID(t, "topic"), uniqueID(t, "sub")
	dlq, dlqSub := uniqueID(t, "dlq"), uniqueID(t, "dlq-sub")
	srv, pushes := pushServer(t, http.StatusInternalServerError)
	const attempts = MinDeliveryAttempts

	// The dead-letter topic needs its subscription before anything is
	// forwarded to it, or the message is dropped.
	if err := c.EnsurePullSubscription(ctx, dlqSub, dlq); err != nil {
		t.Fatalf("EnsurePullSubscription(dlq): %v", err)
	}
	endpoint := srv.URL + "/projects/" + testProject + "/topics/" + topic
	if err := c.EnsurePushSubscription(ctx, sub, topic, endpoint, dlq, attempts, 0); err != nil {
		t.Fatalf("EnsurePushSubscription: %v", err)
	}
	began := time.Now()
	id, err := c.Publish(ctx, topic, []byte("doomed"), map[string]string{"kind": "repair"})
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}

	var dead []Message
	for len(dead) == 0 && ctx.Err() == nil {
		if dead, err = c.Pull(ctx, dlqSub, 10, 10*time.Second); err != nil {
			t.Fatalf("Pull(dlq): %v", err)
		}
	}
	if len(dead) != 1 {
		t.Fatalf("dead-letter subscription got %d messages, want 1", len(dead))
	}
	t.Logf("dead-lettered %v after publish", time.Since(began))

	// Give a would-be extra attempt time to show up, then count.
	time.Sleep(2 * time.Second)
	var seen []push
	for len(pushes) > 0 {
		seen = append(seen, <-pushes)
	}
	if len(seen) != attempts {
		t.Errorf("endpoint saw %d push attempts, want %d", len(seen), attempts)
	}
	for i, p := range seen {
		if !strings.Contains(string(p.body), `"messageId":"`+id+`"`) {
			t.Errorf("attempt %d pushed another message: %s", i+1, p.body)
		}
	}

	got := dead[0]
	if string(got.Data) != "doomed" || got.Attributes["kind"] != "repair" {
		t.Errorf("dead-lettered message = %q %v, want the original data and attributes", got.Data, got.Attributes)
	}
	wantSource := map[string]string{
		"CloudPubSubDeadLetterSourceSubscription":        sub,
		"CloudPubSubDeadLetterSourceSubscriptionProject": testProject,
		"CloudPubSubDeadLetterSourceDeliveryCount":       fmt.Sprint(attempts),
	}
	for k, v := range wantSource {
		if got.Attributes[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, got.Attributes[k], v, got.Attributes)
		}
	}
	if _, ok := got.Attributes["CloudPubSubDeadLetterSourceTopicPublishTime"]; !ok {
		t.Errorf("attribute CloudPubSubDeadLetterSourceTopicPublishTime missing (all: %v)", got.Attributes)
	}
}

// TestConcurrentPublish checks that publishers are shared safely.
func TestConcurrentPublish(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic, sub := uniqueID(t, "topic"), uniqueID(t, "sub")
	if err := c.EnsurePullSubscription(ctx, sub, topic); err != nil {
		t.Fatalf("EnsurePullSubscription: %v", err)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := c.Publish(ctx, topic, []byte(fmt.Sprint(i)), nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Publish: %v", err)
	}
	seen := map[string]bool{}
	for len(seen) < n && ctx.Err() == nil {
		msgs, err := c.Pull(ctx, sub, n, 5*time.Second)
		if err != nil {
			t.Fatalf("Pull: %v", err)
		}
		for _, m := range msgs {
			seen[string(m.Data)] = true
		}
	}
	if len(seen) != n {
		t.Errorf("pulled %d distinct messages, want %d", len(seen), n)
	}
}

// TestShortPullsLoseNothingToTheAckDeadline publishes while another
// goroutine pulls with short waits. A pull the client gives up on after
// the server has handed it a message would hold that message for the
// subscription's ack deadline (10 s) before it is delivered again; Pull
// makes no such call, so every message arrives well within that.
func TestShortPullsLoseNothingToTheAckDeadline(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic, sub := uniqueID(t, "topic"), uniqueID(t, "sub")
	if err := c.EnsurePullSubscription(ctx, sub, topic); err != nil {
		t.Fatal(err)
	}
	const n = 60
	sentAt := make(chan time.Time, n)
	go func() {
		for i := range n {
			time.Sleep(time.Duration(7+i%13) * time.Millisecond)
			if _, err := c.Publish(ctx, topic, []byte(strconv.Itoa(i)), nil); err != nil {
				t.Errorf("Publish: %v", err)
				return
			}
			sentAt <- time.Now()
		}
	}()
	got := map[string]bool{}
	var lastSent time.Time
	for len(got) < n && ctx.Err() == nil {
		for len(sentAt) > 0 {
			lastSent = <-sentAt
		}
		if len(got) > 0 && !lastSent.IsZero() && time.Since(lastSent) > 5*time.Second {
			t.Fatalf("%d of %d messages arrived; nothing more within 5 s of the last publish", len(got), n)
		}
		msgs, err := c.Pull(ctx, sub, 5, 15*time.Millisecond)
		if err != nil {
			t.Fatalf("Pull: %v", err)
		}
		for _, m := range msgs {
			got[string(m.Data)] = true
		}
	}
	if len(got) != n {
		t.Fatalf("%d of %d messages arrived", len(got), n)
	}
}
