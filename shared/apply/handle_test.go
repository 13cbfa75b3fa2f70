package apply_test

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// TestEnvelopeDropsEventsOlderThanPolicy: the age beyond which an event is
// dropped is the runner's Policy's MaxEventAge (default 1 h), nothing else:
// an event published 90 minutes ago is dropped under the default Policy and
// acted on under a Policy allowing 2 h; one published 3 hours ago is dropped
// under both.
func TestEnvelopeDropsEventsOlderThanPolicy(t *testing.T) {
	tests := []struct {
		name    string
		pol     plan.Policy
		age     time.Duration
		dropped bool
	}{
		{"default policy, fresh event", plan.Policy{}, time.Minute, false},
		{"default policy, 90 min old", plan.Policy{}, 90 * time.Minute, true},
		{"2 h policy, 90 min old", plan.Policy{MaxEventAge: 2 * time.Hour}, 90 * time.Minute, false},
		{"2 h policy, 3 h old", plan.Policy{MaxEventAge: 2 * time.Hour}, 3 * time.Hour, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := apply.New(apply.Deps{Policy: tc.pol, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			e := functest.Eventarc(t, "job-pending", "m-1", []byte(`{"version":1}`), nil, time.Now().Add(-tc.age))
			msg, _, err := r.Envelope(t.Context(), "test", e)
			if got := errors.Is(err, apply.ErrTooOld); got != tc.dropped {
				t.Fatalf("Envelope error %v: dropped = %t, want %t", err, got, tc.dropped)
			}
			if !tc.dropped && (msg == nil || msg.ID != "m-1") {
				t.Errorf("Envelope message %+v, want m-1", msg)
			}
		})
	}
}
