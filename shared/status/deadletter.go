package status

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flexslurm/flexslurm/shared/config"
)

// ConsumedTopics are the topics whose subscriptions dead-letter: the five
// function triggers, the Slurm snapshot read by Reconcile and the Slurm
// commands pulled by the agent. deploy/ creates a dead-letter topic and a
// holding subscription for each (its test checks the names against these).
var ConsumedTopics = []string{
	config.TopicJobs,
	config.TopicClusterSpec,
	config.TopicExpiry,
	config.TopicHealthFailure,
	config.TopicReconcile,
	config.TopicSlurmSnapshot,
	config.TopicSlurmCommands,
}

// DeadLetterTopic is the dead-letter topic of topic's subscriptions, as
// deploy/ and the local system name it.
func DeadLetterTopic(topic string) string { return topic + "-dead-letter" }

// DeadLetterSubscription is the pull subscription that holds what reaches
// DeadLetterTopic(topic) for operators to inspect (a topic without a
// subscription drops what it receives).
func DeadLetterSubscription(topic string) string { return topic + "-dead-letter" }

// Depth is the measured backlog of one dead-letter subscription.
type Depth struct {
	Topic        string // the topic whose failures land here
	Subscription string
	// Count is the number of distinct messages seen. When AtLeast is set
	// the peek stopped at its limit and there may be more.
	Count   int
	AtLeast bool
	// Oldest is the publish time of the oldest message seen (zero when
	// none). For a dead-lettered message that is when it was forwarded.
	Oldest time.Time
	// Missing is set when the subscription does not exist.
	Missing bool
	// Err is the error that stopped the peek, or that released the leases;
	// Count is then a lower bound.
	Err error
}

// Subscriber is the part of the Pub/Sub subscription admin API the peek
// uses; *pubsub.Client's SubscriptionAdminClient (cloud.google.com/go/pubsub/v2)
// satisfies it.
type Subscriber interface {
	Pull(ctx context.Context, req *pubsubpb.PullRequest, opts ...gax.CallOption) (*pubsubpb.PullResponse, error)
	ModifyAckDeadline(ctx context.Context, req *pubsubpb.ModifyAckDeadlineRequest, opts ...gax.CallOption) error
}

// PeekOptions bound a peek.
type PeekOptions struct {
	// Limit is the most messages counted per subscription (1000 when 0).
	Limit int
	// Wait is how long one Pull may wait for messages; an empty or
	// timed-out Pull ends the peek (2 s when 0).
	Wait time.Duration
}

// maxAckIDs bounds the ack ids of one ModifyAckDeadline call.
const maxAckIDs = 1000

// PeekDeadLetters measures the depth of the dead-letter subscription of
// each topic in project, one after the other.
//
// Pub/Sub's admin API has no backlog count (the authoritative figure is
// the Cloud Monitoring metric subscription/num_undelivered_messages), so the
// peek pulls without acknowledging: it pulls until a Pull comes back empty
// or Limit messages were seen, counting distinct message ids, then hands
// every lease back at once (ModifyAckDeadline 0) so the messages stay and
// are immediately deliverable again. Pulls may return fewer messages than
// are stored, so Count is a lower bound; on the emulators and for small
// backlogs it is exact. Holding subscriptions have no other consumer, so
// the short leases disturb nothing. The caller needs
// pubsub.subscriptions.consume on the subscriptions (roles/pubsub.subscriber).
func PeekDeadLetters(ctx context.Context, s Subscriber, project string, topics []string, o PeekOptions) []Depth {
	if o.Limit <= 0 {
		o.Limit = 1000
	}
	if o.Wait <= 0 {
		o.Wait = 2 * time.Second
	}
	out := make([]Depth, 0, len(topics))
	for _, t := range topics {
		out = append(out, peek(ctx, s, project, t, o))
	}
	return out
}

func peek(ctx context.Context, s Subscriber, project, topic string, o PeekOptions) Depth {
	d := Depth{Topic: topic, Subscription: DeadLetterSubscription(topic)}
	name := "projects/" + project + "/subscriptions/" + d.Subscription
	seen := map[string]bool{}
	var acks []string
	for len(seen) < o.Limit {
		callCtx, cancel := context.WithTimeout(ctx, o.Wait)
		resp, err := s.Pull(callCtx, &pubsubpb.PullRequest{Subscription: name, MaxMessages: int32(min(o.Limit-len(seen), 1000))})
		timedOut := callCtx.Err() != nil
		cancel()
		if err != nil {
			switch {
			case status.Code(err) == codes.NotFound:
				d.Missing = true
			case ctx.Err() != nil:
				d.Err = fmt.Errorf("peeking %s: %w", d.Subscription, ctx.Err())
			case timedOut || status.Code(err) == codes.DeadlineExceeded:
				// Nothing more arrived within Wait.
			default:
				d.Err = fmt.Errorf("peeking %s: %w", d.Subscription, err)
			}
			break
		}
		msgs := resp.GetReceivedMessages()
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			acks = append(acks, m.GetAckId())
			id := m.GetMessage().GetMessageId()
			if seen[id] {
				continue
			}
			seen[id] = true
			if pt := m.GetMessage().GetPublishTime().AsTime(); d.Oldest.IsZero() || pt.Before(d.Oldest) {
				d.Oldest = pt
			}
		}
	}
	d.Count = len(seen)
	d.AtLeast = d.Count >= o.Limit
	// Hand the leases back, even when ctx has ended.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for len(acks) > 0 {
		n := min(len(acks), maxAckIDs)
		err := s.ModifyAckDeadline(rctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: name, AckIds: acks[:n], AckDeadlineSeconds: 0})
		if err != nil {
			d.Err = errors.Join(d.Err, fmt.Errorf("releasing %d leases on %s (they expire with the ack deadline): %w", n, d.Subscription, err))
			break
		}
		acks = acks[n:]
	}
	return d
}

// renderDeadLetters writes the dead-letter section of Render.
func renderDeadLetters(b *strings.Builder, ds []Depth, at time.Time) {
	if ds == nil {
		b.WriteString("dead letters: not measured (--dead-letter peeks each dead-letter subscription)\n")
		return
	}
	b.WriteString("dead letters (peeked; a lower bound on Google Cloud):\n")
	width := 0
	for _, d := range ds {
		width = max(width, len(d.Subscription))
	}
	for _, d := range ds {
		var s string
		switch {
		case d.Missing:
			s = "no such subscription"
		default:
			s = fmt.Sprint(d.Count)
			if d.AtLeast {
				s = "at least " + s
			}
			if !d.Oldest.IsZero() {
				s += ", oldest " + Human(at.Sub(d.Oldest)) + " old"
			}
			if d.Err != nil {
				s += " (error: " + d.Err.Error() + ")"
			}
		}
		fmt.Fprintf(b, "  %-*s  %s\n", width, d.Subscription, s)
	}
}
