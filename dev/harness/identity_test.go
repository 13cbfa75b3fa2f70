package harness

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/model"
)

// TestAttackForgedHealthFailureInHarness: the harness's KnownSender goes
// through the same matching as a verified token: a drained FAIL sent
// without a token, or by another VM, leaves the node and its VM alone,
// while the same report from the VM itself replaces it once Slurm's
// snapshot confirms the drain.
func TestAttackForgedHealthFailureInHarness(t *testing.T) {
	for name, sender := range map[string]string{
		"no token":           "none",
		"another node's VM":  "zones/us-central1-a/instances/flexvm-a3u-1-g1",
		"the controller":     ControllerVM,
		"the VM, elsewhere":  "zones/us-east1-b/instances/flexvm-a3u-0-g1",
		"the VM's successor": "zones/us-central1-a/instances/flexvm-a3u-0-g2",
	} {
		t.Run(name, func(t *testing.T) {
			h, ctx, _ := flexHarness(t, Options{})
			must(t, h.DeliverWith(ctx, config.TopicHealthFailure, "forged", failEvent("flexvm-a3u-0", 1, true), map[string]string{SenderAttr: sender}))
			if n := node(t, h, "flexvm-a3u-0"); n.Generation != 1 || n.Repair != model.RepairNone || n.LastEnd != "" {
				t.Errorf("a forged FAIL changed the node: gen %d repair %q last end %q", n.Generation, n.Repair, n.LastEnd)
			}
			if d := cmp.Diff([]string{"flexvm-a3u-0-g1"}, h.VMs()); d != "" {
				t.Errorf("a forged FAIL changed the VMs (-want +got):\n%s", d)
			}
		})
	}
	h, ctx, _ := flexHarness(t, Options{})
	must(t, h.DeliverWith(ctx, config.TopicHealthFailure, "genuine", failEvent("flexvm-a3u-0", 1, true), map[string]string{SenderAttr: "zones/us-central1-a/instances/flexvm-a3u-0-g1"}))
	if n := node(t, h, "flexvm-a3u-0"); n.Repair != model.RepairAwaitDrain {
		t.Errorf("the VM's own FAIL did not start a repair: %q", n.Repair)
	}
	confirmDrain(t, h, ctx, "flexvm-a3u-0")
	if n := node(t, h, "flexvm-a3u-0"); n.Generation != 2 {
		t.Errorf("the VM's own FAIL did not replace it: gen %d", n.Generation)
	}
}
