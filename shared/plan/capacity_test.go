package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

const (
	stockoutMsg = "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request."
	quotaMsg    = "Quota 'PREEMPTIBLE_NVIDIA_H200_GPUS' exceeded.  Limit: 8.0 in region us-central1."
)

func queued(name string, la AttemptError) ObservedResizeRequest {
	return ObservedResizeRequest{Name: name, State: "ACCEPTED", Created: t0, VMs: []string{"flexvm-a3u-0-g1"}, LastAttempt: la}
}

var (
	stockout = AttemptError{Class: ClassCapacity, Code: "ZONE_RESOURCE_POOL_EXHAUSTED", Message: stockoutMsg}
	quota    = AttemptError{Class: ClassQuota, Code: "QUOTA_EXCEEDED", Message: quotaMsg}
)

// withJob7 stores job 7 pending on node flexvm-a3u-1, its request
// rr-flexvm-a3u-j7-g1 made at t0.
func withJob7(t *testing.T, st *model.State, _ *model.Pool) {
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
}

// A queued request's lastAttempt error becomes the pool's condition, an
// alert when it begins, and a backoff for new requests; the request keeps
// its place (never cancelled or re-created); the condition and backoff
// clear with the error.
func TestQueuedShortage(t *testing.T) {
	capCond := "WaitingForCapacity: ZONE_RESOURCE_POOL_EXHAUSTED: " + stockoutMsg + " (resize request rr-flexvm-a3u-0-g1 stays queued)"
	quotaCond := "WaitingForQuota: QUOTA_EXCEEDED: " + quotaMsg + " (resize request rr-flexvm-a3u-j7-g1 stays queued)"
	type poolWant struct {
		Condition      string
		ConditionSince time.Time
		Attempts       int
		Reason         string
		Until          time.Time
		Shortage       *model.Shortage
	}
	capShort := func(since time.Time) *model.Shortage {
		return &model.Shortage{Class: ClassCapacity, Code: stockout.Code, Message: stockoutMsg, Request: "rr-flexvm-a3u-0-g1", Since: since}
	}
	quotaShort := &model.Shortage{Class: ClassQuota, Code: quota.Code, Message: quotaMsg, Request: "rr-flexvm-a3u-j7-g1", Since: t0.Add(10 * time.Minute)}
	now := t0.Add(10 * time.Minute)
	tests := []struct {
		name    string
		prepare func(t *testing.T, st *model.State, p *model.Pool)
		rrs     []ObservedResizeRequest
		want    []string
		pool    poolWant
	}{
		{
			name: "a stock-out on the queued request: condition, alert, capacity backoff; the request is left alone",
			rrs:  []ObservedResizeRequest{queued("rr-flexvm-a3u-0-g1", stockout)},
			want: []string{"Metric:pool_backoff", "Alert:a3u", "Metric:provisioning_errors", "PutPool:a3u"},
			pool: poolWant{capCond, now, 1, ClassCapacity, now.Add(2 * time.Minute), capShort(now)},
		},
		{
			name:    "quota wins over capacity, whatever the order",
			prepare: withJob7,
			rrs: []ObservedResizeRequest{queued("rr-flexvm-a3u-0-g1", stockout),
				{Name: "rr-flexvm-a3u-j7-g1", State: "ACCEPTED", Created: t0, LastAttempt: quota}},
			// Job 7's comment now names what Compute reports of its request.
			want: []string{"Metric:pool_backoff", "Alert:a3u", "Metric:provisioning_errors", "PutPool:a3u", "PutJob:7/pending", "Slurm:job_comment:7"},
			pool: poolWant{quotaCond, now, 1, ClassQuota, now.Add(10 * time.Minute), quotaShort},
		},
		{
			name: "the same shortage on a later pass within the backoff changes nothing",
			prepare: func(_ *testing.T, _ *model.State, p *model.Pool) {
				p.Condition, p.ConditionSince = capCond, t0
				p.Shortage = &model.Shortage{Class: ClassCapacity, Code: stockout.Code, Message: stockoutMsg, Request: "rr-flexvm-a3u-0-g1", Since: t0}
				p.BackoffAttempts, p.BackoffReason, p.BackoffUntil = 1, ClassCapacity, now.Add(time.Minute)
			},
			rrs:  []ObservedResizeRequest{queued("rr-flexvm-a3u-0-g1", stockout)},
			want: nil,
			pool: poolWant{capCond, t0, 1, ClassCapacity, now.Add(time.Minute), capShort(t0)},
		},
		{
			name: "the shortage lasting past the backoff: the backoff doubles, no second alert",
			prepare: func(_ *testing.T, _ *model.State, p *model.Pool) {
				p.Condition, p.ConditionSince = capCond, t0
				p.Shortage = &model.Shortage{Class: ClassCapacity, Code: stockout.Code, Message: stockoutMsg, Request: "rr-flexvm-a3u-0-g1", Since: t0}
				p.BackoffAttempts, p.BackoffReason, p.BackoffUntil = 1, ClassCapacity, now
			},
			rrs:  []ObservedResizeRequest{queued("rr-flexvm-a3u-0-g1", stockout)},
			want: []string{"Metric:pool_backoff", "PutPool:a3u"},
			pool: poolWant{capCond, t0, 2, ClassCapacity, now.Add(4 * time.Minute), capShort(t0)},
		},
		{
			name: "a stock-out turning into a quota error is a new condition and alert",
			prepare: func(t *testing.T, st *model.State, p *model.Pool) {
				withJob7(t, st, p)
				p.Condition, p.ConditionSince = capCond, t0
				p.Shortage = &model.Shortage{Class: ClassCapacity, Code: stockout.Code, Message: stockoutMsg, Request: "rr-flexvm-a3u-0-g1", Since: t0}
				p.BackoffAttempts, p.BackoffReason, p.BackoffUntil = 1, ClassCapacity, now.Add(time.Minute)
			},
			rrs:  []ObservedResizeRequest{{Name: "rr-flexvm-a3u-j7-g1", State: "ACCEPTED", Created: t0, LastAttempt: quota}, queued("rr-flexvm-a3u-0-g1", AttemptError{})},
			want: []string{"Alert:a3u", "Metric:provisioning_errors", "PutPool:a3u", "PutJob:7/pending", "Slurm:job_comment:7"},
			pool: poolWant{quotaCond, now, 1, ClassCapacity, now.Add(time.Minute), quotaShort},
		},
		{
			name: "the error cleared while still queued: condition and backoff cleared",
			prepare: func(_ *testing.T, _ *model.State, p *model.Pool) {
				p.Condition, p.ConditionSince = capCond, t0
				p.Shortage = &model.Shortage{Class: ClassCapacity, Code: stockout.Code, Message: stockoutMsg, Request: "rr-flexvm-a3u-0-g1", Since: t0}
				p.BackoffAttempts, p.BackoffReason, p.BackoffUntil = 3, ClassCapacity, now.Add(time.Hour)
			},
			rrs:  []ObservedResizeRequest{queued("rr-flexvm-a3u-0-g1", AttemptError{})},
			want: []string{"PutPool:a3u"},
			pool: poolWant{},
		},
		{
			name: "the request succeeded: condition, shortage and backoff cleared",
			prepare: func(_ *testing.T, _ *model.State, p *model.Pool) {
				p.Condition, p.ConditionSince = capCond, t0
				p.Shortage = &model.Shortage{Class: ClassCapacity, Code: stockout.Code, Message: stockoutMsg, Request: "rr-flexvm-a3u-0-g1", Since: t0}
				p.BackoffAttempts, p.BackoffReason, p.BackoffUntil = 2, ClassCapacity, now.Add(time.Hour)
			},
			rrs:  []ObservedResizeRequest{{Name: "rr-flexvm-a3u-0-g1", State: "SUCCEEDED", Created: t0}},
			want: []string{"PutPool:a3u", "PutNode:flexvm-a3u-0/requested"},
			pool: poolWant{},
		},
		{
			name: "an open breaker's condition is kept; the backoff still applies",
			prepare: func(_ *testing.T, _ *model.State, p *model.Pool) {
				p.Condition, p.ConditionSince = "BootstrapFailures: 3 consecutive nodes never registered", t0
			},
			rrs:  []ObservedResizeRequest{queued("rr-flexvm-a3u-0-g1", stockout)},
			want: []string{"Metric:pool_backoff", "Alert:a3u", "Metric:provisioning_errors", "PutPool:a3u"},
			pool: poolWant{"BootstrapFailures: 3 consecutive nodes never registered", t0, 1, ClassCapacity, now.Add(2 * time.Minute), capShort(now)},
		},
		{
			name: "a permanent code in lastAttempt is not a shortage",
			rrs:  []ObservedResizeRequest{queued("rr-flexvm-a3u-0-g1", AttemptError{Class: ClassPermanent, Code: "INVALID_FIELD_VALUE", Message: "x"})},
			want: nil,
		},
		{
			name: "lastAttempt of a request that is no longer queued is ignored",
			rrs:  []ObservedResizeRequest{{Name: "rr-flexvm-a3u-0-g1", State: "CANCELLED", Created: t0, LastAttempt: stockout}},
			// The finished request, waited on by no node once g2 is asked
			// for, is deleted in the same pass.
			want: []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			if tc.prepare != nil {
				tc.prepare(t, st, st.Pools["a3u"])
			}
			obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, ResizeRequests: tc.rrs}}}
			acts := Reconcile(st, obs, now, Policy{})
			got := kinds(acts)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			Apply(st, acts)
			p := st.Pools["a3u"]
			if d := cmp.Diff(tc.pool, poolWant{p.Condition, p.ConditionSince, p.BackoffAttempts, p.BackoffReason, p.BackoffUntil, p.Shortage}); d != "" {
				t.Errorf("pool (-want +got):\n%s", d)
			}
		})
	}
}

// While the pool waits for capacity, a new job gets no resize request (it
// waits, pending); once the error clears it is served.
func TestQueuedShortageHoldsNewRequests(t *testing.T) {
	st, c := applied(t)
	now := t0.Add(10 * time.Minute)
	short := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
		ResizeRequests: []ObservedResizeRequest{queued("rr-flexvm-a3u-0-g1", stockout)}}}}
	Apply(st, Reconcile(st, short, now, Policy{}))
	acts, err := Job(st, c, jobEv(event.TypeJobPending, "7", 1), now.Add(time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range External(acts) {
		if sc, ok := a.(SlurmCommand); ok && sc.Command == event.SlurmJobComment {
			continue
		}
		t.Fatalf("a new request during the shortage: %v", a)
	}
	if d := cmp.Diff([]string{"7: flexslurm: backing off after a stockout until 2026-11-30T12:12:00Z (pool a3u)"}, comments(acts)); d != "" {
		t.Errorf("the job's user is told why it waits (-want +got):\n%s", d)
	}
	Apply(st, acts)
	if j := st.Jobs["7"]; j == nil || j.State != model.JobPending {
		t.Fatalf("job 7 = %+v, want pending", j)
	}
	// The error clears: the condition goes and the job is served on the
	// same pass.
	clear := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
		ResizeRequests: []ObservedResizeRequest{queued("rr-flexvm-a3u-0-g1", AttemptError{})}}}}
	got := kinds(Reconcile(st, clear, now.Add(2*time.Minute), Policy{}))
	want := []string{"PutPool:a3u", "PutNode:flexvm-a3u-1/requested", "PutJob:7/pending", "CreateResizeRequest:rr-flexvm-a3u-j7-g1=flexvm-a3u-1-g1", "Slurm:job_comment:7"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("after the error cleared (-want +got):\n%s", d)
	}
}

// The quota a refusal, a queued request's last attempt or a failed request
// names reaches the pool's condition and the alert, for the operator; the
// decisions (backoff class and length) are those of any quota error.
func TestQuotaNamedInCondition(t *testing.T) {
	const named = "PREEMPTIBLE_NVIDIA_H200_GPUS in region us-central1 (limit 8)"
	alertOf := func(acts []Action) string {
		for _, a := range acts {
			if al, ok := a.(Alert); ok {
				return al.Reason
			}
		}
		return ""
	}

	t.Run("refused outright", func(t *testing.T) {
		st, _ := applied(t)
		acts, err := ProvisioningFailedQuota(st, "a3u", "rr-x", ClassQuota, "QUOTA_EXCEEDED", named, t0, Policy{})
		if err != nil {
			t.Fatal(err)
		}
		Apply(st, acts)
		p := st.Pools["a3u"]
		if want := "QuotaExceeded: QUOTA_EXCEEDED: quota " + named; p.Condition != want {
			t.Errorf("condition %q, want %q", p.Condition, want)
		}
		if a := alertOf(acts); !strings.Contains(a, named) {
			t.Errorf("alert %q does not name the quota", a)
		}
		if p.BackoffReason != ClassQuota || p.BackoffUntil.Sub(t0) != 10*time.Minute {
			t.Errorf("backoff %s until %s, want quota for 10m", p.BackoffReason, p.BackoffUntil)
		}
		// Without a quota named, the condition is the code alone.
		st2, _ := applied(t)
		acts, _ = ProvisioningFailed(st2, "a3u", "rr-x", ClassQuota, "QUOTA_EXCEEDED", t0, Policy{})
		Apply(st2, acts)
		if c := st2.Pools["a3u"].Condition; c != "QuotaExceeded: QUOTA_EXCEEDED" {
			t.Errorf("condition without a quota %q", c)
		}
	})

	t.Run("queued, last attempt short of quota", func(t *testing.T) {
		st, _ := applied(t)
		la := quota
		la.Quota = named
		obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
			ResizeRequests: []ObservedResizeRequest{queued("rr-flexvm-a3u-0-g1", la)}}}}
		acts := Reconcile(st, obs, t0.Add(10*time.Minute), Policy{})
		Apply(st, acts)
		want := "WaitingForQuota: QUOTA_EXCEEDED on quota " + named + ": " + quotaMsg + " (resize request rr-flexvm-a3u-0-g1 stays queued)"
		if c := st.Pools["a3u"].Condition; c != want {
			t.Errorf("condition %q, want %q", c, want)
		}
		if a := alertOf(acts); !strings.Contains(a, named) {
			t.Errorf("alert %q does not name the quota", a)
		}
	})

	t.Run("failed for quota", func(t *testing.T) {
		st, _ := applied(t)
		obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
			ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-0-g1", State: "FAILED", Created: t0,
				ErrorCode: "QUOTA_EXCEEDED", ErrorClass: ClassQuota, ErrorQuota: named}}}}}
		Apply(st, Reconcile(st, obs, t0.Add(10*time.Minute), Policy{}))
		if want := "QuotaExceeded: QUOTA_EXCEEDED: quota " + named; st.Pools["a3u"].Condition != want {
			t.Errorf("condition %q, want %q", st.Pools["a3u"].Condition, want)
		}
	})
}
