package scenario

import (
	"strings"
	"testing"
)

// TestReconcileSkipsRequestsOfMIGsARunningNodeRunsFrom: shared/apply
// Observe lists the resize requests only of the request MIGs from which no
// node record's VM runs (a MIG whose VM runs holds a request that has
// SUCCEEDED), so that a pass's calls do not grow with the running nodes.
// The reconciler reads the state it observes with only the pool records
// (store.Scope.AllPoolRecords), without the node records that choice reads:
// every pass lists the requests of every request MIG. Here the static node
// runs for an hour of passes every 5 minutes, and its MIG's requests are
// listed at every pass.
func TestReconcileSkipsRequestsOfMIGsARunningNodeRunsFrom(t *testing.T) {
	t.Skip("KNOWN: functions/reconcile reads the state for Observe without node records, so Observe's skip of MIGs with a running node never happens: one listResizeRequests per request MIG per pass")
	rep := run(t, base+`steps:
  - at: 20m
    assert:
      - nodes: [{name: flexvm-a3u-0, phase: running, generation: 1}]
  - at: 1h20m
    assert:
      - name: the running node's request MIG was not asked for its resize requests again
        counter: {counter: compute_calls, method: GET, path: "/instanceGroupManagers/fs-flexvm-a3u-r[0-9a-f]+/resizeRequests$", from: 21m, to: 1h20m, count: 0}
`)
	if rep.Failed() {
		var b strings.Builder
		rep.Write(&b, false)
		t.Errorf("failed assertions:\n%s", b.String())
	}
}
