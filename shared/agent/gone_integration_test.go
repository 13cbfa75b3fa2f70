package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
)

// testPowerDownForceOfAGoneVM: the node's VM ended (its slurmd is gone)
// under a running job, and flexslurm forces the power down. Slurm alone
// would hold the job COMPLETING for good, waiting for a slurmd that never
// answers; the agent sets the node DOWN first, so the job is requeued at
// once and the node powers down.
func testPowerDownForceOfAGoneVM(t *testing.T) {
	h := startAgent(t)
	ctx := context.Background()
	dyn := "flexci-gpu-2"
	if err := cl.StartNode(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(dyn) })
	cl.WaitNode(t, dyn, 15*time.Second, "up", slurm.NodeInfo.Ready)
	job := cl.Sbatch(t, "sleep 300", "-p", "gpu", "-w", dyn, "--time", "10")
	t.Cleanup(func() { cl.Cancel(job) })
	cl.WaitJob(t, job, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurm.JobRunning })

	if err := cl.StopNode(dyn); err != nil { // the VM ends
		t.Fatal(err)
	}
	h.applied(event.SlurmCommand{Command: event.SlurmPowerDownForce, Nodes: []string{dyn}, Reason: "flexslurm: VM flexci-gpu-2-g1 reached its max run duration"})
	j := cl.WaitJob(t, job, 10*time.Second, "requeued and pending", func(j slurm.JobInfo) bool { return j.Pending() && j.Restarts == 1 })
	if j.State != slurm.JobPending {
		t.Errorf("job %s is %s", job, j.State)
	}
	// A hang check, not a target: Slurm 24.11 on a loaded machine has taken
	// over 20 s (SuspendTimeout is 3 s) to finish POWERING_DOWN.
	cl.WaitNode(t, dyn, 90*time.Second, "powered down", func(n slurm.NodeInfo) bool { return n.Has(slurm.FlagPoweredDown) && !n.Down() })
	h.unchanged(event.SlurmCommand{Command: event.SlurmPowerDownForce, Nodes: []string{dyn}})
}
