package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
)

// TestNextGenerationSupersedesAReleaseNotYetCarriedOut: a node released
// while its request was queued (a resume failure) is provisioned again by
// the job's next report before the release's own actions ran (the event
// that released it crashed after its commit and waits for redelivery). The
// new decision cancels the previous request (same request id) before it
// creates the next one, so two requests are never active for one node.
func TestNextGenerationSupersedesAReleaseNotYetCarriedOut(t *testing.T) {
	st, _ := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2")))
	failed, err := NodePower(st, nodeEv(event.TypeResumeFailed, "flexvm-a3u-2"), t0.Add(time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, failed) // committed; its actions are assumed not to have run
	got := mustJob(t, st, jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"))
	want := []string{"CancelResizeRequest:rr-flexvm-a3u-j8-g1", "DeleteVMs:flexvm-a3u-2-g1",
		"PutNode:flexvm-a3u-2/requested", "PutJob:8/pending", "CreateResizeRequest:rr-flexvm-a3u-j8-g2=flexvm-a3u-2-g2"}
	if d := cmp.Diff(want, kinds(got)); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	for _, a := range got {
		if c, ok := a.(CancelResizeRequest); ok && c.RequestID != failedCancelID(t, failed) {
			t.Errorf("cancel request id %s differs from the release's %s", c.RequestID, failedCancelID(t, failed))
		}
	}
}

func failedCancelID(t *testing.T, actions []Action) string {
	t.Helper()
	for _, a := range actions {
		if c, ok := a.(CancelResizeRequest); ok {
			return c.RequestID
		}
	}
	t.Fatal("the release cancelled no request")
	return ""
}
