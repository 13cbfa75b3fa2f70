package chaos

import (
	"strings"
	"testing"
)

// TestRegressionSeeds runs, with the default options (as `flexslurm chaos`
// does), seeds that once failed, so that each stays fixed.
func TestRegressionSeeds(t *testing.T) {
	for _, seed := range []uint64{
		831,  // a repaired node kept idle 2.5 h for a requeued job that ran elsewhere (idle_dynamic_released)
		1040, // a node drained for diagnosis, then FAILed, counted idle from its job's end, not the hold's (idle_dynamic_released)
		1042, // a cancelled job took its static node's queued replacement with it (static_at_min)
		2296, // a static node handed over to a successor that a lowered max_node_count then released kept no static role (static_at_min)
	} {
		o := RunSeed(testContext(t), seed, RunOptions{})
		if o.Failed() {
			var b strings.Builder
			o.Report.Write(&b, false)
			t.Errorf("seed %d: %s\n%s", seed, o.Signature(), b.String())
		}
	}
}

// TestRegressionSeedsAllClasses does the same for seeds that once failed
// with every convergence class's workload added (`flexslurm chaos --class
// all`).
func TestRegressionSeedsAllClasses(t *testing.T) {
	for _, seed := range []uint64{
		1000099, // resume failures during a Compute outage: a job's request made while a node's previous one, its cancel not yet through, was still queued (one_request_per_node)
		1000116, // the same gap, in another seed (one_request_per_node)
		1000625, // a reconcile pass requested a node twice: a job provisioned with it while an earlier node was decided, then the node itself from the copy taken before the loop (one_request_per_node)
	} {
		o := RunSeed(testContext(t), seed, RunOptions{Options: Options{Classes: Classes}})
		if o.Failed() {
			var b strings.Builder
			o.Report.Write(&b, false)
			t.Errorf("seed %d: %s\n%s", seed, o.Signature(), b.String())
		}
	}
}
