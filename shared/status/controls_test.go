package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/model"
)

func TestPoolControls(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		pool *model.Pool
		want Controls
	}{
		{"no record", nil, Controls{Backoff: "none", Breaker: "none"}},
		{"healthy", &model.Pool{}, Controls{Backoff: "none", Breaker: "none"}},
		{"capacity backoff and an open breaker", &model.Pool{
			BackoffUntil: at.Add(4 * time.Minute), BackoffAttempts: 2, BackoffReason: "capacity",
			BreakerOpenedAt: at.Add(-time.Minute), BootstrapFailures: 3,
			Condition: "BootstrapFailures: 3 consecutive nodes never registered", OverlapSeconds: 5400,
		}, Controls{
			Backoff: "capacity until 2026-11-30T12:04:00Z (failure 2)", Breaker: "open since 2026-11-30T11:59:00Z (3 bootstrap failures)",
			Condition: "BootstrapFailures: 3 consecutive nodes never registered", Overlap: 90 * time.Minute,
		}},
		{"backoff over", &model.Pool{BackoffUntil: at.Add(-time.Minute), BackoffAttempts: 1, BackoffReason: "quota", Condition: "QuotaExceeded: QUOTA_EXCEEDED"},
			Controls{Backoff: "expired (1 quota failures; next attempt allowed)", Breaker: "none", Condition: "QuotaExceeded: QUOTA_EXCEEDED"}},
		{"a queued request short of capacity", &model.Pool{
			BackoffUntil: at.Add(8 * time.Minute), BackoffAttempts: 3, BackoffReason: "capacity",
			Condition: "WaitingForCapacity: ZONE_RESOURCE_POOL_EXHAUSTED: no room (resize request rr-1 stays queued)",
			Shortage:  &model.Shortage{Class: "capacity", Code: "ZONE_RESOURCE_POOL_EXHAUSTED", Message: "no room", Request: "rr-1", Since: at.Add(-2 * time.Hour)},
		}, Controls{
			Backoff: "capacity until 2026-11-30T12:08:00Z (failure 3)", Breaker: "none",
			Condition: "WaitingForCapacity: ZONE_RESOURCE_POOL_EXHAUSTED: no room (resize request rr-1 stays queued)",
			Shortage:  "capacity: ZONE_RESOURCE_POOL_EXHAUSTED on rr-1 for " + Human(2*time.Hour) + " (since 2026-11-30T10:00:00Z)",
		}},
		{"workload policy refused", &model.Pool{WorkloadPolicy: "fs-c-p-wp-block", WorkloadPolicyRefused: "fs-c-p-wp-block", WorkloadPolicyError: "HTTP_400"},
			Controls{Backoff: "none", Breaker: "none", PolicyRefused: "fs-c-p-wp-block (HTTP_400)"}},
		{"a refused policy the spec no longer names", &model.Pool{WorkloadPolicy: "fs-c-p-wp-cluster", WorkloadPolicyRefused: "fs-c-p-wp-block", WorkloadPolicyError: "HTTP_400"},
			Controls{Backoff: "none", Breaker: "none"}},
	}
	for _, tc := range tests {
		if d := cmp.Diff(tc.want, poolControls(tc.pool, at)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}
