package status_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/go-cmp/cmp"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/status"
)

// fakeSubscriber holds one subscription's messages in memory, with
// Pub/Sub's lease semantics: a pulled message is not pulled again until its
// lease is handed back (ModifyAckDeadline 0). It returns at most perPull
// messages per Pull, as the service may.
type fakeSubscriber struct {
	sub     string
	msgs    []*pubsubpb.PubsubMessage
	leased  map[string]bool
	perPull int
	pullErr error
	modErr  error
	pulls   int
}

func (f *fakeSubscriber) Pull(ctx context.Context, req *pubsubpb.PullRequest, _ ...gax.CallOption) (*pubsubpb.PullResponse, error) {
	f.pulls++
	if f.pullErr != nil {
		return nil, f.pullErr
	}
	if req.GetSubscription() != f.sub {
		return nil, grpcstatus.Error(codes.NotFound, "Resource not found (resource="+req.GetSubscription()+").")
	}
	resp := &pubsubpb.PullResponse{}
	for _, m := range f.msgs {
		if len(resp.ReceivedMessages) == int(req.GetMaxMessages()) || len(resp.ReceivedMessages) == f.perPull {
			break
		}
		if !f.leased[m.GetMessageId()] {
			f.leased[m.GetMessageId()] = true
			resp.ReceivedMessages = append(resp.ReceivedMessages, &pubsubpb.ReceivedMessage{AckId: "ack-" + m.GetMessageId(), Message: m})
		}
	}
	if len(resp.ReceivedMessages) == 0 {
		<-ctx.Done() // the service waits for messages until the deadline
		return nil, grpcstatus.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	return resp, nil
}

func (f *fakeSubscriber) ModifyAckDeadline(_ context.Context, req *pubsubpb.ModifyAckDeadlineRequest, _ ...gax.CallOption) error {
	if f.modErr != nil {
		return f.modErr
	}
	if req.GetAckDeadlineSeconds() != 0 {
		return fmt.Errorf("ack deadline %d, want 0", req.GetAckDeadlineSeconds())
	}
	for _, id := range req.GetAckIds() {
		delete(f.leased, strings.TrimPrefix(id, "ack-"))
	}
	return nil
}

func newFake(n, perPull int) *fakeSubscriber {
	f := &fakeSubscriber{sub: "projects/p/subscriptions/job-pending-dead-letter", leased: map[string]bool{}, perPull: perPull}
	for i := range n {
		f.msgs = append(f.msgs, &pubsubpb.PubsubMessage{MessageId: fmt.Sprint(i), Data: []byte("x"),
			PublishTime: timestamppb.New(now.Add(-time.Duration(n-i) * time.Minute))})
	}
	return f
}

func TestPeekFake(t *testing.T) {
	opts := status.PeekOptions{Wait: 50 * time.Millisecond}
	tests := []struct {
		name     string
		fake     *fakeSubscriber
		topic    string
		opts     status.PeekOptions
		count    int
		atLeast  bool
		missing  bool
		err      string
		released bool
	}{
		{name: "several pulls", fake: newFake(7, 3), topic: "job-pending", opts: opts, count: 7, released: true},
		{name: "empty", fake: newFake(0, 3), topic: "job-pending", opts: opts, released: true},
		{name: "limit", fake: newFake(7, 3), topic: "job-pending", opts: status.PeekOptions{Limit: 5, Wait: opts.Wait}, count: 5, atLeast: true, released: true},
		{name: "missing", fake: newFake(2, 3), topic: "reconcile-tick", opts: opts, missing: true, released: true},
		{name: "pull error", fake: func() *fakeSubscriber {
			f := newFake(2, 3)
			f.pullErr = grpcstatus.Error(codes.PermissionDenied, "denied")
			return f
		}(), topic: "job-pending", opts: opts, err: "PermissionDenied", released: true},
		{name: "release error", fake: func() *fakeSubscriber {
			f := newFake(2, 3)
			f.modErr = fmt.Errorf("unavailable")
			return f
		}(), topic: "job-pending", opts: opts, count: 2, err: "releasing 2 leases"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := status.PeekDeadLetters(context.Background(), tc.fake, "p", []string{tc.topic}, tc.opts)[0]
			if d.Count != tc.count || d.AtLeast != tc.atLeast || d.Missing != tc.missing {
				t.Errorf("depth = %+v, want count %d, at least %v, missing %v", d, tc.count, tc.atLeast, tc.missing)
			}
			if (tc.err == "") != (d.Err == nil) || d.Err != nil && !strings.Contains(d.Err.Error(), tc.err) {
				t.Errorf("error = %v, want %q", d.Err, tc.err)
			}
			if tc.count > 0 && !d.Oldest.Equal(tc.fake.msgs[0].GetPublishTime().AsTime()) {
				t.Errorf("oldest = %v, want %v", d.Oldest, tc.fake.msgs[0].GetPublishTime().AsTime())
			}
			if tc.released && len(tc.fake.leased) != 0 {
				t.Errorf("%d leases not handed back", len(tc.fake.leased))
			}
		})
	}
}

// TestPeekEmulator runs the peek against the Pub/Sub emulator.
func TestPeekEmulator(t *testing.T) {
	testenv.PubSub(t)
	project := testenv.Project()
	c, err := pubsub.NewClient(context.Background(), project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	full, empty, absent := testenv.UniqueID(t), testenv.UniqueID(t), testenv.UniqueID(t)
	before := time.Now().Add(-time.Minute)
	deadLetters(t, c, project, full, 3)
	deadLetters(t, c, project, empty, 0)
	ctx := context.Background()
	opts := status.PeekOptions{Wait: time.Second}
	type row struct {
		Sub            string
		Count          int
		AtLeast, Gone  bool
		Err, HasOldest bool
	}
	rows := func(ds []status.Depth) []row {
		var out []row
		for _, d := range ds {
			out = append(out, row{d.Subscription, d.Count, d.AtLeast, d.Missing, d.Err != nil, !d.Oldest.IsZero() && d.Oldest.After(before)})
		}
		return out
	}
	want := []row{
		{Sub: full + "-dead-letter", Count: 3, HasOldest: true},
		{Sub: empty + "-dead-letter"},
		{Sub: absent + "-dead-letter", Gone: true},
	}
	topics := []string{full, empty, absent}
	// Peeking twice sees the same messages: the first peek handed its
	// leases back.
	for i := range 2 {
		got := rows(status.PeekDeadLetters(ctx, c.SubscriptionAdminClient, project, topics, opts))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("peek %d (-want +got):\n%s", i+1, diff)
		}
	}
	// A limit below the backlog says "at least", and still keeps the
	// messages.
	got := status.PeekDeadLetters(ctx, c.SubscriptionAdminClient, project, []string{full}, status.PeekOptions{Limit: 2, Wait: time.Second})
	if got[0].Count != 2 || !got[0].AtLeast || got[0].Err != nil {
		t.Errorf("limited peek = %+v, want at least 2", got[0])
	}
	again := rows(status.PeekDeadLetters(ctx, c.SubscriptionAdminClient, project, []string{full}, opts))
	if diff := cmp.Diff(want[:1], again); diff != "" {
		t.Errorf("after the limited peek (-want +got):\n%s", diff)
	}
}

// deadLetters creates the dead-letter topic and holding subscription of
// topic and publishes n messages to it.
func deadLetters(t *testing.T, c *pubsub.Client, project, topic string, n int) {
	t.Helper()
	ctx := context.Background()
	tn := "projects/" + project + "/topics/" + status.DeadLetterTopic(topic)
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: tn}); err != nil {
		t.Fatal(err)
	}
	_, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/" + status.DeadLetterSubscription(topic), Topic: tn, AckDeadlineSeconds: 60,
	})
	if err != nil {
		t.Fatal(err)
	}
	pub := c.Publisher(tn)
	defer pub.Stop()
	for i := range n {
		if _, err := pub.Publish(ctx, &pubsub.Message{Data: fmt.Appendf(nil, "m%d", i)}).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRenderDeadLetters(t *testing.T) {
	snap := &status.Snapshot{At: now, DeadLetters: []status.Depth{
		{Topic: "job-pending", Subscription: "job-pending-dead-letter", Count: 3, Oldest: now.Add(-2*time.Hour - 10*time.Minute)},
		{Topic: "reconcile-tick", Subscription: "reconcile-tick-dead-letter"},
		{Topic: "instance-expiry", Subscription: "instance-expiry-dead-letter", Count: 1000, AtLeast: true, Oldest: now.Add(-time.Minute)},
		{Topic: "slurm-snapshot", Subscription: "slurm-snapshot-dead-letter", Missing: true},
		{Topic: "slurm-commands", Subscription: "slurm-commands-dead-letter", Count: 1, Err: fmt.Errorf("boom")},
	}}
	var b strings.Builder
	if err := status.Render(&b, snap); err != nil {
		t.Fatal(err)
	}
	want := `flexslurm status at 2026-11-20T12:00:00Z

no clusters

dead letters (peeked; a lower bound on Google Cloud):
  job-pending-dead-letter      3, oldest 2h10m old
  reconcile-tick-dead-letter   0
  instance-expiry-dead-letter  at least 1000, oldest 1m old
  slurm-snapshot-dead-letter   no such subscription
  slurm-commands-dead-letter   1 (error: boom)
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
