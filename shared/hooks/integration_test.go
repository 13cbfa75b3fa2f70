package hooks_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/localslurm"
	"github.com/flexslurm/flexslurm/dev/slurmtest"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// cl is the real Slurm cluster that TestWithSlurm runs its subtests on;
// its hooks are the
// flexslurm binary built from this module, publishing to a Pub/Sub
// emulator.
var cl *slurmtest.Cluster

// TestWithSlurm runs the tests that drive a real slurmctld once per Slurm
// release (slurmtest.Run), as subtests named by release and test:
// TestWithSlurm/slurm-24.11/JobLifecycleThroughSlurm.
func TestWithSlurm(t *testing.T) {
	slurmtest.Run(t, slurmtest.Options{PubSub: true, Config: slurm.ConfigOptions{OtherNodes: 1}}, func(t *testing.T, c *slurmtest.Cluster) {
		cl = c
		defer func() { cl = nil }()
		for _, tc := range []struct {
			name string
			f    func(*testing.T)
		}{
			{"JobLifecycleThroughSlurm", testJobLifecycleThroughSlurm},
			{"PrologFailure", testPrologFailure},
			{"HealthCheckProgramDrainsARunningNode", testHealthCheckProgramDrainsARunningNode},
			{"EpilogOfAJobCancelledWhilePoweringUp", testEpilogOfAJobCancelledWhilePoweringUp},
			{"EpilogOfARequeuedJob", testEpilogOfARequeuedJob},
			{"ResumeFallsBackToSpoolWhenPubSubIsDown", testResumeFallsBackToSpoolWhenPubSubIsDown},
			{"ResumeProgram64Nodes", testResumeProgram64Nodes},
			{"EpilogOfAJobRequeuedByPowerDownForce", testEpilogOfAJobRequeuedByPowerDownForce},
			{"JobOnANodeFlexslurmDoesNotOwn", testJobOnANodeFlexslurmDoesNotOwn},
		} {
			t.Run(tc.name, tc.f)
		}
	})
}

// hookConfig returns the cluster's hook config with the PrologSlurmctld
// wait (so that batch jobs on resumed nodes start at once) and a VM name
// directory.
func hookConfig(t *testing.T) hooks.Config {
	t.Helper()
	c := cl.BaseHookConfig()
	c.PrologCtldWaitReady = hooks.Duration(30 * time.Second)
	c.VMNameDir = cl.VMNameDir()
	return c
}

func writeHooks(t *testing.T, c hooks.Config) {
	t.Helper()
	if err := cl.WriteHooks(c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.WriteHooks(hookConfig(t)) })
}

func isJob(typ, id string) func([]byte) bool {
	return func(b []byte) bool {
		j, err := event.DecodeJob(b)
		return err == nil && j.Type == typ && (id == "" || j.JobID == id)
	}
}

func isNode(typ, node string) func([]byte) bool {
	return func(b []byte) bool {
		n, err := event.DecodeNode(b)
		return err == nil && n.Type == typ && slices.Contains(n.Nodes, node)
	}
}

// waitHookRun waits until hook name has run for job id (its "hook done"
// log record).
func waitHookRun(t *testing.T, name, id string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, r := range hookRuns(t, name) {
			if r["slurm_job_id"] == id {
				return
			}
		}
	}
	t.Fatalf("hook %s did not run for job %s within %v", name, id, timeout)
}

// hookRuns returns the "hook done" log records of hook name.
func hookRuns(t *testing.T, name string) []map[string]any {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(cl.HookLogDir(), "hooks-*.log"))
	var out []map[string]any
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["message"] == "hook done" && rec["hook"] == name {
				out = append(out, rec)
			}
		}
		fh.Close()
	}
	return out
}

// testJobLifecycleThroughSlurm submits a 2-node job on powered-down
// dynamic nodes: slurmctld runs the real ResumeProgram, which publishes one
// job.pending naming the job's nodes; the nodes come up (slurmd started
// 2 s after the resume call, as a VM would), PrologSlurmctld publishes
// job.started, the job runs, EpilogSlurmctld publishes job.finished. Once
// idle for SuspendTime, Slurm suspends the dynamic nodes and SuspendProgram
// publishes node.suspend; the static node is never suspended.
func testJobLifecycleThroughSlurm(t *testing.T) {
	cl.Require(t)
	writeHooks(t, hookConfig(t))
	jobs := cl.NewInbox(t, cl.JobsTopic)
	c := context.Background()
	static := "flexci-gpu-0"
	if err := cl.StartNode(c, static); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(static) })

	submitted := time.Now()
	id := cl.Sbatch(t, "srun true", "-p", "gpu", "-N2", "-w", "flexci-gpu-[1-2]", "-t", "30")
	t.Cleanup(func() { cl.Cancel(id) })
	data := jobs.Wait(t, 20*time.Second, "job.pending for job "+id, isJob(event.TypeJobPending, id))
	resumedAt := time.Now()
	t.Logf("job.pending %.1f s after sbatch", resumedAt.Sub(submitted).Seconds())
	got, err := event.DecodeJob(data)
	if err != nil {
		t.Fatal(err)
	}
	want := event.Job{Header: event.Header{Version: 1, Type: event.TypeJobPending, Cluster: slurmtest.ClusterID},
		JobID: id, Partition: "gpu", NodeCount: 2, Nodes: []string{"flexci-gpu-1", "flexci-gpu-2"},
		TimeLimitSeconds: 1800, ReportedAt: got.ReportedAt}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("job.pending (-want +got):\n%s", diff)
	}
	if got.ReportedAt.Before(submitted.Add(-time.Second)) || got.ReportedAt.After(time.Now()) {
		t.Errorf("reported_at %v is not between sbatch and now", got.ReportedAt)
	}

	for _, n := range []string{"flexci-gpu-1", "flexci-gpu-2"} {
		if err := cl.StartNodeAfter(c, n, resumedAt); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.StopNode(n) })
	}
	started, err := event.DecodeJob(jobs.Wait(t, 10*time.Second, "job.started", isJob(event.TypeJobStarted, id)))
	if err != nil || !slices.Equal(started.Nodes, []string{"flexci-gpu-1", "flexci-gpu-2"}) {
		t.Errorf("job.started = %+v, %v", started, err)
	}
	cl.WaitJob(t, id, 40*time.Second, "completed", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobCompleted })
	finished, err := event.DecodeJob(jobs.Wait(t, 10*time.Second, "job.finished", isJob(event.TypeJobFinished, id)))
	if err != nil || finished.NodeCount != 2 || !finished.NodesUp {
		t.Errorf("job.finished = %+v, %v; want its 2 nodes, up", finished, err)
	}

	// Idle dynamic nodes are suspended after SuspendTime (5 s); the
	// static node stays up.
	suspended := map[string]bool{}
	for !suspended["flexci-gpu-1"] || !suspended["flexci-gpu-2"] {
		b := jobs.Wait(t, 30*time.Second, "node.suspend of flexci-gpu-[1-2]", func(b []byte) bool {
			n, err := event.DecodeNode(b)
			return err == nil && n.Type == event.TypeNodeSuspend
		})
		n, _ := event.DecodeNode(b)
		for _, name := range n.Nodes {
			suspended[name] = true
			cl.StopNode(name) // its VM is deleted
		}
	}
	if suspended[static] {
		t.Errorf("static node %s suspended", static)
	}
	for _, n := range []string{"flexci-gpu-1", "flexci-gpu-2"} {
		cl.WaitNode(t, n, 20*time.Second, "powered down", func(n slurm.NodeInfo) bool { return n.Has(slurmstate.FlagPoweredDown) })
	}
	if n := cl.WaitNode(t, static, 20*time.Second, "up", slurm.NodeInfo.Ready); n.PoweredOff() {
		t.Errorf("static node %s is %s", static, n.StateString())
	}
	for _, m := range jobs.Drain(t, time.Second) {
		if isNode(event.TypeNodeSuspend, static)(m) {
			t.Errorf("static node suspended: %s", m)
		}
	}
	runs := hookRuns(t, slurm.HookResume)
	if len(runs) == 0 {
		t.Fatalf("no ResumeProgram run logged in %s", cl.HookLogDir())
	}
	for _, r := range runs {
		// The target is < 1 s (BenchmarkResumeProgram64Nodes); this bound
		// only catches a hook that hangs, and holds on a loaded machine.
		if ms, _ := r["elapsed_ms"].(float64); ms > 15000 {
			t.Errorf("ResumeProgram run took %.0f ms: %v", ms, r)
		}
	}
}

// testPrologFailure makes the health check fail on a static node: the
// prolog drains the node with the check's reasons, publishes health.failure
// (node, VM and generation, job, job state "pending") and fails, so Slurm
// requeues the job and holds it.
func testPrologFailure(t *testing.T) {
	cl.Require(t)
	c := hookConfig(t)
	c.CheckCmd = []string{"/bin/sh", "-c", `echo '{"verdict": "FAIL", "reasons": ["GPU 3: 2 uncorrectable ECC errors"]}'; exit 1`}
	writeHooks(t, c)
	node := "flexci-gpu-0"
	if err := cl.SetNodeVM(node, node+"-g3"); err != nil {
		t.Fatal(err)
	}
	health := cl.NewInbox(t, cl.HealthTopic)
	if err := cl.StartNode(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.StopNode(node)
		cl.Scontrol(t, "update", "nodename="+node, "state=resume")
	})
	cl.WaitNode(t, node, 15*time.Second, "up", slurm.NodeInfo.Ready)

	id := cl.Sbatch(t, "true", "-p", "gpu", "-w", node)
	t.Cleanup(func() { cl.Cancel(id) })
	j := cl.WaitJob(t, id, 30*time.Second, "requeued and held", slurm.JobInfo.Held)
	if j.State != slurmstate.JobPending || j.Restarts != 1 || j.Reason != "launch_failed_requeued_held" {
		t.Errorf("job after the prolog failure: %s %s restarts %d", j.State, j.Reason, j.Restarts)
	}
	n := cl.WaitNode(t, node, 10*time.Second, "drained", slurm.NodeInfo.Drained)
	if want := "flexslurm: health check failed on " + node + "-g3: GPU 3: 2 uncorrectable ECC errors"; n.Reason != want {
		t.Errorf("drain reason %q, want %q", n.Reason, want)
	}
	h, err := event.DecodeHealth(health.Wait(t, 10*time.Second, "health.failure", func([]byte) bool { return true }))
	if err != nil {
		t.Fatal(err)
	}
	want := event.Health{Header: event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: slurmtest.ClusterID},
		Hook: event.HealthHookProlog, Node: node, Generation: 3, VMName: node + "-g3", JobID: id, JobState: "pending", Verdict: "FAIL",
		Reasons: []string{"GPU 3: 2 uncorrectable ECC errors"}, CheckedAt: h.CheckedAt}
	if diff := cmp.Diff(want, *h); diff != "" {
		t.Errorf("health.failure (-want +got):\n%s", diff)
	}
}

// testHealthCheckProgramDrainsARunningNode runs the healthcheck hook the
// way slurmd runs HealthCheckProgram — environment SLURMD_NODENAME only,
// no PATH, no SLURM_CONF — on a node running a job.
func testHealthCheckProgramDrainsARunningNode(t *testing.T) {
	cl.Require(t)
	c := hookConfig(t)
	writeHooks(t, c)
	node := "flexci-gpu-0"
	health := cl.NewInbox(t, cl.HealthTopic)
	if err := cl.StartNode(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.StopNode(node)
		cl.Scontrol(t, "update", "nodename="+node, "state=resume")
	})
	cl.WaitNode(t, node, 15*time.Second, "up", slurm.NodeInfo.Ready)
	id := cl.Sbatch(t, "sleep 120", "-p", "gpu", "-w", node)
	t.Cleanup(func() { cl.Cancel(id) })
	cl.WaitJob(t, id, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })
	waitHookRun(t, slurm.HookProlog, id, 10*time.Second)

	c.CheckCmd = []string{"/bin/sh", "-c", "echo 'Xid 79: GPU has fallen off the bus'; exit 1"}
	writeHooks(t, c)
	cmd := exec.Command(filepath.Join(cl.HookDir(), slurm.HookLinkPrefix+slurm.HookHealth))
	cmd.Env = []string{"SLURMD_NODENAME=" + node}
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("healthcheck hook: %v\n%s", err, out)
	}
	h, err := event.DecodeHealth(health.Wait(t, 10*time.Second, "health.failure", func([]byte) bool { return true }))
	if err != nil {
		t.Fatal(err)
	}
	if h.Node != node || h.JobID != id || h.JobState != "running" || !slices.Equal(h.Reasons, []string{"Xid 79: GPU has fallen off the bus"}) {
		t.Errorf("health.failure = %+v", h)
	}
	if n := cl.WaitNode(t, node, 5*time.Second, "draining", slurm.NodeInfo.DrainSet); !strings.Contains(n.Reason, "Xid 79") {
		t.Errorf("drain reason %q", n.Reason)
	}
}

// testEpilogOfAJobCancelledWhilePoweringUp cancels a job whose node never
// came up: EpilogSlurmctld reports job.cancelled, so its queued capacity is
// released.
//
// slurmctld may kill that EpilogSlurmctld itself: cancelling the job also
// asks slurmscriptd, without waiting for it, to kill every script it runs
// for the job, and on a loaded host that request can
// reach slurmscriptd after the epilog has started ("JobId=N
// EpilogSlurmctld killed by signal 9" in slurmctld's log). flexslurm then
// learns of the end from the reconciler (a snapshot without the job,
// docs/design/convergence.md) and releases the node on its SuspendProgram run; the
// hook is not at fault, so the test tries again with a new job, up to
// three times.
func testEpilogOfAJobCancelledWhilePoweringUp(t *testing.T) {
	cl.Require(t)
	c := cl.BaseHookConfig()
	c.LogLevel = "DEBUG"
	writeHooks(t, c)
	jobs := cl.NewInbox(t, cl.JobsTopic)
	node := "flexci-gpu-3"
	t.Cleanup(func() {
		cl.Scontrol(t, "update", "nodename="+node, "state=power_down_force")
	})
	const attempts = 3
	for attempt := 1; ; attempt++ {
		id := cl.Sbatch(t, "true", "-p", "gpu", "-w", node)
		jobs.Wait(t, 20*time.Second, "job.pending", isJob(event.TypeJobPending, id))
		cl.Cancel(id)
		if _, ok := jobs.Poll(t, 10*time.Second, isJob(event.TypeJobCancelled, id)); ok {
			return
		}
		killed := epilogKilledBySlurm(t, id)
		if !killed || attempt == attempts {
			t.Fatalf("no job.cancelled for job %s within 10s (attempt %d; EpilogSlurmctld killed by slurmctld: %v); received: %q",
				id, attempt, killed, jobs.Received())
		}
		t.Logf("slurmctld killed job %s's EpilogSlurmctld as it cancelled the job (attempt %d of %d): trying again", id, attempt, attempts)
		// The node is still powering up for the cancelled job (until
		// ResumeTimeout); the next job would be allocated it without a
		// ResumeProgram run, so power it down first.
		cl.Scontrol(t, "update", "nodename="+node, "state=power_down_force")
		cl.WaitNode(t, node, 30*time.Second, "powered down", func(n slurm.NodeInfo) bool {
			return n.Has(slurmstate.FlagPoweredDown) && !n.Has(slurmstate.FlagPoweringDown)
		})
	}
}

// epilogKilledBySlurm reports whether slurmctld's log says that it killed
// job id's EpilogSlurmctld.
func epilogKilledBySlurm(t *testing.T, id string) bool {
	t.Helper()
	log, err := os.ReadFile(slurm.LocalCtldLog(cl.Root))
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`JobId=` + regexp.QuoteMeta(id) + ` EpilogSlurmctld killed by signal`).Match(log)
}

// testEpilogOfARequeuedJob requeues a running job: its EpilogSlurmctld
// reports nothing (the job is pending again, not finished), and it starts
// again once start_now clears Slurm's 2-minute requeue delay.
func testEpilogOfARequeuedJob(t *testing.T) {
	cl.Require(t)
	writeHooks(t, cl.BaseHookConfig())
	jobs := cl.NewInbox(t, cl.JobsTopic)
	node := "flexci-gpu-0"
	if err := cl.StartNode(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(node) })
	cl.WaitNode(t, node, 15*time.Second, "up", slurm.NodeInfo.Ready)
	id := cl.Sbatch(t, "sleep 120", "-p", "gpu", "-w", node)
	t.Cleanup(func() { cl.Cancel(id) })
	jobs.Wait(t, 20*time.Second, "job.started", isJob(event.TypeJobStarted, id))
	cl.WaitJob(t, id, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })
	cl.Scontrol(t, "requeue", id)
	waitHookRun(t, slurm.HookEpilogCtld, id, 15*time.Second)
	cl.WaitJob(t, id, 15*time.Second, "pending", slurm.JobInfo.Pending)
	// slurmd refuses a job relaunched within the second of its requeue
	// ("Job credential revoked"): that is what Slurm's requeue delay avoids.
	time.Sleep(1100 * time.Millisecond)
	cl.Scontrol(t, "update", "jobid="+id, "starttime=now")
	again, err := event.DecodeJob(jobs.Wait(t, 20*time.Second, "job.started again", isJob(event.TypeJobStarted, id)))
	if err != nil || !again.Requeued {
		t.Errorf("second job.started = %+v, %v; want requeued", again, err)
	}
	for _, m := range jobs.Drain(t, time.Second) {
		if isJob(event.TypeJobFinished, id)(m) || isJob(event.TypeJobCancelled, id)(m) {
			t.Errorf("requeued job reported as ended: %s", m)
		}
	}
}

// testResumeFallsBackToSpoolWhenPubSubIsDown runs SuspendProgram with
// Pub/Sub unreachable: it returns within its publish timeout with the event
// spooled, and the next hook run publishes it.
func testResumeFallsBackToSpoolWhenPubSubIsDown(t *testing.T) {
	cl.Require(t)
	jobs := cl.NewInbox(t, cl.JobsTopic)
	down := cl.BaseHookConfig()
	down.PubSubEmulatorHost = "127.0.0.1:9"
	down.PublishTimeout = hooks.Duration(300 * time.Millisecond)
	writeHooks(t, down)
	suspend := filepath.Join(cl.HookDir(), slurm.HookLinkPrefix+slurm.HookSuspend)
	run := func(hostlist string) time.Duration {
		start := time.Now()
		cmd := exec.Command(suspend, hostlist)
		cmd.Env = []string{}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("suspend hook: %v\n%s", err, out)
		}
		return time.Since(start)
	}
	// Without the publish timeout the client retries an unreachable
	// Pub/Sub indefinitely; the bound is loose so that only that fails.
	if d := run("flexci-big-[10-11]"); d > 15*time.Second {
		t.Errorf("suspend hook with Pub/Sub down took %v", d)
	}
	if n := (&hooks.Spool{Dir: cl.SpoolDir(), Policy: cl.BaseHookConfig().SpoolPolicy()}).Pending(); n != 1 {
		t.Errorf("spooled messages = %d, want 1", n)
	}
	writeHooks(t, cl.BaseHookConfig())
	run("flexci-big-12")
	for _, n := range []string{"flexci-big-10", "flexci-big-12"} {
		jobs.Wait(t, 10*time.Second, "node.suspend of "+n, isNode(event.TypeNodeSuspend, n))
	}
	if n := (&hooks.Spool{Dir: cl.SpoolDir(), Policy: cl.BaseHookConfig().SpoolPolicy()}).Pending(); n != 0 {
		t.Errorf("spooled messages after the flush = %d", n)
	}
}

// resumeFile writes a SLURM_RESUME_FILE for jobs, one per node of the
// 64-node pool "big", and returns its path and the hostlist.
func resumeFile(t testing.TB, jobIDs []string) (string, string) {
	t.Helper()
	type rj struct {
		JobID int64  `json:"job_id"`
		Nodes string `json:"nodes"`
	}
	var doc struct {
		Jobs     []rj   `json:"jobs"`
		AllNodes string `json:"all_nodes"`
	}
	var all []string
	for i, id := range jobIDs {
		var n int64
		fmt.Sscan(id, &n)
		name := fmt.Sprintf("flexci-big-%d", i)
		doc.Jobs = append(doc.Jobs, rj{JobID: n, Nodes: name})
		all = append(all, name)
	}
	doc.AllNodes = slurm.CompressHostlist(all)
	b, _ := json.Marshal(doc)
	path := filepath.Join(cl.Root, "resume-64.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, doc.AllNodes
}

// heldJobs submits n held jobs (they stay pending: real ids for squeue to
// describe).
func heldJobs(t testing.TB, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, cl.Sbatch(t, "true", "-H", "-p", "big", "-t", "60"))
	}
	c := cl // the cluster these jobs are on, whatever cl is when cleanup runs
	t.Cleanup(func() { c.Cancel(ids...) })
	return ids
}

// runResume runs ResumeProgram as slurmctld does (hostlist argument,
// SLURM_RESUME_FILE and SLURM_CONF only) and returns its wall time.
func runResume(t testing.TB, hostlist, file string) time.Duration {
	start := time.Now()
	cmd := exec.Command(filepath.Join(cl.HookDir(), slurm.HookLinkPrefix+slurm.HookResume), hostlist)
	cmd.Env = []string{"SLURM_RESUME_FILE=" + file, "SLURM_CONF=" + slurm.DefaultConfPath}
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("resume hook: %v\n%s", err, out)
	}
	return time.Since(start)
}

// productionHooks is the base config with the production publish timeout.
func productionHooks() hooks.Config {
	c := cl.BaseHookConfig()
	c.PublishTimeout = 0
	return c
}

// testResumeProgram64Nodes runs ResumeProgram on a 64-node hostlist (64
// one-node jobs, described by the real slurmctld) 3 times: each run
// publishes its 64 job.pending. Its wall time target (p95 < 1 s) is
// BenchmarkResumeProgram64Nodes's (make bench, BENCHMARKS.md): a wall-clock
// limit here would fail on a loaded test machine, so this only catches a
// run that hangs.
func testResumeProgram64Nodes(t *testing.T) {
	cl.Require(t)
	writeHooks(t, productionHooks())
	jobs := cl.NewInbox(t, cl.JobsTopic)
	ids := heldJobs(t, 64)
	file, hostlist := resumeFile(t, ids)
	var times []time.Duration
	for i := 0; i < 3; i++ {
		times = append(times, runResume(t, hostlist, file))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	t.Logf("ResumeProgram, 64-node hostlist, 64 jobs: min %v, median %v, max %v", times[0], times[len(times)/2], times[len(times)-1])
	if slowest := times[len(times)-1]; slowest > 30*time.Second {
		t.Errorf("ResumeProgram run took %v: hung? (all runs: %v)", slowest, times)
	}
	seen := map[string]int{}
	for len(seen) < 64 {
		b := jobs.Wait(t, 10*time.Second, "job.pending", isJob(event.TypeJobPending, ""))
		j, _ := event.DecodeJob(b)
		seen[j.JobID]++
		if j.Partition != "big" || j.TimeLimitSeconds != 3600 || j.NodeCount != 1 {
			t.Fatalf("job.pending = %+v", j)
		}
	}
}

// BenchmarkResumeProgram64Nodes measures the wall time of ResumeProgram for
// a 64-node hostlist against the real slurmctld and Pub/Sub emulator, and
// reports its 99th percentile (on the host's Slurm).
func BenchmarkResumeProgram64Nodes(b *testing.B) {
	c, teardown := slurmtest.Setup(slurmtest.Options{PubSub: true}, localslurm.Host())
	// Cleanups run last registered first: heldJobs' cancel, then these.
	b.Cleanup(teardown)
	cl = c
	b.Cleanup(func() { cl = nil })
	cl.Require(b)
	if err := cl.WriteHooks(productionHooks()); err != nil {
		b.Fatal(err)
	}
	ids := heldJobs(b, 64)
	file, hostlist := resumeFile(b, ids)
	var times []time.Duration
	b.ResetTimer()
	for b.Loop() {
		times = append(times, runResume(b, hostlist, file))
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	p99 := times[min(len(times)-1, len(times)*99/100)]
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
}

// testJobOnANodeFlexslurmDoesNotOwn runs a job on a node of a partition
// that is not flexslurm's, in the cluster flexslurm's slurm.conf lines were
// added to: the job runs; the node hooks run there but check and drain
// nothing; neither they nor PrologSlurmctld and EpilogSlurmctld report
// anything; and the node, idle past flexslurm's SuspendTime, is never
// powered down (power saving is set on flexslurm's partitions only).
func testJobOnANodeFlexslurmDoesNotOwn(t *testing.T) {
	cl.Require(t)
	c := context.Background()
	writeHooks(t, hookConfig(t))
	jobs := cl.NewInbox(t, cl.JobsTopic)
	health := cl.NewInbox(t, cl.HealthTopic)
	other := slurm.OtherNodeName(0)
	if err := cl.StartNode(c, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(other) })
	cl.WaitNode(t, other, 30*time.Second, "idle", func(n slurm.NodeInfo) bool { return n.State == slurmstate.NodeIdle })
	// A check that fails everywhere: only a node flexslurm owns may run it.
	failing := hookConfig(t)
	failing.CheckCmd = []string{"/bin/false"}
	writeHooks(t, failing)

	id := cl.Sbatch(t, "srun true", "-p", slurm.OtherPartition, "-N1", "-t", "5")
	t.Cleanup(func() { cl.Cancel(id) })
	cl.WaitJob(t, id, 40*time.Second, "completed", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobCompleted })
	for _, h := range []string{slurm.HookPrologCtld, slurm.HookEpilogCtld, slurm.HookProlog, slurm.HookEpilog} {
		waitHookRun(t, h, id, 20*time.Second)
	}
	for _, h := range []string{slurm.HookProlog, slurm.HookEpilog} {
		for _, r := range hookRuns(t, h) {
			if r["slurm_job_id"] == id && (r["exit"] != float64(0) || r["error"] != nil) {
				t.Errorf("%s on %s: exit %v, error %v; want 0 and none", h, other, r["exit"], r["error"])
			}
		}
	}
	// Idle past SuspendTime (5 s) and a HealthCheckProgram run.
	time.Sleep(8 * time.Second)
	n := cl.WaitNode(t, other, 10*time.Second, "idle", func(n slurm.NodeInfo) bool { return n.State == slurmstate.NodeIdle })
	if n.Has(slurmstate.FlagDrain) || n.Has(slurmstate.FlagPoweredDown) || n.Has(slurmstate.FlagPoweringDown) {
		t.Errorf("node %s that flexslurm does not own is %s %v: want idle, not drained or powered down", other, n.State, n.Flags)
	}
	for _, b := range jobs.Drain(t, 2*time.Second) {
		if j, err := event.DecodeJob(b); err == nil && j.JobID == id {
			t.Errorf("reported a job on a node flexslurm does not own: %s", b)
		}
		if p, err := event.DecodeNode(b); err == nil && slices.Contains(p.Nodes, other) {
			t.Errorf("reported a node flexslurm does not own: %s", b)
		}
	}
	for _, b := range health.Drain(t, 2*time.Second) {
		if h, err := event.DecodeHealth(b); err == nil && h.Node == other {
			t.Errorf("health report of a node flexslurm does not own: %s", b)
		}
	}
}
