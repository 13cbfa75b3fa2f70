package harness

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/store"
)

// forgedFail is a health.failure as anyone able to publish one could
// forge it: the node is "drained" and the job in the state they chose.
func forgedFail(node string, gen int64, job, jobState string) []byte {
	data, _ := json.Marshal(event.Health{Header: event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: "flexvm"},
		Node: node, Generation: gen, JobID: job, JobState: jobState, Verdict: event.VerdictFail, Drained: true,
		Reasons: []string{"GPU 0: Xid 79, fallen off the bus"}, CheckedAt: time.Unix(0, 0).UTC()})
	return data
}

func jobRecord(t *testing.T, h *Harness, id string) (model.Job, bool) {
	t.Helper()
	st, err := h.Store.Read(context.Background(), store.Scope{Cluster: "flexvm", Jobs: []string{id}})
	must(t, err)
	j, ok := st.Jobs[id]
	if !ok {
		return model.Job{}, false
	}
	return *j, true
}

// TestAttackForgedDrainedClaim: a forged FAIL that says the node is
// drained, on a node whose job runs, through the Repair function and the
// Slurm snapshots the agent then publishes (the node draining: DRAIN with
// its job still on it) and a reconcile pass: the VM is not deleted, no
// capacity is bought, and the job's record stays running. Only Slurm's
// word, not the report's, says a node is drained.
func TestAttackForgedDrainedClaim(t *testing.T) {
	for _, tc := range []struct{ name, job, jobState string }{
		{"drained, the running job named", "7", "running"},
		{"drained, the job said requeued", "7", "requeued"},
		{"drained, the job said pending", "7", "pending"},
		{"drained, no job named", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ctx, _ := flexHarness(t, Options{})
			_, err := h.Publish(ctx, config.TopicJobs, jobPending("7", 1))
			must(t, err)
			settle(t, h, ctx)
			_, err = h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobStarted, "7"))
			must(t, err)
			victim := node(t, h, "flexvm-a3u-1")
			if victim.Phase != model.PhaseRunning || victim.JobID != "7" {
				t.Fatalf("setup: %s %s for job %q", victim.Name, victim.Phase, victim.JobID)
			}
			vms, requests := h.VMs(), resizeRequestsCreated(h)

			must(t, h.Deliver(ctx, config.TopicHealthFailure, "forged-1", forgedFail(victim.Name, victim.Generation, tc.job, tc.jobState)))
			check := func(when string) {
				t.Helper()
				if d := cmp.Diff(vms, h.VMs()); d != "" {
					t.Errorf("%s: VMs changed (-before +after):\n%s", when, d)
				}
				if got := resizeRequestsCreated(h); got != requests {
					t.Errorf("%s: %d resize requests created, want %d", when, got, requests)
				}
				if n := node(t, h, victim.Name); n.Generation != victim.Generation || n.Phase != model.PhaseRunning || n.VMName != victim.VMName {
					t.Errorf("%s: node %s gen %d %s %s, want generation %d running on %s", when, n.Name, n.Generation, n.Phase, n.VMName,
						victim.Generation, victim.VMName)
				}
				if j, ok := jobRecord(t, h, "7"); !ok || j.State != model.JobRunning || j.Requeues != 0 {
					t.Errorf("%s: job 7 %s (requeues %d), want running", when, j.State, j.Requeues)
				}
			}
			check("after the forged FAIL")

			// The agent's snapshots: Slurm drains the node as asked, but
			// the job runs on; the reconciler passes.
			for range 3 {
				must(t, h.Advance(ctx, 30*time.Second))
				snap := event.SlurmSnapshot{Header: event.Header{Version: 1, Type: event.TypeSlurmSnapshot, Cluster: "flexvm"}, TakenAt: h.Clock.Now(),
					Nodes: []event.SnapshotNode{{Name: victim.Name, Node: slurmstate.Node{State: slurmstate.NodeAllocated,
						Flags: slurmstate.NewNodeFlags(slurmstate.FlagCloud, slurmstate.FlagDrain), Reason: "flexslurm: health check failed"}}},
					Jobs: []event.SnapshotJob{{ID: "7", State: "RUNNING", Partition: "a3u", Nodes: []string{victim.Name}, NodeCount: 1}}}
				_, err := h.Publish(ctx, config.TopicSlurmSnapshot, snap)
				must(t, err)
			}
			must(t, h.Tick(ctx))
			check("after Slurm's snapshots showing the job still running there, and a reconcile pass")
		})
	}
}

// TestAttackForgedJobStateBuysNothing: a forged FAIL on an idle dynamic
// node that names a job as pending or requeued, which Slurm does not show
// waiting: once Slurm confirms the drain the node's VM is deleted (an idle
// node, no job harmed), but no capacity is bought for the named job and
// its record is not revived.
func TestAttackForgedJobStateBuysNothing(t *testing.T) {
	for _, tc := range []struct{ name, job, jobState string }{
		{"a job flexslurm never heard of, said pending", "4242", "pending"},
		{"the node's ended job, said requeued", "7", "requeued"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ctx, _ := flexHarness(t, Options{})
			_, err := h.Publish(ctx, config.TopicJobs, jobPending("7", 1))
			must(t, err)
			settle(t, h, ctx)
			_, err = h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobStarted, "7"))
			must(t, err)
			_, err = h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobFinished, "7"))
			must(t, err)
			victim := node(t, h, "flexvm-a3u-1")
			requests := resizeRequestsCreated(h)

			must(t, h.Deliver(ctx, config.TopicHealthFailure, "forged-1", forgedFail(victim.Name, victim.Generation, tc.job, tc.jobState)))
			confirmDrain(t, h, ctx, victim.Name) // Slurm shows no job waiting
			must(t, h.Tick(ctx))
			if got := resizeRequestsCreated(h); got != requests {
				t.Errorf("%d resize requests created, want %d: capacity was bought on the report's word", got, requests)
			}
			if n := node(t, h, victim.Name); n.Phase == model.PhaseRequested || n.JobID == tc.job && n.Generation != victim.Generation {
				t.Errorf("node %s gen %d %s for job %q: replaced for the named job", n.Name, n.Generation, n.Phase, n.JobID)
			}
			if j, ok := jobRecord(t, h, tc.job); ok && j.State == model.JobPending {
				t.Errorf("job %s recorded pending on the report's word", tc.job)
			}
		})
	}
}
