package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/slurmtest"
	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/agent"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/hooks"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// cl is the real Slurm cluster that TestWithSlurm runs its subtests on.
var cl *slurmtest.Cluster

// Topics of the agent under test, unique to this test binary.
var (
	commandsTopic = slurmtest.Topic("commands")
	resultsTopic  = slurmtest.Topic("results")
	snapshotTopic = slurmtest.Topic("snapshot")
)

// TestWithSlurm runs the tests that drive a real slurmctld once per Slurm
// release (slurmtest.Run), as subtests named by release and test:
// TestWithSlurm/slurm-24.11/NodeCommands.
func TestWithSlurm(t *testing.T) {
	slurmtest.Run(t, slurmtest.Options{PubSub: true}, func(t *testing.T, c *slurmtest.Cluster) {
		cl = c
		defer func() { cl = nil }()
		for _, tc := range []struct {
			name string
			f    func(*testing.T)
		}{
			{"NodeCommands", testNodeCommands},
			{"JobCommands", testJobCommands},
			{"JobComment", testJobComment},
			{"SignalReachesTheBatchScriptsTrap", testSignalReachesTheBatchScriptsTrap},
			{"ReservationCommands", testReservationCommands},
			{"EndOfLifeKeepsLongerJobsOff", testEndOfLifeKeepsLongerJobsOff},
			{"Refusals", testRefusals},
			{"SnapshotAndSpool", testSnapshotAndSpool},
			{"PowerDownForceOfAGoneVM", testPowerDownForceOfAGoneVM},
			{"ConfigDivergence", testConfigDivergence},
		} {
			t.Run(tc.name, tc.f)
		}
	})
}

// harness runs the agent for one test and talks to it over Pub/Sub.
type harness struct {
	t         *testing.T
	results   *slurmtest.Inbox
	snapshots *slurmtest.Inbox
	seq       atomic.Int64
}

func startAgent(t *testing.T) *harness {
	t.Helper()
	return startAgentSpec(t, cl.Spec, nil)
}

// startAgentSpec starts the agent with spec c, its log also written to
// logw when set.
func startAgentSpec(t *testing.T, c *spec.Cluster, logw io.Writer) *harness {
	t.Helper()
	cl.Require(t)
	h := &harness{t: t, results: cl.NewInbox(t, resultsTopic), snapshots: cl.NewInbox(t, snapshotTopic)}
	if logw == nil {
		logw = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	logf, err := os.Create(filepath.Join(cl.Root, "log", "agent-"+testenv.UniqueID(t)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- agent.Run(ctx, agent.Options{
			Spec: c, Project: testenv.Project(), Subscription: testenv.UniqueID(t), CreateSubscription: true,
			CommandsTopic: commandsTopic, ResultsTopic: resultsTopic, SnapshotTopic: snapshotTopic,
			SnapshotEvery: time.Second, LedgerPath: filepath.Join(t.TempDir(), "ledger.json"), SpoolDir: cl.SpoolDir(),
			SpoolSenders: cl.SpoolSenders(), JobsTopic: cl.JobsTopic,
			RetryDelay: 200 * time.Millisecond, Slurm: cl.R, MetadataHost: cl.MetadataHost(),
			Log:   slog.New(slog.NewJSONHandler(io.MultiWriter(logf, logw), &slog.HandlerOptions{Level: slog.LevelDebug})),
			Ready: func() { close(ready) },
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent.Run: %v", err)
		}
		logf.Close()
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("agent.Run ended at start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("agent not ready within 30 s")
	}
	return h
}

// publish sends a command as the functions do.
func (h *harness) publish(c event.SlurmCommand) {
	h.t.Helper()
	c.Header = event.Header{Version: 1, Type: event.TypeSlurmCommand, Cluster: c.Cluster}
	if c.Cluster == "" {
		c.Header.Cluster = slurmtest.ClusterID
	}
	data, err := json.Marshal(c)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.PubSubClient(h.t).Publish(ctx, commandsTopic, data, nil); err != nil {
		h.t.Fatal(err)
	}
}

// run sends c (with a fresh id unless it has one) and returns its result.
func (h *harness) run(c event.SlurmCommand) event.CommandResult {
	h.t.Helper()
	if c.ID == "" {
		c.ID = h.t.Name() + "-" + strconv.FormatInt(h.seq.Add(1), 10)
	}
	h.publish(c)
	b := h.results.Wait(h.t, 20*time.Second, "result of "+c.ID, func(b []byte) bool {
		var r event.CommandResult
		return json.Unmarshal(b, &r) == nil && r.ID == c.ID
	})
	var r event.CommandResult
	if err := json.Unmarshal(b, &r); err != nil {
		h.t.Fatal(err)
	}
	if r.Type != event.TypeCommandResult || r.Cluster != slurmtest.ClusterID || r.Command != c.Command || r.At.IsZero() {
		h.t.Errorf("result header of %s: %+v", c.ID, r)
	}
	return r
}

// applied runs c and checks it was applied; then redelivers the same id and
// checks it is skipped, and returns the first result.
func (h *harness) applied(c event.SlurmCommand) event.CommandResult {
	h.t.Helper()
	c.ID = h.t.Name() + "-" + strconv.FormatInt(h.seq.Add(1), 10)
	r := h.run(c)
	if !r.OK || r.Skipped {
		h.t.Errorf("%s %v%s%s: %+v, want applied", c.Command, c.Nodes, c.JobID, c.Reservation, r)
	}
	again := h.run(c)
	if !again.OK || !again.Skipped {
		h.t.Errorf("redelivered %s %s: %+v, want skipped", c.Command, c.ID, again)
	}
	return r
}

// unchanged runs c under a new id and checks the agent found nothing to do.
func (h *harness) unchanged(c event.SlurmCommand) {
	h.t.Helper()
	r := h.run(c)
	if !r.OK || !r.Skipped {
		h.t.Errorf("%s %v%s%s again: %+v, want skipped (already in that state)", c.Command, c.Nodes, c.JobID, c.Reservation, r)
	}
}

func node(t *testing.T, name string) slurm.NodeInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := cl.R.ShowNode(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testNodeCommands applies every node command to real nodes — drain,
// resume, down, power_up, power_down, power_down_force, update_address —
// checking Slurm's state after each, that a redelivered command is skipped,
// and that a repeated command finds nothing to do.
func testNodeCommands(t *testing.T) {
	h := startAgent(t)
	ctx := context.Background()
	up, down, dyn := "flexci-gpu-0", "flexci-gpu-1", "flexci-gpu-3"
	if err := cl.StartNode(ctx, up); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(up) })
	cl.WaitNode(t, up, 15*time.Second, "up", slurm.NodeInfo.Ready)

	h.applied(event.SlurmCommand{Command: event.SlurmDrain, Nodes: []string{up}, Reason: "flexslurm: health check failed: GPU 3"})
	if n := node(t, up); !n.DrainSet() || n.Reason != "flexslurm: health check failed: GPU 3" {
		t.Errorf("after drain: %s %q", n.StateString(), n.Reason)
	}
	h.unchanged(event.SlurmCommand{Command: event.SlurmDrain, Nodes: []string{up}, Reason: "another"})
	h.applied(event.SlurmCommand{Command: event.SlurmResume, Nodes: []string{up}})
	if n := node(t, up); n.DrainSet() {
		t.Errorf("after resume: %s", n.StateString())
	}
	// slurmd may miss a ping on a loaded machine: NOT_RESPONDING for a while.
	cl.WaitNode(t, up, 20*time.Second, "up", slurm.NodeInfo.Ready)
	h.unchanged(event.SlurmCommand{Command: event.SlurmResume, Nodes: []string{up}})

	h.applied(event.SlurmCommand{Command: event.SlurmDown, Nodes: []string{down}, Reason: "flexslurm: VM lost"})
	if n := node(t, down); !n.Down() || n.Reason != "flexslurm: VM lost" {
		t.Errorf("after down: %s %q", n.StateString(), n.Reason)
	}
	h.unchanged(event.SlurmCommand{Command: event.SlurmDown, Nodes: []string{down}, Reason: "x"})
	h.applied(event.SlurmCommand{Command: event.SlurmResume, Nodes: []string{down}})
	if n := node(t, down); n.Down() || !n.Has(slurmstate.FlagPoweredDown) {
		t.Errorf("after resume of a down node: %s", n.StateString())
	}

	h.applied(event.SlurmCommand{Command: event.SlurmUpdateAddress, Nodes: []string{dyn}, Address: "127.1.9.9"})
	if n := node(t, dyn); n.Addr != "127.1.9.9" {
		t.Errorf("NodeAddr after update_address = %s", n.Addr)
	}
	h.unchanged(event.SlurmCommand{Command: event.SlurmUpdateAddress, Nodes: []string{dyn}, Address: "127.1.9.9"})

	// power_up runs ResumeProgram; the node registers from its new address.
	h.applied(event.SlurmCommand{Command: event.SlurmPowerUp, Nodes: []string{dyn}})
	resumed := time.Now()
	if n := node(t, dyn); !n.Has(slurmstate.FlagPoweringUp) && !n.Has(slurmstate.FlagPowerUp) {
		t.Errorf("after power_up: %s", n.StateString())
	}
	h.unchanged(event.SlurmCommand{Command: event.SlurmPowerUp, Nodes: []string{dyn}})
	if err := cl.StartNodeAfter(ctx, dyn, resumed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(dyn) })
	cl.WaitNode(t, dyn, 15*time.Second, "up", slurm.NodeInfo.Ready)

	// power_down_force ends the job on the node (requeued) and powers it
	// down at once.
	job := cl.Sbatch(t, "sleep 300", "-p", "gpu", "-w", dyn)
	t.Cleanup(func() { cl.Cancel(job) })
	cl.WaitJob(t, job, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })
	h.applied(event.SlurmCommand{Command: event.SlurmPowerDownForce, Nodes: []string{dyn}, Reason: "flexslurm: VM expired"})
	cl.WaitJob(t, job, 20*time.Second, "requeued", func(j slurm.JobInfo) bool { return j.Pending() && j.Restarts == 1 })
	cl.WaitNode(t, dyn, 20*time.Second, "powering down", func(n slurm.NodeInfo) bool {
		return n.Has(slurmstate.FlagPoweringDown) || n.Has(slurmstate.FlagPoweredDown)
	})
	h.unchanged(event.SlurmCommand{Command: event.SlurmPowerDownForce, Nodes: []string{dyn}})
	cl.StopNode(dyn)

	// power_down of the idle static node.
	h.applied(event.SlurmCommand{Command: event.SlurmPowerDown, Nodes: []string{up}, Reason: "flexslurm: released"})
	// POWERING_DOWN lasts SuspendTimeout (3 s here) and ends on one of
	// slurmctld's power-save passes; 24.11 can take a few of those longer
	// than 22.05, so the wait is a hang check, not a timing target.
	cl.WaitNode(t, up, 90*time.Second, "powered down", func(n slurm.NodeInfo) bool { return n.Has(slurmstate.FlagPoweredDown) })
	h.unchanged(event.SlurmCommand{Command: event.SlurmPowerDown, Nodes: []string{up}})
}

// testJobCommands requeues a running job, starts it again at once with
// start_now, and checks both are idempotent.
func testJobCommands(t *testing.T) {
	h := startAgent(t)
	ctx := context.Background()
	n := "flexci-gpu-0"
	if err := cl.StartNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(n) })
	cl.WaitNode(t, n, 15*time.Second, "up", slurm.NodeInfo.Ready)
	job := cl.Sbatch(t, "sleep 300", "-p", "gpu", "-w", n)
	t.Cleanup(func() { cl.Cancel(job) })
	cl.WaitJob(t, job, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })

	requeued := time.Now().Truncate(time.Second)
	h.applied(event.SlurmCommand{Command: event.SlurmRequeue, JobID: job})
	j := cl.WaitJob(t, job, 20*time.Second, "pending", func(j slurm.JobInfo) bool { return j.Pending() && !j.SubmitTime.Before(requeued) })
	if j.Restarts != 1 {
		t.Errorf("restarts after requeue = %d", j.Restarts)
	}
	h.unchanged(event.SlurmCommand{Command: event.SlurmRequeue, JobID: job})
	h.applied(event.SlurmCommand{Command: event.SlurmStartNow, JobID: job})
	// Without start_now the job would wait 121 s (BeginTime).
	cl.WaitJob(t, job, 15*time.Second, "running again", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })
	h.unchanged(event.SlurmCommand{Command: event.SlurmStartNow, JobID: job})

	cl.Cancel(job)
	cl.WaitJob(t, job, 15*time.Second, "cancelled", slurm.JobInfo.Finished)
	h.unchanged(event.SlurmCommand{Command: event.SlurmRequeue, JobID: job})
	h.unchanged(event.SlurmCommand{Command: event.SlurmStartNow, JobID: "999999"})
}

// testSignalReachesTheBatchScriptsTrap: the warning before a node's end
// (signal) reaches the trap of the batch script of the job running there,
// as a user's script would set it (docs/user.md), once; a node with no
// running job has nothing to signal.
func testSignalReachesTheBatchScriptsTrap(t *testing.T) {
	h := startAgent(t)
	ctx := context.Background()
	n := "flexci-gpu-1"
	if err := cl.StartNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(n) })
	cl.WaitNode(t, n, 15*time.Second, "up", slurm.NodeInfo.Ready)
	job := cl.Sbatch(t, "trap 'echo checkpoint on USR1; exit 0' USR1; echo started; while :; do sleep 1; done", "-p", "gpu", "-w", n)
	t.Cleanup(func() { cl.Cancel(job) })
	cl.WaitJob(t, job, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })
	out := filepath.Join(cl.Root, "log", "job-"+job+".out")
	// The trap is set once the script has started.
	deadline := time.Now().Add(20 * time.Second)
	for b, _ := os.ReadFile(out); !strings.Contains(string(b), "started"); b, _ = os.ReadFile(out) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s never started its script: %q", job, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := h.applied(event.SlurmCommand{Command: event.SlurmSignal, Nodes: []string{n}, Signal: "USR1",
		Reason: "flexslurm: flexci-gpu-1-g1 ends in 10m0s"})
	if !strings.Contains(r.Detail, "--signal=USR1 "+job) {
		t.Errorf("detail %q does not name the job signalled", r.Detail)
	}
	j := cl.WaitJob(t, job, 20*time.Second, "ended by its trap", slurm.JobInfo.Finished)
	if j.State != slurmstate.JobCompleted {
		t.Errorf("job %s ended %s, want COMPLETED (its trap exits 0)", job, j.State)
	}
	if b, _ := os.ReadFile(out); !strings.Contains(string(b), "checkpoint on USR1") {
		t.Errorf("the trap did not run: job output %q", b)
	}
	h.unchanged(event.SlurmCommand{Command: event.SlurmSignal, Nodes: []string{n}, Signal: "USR1"})
}

// testJobComment sets, repeats and clears flexslurm's comment on a pending
// job, and leaves a user's own comment alone.
func testJobComment(t *testing.T) {
	h := startAgent(t)
	ctx := context.Background()
	job := cl.Sbatch(t, "sleep 1", "-p", "gpu", "--begin", "now+1hour")
	t.Cleanup(func() { cl.Cancel(job) })
	mine := cl.Sbatch(t, "sleep 1", "-p", "gpu", "--begin", "now+1hour", "--comment", "my own note")
	t.Cleanup(func() { cl.Cancel(mine) })
	comment := func(id string) string {
		t.Helper()
		j, err := cl.R.ShowJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j.Comment
	}
	text := "flexslurm: not provisioned: time limit 2-00:00:00 exceeds pool gpu's max run duration 01:00:00"
	h.applied(event.SlurmCommand{Command: event.SlurmJobComment, JobID: job, Reason: text})
	if got := comment(job); got != text {
		t.Errorf("comment = %q, want %q", got, text)
	}
	h.unchanged(event.SlurmCommand{Command: event.SlurmJobComment, JobID: job, Reason: text})
	h.applied(event.SlurmCommand{Command: event.SlurmJobComment, JobID: job})
	if got := comment(job); got != "" {
		t.Errorf("comment after clearing = %q, want none", got)
	}
	h.unchanged(event.SlurmCommand{Command: event.SlurmJobComment, JobID: mine, Reason: text})
	if got := comment(mine); got != "my own note" {
		t.Errorf("user's comment = %q, want it kept", got)
	}
}

// testReservationCommands creates, moves and deletes a maintenance
// reservation, and checks that the agent never touches a reservation
// without the flexslurm- prefix.
func testReservationCommands(t *testing.T) {
	h := startAgent(t)
	ctx := context.Background()
	name := "flexslurm-eol-test"
	start := time.Now().Add(time.Hour).Truncate(time.Second)
	nodes := []string{"flexci-gpu-2", "flexci-gpu-3"}
	t.Cleanup(func() { cl.R.Scontrol(context.Background(), "delete", "reservationname="+name) })

	h.applied(event.SlurmCommand{Command: event.SlurmReservationCreate, Reservation: name, Nodes: nodes,
		StartTime: start, DurationSeconds: 7200})
	r, err := cl.R.ShowReservation(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.Flags, "MAINT") || !slices.Equal(r.Nodes, nodes) || !r.StartTime.Equal(start) ||
		!r.EndTime.Equal(start.Add(2*time.Hour)) {
		t.Errorf("reservation = %+v", r)
	}
	h.unchanged(event.SlurmCommand{Command: event.SlurmReservationCreate, Reservation: name, Nodes: nodes,
		StartTime: start, DurationSeconds: 7200})

	// Moved (a replaced node's new end of life) and on one node.
	moved := start.Add(30 * time.Minute)
	h.applied(event.SlurmCommand{Command: event.SlurmReservationCreate, Reservation: name, Nodes: nodes[:1],
		StartTime: moved, DurationSeconds: 3600})
	if r, err = cl.R.ShowReservation(ctx, name); err != nil || !r.StartTime.Equal(moved) || !slices.Equal(r.Nodes, nodes[:1]) ||
		!r.EndTime.Equal(moved.Add(time.Hour)) {
		t.Errorf("moved reservation = %+v, %v", r, err)
	}

	// A user's reservation is never touched.
	user := "userres"
	cl.Scontrol(t, "create", "reservation", "reservationname="+user, "nodes=flexci-gpu-1", "starttime=now",
		"duration=60", "users=root", "flags=maint")
	t.Cleanup(func() { cl.R.Scontrol(context.Background(), "delete", "reservationname="+user) })
	if res := h.run(event.SlurmCommand{ID: "delete-user-res", Command: event.SlurmReservationDelete, Reservation: user}); res.OK {
		t.Errorf("delete of reservation %s without the prefix: %+v, want refused", user, res)
	}
	if _, err := cl.R.ShowReservation(ctx, user); err != nil {
		t.Errorf("user reservation after a refused delete: %v", err)
	}

	h.applied(event.SlurmCommand{Command: event.SlurmReservationDelete, Reservation: name})
	if _, err := cl.R.ShowReservation(ctx, name); err == nil {
		t.Errorf("reservation %s still exists after delete", name)
	}
	h.unchanged(event.SlurmCommand{Command: event.SlurmReservationDelete, Reservation: name})
}

// testEndOfLifeKeepsLongerJobsOff: a node's end-of-life reservation, placed
// by the agent as flexslurm asks at the VM's end, keeps Slurm from starting
// a job whose time limit outlives the VM, and lets a job that fits the time
// left run: a node reused after its first job is offered only to jobs that
// fit its remaining life (docs/design/jobduration.md, docs/design/expiry.md).
func testEndOfLifeKeepsLongerJobsOff(t *testing.T) {
	h := startAgent(t)
	ctx := context.Background()
	n := "flexci-big-7" // a node no other test uses: it is left powered down
	if err := cl.StartNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(n) })
	cl.WaitNode(t, n, 15*time.Second, "up", slurm.NodeInfo.Ready)
	name := "flexslurm-eol-" + n
	t.Cleanup(func() { cl.R.Scontrol(context.Background(), "delete", "reservationname="+name) })
	// The VM ends in 20 minutes.
	h.applied(event.SlurmCommand{Command: event.SlurmReservationCreate, Reservation: name, Nodes: []string{n},
		StartTime: time.Now().Add(20 * time.Minute).Truncate(time.Second), DurationSeconds: 3600})

	// A job that fits the 20 minutes left runs.
	short := cl.Sbatch(t, "sleep 300", "-p", "big", "-w", n, "-t", "10")
	t.Cleanup(func() { cl.Cancel(short) })
	cl.WaitJob(t, short, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })
	cl.Cancel(short)
	cl.WaitJob(t, short, 20*time.Second, "ended", slurm.JobInfo.Finished)

	// A job that would outlive the VM is not started on the idle node.
	long := cl.Sbatch(t, "sleep 300", "-p", "big", "-w", n, "-t", "60")
	t.Cleanup(func() { cl.Cancel(long) })
	j := cl.WaitJob(t, long, 20*time.Second, "held off by the reservation", func(j slurm.JobInfo) bool {
		return j.Pending() && strings.Contains(j.Reason, "ReqNodeNotAvail")
	})
	t.Logf("a 60-minute job on an idle node with 20 minutes left: %s (%s)", j.State, j.Reason)
	time.Sleep(3 * time.Second)
	if j := cl.WaitJob(t, long, time.Second, "still pending", slurm.JobInfo.Pending); j.State == slurmstate.JobRunning {
		t.Errorf("the 60-minute job started on a node whose VM ends in 20 minutes")
	}
}

// testRefusals sends commands the agent must not apply: foreign nodes,
// another cluster's command (ignored: no result), a malformed command.
func testRefusals(t *testing.T) {
	h := startAgent(t)
	for _, nodes := range [][]string{{"flexci-gpu-7"}, {"flexci-big-0", "other-gpu-0"}} {
		if r := h.run(event.SlurmCommand{Command: event.SlurmDrain, Nodes: nodes, Reason: "x"}); r.OK || r.Skipped {
			t.Errorf("drain %v: %+v, want refused", nodes, r)
		}
	}
	h.publish(event.SlurmCommand{ID: "other-cluster", Header: event.Header{Cluster: "otherc"}, Command: event.SlurmDrain, Nodes: []string{"flexci-gpu-0"}})
	h.run(event.SlurmCommand{Command: event.SlurmResume, Nodes: []string{"flexci-gpu-0"}})
	for _, b := range h.results.Drain(t, time.Second) {
		if strings.Contains(string(b), "other-cluster") {
			t.Errorf("a command for another cluster was answered: %s", b)
		}
	}
	if n := node(t, "flexci-gpu-0"); n.DrainSet() {
		t.Errorf("another cluster's drain was applied: %s", n.StateString())
	}
}

// testSnapshotAndSpool checks the periodic snapshot against Slurm's real
// 22.05 output (every node of the cluster, a held job, no ended job) and
// that the agent publishes what the hooks left in their spool.
func testSnapshotAndSpool(t *testing.T) {
	h := startAgent(t)
	held := cl.Sbatch(t, "true", "-H", "-p", "big")
	t.Cleanup(func() { cl.Cancel(held) })
	spooled := cl.NewInbox(t, cl.JobsTopic)
	sp := &hooks.Spool{Dir: cl.SpoolDir()}
	// A job report as ResumeProgram spools it: what the spool may carry.
	data, _ := json.Marshal(event.Job{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeJobPending, Cluster: slurmtest.ClusterID},
		JobID: "424242", Partition: "big", Nodes: []string{"flexci-big-1"}, NodeCount: 1})
	e, err := sp.Put(hooks.Message{Topic: cl.JobsTopic, Data: data}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Release(e); err != nil {
		t.Fatal(err)
	}

	var snap *event.SlurmSnapshot
	h.snapshots.Wait(t, 15*time.Second, "snapshot with job "+held, func(b []byte) bool {
		s, err := event.DecodeSnapshot(b)
		if err != nil {
			t.Errorf("snapshot does not decode: %v", err)
			return false
		}
		for _, j := range s.Jobs {
			if j.ID == held {
				snap = s
				return true
			}
		}
		return false
	})
	if len(snap.Nodes) != len(cl.Topology.NodeNames()) {
		t.Errorf("snapshot has %d nodes, want %d", len(snap.Nodes), len(cl.Topology.NodeNames()))
	}
	for _, n := range snap.Nodes {
		if n.Name == "flexci-big-63" && (n.State != "idle" || !slices.Contains(n.Flags, "POWERED_DOWN")) {
			t.Errorf("snapshot node %+v, want idle and POWERED_DOWN", n)
		}
	}
	for _, j := range snap.Jobs {
		if j.ID == held && (j.State != "PENDING" || j.Reason != "JobHeldUser" || j.Partition != "big") {
			t.Errorf("snapshot job %+v", j)
		}
		if j.State == "COMPLETED" || j.State == "CANCELLED" {
			t.Errorf("snapshot lists an ended job: %+v", j)
		}
	}
	spooled.Wait(t, 10*time.Second, "the spooled message", func(b []byte) bool { return strings.Contains(string(b), `"424242"`) })
}

// testConfigDivergence: a spec applied with pool gpu grown from 4 to 5
// nodes while slurm.conf still has 4 is reported by the agent, against the
// configuration slurmctld runs with: at error level in its log and in its
// snapshot (which `flexslurm status` shows), naming the exact generated
// NodeName and PartitionName lines to set. The spec Slurm was configured
// for has no such divergence.
func testConfigDivergence(t *testing.T) {
	cl.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, err := agent.NewConfigChecker(cl.Spec, slurm.GenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base, err := k.Check(ctx, cl.R, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("comparing with the live configuration: %v", err)
	}
	for _, d := range base.Divergences {
		if strings.Contains(d.Problem, "node") && !strings.Contains(d.Problem, "GPUs") {
			t.Errorf("the spec Slurm runs with diverges: %s: %s", d.Problem, d.Fix)
		}
	}
	grown, err := spec.Parse([]byte(strings.Replace(slurmtest.SpecJSON, `"max_node_count": 4}`, `"max_node_count": 5}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	g, err := slurm.Generate(grown, slurm.GenOptions{HookDir: agent.DefaultConfigHookDir, DefaultTime: time.Hour, Configless: true})
	if err != nil {
		t.Fatal(err)
	}
	var nodeLine, partLine string
	for _, l := range g.NodeLines {
		if strings.HasPrefix(l, "NodeName=flexci-gpu-[0-4] ") {
			nodeLine = l
		}
	}
	for _, l := range g.PartitionLines {
		if strings.HasPrefix(l, "PartitionName=gpu ") {
			partLine = l
		}
	}
	if nodeLine == "" || partLine == "" {
		t.Fatalf("no NodeName=flexci-gpu-[0-4] or PartitionName=gpu line in %q %q", g.NodeLines, g.PartitionLines)
	}
	want := []event.ConfigDivergence{
		{Problem: "pool gpu has max_node_count 5 but Slurm has no node flexci-gpu-4", Fix: fmt.Sprintf("set %q, then restart slurmctld (new nodes need it)", nodeLine)},
		{Problem: "partition gpu lacks node flexci-gpu-4", Fix: fmt.Sprintf("set %q, then run `scontrol reconfigure`", partLine)},
	}
	var logs syncBuffer
	h := startAgentSpec(t, grown, &logs)
	var snap *event.SlurmSnapshot
	h.snapshots.Wait(t, 15*time.Second, "snapshot with a config check", func(b []byte) bool {
		s, err := event.DecodeSnapshot(b)
		if err != nil {
			t.Errorf("snapshot does not decode: %v", err)
			return false
		}
		snap = s
		return s.Config != nil
	})
	var got []event.ConfigDivergence
	for _, d := range snap.Config.Divergences {
		if !strings.Contains(d.Problem, "GPUs") {
			got = append(got, d)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshot divergences (-want +got):\n%s", diff)
	}
	if snap.Config.SpecSHA256 == "" {
		t.Error("the snapshot's config check names no spec")
	}
	for _, w := range want {
		line, _ := json.Marshal(w.Fix)
		if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), string(line)) {
			t.Errorf("the agent's log has no error naming %s:\n%s", line, logs.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the agent's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
