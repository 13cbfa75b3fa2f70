package local

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/event"
)

// The timeline prints each Slurm decision once per node and VM, whatever
// its command id (a new attempt's, or delivered at least once),
// and every time in its one format.
func TestTimelineOnceAndOneTimeFormat(t *testing.T) {
	var out bytes.Buffer
	tl := NewTimeline(&out)
	origin := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tl.Origin = origin
	tl.Clock = clock.NewScaled(origin, 1e-9) // stays at the origin
	down := func(id, vm string) event.SlurmCommand {
		return event.SlurmCommand{ID: id, Command: event.SlurmPowerDownForce, Nodes: []string{"c-a3u-1"},
			Reason: "flexslurm: Slurm thinks the node is up but it has no VM " + vm}
	}
	for _, c := range []event.SlurmCommand{down("a", "c-a3u-1-g1"), down("b", "c-a3u-1-g1"), down("a", "c-a3u-1-g1"),
		down("c", "c-a3u-1-g1"), down("d", "c-a3u-1-g2")} {
		tl.command(c)
	}
	tl.Say("VM c-a3u-0-g1 is running until 2026-12-08T03:15:00Z, created 2026-11-30T23:00:00.5Z")
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"+0d 00:00  slurm: power_down_force c-a3u-1 (flexslurm: Slurm thinks the node is up but it has no VM c-a3u-1-g1)",
		"+0d 00:00  slurm: power_down_force c-a3u-1 (flexslurm: Slurm thinks the node is up but it has no VM c-a3u-1-g2)",
		"+0d 00:00  VM c-a3u-0-g1 is running until +7d 03:15, created -0d 00:59",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	if n := len(tl.Commands()); n != 5 {
		t.Errorf("Commands() holds %d commands, want every one received (5)", n)
	}
	// Two decisions (one per VM); "b" and "c" repeat the first under new
	// ids, the second "a" is a redelivery.
	if d, r := tl.CommandCounts(); d != 2 || r != 2 {
		t.Errorf("CommandCounts() = %d decisions, %d resent; want 2, 2", d, r)
	}
}
