package hooks

import (
	"context"
	"testing"

	"github.com/flexslurm/flexslurm/shared/slurm"
)

// TestAttackNodeRootPowersDownAnotherNode: the root of a node VM holds the
// cluster's munge key (its node account reads it from Secret Manager, and
// munged needs it), and slurmctld treats uid 0 from any host as a Slurm
// super user. So a node's root can run, from its own node,
// `scontrol update nodename=flexvm-a3u-1 state=power_down_force` (or drain,
// down, resume any node, or forge a credential for any uid). slurmctld
// then runs SuspendProgram for flexvm-a3u-1 as the SlurmUser, and the
// controller's hook publishes node.suspend signed with the controller's
// identity token: ScaleUp releases another node's VM on a node root's
// word, which the identity check was meant to prevent. The hook cannot
// tell who asked Slurm for the power down, and no flexslurm check can:
// the fix is in Slurm's authentication (a key that is not cluster-wide,
// or slurmctld refusing super-user requests from compute nodes).
func TestAttackNodeRootPowersDownAnotherNode(t *testing.T) {
	t.Skip("KNOWN HOLE: a node's root is a Slurm super user through the cluster-wide munge key, so it can make slurmctld run the controller's hooks about any node (see docs/security.md, Known holes)")
	rt, pub := testRuntime(t, map[string]string{})
	// What slurmctld runs after flexvm-a3u-0's root powered down
	// flexvm-a3u-1.
	rt.Run(context.Background(), slurm.HookSuspend, []string{"flexvm-a3u-1"})
	if len(pub.msgs) != 0 || rt.Outbox.Spool.Pending() != 0 {
		t.Errorf("a power down asked by another node's root was reported as the controller's: %d published, %d spooled", len(pub.msgs), rt.Outbox.Spool.Pending())
	}
}
