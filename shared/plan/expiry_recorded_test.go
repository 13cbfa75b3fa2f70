package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// TestExpiryRecordedRunDurationEnds: both forms in which Compute logs the
// end of a VM's run duration — the System Event
// compute.instances.deferredDelete, and the MIG deleting the VM (a
// versioned …compute.instances.delete by the project's Google APIs service
// agent, first or last entry, v1 or beta) — decode from the recorded
// entries the sink filter is tested on (shared/event/testdata/audit) and
// reach Expiry as a run-duration end: the static node is recreated and its
// ended generation recorded as expired. The same delete by a user is a
// loss, not an expiry.
func TestExpiryRecordedRunDurationEnds(t *testing.T) {
	for _, tc := range []struct {
		file string
		want model.EndReason
	}{
		{"deferred-delete.json", model.EndExpired},
		{"v1-delete-by-mig-service-agent.json", model.EndExpired},
		{"v1-delete-by-mig-service-agent-last.json", model.EndExpired},
		{"beta-delete-by-mig-service-agent.json", model.EndExpired},
		{"v1-delete-by-user-first.json", model.EndLost},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "event", "testdata", "audit", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			a, err := event.DecodeAudit(data)
			if err != nil {
				t.Fatal(err)
			}
			if a.Instance != "flexvm-a3u-0-g1" {
				t.Fatalf("entry about %s, want flexvm-a3u-0-g1 (the test's node)", a.Instance)
			}
			st, _ := applied(t)
			// The entry is logged when the VM's run duration ends.
			running(st, "flexvm-a3u-0", a.Timestamp)
			got, err := Expiry(st, a, a.Timestamp, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			var ended *model.Node
			for _, act := range got {
				if p, ok := act.(PutNode); ok && p.Node.Name == "flexvm-a3u-0" {
					ended = &p.Node
					break
				}
			}
			if ended == nil {
				t.Fatalf("no record of node flexvm-a3u-0 in %v", kinds(got))
			}
			if ended.LastEnd != tc.want {
				t.Errorf("%s (%s by %s): generation ended as %q, want %q", tc.file, a.Method, a.Principal, ended.LastEnd, tc.want)
			}
			if tc.want == model.EndExpired && !strings.Contains(strings.Join(kinds(got), " "), "CreateResizeRequest:rr-flexvm-a3u-0-g2") {
				t.Errorf("%s: the static node is not recreated: %v", tc.file, kinds(got))
			}
		})
	}
}
