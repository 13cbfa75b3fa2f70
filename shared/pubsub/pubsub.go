// Package pubsub is flexslurm's Pub/Sub adapter. It owns publishing
// (with one reused publisher per topic), the idempotent creation of topics
// and of push and pull subscriptions (including dead-letter topics), a
// synchronous Pull for demos and tests, and the validation of topic and
// subscription ids, which the in-process fake pstest does not perform.
//
// It wraps cloud.google.com/go/pubsub/v2 and, like that library, talks to
// the emulator named by PUBSUB_EMULATOR_HOST when that variable is set.
//
// This package imports no other flexslurm package.
package pubsub

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	pubsubapi "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Limits of the Pub/Sub service.
const (
	// MinDeliveryAttempts and MaxDeliveryAttempts bound a dead-letter
	// policy's maximum number of delivery attempts.
	MinDeliveryAttempts = 5
	MaxDeliveryAttempts = 100
	// MinAckDeadline and MaxAckDeadline bound a subscription's ack deadline.
	MinAckDeadline = 10 * time.Second
	MaxAckDeadline = 600 * time.Second
	// MaxPullMessages bounds Pull's maxMessages.
	MaxPullMessages = 1000
)

// Errors returned (wrapped) by this package. Test with errors.Is.
var (
	// ErrInvalidID reports a topic or subscription id the service would
	// reject.
	ErrInvalidID = errors.New("invalid Pub/Sub id")
	// ErrInvalidArgument reports any other argument out of range.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrClosed reports a call on a closed Client.
	ErrClosed = errors.New("pubsub client is closed")
)

// Client publishes messages and manages topics and subscriptions of one
// project. It is safe for concurrent use. Create one per process and reuse
// it.
type Client struct {
	c       *pubsub.Client
	project string

	mu         sync.Mutex
	publishers map[string]*pubsub.Publisher // by topic id
	closed     bool
}

// New returns a Client for project. opts are passed to the underlying
// client; with PUBSUB_EMULATOR_HOST set, the library connects to that
// emulator without credentials.
func New(ctx context.Context, project string, opts ...option.ClientOption) (*Client, error) {
	if project == "" {
		return nil, fmt.Errorf("creating Pub/Sub client: %w: empty project id", ErrInvalidArgument)
	}
	c, err := pubsub.NewClient(ctx, project, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating Pub/Sub client for project %s: %w", project, err)
	}
	return &Client{c: c, project: project, publishers: make(map[string]*pubsub.Publisher)}, nil
}

// Project returns the project id the Client works in.
func (c *Client) Project() string { return c.project }

// SubscriptionAdmin returns the client's subscription admin client, for
// pulls that acknowledge nothing (shared/status PeekDeadLetters).
func (c *Client) SubscriptionAdmin() *pubsubapi.SubscriptionAdminClient {
	return c.c.SubscriptionAdminClient
}

// Close flushes and stops every publisher, then closes the connections.
// Later calls return nil; other methods then return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	pubs := c.publishers
	c.publishers = nil
	c.mu.Unlock()

	var wg sync.WaitGroup
	for _, p := range pubs {
		wg.Go(p.Stop)
	}
	wg.Wait()
	if err := c.c.Close(); err != nil {
		return fmt.Errorf("closing Pub/Sub client: %w", err)
	}
	return nil
}

// publisher returns the publisher of topic, creating it on first use.
func (c *Client) publisher(topic string) (*pubsub.Publisher, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	p, ok := c.publishers[topic]
	if !ok {
		p = c.c.Publisher(topic)
		c.publishers[topic] = p
	}
	return p, nil
}

// Publish publishes one message to topic and waits for the server to
// acknowledge it, returning the server-assigned message id. The caller
// bounds the wait through ctx. attrs may be nil. Publishing to a topic that
// does not exist fails with a NotFound status.
func (c *Client) Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) (string, error) {
	if err := ValidateTopicID(topic); err != nil {
		return "", fmt.Errorf("publishing: %w", err)
	}
	p, err := c.publisher(topic)
	if err != nil {
		return "", fmt.Errorf("publishing to %s: %w", topic, err)
	}
	id, err := p.Publish(ctx, &pubsub.Message{Data: data, Attributes: attrs}).Get(ctx)
	if err != nil {
		return "", fmt.Errorf("publishing to %s: %w", topic, err)
	}
	return id, nil
}

// EnsureTopic creates topic unless it exists.
func (c *Client) EnsureTopic(ctx context.Context, topic string) error {
	if err := ValidateTopicID(topic); err != nil {
		return fmt.Errorf("ensuring topic: %w", err)
	}
	if err := c.live(); err != nil {
		return fmt.Errorf("ensuring topic %s: %w", topic, err)
	}
	_, err := c.c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: c.topicName(topic)})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	return nil
}

// EnsurePushSubscription creates subscription sub on topic, pushing to
// endpoint, unless a subscription of that name exists; an existing one is
// left as it is, whatever its settings. It creates topic too when needed.
//
// endpoint is an absolute http or https URL (the service requires https;
// the emulator accepts http). To have functions-framework deliver the push
// as a Pub/Sub CloudEvent, its path must contain projects/P/topics/T.
//
// When deadLetterTopic is not empty, it is created when needed, and a
// message that failed maxDeliveryAttempts deliveries (5–100; 0 means 5) is
// forwarded to it. A dead-letter topic without subscriptions drops what it
// receives, so give it one. On Google Cloud the Pub/Sub service agent also
// needs publisher rights on that topic and subscriber rights on sub.
// maxDeliveryAttempts must be 0 when deadLetterTopic is empty.
//
// ackDeadline is how long a push may take before it is retried: whole
// seconds from 10 s to 600 s, 0 meaning 10 s.
//
// Invalid arguments return ErrInvalidID or ErrInvalidArgument without any
// call to the service.
func (c *Client) EnsurePushSubscription(ctx context.Context, sub, topic, endpoint string,
	deadLetterTopic string, maxDeliveryAttempts int, ackDeadline time.Duration) error {
	s, err := c.pushSubscription(sub, topic, endpoint, deadLetterTopic, maxDeliveryAttempts, ackDeadline)
	if err != nil {
		return fmt.Errorf("ensuring push subscription: %w", err)
	}
	if err := c.EnsureTopic(ctx, topic); err != nil {
		return fmt.Errorf("ensuring push subscription %s: %w", sub, err)
	}
	if deadLetterTopic != "" {
		if err := c.EnsureTopic(ctx, deadLetterTopic); err != nil {
			return fmt.Errorf("ensuring push subscription %s: dead-letter topic: %w", sub, err)
		}
	}
	return c.createSubscription(ctx, s)
}

// pushSubscription validates the arguments of EnsurePushSubscription and
// builds the subscription.
func (c *Client) pushSubscription(sub, topic, endpoint, deadLetterTopic string,
	maxDeliveryAttempts int, ackDeadline time.Duration) (*pubsubpb.Subscription, error) {
	var errs []error
	errs = append(errs, ValidateSubscriptionID(sub), ValidateTopicID(topic))
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%w: push endpoint %q is not an absolute http(s) URL", ErrInvalidArgument, endpoint))
	}
	var dlp *pubsubpb.DeadLetterPolicy
	if deadLetterTopic == "" {
		if maxDeliveryAttempts != 0 {
			errs = append(errs, fmt.Errorf("%w: maxDeliveryAttempts %d given without a dead-letter topic", ErrInvalidArgument, maxDeliveryAttempts))
		}
	} else {
		errs = append(errs, ValidateTopicID(deadLetterTopic))
		if deadLetterTopic == topic {
			errs = append(errs, fmt.Errorf("%w: dead-letter topic %s is the subscription's own topic", ErrInvalidArgument, topic))
		}
		if maxDeliveryAttempts == 0 {
			maxDeliveryAttempts = MinDeliveryAttempts
		}
		if maxDeliveryAttempts < MinDeliveryAttempts || maxDeliveryAttempts > MaxDeliveryAttempts {
			errs = append(errs, fmt.Errorf("%w: maxDeliveryAttempts %d outside %d–%d",
				ErrInvalidArgument, maxDeliveryAttempts, MinDeliveryAttempts, MaxDeliveryAttempts))
		}
		dlp = &pubsubpb.DeadLetterPolicy{
			DeadLetterTopic:     c.topicName(deadLetterTopic),
			MaxDeliveryAttempts: int32(maxDeliveryAttempts),
		}
	}
	if ackDeadline == 0 {
		ackDeadline = MinAckDeadline
	}
	if ackDeadline < MinAckDeadline || ackDeadline > MaxAckDeadline || ackDeadline%time.Second != 0 {
		errs = append(errs, fmt.Errorf("%w: ack deadline %v is not whole seconds in %v–%v",
			ErrInvalidArgument, ackDeadline, MinAckDeadline, MaxAckDeadline))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &pubsubpb.Subscription{
		Name:               c.subscriptionName(sub),
		Topic:              c.topicName(topic),
		PushConfig:         &pubsubpb.PushConfig{PushEndpoint: endpoint},
		AckDeadlineSeconds: int32(ackDeadline / time.Second),
		DeadLetterPolicy:   dlp,
	}, nil
}

// EnsurePullSubscription creates pull subscription sub on topic unless a
// subscription of that name exists, creating topic too when needed.
func (c *Client) EnsurePullSubscription(ctx context.Context, sub, topic string) error {
	if err := errors.Join(ValidateSubscriptionID(sub), ValidateTopicID(topic)); err != nil {
		return fmt.Errorf("ensuring pull subscription: %w", err)
	}
	if err := c.EnsureTopic(ctx, topic); err != nil {
		return fmt.Errorf("ensuring pull subscription %s: %w", sub, err)
	}
	return c.createSubscription(ctx, &pubsubpb.Subscription{
		Name:               c.subscriptionName(sub),
		Topic:              c.topicName(topic),
		AckDeadlineSeconds: int32(MinAckDeadline / time.Second),
	})
}

func (c *Client) createSubscription(ctx context.Context, s *pubsubpb.Subscription) error {
	if err := c.live(); err != nil {
		return fmt.Errorf("creating subscription %s: %w", s.GetName(), err)
	}
	_, err := c.c.SubscriptionAdminClient.CreateSubscription(ctx, s)
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("creating subscription %s on %s: %w", s.GetName(), s.GetTopic(), err)
	}
	return nil
}

// Message is a message received by Pull.
type Message struct {
	ID          string
	Data        []byte
	Attributes  map[string]string
	PublishTime time.Time
	OrderingKey string
	// DeliveryAttempt counts deliveries, from 1, on subscriptions with a
	// dead-letter policy; it is 0 otherwise.
	DeliveryAttempt int
}

// pullPoll is the pause between empty pulls.
const pullPoll = 100 * time.Millisecond

// pullCallTimeout bounds one Pull call. It is not Pull's wait: each call
// returns at once (return_immediately), and the bound is only against a
// server that does not answer.
const pullCallTimeout = 30 * time.Second

// Pull receives up to maxMessages (1–1000) messages from subscription sub,
// waiting up to wait for at least one, and acknowledges those it returns.
// It returns as soon as a pull yields messages, so it may return fewer than
// maxMessages even when more are queued. An empty result with a nil error means
// nothing arrived within wait. It is meant for demos and tests; functions
// receive messages by push.
//
// It polls with calls that return at once rather than making a call that
// waits and cutting it short at wait: the server may already have handed
// messages to a call the client abandons, and those are delivered again
// only after the subscription's ack deadline (10 s by default), which a
// loaded machine turns into most messages arriving 10 s late.
func (c *Client) Pull(ctx context.Context, sub string, maxMessages int, wait time.Duration) ([]Message, error) {
	if err := ValidateSubscriptionID(sub); err != nil {
		return nil, fmt.Errorf("pulling: %w", err)
	}
	if maxMessages < 1 || maxMessages > MaxPullMessages {
		return nil, fmt.Errorf("pulling from %s: %w: maxMessages %d outside 1–%d", sub, ErrInvalidArgument, maxMessages, MaxPullMessages)
	}
	if err := c.live(); err != nil {
		return nil, fmt.Errorf("pulling from %s: %w", sub, err)
	}
	name := c.subscriptionName(sub)
	deadline := time.Now().Add(wait)
	for {
		resp, err := c.pullOnce(ctx, name, maxMessages)
		if err != nil {
			return nil, fmt.Errorf("pulling from %s: %w", sub, err)
		}
		if len(resp) > 0 {
			return c.ack(ctx, name, resp)
		}
		if !time.Now().Before(deadline) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pulling from %s: %w", sub, ctx.Err())
		case <-time.After(min(pullPoll, time.Until(deadline))):
		}
	}
}

// pullOnce makes one Pull call that returns at once, with what is there.
func (c *Client) pullOnce(ctx context.Context, name string, maxMessages int) ([]*pubsubpb.ReceivedMessage, error) {
	callCtx, cancel := context.WithTimeout(ctx, pullCallTimeout)
	defer cancel()
	resp, err := c.c.SubscriptionAdminClient.Pull(callCtx, &pubsubpb.PullRequest{
		Subscription: name,
		MaxMessages:  int32(maxMessages),
		//lint:ignore SA1019 the API still accepts it (pubsub.proto: "discouraged" for throughput, which a demo's or test's Pull does not need); without it, a wait cut short can strand messages until their ack deadline
		ReturnImmediately: true,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return resp.GetReceivedMessages(), nil
}

// ack acknowledges received and converts them.
func (c *Client) ack(ctx context.Context, name string, received []*pubsubpb.ReceivedMessage) ([]Message, error) {
	ids := make([]string, 0, len(received))
	msgs := make([]Message, 0, len(received))
	for _, r := range received {
		ids = append(ids, r.GetAckId())
		m := r.GetMessage()
		msgs = append(msgs, Message{
			ID:              m.GetMessageId(),
			Data:            m.GetData(),
			Attributes:      m.GetAttributes(),
			PublishTime:     m.GetPublishTime().AsTime(),
			OrderingKey:     m.GetOrderingKey(),
			DeliveryAttempt: int(r.GetDeliveryAttempt()),
		})
	}
	err := c.c.SubscriptionAdminClient.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: name, AckIds: ids})
	if err != nil {
		return nil, fmt.Errorf("acknowledging %d messages on %s: %w", len(ids), name, err)
	}
	return msgs, nil
}

func (c *Client) live() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return nil
}

func (c *Client) topicName(id string) string { return TopicName(c.project, id) }

func (c *Client) subscriptionName(id string) string { return SubscriptionName(c.project, id) }

// ValidateTopicID reports, as ErrInvalidID, why the service would reject
// id as a topic id. See validateID for the rules.
func ValidateTopicID(id string) error { return validateID("topic", id) }

// ValidateSubscriptionID reports, as ErrInvalidID, why the service would
// reject id as a subscription id. See validateID for the rules.
func ValidateSubscriptionID(id string) error { return validateID("subscription", id) }

// validateID applies the service's rules for topic and subscription ids:
// 3–255 characters, starting with a letter, made of letters, digits and
// - _ . ~ + %, and not starting with "goog". It expects the id, not the
// full projects/P/… name.
func validateID(kind, id string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %s id %q %s", ErrInvalidID, kind, id, why) }
	switch {
	case strings.HasPrefix(id, "projects/"):
		return bad("is a full resource name; pass the id alone")
	case len(id) < 3 || len(id) > 255:
		return bad("must be 3–255 characters long")
	case !isLetter(rune(id[0])):
		return bad("must start with a letter")
	case strings.HasPrefix(id, "goog"):
		return bad(`must not start with "goog"`)
	}
	for _, r := range id {
		if !isLetter(r) && !(r >= '0' && r <= '9') && !strings.ContainsRune("-_.~+%", r) {
			return bad(fmt.Sprintf("contains %q; allowed are letters, digits and - _ . ~ + %%", r))
		}
	}
	return nil
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// TopicName is the full resource name of topic id in project:
// "projects/P/topics/ID".
func TopicName(project, id string) string { return "projects/" + project + "/topics/" + id }

// SubscriptionName is the full resource name of subscription id in project:
// "projects/P/subscriptions/ID".
func SubscriptionName(project, id string) string {
	return "projects/" + project + "/subscriptions/" + id
}

// Predefined roles a Pub/Sub caller needs: RolePublisher on a topic to
// publish to it, RoleSubscriber on a subscription to pull from it and
// acknowledge its messages (https://cloud.google.com/pubsub/docs/access-control).
const (
	RolePublisher  = "roles/pubsub.publisher"
	RoleSubscriber = "roles/pubsub.subscriber"
)

// PermissionError is a PermissionDenied answer of Pub/Sub, told as the
// grant that is missing: who needs which role on which resource.
type PermissionError struct {
	Identity string // e.g. "the agent's service account"
	Role     string // e.g. RoleSubscriber
	Resource string // full resource name, e.g. "projects/P/subscriptions/S"
	Err      error  // the service's answer
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("%s needs %s on %s: %v", e.Identity, e.Role, e.Resource, e.Err)
}

func (e *PermissionError) Unwrap() error { return e.Err }

// Permission returns err as a *PermissionError naming identity, role and
// resource when it carries a gRPC PermissionDenied status (wrapped or
// not), and err unchanged otherwise (nil for nil).
func Permission(err error, identity, role, resource string) error {
	if err == nil || status.Code(err) != codes.PermissionDenied {
		return err
	}
	var pe *PermissionError
	if errors.As(err, &pe) {
		return err
	}
	return &PermissionError{Identity: identity, Role: role, Resource: resource, Err: err}
}
