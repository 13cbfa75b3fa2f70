package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// TestOptionsDefaults: the agent consumes the subscription deploy/ creates
// and creates nothing unless asked.
func TestOptionsDefaults(t *testing.T) {
	o, err := Options{Spec: &spec.Cluster{ID: "flexvm"}, Project: "p"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Subscription != "slurm-commands-agent" || o.CreateSubscription {
		t.Errorf("subscription %q, create %v; want slurm-commands-agent, false", o.Subscription, o.CreateSubscription)
	}
	if o.Identity != "the agent's service account" {
		t.Errorf("identity %q", o.Identity)
	}
}

// TestReceiveError: a PermissionDenied or NotFound on the subscription is
// one error naming the role or the missing subscription; anything else is
// retried.
func TestReceiveError(t *testing.T) {
	o := Options{Project: "p", Subscription: DefaultSubscription, Identity: "the agent's service account"}
	denied := status.Error(codes.PermissionDenied, "User not authorized to perform this action.")
	err := receiveError(fmt.Errorf("pubsub: %w", denied), o)
	want := "the agent's service account needs roles/pubsub.subscriber on projects/p/subscriptions/slurm-commands-agent: pubsub: " + denied.Error()
	var pe *pubsub.PermissionError
	if err == nil || err.Error() != want || !errors.As(err, &pe) {
		t.Errorf("PermissionDenied: %v\nwant %s", err, want)
	}
	err = receiveError(status.Error(codes.NotFound, "Resource not found"), o)
	if err == nil || !strings.HasPrefix(err.Error(), "subscription projects/p/subscriptions/slurm-commands-agent does not exist: deploy/ creates it") {
		t.Errorf("NotFound: %v", err)
	}
	for _, retried := range []error{status.Error(codes.Unavailable, "try again"), errors.New("connection reset")} {
		if err := receiveError(retried, o); err != nil {
			t.Errorf("%v is not retried: %v", retried, err)
		}
	}
}

type fakePublisher struct{ err error }

func (f fakePublisher) Publish(context.Context, string, []byte, map[string]string) (string, error) {
	if f.err != nil {
		return "", f.err
	}
	return "1", nil
}

// TestPermissionPublisher: a publish refused for lack of permission names
// roles/pubsub.publisher and the topic.
func TestPermissionPublisher(t *testing.T) {
	p := permissionPublisher{pub: fakePublisher{err: fmt.Errorf("publishing to slurm-snapshot: %w",
		status.Error(codes.PermissionDenied, "User not authorized to perform this action."))}, project: "p", identity: "the agent's service account"}
	_, err := p.Publish(context.Background(), "slurm-snapshot", nil, nil)
	if want := "the agent's service account needs roles/pubsub.publisher on projects/p/topics/slurm-snapshot: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %v, want it to start %q", err, want)
	}
	other := errors.New("deadline exceeded")
	if _, err := (permissionPublisher{pub: fakePublisher{err: other}, project: "p"}).Publish(context.Background(), "t", nil, nil); err != other {
		t.Errorf("other errors change: %v", err)
	}
	if id, err := (permissionPublisher{pub: fakePublisher{}, project: "p"}).Publish(context.Background(), "t", nil, nil); err != nil || id != "1" {
		t.Errorf("success: %q, %v", id, err)
	}
}

// TestDefaultSubscriptionIsDeploys: the default is the subscription
// deploy/pubsub.tf creates for the agent.
func TestDefaultSubscriptionIsDeploys(t *testing.T) {
	b, err := os.ReadFile("../../deploy/pubsub.tf")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)resource "google_pubsub_subscription" "slurm_commands" \{.*?name\s*=\s*"([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatal(`deploy/pubsub.tf has no google_pubsub_subscription "slurm_commands" with a name`)
	}
	if string(m[1]) != DefaultSubscription {
		t.Errorf("deploy/pubsub.tf creates %q, the agent consumes %q", m[1], DefaultSubscription)
	}
}

// TestPromptSnapshot: a command that changed a node's state is followed by
// a snapshot PromptSnapshot later, long before the period's next one;
// commands that come meanwhile share it; none follows when prompt
// snapshots are off.
func TestPromptSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prompt time.Duration
		want   int // snapshots: the first, at once, and the prompted ones
	}{
		{"prompted", 50 * time.Millisecond, 2},
		{"off", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := make(chan time.Time, 10)
			r := &runner{o: Options{SnapshotEvery: time.Hour, PromptSnapshot: tc.prompt}, out: &hooks.Outbox{}, soon: make(chan struct{}, 1)}
			r.snapshot = func(context.Context) { taken <- time.Now() }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); r.tick(ctx) }()
			<-taken // the first, at once
			asked := time.Now()
			for range 3 {
				r.prompt() // three drains in a row
			}
			deadline := time.After(2 * time.Second) // far below the hour's period, far above the prompt
			n := 1
		wait:
			for {
				select {
				case at := <-taken:
					n++
					if at.Sub(asked) < tc.prompt {
						t.Errorf("prompted snapshot %v after the command, want at least %v", at.Sub(asked), tc.prompt)
					}
				case <-deadline:
					break wait
				}
			}
			cancel()
			<-done
			if n != tc.want {
				t.Errorf("%d snapshots, want %d", n, tc.want)
			}
		})
	}
}

// TestPromptsSnapshot: the commands whose effect a decision waits to see
// prompt a snapshot; the others do not.
func TestPromptsSnapshot(t *testing.T) {
	for _, c := range []event.SlurmOp{event.SlurmDrain, event.SlurmDown, event.SlurmPowerDown, event.SlurmPowerDownForce,
		event.SlurmPowerUp, event.SlurmResume, event.SlurmRequeue} {
		if !promptsSnapshot(c) {
			t.Errorf("%s prompts no snapshot", c)
		}
	}
	for _, c := range []event.SlurmOp{event.SlurmJobComment, event.SlurmSignal, event.SlurmReservationCreate,
		event.SlurmReservationDelete, event.SlurmUpdateAddress, event.SlurmStartNow} {
		if promptsSnapshot(c) {
			t.Errorf("%s prompts a snapshot", c)
		}
	}
}
