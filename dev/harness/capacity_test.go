package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
)

var rrInsert = computesim.Match{Method: "POST", Path: `/resizeRequests$`}

func pool(t *testing.T, h *Harness) model.Pool {
	t.Helper()
	st, err := h.Store.Read(t.Context(), store.Scope{Cluster: "flexvm", AllPools: true})
	must(t, err)
	return *st.Pools["a3u"]
}

func rrInserts(h *Harness, from, to time.Time) int {
	n := 0
	for _, c := range h.Sim.Calls() {
		if c.Method == "POST" && strings.HasSuffix(c.Path, "/resizeRequests") && !c.Time.Before(from) && c.Time.Before(to) {
			n++
		}
	}
	return n
}

// A stock-out, as Compute reports it: the job's resize request is accepted
// and stays queued with ZONE_RESOURCE_POOL_EXHAUSTED in
// status.lastAttempt.error. The reconciler records the shortage and backs
// the pool off new requests, never cancels or re-creates the queued one,
// and once capacity is back the job is served with no manual step and the
// shortage clears. No delete is issued for a VM that was never created.
func TestStockOutThenRecovery(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	start := h.Clock.Now()
	h.Sim.SetShortage(computesim.Shortage{Name: "stockout"})
	_, err := h.Publish(ctx, config.TopicJobs, jobPending("7", 1))
	must(t, err)
	for i := 0; i < 6; i++ {
		must(t, h.Advance(ctx, 10*time.Minute))
		must(t, h.Tick(ctx))
	}
	p := pool(t, h)
	if p.Shortage == nil || p.Shortage.Class != plan.ClassCapacity || p.Shortage.Code != "ZONE_RESOURCE_POOL_EXHAUSTED" ||
		p.BackoffReason != plan.ClassCapacity || !strings.HasPrefix(p.Condition, plan.CondWaitingForCapacity+": ZONE_RESOURCE_POOL_EXHAUSTED") {
		t.Fatalf("pool during the stock-out: shortage %+v backoff %q condition %q", p.Shortage, p.BackoffReason, p.Condition)
	}
	if n := rrInserts(h, start, h.Clock.Now()); n != 1 {
		t.Errorf("resize request inserts during the stock-out = %d, want 1 (the queued request keeps its place)", n)
	}
	h.Sim.ClearShortage("stockout")
	for i := 0; i < 12 && len(h.VMs()) < 2; i++ {
		must(t, h.Advance(ctx, 10*time.Minute))
		must(t, h.Tick(ctx))
	}
	settle(t, h, ctx)
	if d := cmp.Diff([]string{"flexvm-a3u-0-g1"}, h.VMs()[:1]); d != "" || len(h.VMs()) != 2 {
		t.Fatalf("VMs after recovery: %v", h.VMs())
	}
	st, err := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true, Jobs: []string{"7"}})
	must(t, err)
	n := st.Nodes[st.Jobs["7"].Nodes[0]]
	if n.Phase != model.PhaseRunning || n.JobID != "7" {
		t.Fatalf("job 7's node after recovery: %s job %q", n.Phase, n.JobID)
	}
	if p := pool(t, h); p.BackoffAttempts != 0 || p.BackoffReason != "" || p.Shortage != nil || p.Condition != "" {
		t.Errorf("shortage, condition or backoff not cleared after success: %+v", p)
	}
	for _, c := range h.Sim.Calls() {
		if strings.HasSuffix(c.Path, "/deleteInstances") || strings.HasSuffix(c.Path, "/cancel") {
			t.Errorf("a delete or cancel was issued: %s %s", c.Method, c.Path)
		}
	}
}

// Quota short for two hours: the request stays pending with QUOTA_EXCEEDED
// in its lastAttempt, the pool shows a WaitingForQuota condition naming the
// quota, with Compute's message, and the job is served once quota is granted.
func TestQuotaShortForTwoHours(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	start := h.Clock.Now()
	h.Sim.SetShortage(computesim.Shortage{Name: "quota", Code: "QUOTA_EXCEEDED", Metric: "compute.googleapis.com/preemptible_nvidia_h200_gpus", Limit: 8})
	_, err := h.Publish(ctx, config.TopicJobs, jobPending("7", 1))
	must(t, err)
	for h.Clock.Now().Before(start.Add(2 * time.Hour)) {
		must(t, h.Advance(ctx, time.Minute))
		must(t, h.Tick(ctx)) // a reconcile tick every simulated minute
	}
	p := pool(t, h)
	if want := plan.CondWaitingForQuota + ": QUOTA_EXCEEDED on quota PREEMPTIBLE_NVIDIA_H200_GPUS in region us-central1 (limit 8): Quota 'PREEMPTIBLE_NVIDIA_H200_GPUS' exceeded."; !strings.HasPrefix(p.Condition, want) {
		t.Fatalf("condition %q, want %q…", p.Condition, want)
	}
	if p.BackoffReason != plan.ClassQuota {
		t.Errorf("backoff %q, want quota", p.BackoffReason)
	}
	if n := rrInserts(h, start, h.Clock.Now()); n != 1 {
		t.Errorf("resize request inserts while short of quota = %d, want 1", n)
	}
	h.Sim.ClearShortage("quota")
	for i := 0; i < 200 && len(h.VMs()) < 2; i++ {
		must(t, h.Advance(ctx, time.Minute))
		must(t, h.Tick(ctx))
	}
	settle(t, h, ctx)
	if len(h.VMs()) != 2 {
		t.Fatalf("job not served after quota returned: VMs %v", h.VMs())
	}
	if p := pool(t, h); p.Condition != "" || p.Shortage != nil {
		t.Errorf("condition not cleared after success: %q %+v", p.Condition, p.Shortage)
	}
}

// A resize request refused at insert with a capacity error (rare: Compute
// queues requests short of capacity) still backs the pool off, and the job
// is served once inserts succeed.
func TestInsertTimeStockOut(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	h.Sim.InjectError(rrInsert, 0, "", "ZONE_RESOURCE_POOL_EXHAUSTED", 0) // every insert, until cleared
	_, err := h.Publish(ctx, config.TopicJobs, jobPending("7", 1))
	must(t, err) // acknowledged: the backoff, not a redelivery, retries
	if p := pool(t, h); p.BackoffReason != plan.ClassCapacity || p.BackoffAttempts != 1 {
		t.Fatalf("pool after a refused insert: reason %q attempts %d", p.BackoffReason, p.BackoffAttempts)
	}
	h.Sim.ClearInjections()
	for i := 0; i < 12 && len(h.VMs()) < 2; i++ {
		must(t, h.Advance(ctx, 10*time.Minute))
		must(t, h.Tick(ctx))
	}
	settle(t, h, ctx)
	if len(h.VMs()) != 2 {
		t.Fatalf("VMs after recovery: %v", h.VMs())
	}
}

// A resize request refused at insert for quota backs the pool off with a
// QuotaExceeded condition naming the quota Compute gave in
// errorDetails.quotaInfo (metric, region, limit).
func TestInsertTimeQuotaNamed(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	h.Sim.Inject(computesim.Injection{Match: rrInsert, Status: 403, Code: "QUOTA_EXCEEDED",
		QuotaMetric: "PREEMPTIBLE_NVIDIA_H200_GPUS", QuotaLimit: 16})
	_, err := h.Publish(ctx, config.TopicJobs, jobPending("7", 1))
	must(t, err)
	p := pool(t, h)
	if p.BackoffReason != plan.ClassQuota || p.BackoffAttempts != 1 {
		t.Fatalf("pool after a refused insert: reason %q attempts %d", p.BackoffReason, p.BackoffAttempts)
	}
	if want := "QuotaExceeded: QUOTA_EXCEEDED: quota PREEMPTIBLE_NVIDIA_H200_GPUS in region us-central1 (limit 16)"; p.Condition != want {
		t.Errorf("condition %q, want %q", p.Condition, want)
	}
}

// A request queued past the queue timeout is cancelled and resubmitted as
// a new generation while its job is pending; at most MaxResubmits times.
func TestQueueTimeoutResubmits(t *testing.T) {
	h, ctx := newHarness(t, Options{
		Sim:    computesim.Options{CapacityDelay: func(string, string) time.Duration { return 100 * time.Hour }},
		Policy: plan.Policy{QueueTimeout: time.Hour, MaxResubmits: 2},
	})
	must(t, h.Apply(ctx, exampleSpec(t)))
	_, err := h.Publish(ctx, config.TopicJobs, jobPending("7", 1))
	must(t, err)
	for i := 0; i < 5*6; i++ {
		must(t, h.Advance(ctx, 10*time.Minute))
		must(t, h.Tick(ctx))
	}
	states := map[string]string{}
	for _, rr := range h.Sim.ResizeRequestHistory() {
		if strings.Contains(rr.Name, "-j7-") {
			states[rr.Name] = rr.State
		}
	}
	want := map[string]string{"rr-flexvm-a3u-j7-g1": "CANCELLED", "rr-flexvm-a3u-j7-g2": "CANCELLED", "rr-flexvm-a3u-j7-g3": "ACCEPTED"}
	if d := cmp.Diff(want, states); d != "" {
		t.Errorf("job 7's requests (-want +got):\n%s", d)
	}
	if p := pool(t, h); !strings.HasPrefix(p.Condition, "QueueTimeouts") {
		t.Errorf("pool not flagged after the last resubmit: %q", p.Condition)
	}
}

// A request's MIG deleted out of band: the generation is lost, and the
// node is requested again in a MIG of its own, under new names.
func TestMIGDeletedOutOfBand(t *testing.T) {
	h, ctx := newHarness(t, Options{Sim: computesim.Options{CapacityDelay: func(string, string) time.Duration { return 3 * time.Hour }}})
	must(t, h.Apply(ctx, exampleSpec(t)))
	must(t, h.Advance(ctx, time.Minute))
	must(t, h.Tick(ctx))
	first := node(t, h, "flexvm-a3u-0")
	// Someone deletes the MIG while the static node's request is queued.
	must(t, h.gce.DeleteMIG(ctx, "us-central1-a", first.MIG, ""))
	// Within RequestGrace of the request's record, a missing MIG may still
	// be on its way (commit, then act): nothing is re-planned yet.
	must(t, h.Tick(ctx))
	if migs := h.Sim.MIGs(); len(migs) != 0 {
		t.Fatalf("MIG recreated within the grace: %v", migs)
	}
	if n := node(t, h, "flexvm-a3u-0"); n.Generation != first.Generation {
		t.Fatalf("generation %d re-planned within the grace", n.Generation)
	}
	must(t, h.Advance(ctx, plan.DefaultPolicy().RequestGrace))
	must(t, h.Tick(ctx))
	must(t, h.Tick(ctx))
	n := node(t, h, "flexvm-a3u-0")
	if migs := h.Sim.MIGs(); len(migs) != 1 || migs[0].Name != n.MIG || n.MIG == first.MIG || n.Generation != first.Generation+1 {
		t.Fatalf("MIGs %v, node generation %d in %s (was %d in %s): want the next generation in a MIG of its own", migs, n.Generation, n.MIG, first.Generation, first.MIG)
	}
	for i := 0; i < 5; i++ {
		settle(t, h, ctx)
	}
	if d := cmp.Diff([]string{"flexvm-a3u-0-g2"}, h.VMs()); d != "" {
		t.Errorf("VMs (-want +got):\n%s", d)
	}
}

// TestRequestMIGQuotaNamed: one MIG per resize request consumes the
// region's INSTANCE_GROUP_MANAGERS quota; a request whose MIG Compute
// refuses for it backs the pool off with a condition naming that quota,
// and leaves no MIG or request behind.
func TestRequestMIGQuotaNamed(t *testing.T) {
	h, ctx := newHarness(t, Options{Sim: computesim.Options{Quotas: map[string]float64{"INSTANCE_GROUP_MANAGERS": 1}}})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx) // the static node's request uses the one MIG
	if migs := h.Sim.MIGs(); len(migs) != 1 {
		t.Fatalf("MIGs %+v, want the static node's", migs)
	}
	_, err := h.Publish(ctx, config.TopicJobs, jobPending("7", 1))
	must(t, err)
	p := pool(t, h)
	if p.BackoffReason != plan.ClassQuota {
		t.Fatalf("pool after its request's MIG was refused: backoff reason %q (condition %q)", p.BackoffReason, p.Condition)
	}
	if want := "quota INSTANCE_GROUP_MANAGERS in region us-central1 (limit 1)"; !strings.Contains(p.Condition, want) {
		t.Errorf("condition %q does not name %s", p.Condition, want)
	}
	if migs := h.Sim.MIGs(); len(migs) != 1 {
		t.Errorf("MIGs %+v after the refusal, want the static node's alone", migs)
	}
	for _, rr := range h.Sim.ResizeRequestHistory() {
		if strings.Contains(rr.Name, "-j7-") {
			t.Errorf("resize request %s of job 7 exists (%s) though its MIG was refused", rr.Name, rr.State)
		}
	}
}
