package agent_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
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
	cl.WaitJob(t, job, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })

	// slurmctld marks the job RUNNING before slurmd starts its script:
	// wait for the script's sleep.
	var tasks []int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		tasks = jobProcesses(job)
		if slices.ContainsFunc(tasks, func(pid int) bool { return procName(pid) == "sleep" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s runs no sleep on this host 10 s after it started: processes %v", job, tasks)
		}
	}
	if err := cl.StopNode(dyn); err != nil { // the VM ends
		t.Fatal(err)
	}
	for _, pid := range tasks {
		// A zombie ("PID (comm) Z …") has ended; this host's init may be
		// slow to reap it.
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && !bytes.Contains(st, []byte(") Z ")) {
			t.Errorf("process of job %s still there after its node's VM ended: %s", job, st)
		}
	}
	h.applied(event.SlurmCommand{Command: event.SlurmPowerDownForce, Nodes: []string{dyn}, Reason: "flexslurm: VM flexci-gpu-2-g1 reached its max run duration"})
	j := cl.WaitJob(t, job, 10*time.Second, "requeued and pending", func(j slurm.JobInfo) bool { return j.Pending() && j.Restarts == 1 })
	if j.State != slurmstate.JobPending {
		t.Errorf("job %s is %s", job, j.State)
	}
	// A hang check, not a target: Slurm 24.11 on a loaded machine has taken
	// over 20 s (SuspendTimeout is 3 s) to finish POWERING_DOWN.
	cl.WaitNode(t, dyn, 90*time.Second, "powered down", func(n slurm.NodeInfo) bool { return n.Has(slurmstate.FlagPoweredDown) && !n.Down() })
	h.unchanged(event.SlurmCommand{Command: event.SlurmPowerDownForce, Nodes: []string{dyn}})
}

// jobProcesses returns the processes on this host whose environment holds
// SLURM_JOB_ID=id: the job's batch script and its tasks.
func jobProcesses(id string) []int {
	entries, _ := os.ReadDir("/proc")
	want := []byte("\x00SLURM_JOB_ID=" + id + "\x00")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, env...), want) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procName is the program name of pid ("" when it has ended).
func procName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
