package apply

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// TestClassify: the executor classifies a failed action at the adapter
// edge, by Compute error code (never by what to do about it: plan.Respond),
// and keeps the code for operators.
func TestClassify(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	op := func(code string, status int) error {
		return fmt.Errorf("creating resize request rr: %w", &gce.OperationError{Op: "op-1", Code: code, HTTPStatus: status})
	}
	create := plan.CreateResizeRequest{Pool: "a3u", Name: "rr"}
	slurm := plan.SlurmCommand{Command: "drain"}
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		a        plan.Action
		err      error
		want     plan.FailureClass
		wantCode string
	}{
		{"stock-out", live, create, op("ZONE_RESOURCE_POOL_EXHAUSTED", 503), plan.FailCapacity, "ZONE_RESOURCE_POOL_EXHAUSTED"},
		{"quota", live, create, op("QUOTA_EXCEEDED", 403), plan.FailQuota, "QUOTA_EXCEEDED"},
		{"server error", live, create, op("INTERNAL_ERROR", 503), plan.FailTransient, "INTERNAL_ERROR"},
		{"not ready: told apart from transient", live, plan.ReportHostAsFaulty{Pool: "a3u"}, op("RESOURCE_NOT_READY", 400), plan.FailNotReady, "RESOURCE_NOT_READY"},
		{"not found", live, create, op("RESOURCE_NOT_FOUND", 404), plan.FailNotFound, "RESOURCE_NOT_FOUND"},
		{"invalid", live, create, op("INVALID_ARGUMENT", 400), plan.FailPermanent, "INVALID_ARGUMENT"},
		{"not flexslurm's", live, plan.DeleteVMs{Pool: "a3u"}, fmt.Errorf("%w: refusing", errNotOurs), plan.FailPermanent, "UNKNOWN"},
		{"Slurm command not published", live, slurm, errors.New("pubsub: connection reset"), plan.FailTransient, "UNKNOWN"},
		{"Slurm command, context ended", ended, slurm, context.Canceled, failureClass(gce.Classify(context.Canceled)), "UNKNOWN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.ctx, tc.a, tc.err); got != tc.want {
				t.Errorf("classify = %s, want %s", got, tc.want)
			}
			if got := errorCode(tc.err); got != tc.wantCode {
				t.Errorf("errorCode = %q, want %q", got, tc.wantCode)
			}
		})
	}
	if got := failureClass(gce.ClassNone).Provisioning(); got != "" {
		t.Errorf("a resize request with no error code backs off as %q, want none", got)
	}
}
