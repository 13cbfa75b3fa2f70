package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
)

// TestNeverTouchesWhatIsNotOurs: VMs named exactly as flexslurm would name
// them, but unlabelled or labelled for another cluster, survive events
// that name them (health failure, cancellation, forged expiry) and the
// reconciler.
func TestNeverTouchesWhatIsNotOurs(t *testing.T) {
	rec := &deleteRecorder{}
	h, ctx := newHarness(t, Options{
		Sim:     computesim.Options{CapacityDelay: func(string, string) time.Duration { return 24 * time.Hour }},
		Compute: func(c apply.Compute) apply.Compute { rec.Compute = c; return rec },
	})
	must(t, h.Apply(ctx, exampleSpec(t)))
	settle(t, h, ctx)
	_, err := h.Sim.AddInstance("", "us-central1-a", "flexvm-a3u-1-g1", nil)
	must(t, err)
	_, err = h.Sim.AddInstance("", "us-central1-a", "flexvm-a3u-2-g1", map[string]string{
		"managed-by": "flexslurm", "flexslurm-cluster": "other", "flexslurm-pool": "a3u"})
	must(t, err)

	_, err = h.Publish(ctx, config.TopicJobs, jobPending("7", 2))
	must(t, err)
	_, err = h.Publish(ctx, config.TopicHealthFailure, event.Health{
		Header: event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: "flexvm"},
		Node:   "flexvm-a3u-1", Generation: 1, JobID: "7", JobState: "pending", Verdict: "FAIL", Reasons: []string{"forged"}})
	must(t, err)
	_, err = h.Publish(ctx, config.TopicJobs, jobReport(event.TypeJobCancelled, "7"))
	must(t, err)
	for _, vm := range []string{"flexvm-a3u-1-g1", "flexvm-a3u-2-g1"} {
		forged := fmt.Sprintf(`{"protoPayload":{"serviceName":"compute.googleapis.com","methodName":"compute.instances.deferredDelete",`+
			`"resourceName":"projects/%s/zones/us-central1-a/instances/%s"},"logName":"projects/%s/logs/cloudaudit.googleapis.com%%2Fsystem_event"}`, Project, vm, Project)
		must(t, h.Deliver(ctx, config.TopicExpiry, h.NewID(), []byte(forged)))
	}
	for i := 0; i < 6; i++ {
		must(t, h.Advance(ctx, 10*time.Minute))
		must(t, h.Tick(ctx))
	}
	alive := map[string]bool{}
	for _, vm := range h.Sim.Instances() {
		alive[vm.Name] = vm.Status == "RUNNING"
	}
	for _, vm := range []string{"flexvm-a3u-1-g1", "flexvm-a3u-2-g1"} {
		if !alive[vm] {
			t.Errorf("%s (not labelled as this cluster's) was touched", vm)
		}
	}
	for _, name := range rec.names {
		if name == "flexvm-a3u-1-g1" || name == "flexvm-a3u-2-g1" {
			t.Errorf("flexslurm asked Compute to delete %s, which is not labelled as its own", name)
		}
	}
	for _, c := range h.Sim.Calls() {
		if c.Method == "DELETE" && (c.Path == "/compute/v1/projects/"+Project+"/zones/us-central1-a/instances/flexvm-a3u-1-g1" ||
			c.Path == "/compute/v1/projects/"+Project+"/zones/us-central1-a/instances/flexvm-a3u-2-g1") {
			t.Errorf("a delete was sent for a VM that is not ours: %s", c.Path)
		}
	}
}

// deleteRecorder records the VM names flexslurm asks Compute to delete.
type deleteRecorder struct {
	apply.Compute
	names []string
}

func (d *deleteRecorder) DeleteInstances(ctx context.Context, zone, mig string, names []string, requestID string) error {
	d.names = append(d.names, names...)
	return d.Compute.DeleteInstances(ctx, zone, mig, names, requestID)
}
