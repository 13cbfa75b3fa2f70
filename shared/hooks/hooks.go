// Package hooks implements flexslurm's Slurm hooks — the programs slurm.conf
// names, run as `flexslurm hook NAME` or through a link named
// flexslurm-hook-NAME:
//
//	resume       ResumeProgram       hostlist + SLURM_RESUME_FILE → one job.pending per job, with its nodes
//	suspend      SuspendProgram      hostlist → node.suspend (the nodes' VMs may go)
//	resume-fail  ResumeFailProgram   hostlist → node.resume_failed
//	prolog-ctld  PrologSlurmctld     job.started
//	epilog-ctld  EpilogSlurmctld     job.finished, or job.cancelled for a job cancelled before its nodes came up
//	prolog       Prolog (node)       health check; on FAIL: drain, health.failure, exit 1 (Slurm requeues the job held)
//	epilog       Epilog (node)       health check; on FAIL: drain, health.failure
//	healthcheck  HealthCheckProgram  health check; on FAIL: drain, health.failure
//
// The node-side hooks also publish an INCONCLUSIVE verdict (health.failure
// with verdict INCONCLUSIVE), without draining the node and with exit
// status 0: flexslurm drains a node for diagnosis when such verdicts repeat.
//
// Job and node events go to the job-pending topic, health failures to
// health-failure (docs/events.md). Hooks need neither PATH nor SLURM_CONF:
// Slurm commands run by absolute path, settings come from a config file
// (Config). They validate every node name against the cluster, never run a
// shell, and return fast: messages are spooled to local disk first and
// published within Config.PublishTimeout; what Pub/Sub does not acknowledge
// in time stays spooled and is published by a later hook run or by the
// agent (Outbox, Spool).
//
// Controller-side hooks (resume, suspend, resume-fail, prolog-ctld,
// epilog-ctld) always exit 0 once configured: a failing PrologSlurmctld
// would requeue every job. Failures are logged.
package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/text"
)

// Runtime is what a hook run needs; Command builds it from the config file
// and flags, tests build it directly.
type Runtime struct {
	// Config is the effective configuration (defaults filled in).
	Config Config
	// Topology validates node names.
	Topology *slurm.Topology
	// Slurm runs scontrol and squeue.
	Slurm *slurm.Runner
	// Outbox spools and publishes.
	Outbox *Outbox
	// Check is the node health check; PassCheck when nil.
	Check CheckFunc
	// Getenv reads the hook's environment (os.Getenv).
	Getenv func(string) string
	// Now is the clock (time.Now).
	Now func() time.Time
	// VMName, when set, is the VM the node-side hooks run on.
	VMName string
	// Log receives the hook's log.
	Log *slog.Logger
}

// enrichTimeout bounds the Slurm queries that add detail to an event (job
// partition, time limit, restarts). They are best effort: the event goes
// out without the detail when Slurm is slow.
const enrichTimeout = 400 * time.Millisecond

// slowQueryTimeout bounds the Slurm queries of the hooks that are not on
// a latency-critical path (EpilogSlurmctld, the node-side health hooks).
const slowQueryTimeout = 5 * time.Second

// Run runs hook name with its arguments and returns the exit status the
// hook program should end with. It ends with one "hook done" log record
// (args, exit, elapsed_ms, error); Log is expected to carry the hook's name.
func (rt *Runtime) Run(ctx context.Context, name string, args []string) int {
	start := time.Now()
	var exit int
	var err error
	switch name {
	case slurm.HookResume:
		err = rt.Resume(ctx, args)
	case slurm.HookSuspend:
		err = rt.powerEvent(ctx, name, event.TypeNodeSuspend, "SuspendProgram", args)
	case slurm.HookResumeFail:
		err = rt.powerEvent(ctx, name, event.TypeResumeFailed, "ResumeFailProgram: not resumed within ResumeTimeout", args)
	case slurm.HookPrologCtld:
		err = rt.PrologCtld(ctx)
	case slurm.HookEpilogCtld:
		err = rt.EpilogCtld(ctx)
	case slurm.HookProlog, slurm.HookEpilog, slurm.HookHealth:
		exit, err = rt.NodeCheck(ctx, name)
	default:
		rt.Log.Error("unknown hook", "hook", name)
		return 2
	}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelError
	}
	rt.Log.Log(ctx, level, "hook done", "args", args, "exit", exit,
		"elapsed_ms", float64(time.Since(start).Microseconds())/1000, "error", err)
	return exit
}

func (rt *Runtime) now() time.Time {
	if rt.Now != nil {
		return rt.Now()
	}
	return time.Now()
}

func (rt *Runtime) header(typ string) event.Header {
	return event.Header{Version: event.SchemaVersion, Type: typ, Cluster: rt.Config.Cluster}
}

// message encodes v for topic with the attributes every flexslurm message
// carries.
func (rt *Runtime) message(topic, typ, source string, v any) (Message, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return Message{}, fmt.Errorf("encoding %s: %w", typ, err)
	}
	return Message{Topic: topic, Data: data, Attributes: map[string]string{
		"cluster": rt.Config.Cluster, "type": typ, "source": "hook/" + source}}, nil
}

// send publishes msgs through the outbox, then flushes older spooled
// messages with what is left of Config.PublishTimeout.
func (rt *Runtime) send(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	timeout := time.Duration(rt.Config.PublishTimeout)
	if timeout <= 0 {
		timeout = DefaultPublishTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := rt.Outbox.Send(ctx, msgs)
	rt.Log.Info("events sent", "published", res.Published, "spooled", res.Spooled, "lost", res.Lost)
	if err == nil && res.Spooled == 0 {
		if fr, ferr := rt.Outbox.Flush(ctx); ferr != nil || fr.Published > 0 {
			rt.Log.Info("older spooled events flushed", "published", fr.Published, "still_spooled", fr.Spooled, "error", ferr)
		}
	}
	return err
}

// ourNodes expands a hostlist and keeps the cluster's nodes, logging the
// others.
func (rt *Runtime) ourNodes(hostlist string) ([]string, error) {
	names, err := slurm.ExpandHostlist(hostlist)
	if err != nil {
		return nil, err
	}
	ours, others := rt.Topology.Split(names)
	if len(others) > 0 {
		rt.Log.Warn("ignoring nodes that are not this cluster's", "nodes", slurm.CompressHostlist(others), "cluster", rt.Config.Cluster)
	}
	return ours, nil
}

// resumeFile is SLURM_RESUME_FILE: 22.05 writes {"jobs":[{"job_id":N,
// "nodes":"hostlist"}],"all_nodes":"hostlist"}; 23.02+ adds per-job
// "nodes_alloc", "nodes_resume" and "partition", and "all_nodes_resume".
type resumeFile struct {
	Jobs []struct {
		JobID      int64  `json:"job_id"`
		Nodes      string `json:"nodes"`
		NodesAlloc string `json:"nodes_alloc"`
		Partition  string `json:"partition"`
	} `json:"jobs"`
}

// resumeJob is one job of a resume request.
type resumeJob struct {
	id        string
	nodes     []string // the cluster's nodes allocated to the job
	partition string
}

// Resume is ResumeProgram: args is the hostlist of the nodes to power up.
// It publishes one job.pending per job of SLURM_RESUME_FILE with the job's
// nodes of this cluster (falling back to asking squeue which jobs are
// allocated those nodes when the file is absent), enriched with the job's
// partition, time limit and restart count when squeue answers within
// enrichTimeout. Nodes powered up without a job (`scontrol update
// state=power_up`, static nodes) produce no event.
func (rt *Runtime) Resume(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("ResumeProgram takes one hostlist argument, got %d", len(args))
	}
	nodes, err := rt.ourNodes(args[0])
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return nil
	}
	jobs, err := rt.resumeJobs(ctx, nodes)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(jobs))
	for _, j := range jobs {
		ids = append(ids, j.id)
	}
	info := rt.jobDetails(ctx, ids)
	covered := map[string]bool{}
	var msgs []Message
	for _, j := range jobs {
		ev := event.Job{Header: rt.header(event.TypeJobPending), JobID: j.id, Partition: j.partition,
			Nodes: j.nodes, NodeCount: len(j.nodes), ReportedAt: rt.now().UTC()}
		if d, ok := info[j.id]; ok {
			if ev.Partition == "" {
				ev.Partition = d.Partition
			}
			ev.Requeued = d.Restarts > 0
			ev.TimeLimitSeconds = int64(d.TimeLimit / time.Second)
		}
		if ev.Partition == "" {
			ev.Partition = rt.Topology.PartitionOf(j.nodes[0])
		}
		for _, n := range j.nodes {
			covered[n] = true
		}
		m, err := rt.message(rt.Config.Topics.Jobs, ev.Type, slurm.HookResume, ev)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	var jobless []string
	for _, n := range nodes {
		if !covered[n] {
			jobless = append(jobless, n)
		}
	}
	if len(jobless) > 0 {
		rt.Log.Info("nodes resumed without a job: no job.pending for them", "nodes", slurm.CompressHostlist(jobless))
	}
	return rt.send(ctx, msgs)
}

// resumeJobs reads SLURM_RESUME_FILE, or asks squeue, for the jobs the
// resumed nodes are for, keeping each job's nodes of this cluster.
func (rt *Runtime) resumeJobs(ctx context.Context, nodes []string) ([]resumeJob, error) {
	var out []resumeJob
	if path := rt.Getenv("SLURM_RESUME_FILE"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading SLURM_RESUME_FILE %s: %w", path, err)
		}
		var rf resumeFile
		if err := json.Unmarshal(b, &rf); err != nil {
			return nil, fmt.Errorf("parsing SLURM_RESUME_FILE %s: %w", path, err)
		}
		for _, j := range rf.Jobs {
			hl := j.NodesAlloc
			if hl == "" {
				hl = j.Nodes
			}
			ours, err := rt.ourNodes(hl)
			if err != nil {
				return nil, fmt.Errorf("SLURM_RESUME_FILE job %d: %w", j.JobID, err)
			}
			if j.JobID <= 0 || len(ours) == 0 {
				continue
			}
			out = append(out, resumeJob{id: strconv.FormatInt(j.JobID, 10), nodes: ours, partition: j.Partition})
		}
		return out, nil
	}
	rt.Log.Warn("SLURM_RESUME_FILE is not set: asking squeue which jobs the nodes are for")
	qctx, cancel := context.WithTimeout(ctx, 2*enrichTimeout)
	defer cancel()
	jobs, err := rt.Slurm.JobsOnNodes(qctx, nodes, "CONFIGURING,PENDING")
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		ours, _ := rt.Topology.Split(j.Nodes)
		if len(ours) > 0 {
			out = append(out, resumeJob{id: strconv.FormatInt(j.JobID, 10), nodes: ours, partition: j.Partition})
		}
	}
	return out, nil
}

// jobDetails asks squeue, within enrichTimeout, for the jobs ids; a slow or
// failing squeue yields what it could.
func (rt *Runtime) jobDetails(ctx context.Context, ids []string) map[string]slurm.JobInfo {
	out := map[string]slurm.JobInfo{}
	if len(ids) == 0 {
		return out
	}
	qctx, cancel := context.WithTimeout(ctx, enrichTimeout)
	defer cancel()
	jobs, err := rt.Slurm.JobsByID(qctx, ids)
	if err != nil {
		rt.Log.Warn("job details unavailable; events go out without partition, time limit and restarts", "error", err)
		return out
	}
	for _, j := range jobs {
		out[strconv.FormatInt(j.JobID, 10)] = j
	}
	return out
}

// powerEvent is SuspendProgram and ResumeFailProgram: one node event of
// type typ for the cluster's nodes of the hostlist, in chunks of
// event.MaxNodesPerEvent.
func (rt *Runtime) powerEvent(ctx context.Context, hook, typ, reason string, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes one hostlist argument, got %d", reason, len(args))
	}
	nodes, err := rt.ourNodes(args[0])
	if err != nil {
		return err
	}
	var msgs []Message
	for len(nodes) > 0 {
		n := min(len(nodes), event.MaxNodesPerEvent)
		ev := event.Node{Header: rt.header(typ), Nodes: nodes[:n], Reason: reason, ReportedAt: rt.now().UTC()}
		nodes = nodes[n:]
		m, err := rt.message(rt.Config.Topics.Jobs, typ, hook, ev)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	return rt.send(ctx, msgs)
}

// ctldJob reads the job of a PrologSlurmctld/EpilogSlurmctld environment,
// keeping its nodes of this cluster. ok is false when the job has nothing
// to do with the cluster.
func (rt *Runtime) ctldJob() (id, partition string, nodes []string, ok bool, err error) {
	id = rt.Getenv("SLURM_JOB_ID")
	if _, err := strconv.ParseInt(id, 10, 64); err != nil {
		return "", "", nil, false, fmt.Errorf("SLURM_JOB_ID %q is not a job id", id)
	}
	partition = rt.Getenv("SLURM_JOB_PARTITION")
	if hl := rt.Getenv("SLURM_JOB_NODELIST"); hl != "" {
		if nodes, err = rt.ourNodes(hl); err != nil {
			return "", "", nil, false, fmt.Errorf("SLURM_JOB_NODELIST: %w", err)
		}
	}
	return id, partition, nodes, len(nodes) > 0 || rt.Topology.OwnsPartition(partition), nil
}

// PrologCtld is PrologSlurmctld: job.started with the job's nodes. With
// Config.PrologCtldWaitReady it then waits until those nodes registered.
func (rt *Runtime) PrologCtld(ctx context.Context) error {
	id, partition, nodes, ok, err := rt.ctldJob()
	if err != nil || !ok {
		return err
	}
	ev := event.Job{Header: rt.header(event.TypeJobStarted), JobID: id, Partition: partition, Nodes: nodes,
		NodeCount: len(nodes), ReportedAt: rt.now().UTC()}
	if n, err := strconv.Atoi(rt.Getenv("SLURM_JOB_RESTART_COUNT")); err == nil && n > 0 {
		ev.Requeued = true
	}
	m, err := rt.message(rt.Config.Topics.Jobs, ev.Type, slurm.HookPrologCtld, ev)
	if err != nil {
		return err
	}
	sendErr := rt.send(ctx, []Message{m})
	if wait := time.Duration(rt.Config.PrologCtldWaitReady); wait > 0 && len(nodes) > 0 {
		rt.waitReady(ctx, nodes, wait)
	}
	return sendErr
}

// waitReady polls the nodes until all are Ready or wait passes.
func (rt *Runtime) waitReady(ctx context.Context, nodes []string, wait time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		got, err := rt.Slurm.ShowNodes(ctx, nodes)
		ready := err == nil && len(got) == len(nodes)
		for _, n := range got {
			ready = ready && n.Ready()
		}
		if ready {
			return
		}
		select {
		case <-ctx.Done():
			rt.Log.Warn("nodes not ready within the prolog wait", "nodes", slurm.CompressHostlist(nodes), "wait", wait)
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// beingRequeued reports whether job j, seen by its EpilogSlurmctld, is
// being requeued rather than ending. Slurm resets a requeued job's end
// time: to Unknown (scontrol requeue; a node failure of a job without a
// time limit), or, for a node failure or power_down_force of a job with a
// time limit, to its new start (the requeue) plus that limit — still
// ahead, with the restart counted. An ended or cancelled job's end time is
// behind us. now is Slurm's clock, the wall clock.
func beingRequeued(j slurm.JobInfo, now time.Time) bool {
	if j.EndTime.IsZero() {
		return true
	}
	return j.Restarts > 0 && j.TimeLimit > 0 && j.EndTime.After(now) && j.EndTime.Sub(j.StartTime) == j.TimeLimit
}

// EpilogCtld is EpilogSlurmctld: job.finished, or job.cancelled when the
// job ended while some of its nodes were still powering up (it never ran:
// its queued capacity is no longer wanted). job.finished says nodes_up
// when Slurm showed every node up: their capacity came, even if flexslurm
// has not yet seen the VMs (its job.started may still be on its way). A
// job being requeued (scontrol shows EndTime=Unknown, or an end time still
// ahead, during its epilog) gets no event: it comes back through
// ResumeProgram as job.pending once Slurm allocates it nodes.
// Slurm runs no EpilogSlurmctld for a job cancelled before any allocation.
func (rt *Runtime) EpilogCtld(ctx context.Context) error {
	id, partition, nodes, ok, err := rt.ctldJob()
	if err != nil || !ok {
		return err
	}
	// EpilogSlurmctld delays nothing but the job's completion record: it
	// can afford to wait for Slurm longer than ResumeProgram.
	qctx, cancel := context.WithTimeout(ctx, slowQueryTimeout)
	defer cancel()
	// scontrol prints a completing job as COMPLETING whatever its base
	// state, but a job being requeued has had its end time reset.
	if j, err := rt.Slurm.ShowJob(qctx, id); err == nil && beingRequeued(j, time.Now()) {
		rt.Log.Info("job is being requeued: no event (ResumeProgram reports it when it gets nodes)", "job_id", id,
			"restarts", j.Restarts)
		return nil
	} else if err != nil {
		rt.Log.Warn("job state unknown at its epilog", "job_id", id, "error", err)
	}
	typ := event.TypeJobFinished
	up := rt.nodesUp(qctx, nodes)
	if up == nodesNeverUp {
		typ = event.TypeJobCancelled
	}
	ev := event.Job{Header: rt.header(typ), JobID: id, Partition: partition, Nodes: nodes, NodeCount: len(nodes),
		NodesUp: up == nodesAllUp, ReportedAt: rt.now().UTC()}
	m, err := rt.message(rt.Config.Topics.Jobs, typ, slurm.HookEpilogCtld, ev)
	if err != nil {
		return err
	}
	return rt.send(ctx, []Message{m})
}

// What EpilogSlurmctld saw of its job's nodes.
type nodesSeen int

const (
	nodesUnknown nodesSeen = iota // no nodes, or Slurm did not say
	nodesNeverUp                  // one of them is powering up or powered down: the job never ran
	nodesAllUp                    // Slurm showed every one of them, none powering up or powered down
)

// nodesUp asks Slurm whether the job's nodes came up.
func (rt *Runtime) nodesUp(ctx context.Context, nodes []string) nodesSeen {
	if len(nodes) == 0 {
		return nodesUnknown
	}
	ns, err := rt.Slurm.ShowNodes(ctx, nodes)
	if err != nil {
		rt.Log.Debug("node states unknown", "error", err)
		return nodesUnknown
	}
	for _, n := range ns {
		if n.Has(slurmstate.FlagPoweringUp) || n.Has(slurmstate.FlagPoweredDown) {
			rt.Log.Debug("the job ended on a node that never came up", "node", n.Name, "state", n.StateString())
			return nodesNeverUp
		}
	}
	if len(ns) != len(nodes) {
		return nodesUnknown
	}
	return nodesAllUp
}

// maxDrainReason bounds the drain reason set in Slurm.
const maxDrainReason = 400

// drainedQueryTimeout bounds the one `scontrol show node` after a drain
// that tells whether Slurm has drained the node already.
const drainedQueryTimeout = 2 * time.Second

// NodeCheck is Prolog, Epilog and HealthCheckProgram on a node
// (SLURMD_NODENAME): it runs the health check, and on FAIL drains the node
// with the reasons, asks Slurm once (within drainedQueryTimeout) whether the
// node is now drained (DRAIN with no job left: the event's drained flag),
// publishes health.failure (node, VM and generation when known, job and its
// state) and, for the prolog, exits 1 so that Slurm requeues the job and
// holds it. An INCONCLUSIVE verdict is published as is (verdict
// INCONCLUSIVE, no drain, exit 0). A PASS of the healthcheck hook publishes
// the node's spooled messages. Nodes of other clusters are left alone.
func (rt *Runtime) NodeCheck(ctx context.Context, hook string) (int, error) {
	node := rt.Getenv("SLURMD_NODENAME")
	if node == "" {
		return 0, errors.New("SLURMD_NODENAME is not set: not run by slurmd")
	}
	if _, _, err := rt.Topology.Check(node); err != nil {
		rt.Log.Info("not a node of this cluster: no check", "node", node, "reason", err)
		return 0, nil
	}
	check := rt.Check
	if check == nil {
		check = PassCheck
	}
	start := time.Now()
	verdict, reasons := check(ctx)
	reasons = BoundReasons(reasons)
	rt.Log.Info("health check", "node", node, "hook", hook, "verdict", verdict, "reasons", reasons,
		"elapsed_ms", time.Since(start).Milliseconds())
	if verdict != VerdictFail && verdict != VerdictInconclusive {
		// The periodic health check publishes what earlier hooks on this
		// node left in the spool; the prolog and epilog do not, so that an
		// unreachable Pub/Sub never delays a job's start or end.
		if hook == slurm.HookHealth {
			if res, err := rt.Outbox.Flush(ctx); err != nil || res.Published > 0 {
				rt.Log.Info("spool flushed", "published", res.Published, "error", err)
			}
		}
		return 0, nil
	}
	if len(reasons) == 0 {
		reasons = []string{"health check failed"}
		if verdict == VerdictInconclusive {
			reasons = []string{"health check inconclusive"}
		}
	}
	ev := event.Health{Header: rt.header(event.TypeHealthFailure), Hook: healthHooks[hook], Node: node, Verdict: verdict,
		Reasons: reasons, CheckedAt: rt.now().UTC()}
	if vm := rt.vmName(node); vm != "" {
		if n, _, _, gen, ok := naming.ParseVMName(vm); ok && n == node {
			ev.VMName, ev.Generation = vm, gen
		} else {
			rt.Log.Warn("VM name does not belong to the node: not reported", "vm", vm, "node", node)
		}
	}
	if verdict == VerdictInconclusive {
		// The node stays in service and its job runs (or ends) as Slurm
		// decides: only the verdict is reported, without a job state.
		if hook != slurm.HookHealth {
			if _, err := strconv.ParseInt(rt.Getenv("SLURM_JOB_ID"), 10, 64); err == nil {
				ev.JobID = rt.Getenv("SLURM_JOB_ID")
			}
		}
		m, err := rt.message(rt.Config.Topics.Health, ev.Type, hook, ev)
		if err != nil {
			return 0, err
		}
		return 0, rt.send(ctx, []Message{m})
	}
	switch hook {
	case slurm.HookProlog:
		ev.JobID, ev.JobState = rt.Getenv("SLURM_JOB_ID"), "pending"
	case slurm.HookEpilog:
		ev.JobID = rt.Getenv("SLURM_JOB_ID")
	case slurm.HookHealth:
		ev.JobID, ev.JobState = rt.runningJob(ctx, node)
	}
	if _, err := strconv.ParseInt(ev.JobID, 10, 64); err != nil {
		ev.JobID, ev.JobState = "", ""
	}
	// The reason names the VM, so that flexslurm lifts this drain once
	// another VM backs the node (a drain survives the node's reboot).
	on := ""
	if ev.VMName != "" {
		on = " on " + ev.VMName
	}
	reason := text.Truncate(slurmstate.ReasonPrefix+" "+slurmstate.HealthReason+on+": "+strings.Join(reasons, "; "), maxDrainReason)
	if hook == slurm.HookEpilog && ev.VMName != "" && rt.drainedForHealth(ctx, node, slurmstate.ReasonPrefix+" "+slurmstate.HealthReason+on+": ") {
		// Slurm 24.11, unlike 22.05, runs the Epilog after a Prolog that
		// failed (docs/slurm-versions.md):
		// the prolog drained the node for this VM and reported the failure
		// with its job pending. A second report without the pending job
		// could reach flexslurm first and have the VM deleted rather than
		// replaced for the job.
		rt.Log.Info("the node is already drained for this VM's failed health check: not reported again", "node", node, "vm", ev.VMName)
		return 0, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	drainErr := rt.Slurm.UpdateNodes(dctx, []string{node}, "state=drain", "reason="+reason)
	cancel()
	if drainErr != nil {
		rt.Log.Error("draining the node", "node", node, "error", drainErr)
	} else {
		ev.Drained = rt.drainComplete(ctx, node)
	}
	m, err := rt.message(rt.Config.Topics.Health, ev.Type, hook, ev)
	if err != nil {
		return 1, err
	}
	sendErr := rt.send(ctx, []Message{m})
	exit := 0
	if hook == slurm.HookProlog {
		exit = 1
	}
	return exit, errors.Join(drainErr, sendErr)
}

// healthHooks names each node-side hook in the health.failure it
// publishes (event.Health.Hook).
var healthHooks = map[string]string{
	slurm.HookProlog: event.HealthHookProlog,
	slurm.HookEpilog: event.HealthHookEpilog,
	slurm.HookHealth: event.HealthHookHealthCheck,
}

// drainComplete asks Slurm once, within drainedQueryTimeout, whether the
// node is drained (DRAIN with no job left); false when it is still
// draining or Slurm does not answer in time.
func (rt *Runtime) drainComplete(ctx context.Context, node string) bool {
	qctx, cancel := context.WithTimeout(ctx, drainedQueryTimeout)
	defer cancel()
	n, err := rt.Slurm.ShowNode(qctx, node)
	if err != nil {
		rt.Log.Warn("node state after the drain unknown: reported as draining", "node", node, "error", err)
		return false
	}
	rt.Log.Info("node state after the drain", "node", node, "state", n.StateString(), "drained", n.Drained())
	return n.Drained()
}

// drainedForHealth reports whether Slurm shows node drained (or
// draining) with a reason starting with prefix; false when it cannot tell.
func (rt *Runtime) drainedForHealth(ctx context.Context, node, prefix string) bool {
	qctx, cancel := context.WithTimeout(ctx, drainedQueryTimeout)
	defer cancel()
	n, err := rt.Slurm.ShowNode(qctx, node)
	if err != nil {
		rt.Log.Warn("node state before the drain unknown", "node", node, "error", err)
		return false
	}
	return n.DrainSet() && strings.HasPrefix(n.Reason, prefix)
}

// runningJob returns a job running on node and "running", or "", "".
func (rt *Runtime) runningJob(ctx context.Context, node string) (string, string) {
	qctx, cancel := context.WithTimeout(ctx, slowQueryTimeout)
	defer cancel()
	jobs, err := rt.Slurm.JobsOnNodes(qctx, []string{node}, "RUNNING,CONFIGURING,COMPLETING")
	if err != nil || len(jobs) == 0 {
		if err != nil {
			rt.Log.Warn("jobs on the node unknown", "node", node, "error", err)
		}
		return "", ""
	}
	return strconv.FormatInt(jobs[0].JobID, 10), "running"
}

// vmName returns the VM node runs on: Runtime.VMName, FLEXSLURM_VM_NAME,
// or Config.VMNameDir/<node>; "" when unknown.
func (rt *Runtime) vmName(node string) string {
	if rt.VMName != "" {
		return rt.VMName
	}
	if v := rt.Getenv(EnvVMName); v != "" {
		return v
	}
	if rt.Config.VMNameDir == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(rt.Config.VMNameDir, node))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// MetadataHostSuffix names the per-node file, Config.VMNameDir/<node> plus
// this suffix, in which a node's bootstrap records the metadata server
// (host:port) its node hooks sign their reports at, when it is not
// Compute Engine's. On a VM it is the VM's own; the local system's
// simulated VMs share one root, and each node's hooks must sign as their
// own VM.
const MetadataHostSuffix = ".metadata-host"

// NodeMetadataHost is the metadata server a hook running for node (Slurm's
// SLURMD_NODENAME) fetches its identity token from: the one the node's
// bootstrap recorded for it (MetadataHostSuffix), else
// Config.MetadataHost ("" is GCE_METADATA_HOST's or Compute Engine's).
// Controller hooks run with no node and use Config.MetadataHost.
func NodeMetadataHost(cfg Config, node string) string {
	if node == "" || cfg.VMNameDir == "" || strings.ContainsAny(node, "/\\") || strings.HasPrefix(node, ".") {
		return cfg.MetadataHost
	}
	b, err := os.ReadFile(filepath.Join(cfg.VMNameDir, node+MetadataHostSuffix))
	if err != nil {
		return cfg.MetadataHost
	}
	if h := strings.TrimSpace(string(b)); h != "" {
		return h
	}
	return cfg.MetadataHost
}
