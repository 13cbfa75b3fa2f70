package hooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// testEpilogOfAJobRequeuedByPowerDownForce: when flexslurm powers a node
// down under a running job (its VM reached its max run duration), Slurm
// requeues the job; its EpilogSlurmctld sees an end time still ahead, not
// Unknown, and must report nothing — the job is pending again, not
// finished.
func testEpilogOfAJobRequeuedByPowerDownForce(t *testing.T) {
	cl.Require(t)
	writeHooks(t, cl.BaseHookConfig())
	jobs := cl.NewInbox(t, cl.JobsTopic)
	node := "flexci-gpu-1"
	if err := cl.StartNode(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	cl.WaitNode(t, node, 15*time.Second, "up", slurm.NodeInfo.Ready)
	// A time limit: the requeued job's end time then reads start + limit
	// during its epilog, not Unknown.
	id := cl.Sbatch(t, "sleep 120", "-p", "gpu", "-w", node, "--time", "10")
	t.Cleanup(func() { cl.Cancel(id) })
	jobs.Wait(t, 20*time.Second, "job.started", isJob(event.TypeJobStarted, id))
	cl.WaitJob(t, id, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })
	cl.Scontrol(t, "update", "nodename="+node, "state=power_down_force")
	t.Cleanup(func() {
		cl.StopNode(node)
		cl.WaitNode(t, node, 30*time.Second, "powered down", slurm.NodeInfo.PoweredOff)
	})
	waitHookRun(t, slurm.HookEpilogCtld, id, 15*time.Second)
	requeued := false
	for _, r := range hookRecords(t, slurm.HookEpilogCtld, id) {
		requeued = requeued || strings.Contains(fmt.Sprint(r["message"]), "requeued")
	}
	if !requeued {
		t.Errorf("EpilogSlurmctld did not see job %s being requeued: %v", id, hookRecords(t, slurm.HookEpilogCtld, id))
	}
	j := cl.WaitJob(t, id, 15*time.Second, "pending", slurm.JobInfo.Pending)
	if j.Restarts != 1 {
		t.Errorf("restarts = %d, want 1 (requeued by power_down_force)", j.Restarts)
	}
	for _, m := range jobs.Drain(t, time.Second) {
		if isJob(event.TypeJobFinished, id)(m) || isJob(event.TypeJobCancelled, id)(m) {
			t.Errorf("job requeued by power_down_force reported as ended: %s", m)
		}
	}
}

// hookRecords returns every log record of hook name for job id.
func hookRecords(t *testing.T, name, id string) []map[string]any {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(cl.HookLogDir(), "hooks-*.log"))
	var out []map[string]any
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			var rec map[string]any
			if json.Unmarshal(line, &rec) == nil && rec["hook"] == name && rec["slurm_job_id"] == id {
				out = append(out, rec)
			}
		}
	}
	return out
}
