package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

const week = 7 * 24 * time.Hour

func exampleSpec(t *testing.T) *spec.Cluster {
	t.Helper()
	data, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newHarness(t *testing.T, o Options) (*Harness, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	if o.Sim.CapacityDelay == nil {
		o.Sim.CapacityDelay = func(string, string) time.Duration { return 20 * time.Minute }
	}
	h, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, ctx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func node(t *testing.T, h *Harness, name string) model.Node {
	t.Helper()
	st, err := h.Store.Read(context.Background(), store.Scope{Cluster: "flexvm", AllPools: true})
	must(t, err)
	n, ok := st.Nodes[name]
	if !ok {
		t.Fatalf("node %s has no record", name)
	}
	return *n
}

func jobPending(id string, count int, nodes ...string) event.Job {
	return event.Job{Header: event.Header{Version: 1, Type: event.TypeJobPending, Cluster: "flexvm"},
		JobID: id, Partition: "a3u", NodeCount: count, Nodes: nodes}
}

func jobReport(typ, id string) event.Job {
	return event.Job{Header: event.Header{Version: 1, Type: typ, Cluster: "flexvm"}, JobID: id}
}

// settle lets capacity arrive and the reconciler record what came up.
func settle(t *testing.T, h *Harness, ctx context.Context) {
	t.Helper()
	must(t, h.Advance(ctx, time.Hour))
	must(t, h.Tick(ctx))
}

// resizeRequestsCreated counts the resize requests that exist or existed in
// Compute (a repeated call with the same name and request id creates none).
func resizeRequestsCreated(h *Harness) int {
	return len(h.Sim.ResizeRequestHistory())
}

// TestExampleLifecycle runs the example spec's node lifecycle end to end
// through the functions.
func TestExampleLifecycle(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	if n := node(t, h, "flexvm-a3u-0"); n.Phase != model.PhaseRunning || n.Kind != model.NodeStatic {
		t.Fatalf("static node after apply: %s %s", n.Kind, n.Phase)
	}

	// A pending job gets its dynamic nodes through one resize request.
	_, err := h.Publish(ctx, config.TopicJobs, jobPending("101", 2))
	must(t, err)
	settle(t, h, ctx)
	if d := cmp.Diff([]string{"flexvm-a3u-0-g1", "flexvm-a3u-1-g1", "flexvm-a3u-2-g1"}, h.VMs()); d != "" {
		t.Fatalf("VMs (-want +got):\n%s", d)
	}
	if got := resizeRequestsCreated(h); got != 2 {
		t.Fatalf("%d resize requests created, want 2 (one static node, one job)", got)
	}
	_, err = h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobStarted, "101"))
	must(t, err)
	_, err = h.Publish(ctx, config.TopicJobs, jobPending("102", 1)) // waits: the pool is at max
	must(t, err)
	_, err = h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobFinished, "101"))
	must(t, err)

	// A week later: the static node is recreated; of the two dynamic nodes
	// one is recreated for pending job 102 and the other is not.
	must(t, h.Advance(ctx, week))
	settle(t, h, ctx)
	if n := node(t, h, "flexvm-a3u-0"); n.Generation != 2 || n.Phase != model.PhaseRunning || n.LastEnd != model.EndExpired {
		t.Fatalf("static node after expiry: gen %d %s (last end %s)", n.Generation, n.Phase, n.LastEnd)
	}
	a, b := node(t, h, "flexvm-a3u-1"), node(t, h, "flexvm-a3u-2")
	if !(a.Generation == 2 && a.Phase == model.PhaseRunning && a.JobID == "102" && b.Phase == model.PhaseReleased) {
		t.Fatalf("dynamic nodes after expiry: %s gen %d %s job %q; %s gen %d %s", a.Name, a.Generation, a.Phase, a.JobID, b.Name, b.Generation, b.Phase)
	}
	if d := cmp.Diff([]string{"flexvm-a3u-0-g2", "flexvm-a3u-1-g2"}, h.VMs()); d != "" {
		t.Fatalf("VMs after expiry (-want +got):\n%s", d)
	}
	// One MIG per resize request: after one more pass the MIGs left are
	// exactly those of the requests whose VMs serve a node, each holding
	// its one request; every other request went with its MIG.
	must(t, h.Tick(ctx))
	st, err := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true})
	must(t, err)
	var serving, migs []string
	for _, n := range st.PoolNodes("a3u") {
		if n.Phase.Serving() && !slices.Contains(serving, n.MIG) {
			serving = append(serving, n.MIG)
		}
	}
	for _, m := range h.Sim.MIGs() {
		migs = append(migs, m.Name)
	}
	slices.Sort(serving)
	if d := cmp.Diff(serving, migs); d != "" {
		t.Fatalf("MIGs left (-serving nodes' +Compute's):\n%s", d)
	}
	perMIG := map[string]int{}
	for _, rr := range h.Sim.ResizeRequests() {
		perMIG[rr.MIG]++
	}
	for _, m := range migs {
		if perMIG[m] != 1 {
			t.Errorf("MIG %s holds %d resize requests, want its one", m, perMIG[m])
		}
	}
	if gone := len(h.Sim.ResizeRequestHistory()) - len(h.Sim.ResizeRequests()); gone < 2 {
		t.Fatalf("%d resize requests gone with their MIGs, want at least 2", gone)
	}

	// A GPU fault on job 102's node, which Slurm requeued and drained: the
	// Flex-Start VM gets no host repair (Compute Engine repairs hosts of
	// reservation-bound VMs only); it is deleted and job 102 gets a
	// replacement at once.
	_, err = h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobStarted, "102"))
	must(t, err)
	_, err = h.Publish(ctx, config.TopicHealthFailure, event.Health{
		Header: event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: "flexvm"},
		Node:   "flexvm-a3u-1", Generation: 2, JobID: "102", JobState: "requeued", Verdict: "FAIL", Drained: true,
		Reasons: []string{"GPU 3: 2 uncorrectable ECC errors"}})
	must(t, err)
	// The hook's word that the node is drained and the job requeued
	// decides nothing: Slurm's next snapshot confirms both.
	if n := node(t, h, "flexvm-a3u-1"); n.Repair != model.RepairAwaitDrain || n.VMName != "flexvm-a3u-1-g2" {
		t.Fatalf("node after the failure, before Slurm confirmed the drain: repair %q %s", n.Repair, n.VMName)
	}
	confirmDrain(t, h, ctx, "flexvm-a3u-1", event.SnapshotJob{ID: "102", State: "PENDING", Partition: "a3u", NodeCount: 1})
	if n := node(t, h, "flexvm-a3u-1"); n.Repair != model.RepairNone || n.LastEnd != model.EndHealth || n.VMName == "flexvm-a3u-1-g2" && n.Phase.Serving() {
		t.Fatalf("node after the failure: repair %q last end %q, %s %s", n.Repair, n.LastEnd, n.VMName, n.Phase)
	}
	settle(t, h, ctx)
	var replacement string
	for _, name := range []string{"flexvm-a3u-1", "flexvm-a3u-2"} {
		if n := node(t, h, name); n.JobID == "102" && n.Phase == model.PhaseRunning {
			replacement = n.VMName
		}
	}
	if replacement == "" || replacement == "flexvm-a3u-1-g2" {
		t.Fatalf("no replacement runs for job 102 (VMs %v)", h.VMs())
	}
	if d := cmp.Diff([]string{"flexvm-a3u-0-g2", replacement}, h.VMs()); d != "" {
		t.Fatalf("VMs after the replacement (-want +got):\n%s", d)
	}
	var drained bool
	for _, m := range h.Publisher.Take(config.TopicSlurmCommands) {
		c, err := event.DecodeSlurmCommand(m.Data)
		must(t, err)
		drained = drained || (c.Command == event.SlurmDrain && c.Nodes[0] == "flexvm-a3u-1")
	}
	if !drained {
		t.Error("the faulty node was not drained")
	}
	if n := len(h.Sim.Instances()); n != 2 {
		t.Errorf("%d VMs in Compute, want 2", n)
	}
}

// TestRedeliveredJobPendingCreatesNothingTwice: the same message delivered
// twice, and the same job reported again under a new message id.
func TestRedeliveredJobPendingCreatesNothingTwice(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	data := []byte(`{"version":1,"type":"job.pending","cluster":"flexvm","job_id":"7","partition":"a3u","node_count":1}`)
	must(t, h.Deliver(ctx, config.TopicJobs, "same-id", data))
	must(t, h.Deliver(ctx, config.TopicJobs, "same-id", data))
	must(t, h.Deliver(ctx, config.TopicJobs, "another-id", data))
	settle(t, h, ctx)
	must(t, h.Deliver(ctx, config.TopicJobs, "same-id", data))
	settle(t, h, ctx)
	if d := cmp.Diff([]string{"flexvm-a3u-0-g1", "flexvm-a3u-1-g1"}, h.VMs()); d != "" {
		t.Fatalf("VMs (-want +got):\n%s", d)
	}
	if got := resizeRequestsCreated(h); got != 2 {
		t.Errorf("%d resize requests created, want 2", got)
	}
}

// flaky fails the first n CreateResizeRequest calls after doing nothing, as
// a function that crashed between its Firestore commit and its Compute call.
type flaky struct {
	apply.Compute
	n int
}

func (f *flaky) CreateResizeRequest(ctx context.Context, zone, mig string, rr gce.ResizeRequestSpec, requestID string) error {
	if f.n > 0 {
		f.n--
		return fmt.Errorf("injected crash before the call: %w", syscall.ECONNRESET)
	}
	return f.Compute.CreateResizeRequest(ctx, zone, mig, rr, requestID)
}

func TestCrashBetweenCommitAndComputeCallIsRecovered(t *testing.T) {
	var f *flaky
	h, ctx := newHarness(t, Options{Compute: func(c apply.Compute) apply.Compute { f = &flaky{Compute: c}; return f }})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	f.n = 1
	data := []byte(`{"version":1,"type":"job.pending","cluster":"flexvm","job_id":"7","partition":"a3u","node_count":1}`)
	err := h.Deliver(ctx, config.TopicJobs, "m-7", data)
	if err == nil {
		t.Fatal("the failed Compute call was acknowledged; it must be redelivered")
	}
	if n := node(t, h, "flexvm-a3u-1"); n.Phase != model.PhaseRequested {
		t.Fatalf("intent not recorded before the Compute call: %s", n.Phase)
	}
	// Pub/Sub redelivers the same message: the intent is re-driven.
	must(t, h.Deliver(ctx, config.TopicJobs, "m-7", data))
	must(t, h.Deliver(ctx, config.TopicJobs, "m-7", data))
	settle(t, h, ctx)
	if d := cmp.Diff([]string{"flexvm-a3u-0-g1", "flexvm-a3u-1-g1"}, h.VMs()); d != "" {
		t.Fatalf("VMs (-want +got):\n%s", d)
	}
	if n := node(t, h, "flexvm-a3u-1"); n.Phase != model.PhaseRunning {
		t.Fatalf("node after recovery: %s", n.Phase)
	}
}

func TestCrashRecoveredByTheReconcilerAlone(t *testing.T) {
	var f *flaky
	h, ctx := newHarness(t, Options{Compute: func(c apply.Compute) apply.Compute { f = &flaky{Compute: c}; return f }})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	f.n = 1
	data := []byte(`{"version":1,"type":"job.pending","cluster":"flexvm","job_id":"7","partition":"a3u","node_count":1}`)
	_ = h.Deliver(ctx, config.TopicJobs, "m-7", data) // the redelivery never comes
	must(t, h.Advance(ctx, 5*time.Minute))
	must(t, h.Tick(ctx)) // re-issues the missing request, same name
	settle(t, h, ctx)
	settle(t, h, ctx)
	if d := cmp.Diff([]string{"flexvm-a3u-0-g1", "flexvm-a3u-1-g1"}, h.VMs()); d != "" {
		t.Fatalf("VMs (-want +got):\n%s", d)
	}
}

func TestMalformedAndUnknownEventsAreAcknowledged(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	must(t, h.Apply(ctx, exampleSpec(t)))
	for _, tc := range []struct{ topic, data string }{
		{config.TopicJobs, `not json`},
		{config.TopicJobs, `{"version":2,"type":"job.pending","cluster":"flexvm","job_id":"1","node_count":1}`},
		{config.TopicJobs, `{"version":1,"type":"job.pending","cluster":"flexvm","job_id":"1; rm -rf /","node_count":1}`},
		{config.TopicJobs, `{"version":1,"type":"job.pending","cluster":"flexvm","job_id":"1","node_count":1,"partition":"nope"}`},
		{config.TopicJobs, `{"version":1,"type":"job.pending","cluster":"ghost","job_id":"1","node_count":1,"partition":"a3u"}`},
		{config.TopicHealthFailure, `{"version":1,"type":"health.failure","cluster":"flexvm","node":"flexvm-a3u-2","generation":9,"verdict":"FAIL"}`},
		{config.TopicExpiry, `{"protoPayload":{"serviceName":"compute.googleapis.com","methodName":"compute.instances.deferredDelete","resourceName":"projects/p/zones/us-central1-a/instances/not-ours"}}`},
		{config.TopicReconcile, `{"version":1,"type":"reconcile.tick","cluster":"ghost"}`},
	} {
		if err := h.Deliver(ctx, tc.topic, h.NewID(), []byte(tc.data)); err != nil {
			t.Errorf("%s %s: returned %v, want nil (acknowledged)", tc.topic, tc.data, err)
		}
	}
	if got := resizeRequestsCreated(h); got != 1 {
		t.Errorf("%d resize requests created, want only the static node's", got)
	}
}

func TestExpiryLoggedAsMIGDeleteIsHandledOnce(t *testing.T) {
	h, ctx := newHarness(t, Options{Sim: computesim.Options{ExpiryLogStyle: computesim.ExpiryLogMIGDelete}})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	must(t, h.Advance(ctx, week))
	settle(t, h, ctx)
	if n := node(t, h, "flexvm-a3u-0"); n.Generation != 2 || n.Phase != model.PhaseRunning || n.LastEnd != model.EndExpired {
		t.Fatalf("static node after a MIG-logged expiry: gen %d %s last end %s", n.Generation, n.Phase, n.LastEnd)
	}
	if got := resizeRequestsCreated(h); got != 2 {
		t.Errorf("%d resize requests created, want 2", got)
	}
}

func TestLatePendingReportAfterJobEndedProvisionsNothing(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	_, err := h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobCancelled, "9"))
	must(t, err)
	_, err = h.Publish(ctx, config.TopicJobs, jobPending("9", 1))
	must(t, err)
	settle(t, h, ctx)
	if d := cmp.Diff([]string{"flexvm-a3u-0-g1"}, h.VMs()); d != "" {
		t.Fatalf("VMs (-want +got):\n%s", d)
	}
}

func TestCancelledJobCancelsOnlyItsOwnRequest(t *testing.T) {
	h, ctx := newHarness(t, Options{Sim: computesim.Options{CapacityDelay: func(string, string) time.Duration { return 10 * time.Hour }}})
	must(t, h.Apply(ctx, exampleSpec(t)))
	_, err := h.Publish(ctx, config.TopicJobs, jobPending("7", 1))
	must(t, err)
	_, err = h.Publish(ctx, config.TopicJobs, jobPending("8", 1))
	must(t, err)
	must(t, h.Advance(ctx, time.Minute))
	_, err = h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobCancelled, "7"))
	must(t, err)
	states := map[string]string{}
	for _, rr := range h.Sim.ResizeRequestHistory() {
		states[rr.Name] = rr.State
	}
	want := map[string]string{"rr-flexvm-a3u-0-g1": "ACCEPTED", "rr-flexvm-a3u-j7-g1": "CANCELLED", "rr-flexvm-a3u-j8-g1": "ACCEPTED"}
	if d := cmp.Diff(want, states); d != "" {
		t.Errorf("resize request states (-want +got):\n%s", d)
	}
}

// TestCrashAtEverySideEffectBoundary crashes a job-pending delivery at each
// boundary in turn; Pub/Sub redelivers it until it is acknowledged. Exactly
// one VM per node results.
func TestCrashAtEverySideEffectBoundary(t *testing.T) {
	for crashAt := 0; crashAt < 2; crashAt++ { // commit, then the resize request

		t.Run(fmt.Sprintf("boundary-%d", crashAt), func(t *testing.T) {
			seen := -1
			armed := false
			h, ctx := newHarness(t, Options{Fault: func(point string, a plan.Action) error {
				if !armed {
					return nil
				}
				seen++
				if seen == crashAt {
					armed = false
					return fmt.Errorf("crash at %s %v", point, a)
				}
				return nil
			}})
			must(t, h.Apply(ctx, exampleSpec(t)))
			settle(t, h, ctx)
			armed = true
			data := []byte(`{"version":1,"type":"job.pending","cluster":"flexvm","job_id":"7","partition":"a3u","node_count":2}`)
			for i := 0; ; i++ {
				if err := h.Deliver(ctx, config.TopicJobs, "m-7", data); err == nil {
					break
				}
				if i > 5 {
					t.Fatal("never acknowledged")
				}
			}
			armed = false
			settle(t, h, ctx)
			if d := cmp.Diff([]string{"flexvm-a3u-0-g1", "flexvm-a3u-1-g1", "flexvm-a3u-2-g1"}, h.VMs()); d != "" {
				t.Fatalf("VMs (-want +got):\n%s", d)
			}
			if got := resizeRequestsCreated(h); got != 2 {
				t.Errorf("%d resize requests, want 2", got)
			}
		})
	}
}

// TestPoolRemovedFromSpecIsDrainedAndItsMIGDeleted: the pool's idle VMs are
// released at once, a busy one when its job ends, then the empty MIG is
// deleted and the pool forgotten.
func TestPoolRemovedFromSpecIsDrainedAndItsMIGDeleted(t *testing.T) {
	h, ctx := newHarness(t, Options{})
	c := exampleSpec(t)
	must(t, h.Apply(ctx, c))
	settle(t, h, ctx)
	_, err := h.Publish(ctx, config.TopicJobs, jobPending("5", 1))
	must(t, err)
	settle(t, h, ctx)
	_, err = h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobStarted, "5"))
	must(t, err)

	shrunk := *c
	shrunk.NodePools = nil
	for _, p := range c.NodePools {
		if !p.IsFlexStart() {
			shrunk.NodePools = append(shrunk.NodePools, p)
		}
	}
	shrunk.Slurm.Partitions = []spec.Partition{{ID: "login", NodePoolIDs: []string{"login"}}}
	must(t, h.Apply(ctx, &shrunk))
	settle(t, h, ctx)
	if d := cmp.Diff([]string{"flexvm-a3u-1-g1"}, h.VMs()); d != "" {
		t.Fatalf("VMs after the pool left the spec (-want +got): the busy node stays\n%s", d)
	}
	_, err = h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobFinished, "5"))
	must(t, err)
	for i := 0; i < 3; i++ {
		settle(t, h, ctx)
	}
	if got := h.VMs(); len(got) != 0 {
		t.Fatalf("VMs left: %v", got)
	}
	if migs := h.Sim.MIGs(); len(migs) != 0 {
		t.Fatalf("MIGs left: %v", migs)
	}
	st, err := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true})
	must(t, err)
	if len(st.Pools) != 0 || len(st.Nodes) != 0 {
		t.Errorf("records left: %d pools, %d nodes", len(st.Pools), len(st.Nodes))
	}
}
