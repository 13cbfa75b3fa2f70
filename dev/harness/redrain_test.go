package harness

import (
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// TestRepairDrainLiftedIsAskedAgain: a repair waits for the drain it asked
// Slurm for. When a snapshot taken after the repair started shows the node
// with no drain at all (the command was lost, or a late resume lifted it),
// the reconciler asks for the drain again, once per such snapshot, and the
// repair goes on once Slurm confirms it; a snapshot older than the repair
// asks for nothing.
func TestRepairDrainLiftedIsAskedAgain(t *testing.T) {
	h, ctx, _ := flexHarness(t, Options{})
	must(t, h.DeliverWith(ctx, config.TopicHealthFailure, "fail", failEvent("flexvm-a3u-0", 1, true), nil))
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairAwaitDrain {
		t.Fatalf("after the FAIL: repair %q, want await_drain", n.Repair)
	}
	// Distinct drain commands (the agent applies a command id once).
	drains := func() int {
		ids := map[string]bool{}
		for _, m := range h.Publisher.Take(config.TopicSlurmCommands) {
			c, err := event.DecodeSlurmCommand(m.Data)
			must(t, err)
			if c.Command == event.SlurmDrain && len(c.Nodes) == 1 && c.Nodes[0] == "flexvm-a3u-0" {
				ids[c.ID] = true
			}
		}
		return len(ids)
	}
	if n := drains(); n != 1 {
		t.Fatalf("the FAIL asked for %d drains, want 1", n)
	}
	undrained := func(at time.Time) event.SlurmSnapshot {
		return event.SlurmSnapshot{Header: event.Header{Version: 1, Type: event.TypeSlurmSnapshot, Cluster: "flexvm"}, TakenAt: at,
			Nodes: []event.SnapshotNode{{Name: "flexvm-a3u-0", Node: slurmstate.Node{State: slurmstate.NodeIdle,
				Flags: slurmstate.NewNodeFlags(slurmstate.FlagCloud)}}}}
	}
	// A snapshot from before the repair shows no drain: it proves nothing.
	_, err := h.Publish(ctx, config.TopicSlurmSnapshot, undrained(h.Clock.Now().Add(-time.Minute)))
	must(t, err)
	must(t, h.Tick(ctx))
	if n := drains(); n != 0 {
		t.Errorf("a snapshot older than the repair asked for %d drains", n)
	}
	// One taken after it shows the drain gone: asked again, once.
	must(t, h.Advance(ctx, time.Minute))
	_, err = h.Publish(ctx, config.TopicSlurmSnapshot, undrained(h.Clock.Now()))
	must(t, err)
	must(t, h.Tick(ctx))
	must(t, h.Tick(ctx))
	if n := drains(); n != 1 {
		t.Errorf("a newer snapshot without the drain: %d drains asked, want 1", n)
	}
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairAwaitDrain || n.Generation != 1 {
		t.Errorf("before Slurm confirms the drain: repair %q generation %d", n.Repair, n.Generation)
	}
	confirmDrain(t, h, ctx, "flexvm-a3u-0")
	if n := node(t, h, "flexvm-a3u-0"); n.Generation != 2 {
		t.Errorf("after Slurm confirmed the drain: generation %d, want 2 (replaced)", n.Generation)
	}
}
