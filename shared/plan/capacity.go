package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
)

// Error classes the executor and the observer hand to the decisions (from
// shared/gce's table, keyed on Compute error codes).
const (
	ClassCapacity  = "capacity"  // stock-out: ZONE_RESOURCE_POOL_EXHAUSTED and kin
	ClassQuota     = "quota"     // QUOTA_EXCEEDED and kin
	ClassPermanent = "permanent" // invalid argument, permission, …
	// ClassWorkloadPolicy: the MIG's insert was refused while it carried
	// the pool's workload policy (placement.go, policyRefused).
	ClassWorkloadPolicy = "workload-policy"
)

// Metric is a counter increment, emitted as a structured log line that a
// Cloud Logging log-based metric counts (jsonPayload.metric = Name, labels
// as label extractors).
type Metric struct {
	Name   string
	Labels map[string]string
	Reason string
}

func (a Metric) Why() string    { return a.Reason }
func (a Metric) String() string { return "metric " + a.Name }

// Metric names.
const (
	MetricProvisioningErrors = "provisioning_errors" // labels: pool, class, code
	MetricBackoff            = "pool_backoff"        // labels: pool, reason
	MetricResubmits          = "resize_request_resubmits"
	MetricBreakerTrips       = "breaker_trips"
	MetricBootstrapFailures  = "bootstrap_failures"
	// MetricWorkloadPolicyRefused counts requests whose MIG Compute
	// refused with the pool's workload policy. Labels: pool, policy, code.
	MetricWorkloadPolicyRefused = "workload_policy_refused"
)

// backoff returns how long a pool waits after its n-th consecutive failure
// of the class: base × 2^(n−1), capped.
func (p Policy) backoff(class string, n int) time.Duration {
	base, limit := p.BackoffBase, p.BackoffCap
	if class != ClassCapacity {
		base, limit = p.QuotaBackoffBase, p.QuotaBackoffCap
	}
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// blocked reports whether the pool may not request capacity now (backoff,
// or an open breaker inside its cool-down), and why.
func (b *builder) blocked(pool *model.Pool) (bool, string) {
	if cur, ok := b.st.Pools[pool.ID]; ok {
		pool = cur // the record as this decision left it
	}
	if b.now.Before(pool.BackoffUntil) {
		return true, fmt.Sprintf("waiting: pool %s is in %s backoff until %s (failure %d)", pool.ID, pool.BackoffReason,
			pool.BackoffUntil.Format(time.RFC3339), pool.BackoffAttempts)
	}
	if !pool.BreakerOpenedAt.IsZero() && b.now.Before(pool.BreakerOpenedAt.Add(b.pol.BreakerCooldown)) {
		return true, fmt.Sprintf("waiting: pool %s's breaker is open after %d bootstrap failures, until %s", pool.ID,
			pool.BootstrapFailures, pool.BreakerOpenedAt.Add(b.pol.BreakerCooldown).Format(time.RFC3339))
	}
	return false, ""
}

func (b *builder) putPool(p model.Pool, reason string) {
	p.UpdatedAt = b.now
	c := p
	b.st.Pools[p.ID] = &c
	b.add(PutPool{Pool: p, Reason: reason})
}

// backOffQuota puts a pool into backoff after a failure of the class; quota
// names the quota the failure names (metric, region, limit, as Compute gave
// it; "" for none): the pool's condition
// and the alert name it, so that an operator knows which quota to raise.
// The text is for people; no decision reads it back.
func (b *builder) backOffQuota(pool *model.Pool, class, code, quota, why string) {
	p := *pool
	p.BackoffAttempts++
	p.BackoffReason = class
	d := b.pol.backoff(class, p.BackoffAttempts)
	p.BackoffUntil = b.now.Add(d)
	if class != ClassCapacity && p.Condition == "" {
		name := "QuotaExceeded"
		if class == ClassPermanent {
			name = "ProvisioningError"
		}
		what := code
		if quota != "" {
			what += ": quota " + quota
		}
		p.Condition, p.ConditionSince = fmt.Sprintf("%s: %s", name, what), b.now
		b.add(Alert{Pool: p.ID, Reason: fmt.Sprintf("pool %s cannot get capacity: %s (%s): fix it, flexslurm retries every backoff period", p.ID, what, why)})
	}
	b.putPool(p, fmt.Sprintf("%s error %s: no capacity requested for pool %s before %s (failure %d, backoff %s)", class, code, p.ID, p.BackoffUntil.Format(time.RFC3339), p.BackoffAttempts, d))
	b.add(Metric{Name: MetricProvisioningErrors, Labels: map[string]string{"pool": p.ID, "class": class, "code": code}, Reason: why})
	b.add(Metric{Name: MetricBackoff, Labels: map[string]string{"pool": p.ID, "reason": class}, Reason: p.BackoffUntil.Format(time.RFC3339)})
}

// clearBackoff clears a pool's backoff (and a quota or provisioning condition)
// after capacity was granted.
func (b *builder) clearBackoff(pool *model.Pool) {
	if pool.BackoffAttempts == 0 && pool.BackoffReason == "" && !isCapacityCondition(pool.Condition) && pool.Shortage == nil {
		return
	}
	p := *pool
	p.BackoffAttempts, p.BackoffReason, p.BackoffUntil = 0, "", time.Time{}
	p.Shortage = nil
	if isCapacityCondition(p.Condition) {
		p.Condition, p.ConditionSince = "", time.Time{}
	}
	b.putPool(p, fmt.Sprintf("capacity granted to pool %s: backoff cleared", p.ID))
}

func isCapacityCondition(c string) bool {
	return len(c) > 0 && (hasPrefix(c, "QuotaExceeded") || hasPrefix(c, "ProvisioningError") || hasPrefix(c, "QueueTimeouts") || isShortageCondition(c))
}

// Conditions of a pool whose queued request reports a shortage.
const (
	CondWaitingForCapacity = "WaitingForCapacity"
	CondWaitingForQuota    = "WaitingForQuota"
)

func isShortageCondition(c string) bool {
	return hasPrefix(c, CondWaitingForCapacity+":") || hasPrefix(c, CondWaitingForQuota+":")
}

// backOffOnShortage follows what Compute reports of a pool's queued requests.
// A resize request short of capacity or quota does not fail: it stays
// ACCEPTED, keeps its place in the queue, and carries the error of its
// latest attempt in status.lastAttempt.error, cleared when it turns final
// (docs/design/convergence.md, "Capacity"). While one of the pool's queued requests
// reports such an error, the pool shows it as its condition (with the
// Compute code and message), the operator is alerted when it begins or its
// code changes, and the pool is in backoff so that no new request is
// created for it; the queued request itself is never cancelled or
// re-created because of it. When no queued request reports a shortage any
// more (the error cleared, or the request ended), the condition and that
// backoff are cleared. Quota wins over capacity (it needs an operator);
// among requests of one class, the first by name.
func (b *builder) backOffOnShortage(pool *model.Pool, rrs []ObservedResizeRequest) {
	var short *ObservedResizeRequest
	for i := range rrs {
		rr := &rrs[i]
		if rr.State != "ACCEPTED" || (rr.LastAttempt.Class != ClassCapacity && rr.LastAttempt.Class != ClassQuota) {
			continue
		}
		if short == nil || (short.LastAttempt.Class != ClassQuota && rr.LastAttempt.Class == ClassQuota) ||
			(short.LastAttempt.Class == rr.LastAttempt.Class && rr.Name < short.Name) {
			short = rr
		}
	}
	if short == nil {
		if pool.Shortage == nil && !isShortageCondition(pool.Condition) {
			return
		}
		p := *pool
		why := fmt.Sprintf("reconciler: no queued request of pool %s reports a shortage any more", p.ID)
		if p.Shortage != nil {
			why += fmt.Sprintf(" (was %s %s on %s since %s)", p.Shortage.Class, p.Shortage.Code, p.Shortage.Request, p.Shortage.Since.UTC().Format(time.RFC3339))
		}
		p.Shortage = nil
		if isShortageCondition(p.Condition) {
			p.Condition, p.ConditionSince = "", time.Time{}
		}
		if p.BackoffReason == ClassCapacity || p.BackoffReason == ClassQuota {
			p.BackoffAttempts, p.BackoffReason, p.BackoffUntil = 0, "", time.Time{}
		}
		b.putPool(p, why+": condition and backoff cleared")
		return
	}
	la := short.LastAttempt
	p := *pool
	old := pool.Shortage
	begins := old == nil || old.Class != la.Class || old.Code != la.Code
	sh := model.Shortage{Class: la.Class, Code: la.Code, Message: la.Message, Request: short.Name, Since: b.now}
	if !begins {
		sh.Since = old.Since
	}
	var reasons []string
	if old == nil || *old != sh {
		p.Shortage = &sh
		reasons = append(reasons, "shortage recorded")
	}
	kind := CondWaitingForCapacity
	if la.Class == ClassQuota {
		kind = CondWaitingForQuota
	}
	code := la.Code
	if la.Quota != "" {
		code += " on quota " + la.Quota
	}
	cond := fmt.Sprintf("%s: %s: %s (resize request %s stays queued)", kind, code, la.Message, short.Name)
	if cond != p.Condition && (p.Condition == "" || isCapacityCondition(p.Condition)) {
		p.Condition, p.ConditionSince = cond, sh.Since
		reasons = append(reasons, "condition "+cond)
	}
	if !b.now.Before(p.BackoffUntil) {
		p.BackoffAttempts++
		p.BackoffReason = la.Class
		d := b.pol.backoff(la.Class, p.BackoffAttempts)
		p.BackoffUntil = b.now.Add(d)
		reasons = append(reasons, fmt.Sprintf("no new request before %s (backoff %s, %d)", p.BackoffUntil.Format(time.RFC3339), d, p.BackoffAttempts))
		b.add(Metric{Name: MetricBackoff, Labels: map[string]string{"pool": p.ID, "reason": la.Class}, Reason: p.BackoffUntil.Format(time.RFC3339)})
	}
	why := fmt.Sprintf("resize request %s queued, its last attempt failed with %s error %s: %s", short.Name, la.Class, code, la.Message)
	if begins {
		b.add(Alert{Pool: p.ID, Reason: fmt.Sprintf("pool %s is short of %s: %s; the request stays queued and no new one is made until it clears", p.ID, la.Class, why)})
		b.add(Metric{Name: MetricProvisioningErrors, Labels: map[string]string{"pool": p.ID, "class": la.Class, "code": la.Code}, Reason: why})
	}
	if len(reasons) > 0 {
		b.putPool(p, "reconciler: "+why+": "+strings.Join(reasons, "; "))
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// ProvisioningFailed decides what a resize request refused or failed with
// an error of the class requires: the pool backs off (stored, so every
// function instance sees it), the nodes waiting on the request are released
// without any deletion (no VM was created), and their job stays pending, to
// be served by the reconciler once the backoff ends.
func ProvisioningFailed(st *model.State, poolID, rr, class, code string, now time.Time, pol Policy) ([]Action, error) {
	return ProvisioningFailedQuota(st, poolID, rr, class, code, "", now, pol)
}

// ProvisioningFailedQuota is ProvisioningFailed for a refusal that names a
// quota (metric, region and limit as Compute gave them, for people; ""
// for none): the pool's condition and the alert name it.
func ProvisioningFailedQuota(st *model.State, poolID, rr, class, code, quota string, now time.Time, pol Policy) ([]Action, error) {
	b := newBuilder(st, now, pol)
	pool, ok := b.st.Pools[poolID]
	if !ok {
		return nil, rejectf("pool %s has no record", poolID)
	}
	why := fmt.Sprintf("resize request %s: %s error %s", rr, class, code)
	if class == ClassWorkloadPolicy {
		b.policyRefused(pool, rr, code)
		b.endRequest(rr, model.EndFailed, true, why)
		return b.out, nil
	}
	b.backOffQuota(pool, class, code, quota, why)
	b.endRequest(rr, model.EndFailed, true, why)
	return b.out, nil
}

// endRequest releases the nodes still waiting on a resize request that
// will never provision them, and notes it on their job. gone says the
// request can create no VM any more (Compute refused to create it); else
// it is being cancelled, and the nodes get no next generation until it is
// seen to end (requestMayBeActive).
func (b *builder) endRequest(rr string, end model.EndReason, gone bool, why string) {
	jobs := map[string]bool{}
	for _, n := range b.st.SortedNodes() {
		if n.ResizeRequest != rr || n.Phase != model.PhaseRequested {
			continue
		}
		node := *n
		node.Phase = model.PhaseReleased
		node.LastEnd = end
		node.RequestOpen = !gone
		b.putNode(node, why)
		if node.JobID != "" {
			jobs[node.JobID] = true
		}
	}
	for id := range jobs {
		if j, ok := b.st.Jobs[id]; ok && j.State == model.JobPending {
			jj := *j
			b.putJobAt(jj, model.JobStageWaiting, "waiting: "+why)
		}
	}
}

// queueTimedOut handles a request queued (ACCEPTED) past the queue timeout:
// cancelled and resubmitted as a new generation while its job is still
// pending (static nodes always), at most MaxResubmits times; then the pool is
// flagged and the request left queued.
func (b *builder) queueTimedOut(pool *model.Pool, node model.Node, rr ObservedResizeRequest) bool {
	count, owner := node.Resubmits, "node "+node.Name
	var job *model.Job
	if node.JobID != "" && kindOf(node, pool) == model.NodeDynamic {
		j, ok := b.st.Jobs[node.JobID]
		if !ok || j.State != model.JobPending {
			return false // a running job has its nodes; an ended job's queued request is cancelled (endedBeforeListing)
		}
		job, count, owner = j, j.Resubmits, "job "+j.ID
	}
	if count >= b.pol.MaxResubmits {
		if !hasPrefix(pool.Condition, "QueueTimeouts") {
			p := *pool
			p.Condition, p.ConditionSince = fmt.Sprintf("QueueTimeouts: %s resubmitted %d times without capacity", owner, count), b.now
			b.putPool(p, p.Condition)
			b.add(Alert{Pool: pool.ID, Node: node.Name, Reason: fmt.Sprintf("pool %s: %s queued %d times past the queue timeout %s; left queued", pool.ID, owner, count+1, b.pol.QueueTimeout)})
		}
		return false
	}
	why := fmt.Sprintf("resize request %s queued for %s, past the queue timeout %s: cancelled and resubmitted (%d of %d)",
		rr.Name, b.now.Sub(rr.Created).Round(time.Minute), b.pol.QueueTimeout, count+1, b.pol.MaxResubmits)
	b.add(b.cancelRequest(pool, node, why))
	b.add(Metric{Name: MetricResubmits, Labels: map[string]string{"pool": pool.ID}, Reason: why})
	b.endRequest(rr.Name, model.EndTimeout, false, why)
	if job != nil {
		jj := *b.st.Jobs[job.ID]
		jj.Resubmits++
		b.putJob(jj, why)
		b.provisionJob(jj, why)
		return true
	}
	n := *b.st.Nodes[node.Name]
	n.Resubmits++
	b.provisionNode(pool, n, "", why)
	return true
}

// bootstrapFailed counts a VM whose node never registered in Slurm (what
// says so: the reconciler, or the VM's own bootstrap), and opens the
// pool's breaker at the threshold.
func (b *builder) bootstrapFailed(pool *model.Pool, node model.Node, what string) {
	p := *b.st.Pools[pool.ID]
	p.BootstrapFailures++
	b.add(Metric{Name: MetricBootstrapFailures, Labels: map[string]string{"pool": p.ID}, Reason: node.VMName})
	why := fmt.Sprintf("%s (%d consecutive)", what, p.BootstrapFailures)
	if p.BootstrapFailures >= b.pol.BreakerThreshold {
		p.BreakerOpenedAt = b.now
		p.Condition, p.ConditionSince = fmt.Sprintf("BootstrapFailures: %d consecutive nodes never registered; provisioning stopped until %s", p.BootstrapFailures, b.now.Add(b.pol.BreakerCooldown).Format(time.RFC3339)), b.now
		b.add(Alert{Pool: p.ID, Node: node.Name, Reason: "breaker open: " + p.Condition})
		b.add(Metric{Name: MetricBreakerTrips, Labels: map[string]string{"pool": p.ID}, Reason: why})
	}
	b.putPool(p, why)
}

// markRegistered records a node's first registration in Slurm and closes the
// pool's breaker (a success resets it).
func (b *builder) markRegistered(pool *model.Pool, node *model.Node) {
	node.Registered = true
	p := *b.st.Pools[pool.ID]
	if p.BootstrapFailures == 0 && p.BreakerOpenedAt.IsZero() {
		return
	}
	p.BootstrapFailures, p.BreakerOpenedAt = 0, time.Time{}
	if hasPrefix(p.Condition, "BootstrapFailures") {
		p.Condition, p.ConditionSince = "", time.Time{}
	}
	b.putPool(p, fmt.Sprintf("node %s registered in Slurm: bootstrap failures reset", node.Name))
}

// shortagePass backs the pool off when its queued requests report a
// shortage.
type shortagePass struct{}

func (shortagePass) apply(b *builder, pc *poolContext) {
	b.backOffOnShortage(pc.pool, pc.observed.ResizeRequests)
	pc.pool = b.st.Pools[pc.pool.ID]
}
