package pubsub

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestPermission: a PermissionDenied answer, however wrapped, becomes one
// error naming who needs which role on which resource; anything else is
// returned unchanged.
func TestPermission(t *testing.T) {
	denied := status.Error(codes.PermissionDenied, "User not authorized to perform this action.")
	const sub = "projects/p/subscriptions/slurm-commands-agent"
	const want = "the agent's service account needs roles/pubsub.subscriber on projects/p/subscriptions/slurm-commands-agent: "
	for name, err := range map[string]error{
		"bare status":    denied,
		"wrapped status": fmt.Errorf("receiving: %w", denied),
		"status carrier": fmt.Errorf("publishing to t: %w", carrier{denied}),
	} {
		t.Run(name, func(t *testing.T) {
			got := Permission(err, "the agent's service account", RoleSubscriber, sub)
			var pe *PermissionError
			if !errors.As(got, &pe) {
				t.Fatalf("Permission(%v) = %v, want a *PermissionError", err, got)
			}
			if got.Error() != want+err.Error() {
				t.Errorf("message %q, want %q", got.Error(), want+err.Error())
			}
			if status.Code(got) != codes.PermissionDenied || !errors.Is(got, err) {
				t.Errorf("the cause is not kept: %v", got)
			}
			if again := Permission(got, "x", RolePublisher, "y"); again != got {
				t.Errorf("mapped twice: %v", again)
			}
		})
	}
	for _, err := range []error{nil, status.Error(codes.NotFound, "no such subscription"), errors.New("boom")} {
		if got := Permission(err, "who", RoleSubscriber, sub); got != err {
			t.Errorf("Permission(%v) = %v, want it unchanged", err, got)
		}
	}
}

func TestResourceNames(t *testing.T) {
	if got := TopicName("p", "slurm-snapshot"); got != "projects/p/topics/slurm-snapshot" {
		t.Errorf("TopicName = %s", got)
	}
	if got := SubscriptionName("p", "slurm-commands-agent"); got != "projects/p/subscriptions/slurm-commands-agent" {
		t.Errorf("SubscriptionName = %s", got)
	}
}

// carrier carries a gRPC status the way the client libraries' API errors
// (gax-go apierror.APIError) do: through a GRPCStatus method.
type carrier struct{ err error }

func (c carrier) Error() string              { return "api error: " + c.err.Error() }
func (c carrier) GRPCStatus() *status.Status { s, _ := status.FromError(c.err); return s }
func (c carrier) Unwrap() error              { return c.err }
