package tracebench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/benchpool"
	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/dev/scenario/slurmmodel"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// The replay's cluster and pool.
const (
	clusterID = "trace"
	poolID    = "h200"
	zone      = "us-central1-a"
)

// clusterSpec is the replay's cluster_config.json: one Flex-Start pool of
// a3-ultragpu-8g (8 × H200), min 0, and the login pool the managed Slurm
// API requires.
func clusterSpec(cfg Config, s Strategy) (*spec.Cluster, error) {
	c, err := benchpool.Pool{Cluster: clusterID, ID: poolID, GPUs: GPUsPerNode, MaxRunDuration: cfg.MaxRunDuration, Min: 0, Max: cfg.MaxNodes}.Spec()
	if err != nil {
		return nil, err
	}
	p, ok := c.Pool(poolID)
	if !ok {
		return nil, fmt.Errorf("replay cluster spec has no pool %q", poolID)
	}
	p.Ext.UseJobDuration = s.UseJobDuration
	return c, nil
}

// Result is what one replay measured.
type Result struct {
	Strategy Strategy
	// Config is the configuration run, with its defaults filled in.
	Config Config
	// NotRun is set when the strategy could not run (Strategy.Pending).
	NotRun string

	// Jobs were submitted; Refused of them sbatch refused (they fit no
	// node: more GPUs than a node has, or a time limit beyond the pool's
	// max run duration, the partition's MaxTime); Completed ran to their
	// end; PendingAtEnd were still queued or running when the replay
	// stopped.
	Jobs, Refused, Completed, PendingAtEnd int
	// RefusedGPUTime is Σ runtime × GPUs of the refused jobs: the work
	// the trace did that the pool cannot take.
	RefusedGPUTime time.Duration
	// KilledByExpiry counts job attempts killed because their node's VM
	// reached its max run duration, KilledByDeletion those whose VM was
	// deleted under them; each is requeued and runs again. Requeues
	// counts every requeue, of running jobs or not.
	KilledByExpiry, KilledByDeletion, Requeues int

	// GPUTimeUsed is Σ runtime × GPUs of the completed jobs; GPUTimeLost
	// what the killed attempts had run (× their GPUs).
	GPUTimeUsed, GPUTimeLost time.Duration
	// VMTime is ∫ VMs RUNNING dt: what is paid, GPUsPerNode GPUs a VM.
	VMTime time.Duration
	// IdleVMTime is ∫ VMs RUNNING whose node runs no job dt (boots
	// included: a job allocated to a booting node does not run yet).
	IdleVMTime time.Duration
	// GPUTimeHeld is ∫ GPUs that jobs hold on RUNNING VMs dt: the paid
	// GPU-time minus it is paid for GPUs no job held (idle nodes, and
	// the free GPUs of nodes partly used).
	GPUTimeHeld time.Duration
	// PackedVMTime is ∫ ⌈GPUs jobs hold ÷ GPUsPerNode⌉ dt: the VM time if
	// at every instant the running jobs were packed onto the fewest nodes
	// (jobs do not move, so no schedule does better).
	PackedVMTime time.Duration
	// NodeStarts counts the VMs that ran.
	NodeStarts int
	// AddedDelays are, for every job start for which Slurm powered nodes
	// up, the time from ResumeProgram's report to the start minus the
	// capacity wait drawn for the node's resize request and the boot
	// time: what flexslurm added. Jobs that started on nodes already up
	// have none.
	AddedDelays []time.Duration
	// CapacityWaits are the waits drawn, one per resize request.
	CapacityWaits []time.Duration

	// ComputeCalls counts apply.Compute calls by method.
	ComputeCalls map[string]int
	// StoreUpdates and StoreReads count the functions' store operations:
	// Update is one Firestore transaction, Read one read outside a
	// transaction.
	StoreUpdates, StoreReads int64
	// Deliveries counts the messages delivered to the functions;
	// DeliveryErrors those a function returned an error for (redelivered).
	Deliveries, DeliveryErrors int

	// Simulated is the simulated time replayed; Wall the wall time the
	// replay took.
	Simulated, Wall time.Duration
}

// GPUTimePaid is VMTime × GPUsPerNode.
func (r *Result) GPUTimePaid() time.Duration { return r.VMTime * GPUsPerNode }

// Compare replays jobs under each strategy in turn (each its own harness)
// and returns the results in the strategies' order.
func Compare(ctx context.Context, cfg Config, jobs []Job, strategies []Strategy) ([]*Result, error) {
	var out []*Result
	for _, s := range strategies {
		r, err := Run(ctx, cfg, jobs, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Run replays jobs under one strategy.
func Run(ctx context.Context, cfg Config, jobs []Job, s Strategy) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	res := &Result{Strategy: s, Config: cfg}
	if s.Pending != "" {
		res.NotRun = s.Pending
		return res, nil
	}
	wall := time.Now()
	c, err := clusterSpec(cfg, s)
	if err != nil {
		return nil, fmt.Errorf("replay cluster spec: %w", err)
	}
	waitRand := rand.New(rand.NewPCG(cfg.Seed, 1))
	var h *harness.Harness
	st := &countingStore{inner: store.NewMemory(func() time.Time { return h.Clock.Now() })}
	cc := &countingCompute{}
	h, err = harness.New(ctx, harness.Options{
		Policy: s.Policy,
		Store:  st,
		Sim: computesim.Options{Seed: cfg.Seed, CapacityDelay: func(string, string) time.Duration {
			d := cfg.Wait.Draw(waitRand)
			res.CapacityWaits = append(res.CapacityWaits, d)
			return d
		}},
		Compute: func(inner apply.Compute) apply.Compute { cc.inner = inner; return cc },
	})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	r := &runner{cfg: cfg, s: s, h: h, res: res, jobs: jobs, live: map[string]liveVM{}, ended: map[string]endedVM{},
		alloc: map[string]time.Time{}, startedAt: map[string]time.Time{}, spec: map[string]Job{}, seenCmds: map[string]bool{},
		ran: map[string]bool{}, rrs: map[string]computesim.ResizeRequest{}}
	for _, j := range jobs {
		r.spec[j.ID] = j
	}
	r.start = h.Clock.Now()
	r.now = r.start
	last := time.Duration(0)
	for _, j := range jobs {
		last = max(last, j.Submit)
	}
	r.windowEnd = r.start.Add(max(cfg.Length, last+time.Second))
	r.end = r.windowEnd.Add(cfg.Drain)
	r.m = slurmmodel.New(lang.Slurm{Simulate: true, SuspendTime: lang.Duration(s.SuspendTime), BootTime: lang.Duration(cfg.BootTime),
		PartitionLimits: true}, c, r.start, r.publish, r.trace)
	if s.SuspendTime > 0 {
		r.m.PowerSaveFlexNodes()
	}
	if err := h.Apply(ctx, c); err != nil {
		return nil, fmt.Errorf("applying the replay's spec: %w", err)
	}
	if err := r.loop(ctx); err != nil {
		return nil, err
	}
	res.ComputeCalls = cc.snapshot()
	res.StoreUpdates, res.StoreReads = st.updates.Load(), st.reads.Load()
	res.Simulated = r.now.Sub(r.start)
	res.Wall = time.Since(wall)
	res.PendingAtEnd = len(jobs) - res.Completed - res.Refused
	return res, nil
}

// runner is one replay: the harness, the Slurm model and the meters.
type runner struct {
	cfg Config
	s   Strategy
	h   *harness.Harness
	m   *slurmmodel.Model
	res *Result

	start, windowEnd, end, now time.Time

	jobs []Job
	next int // next job to submit
	spec map[string]Job

	out      []outMsg // what the Slurm model published, to deliver
	retry    []outMsg // deliveries a function failed, redelivered at the next tick
	seenCmds map[string]bool

	vms   map[string]slurmmodel.VM // each node's live VM now
	live  map[string]liveVM        // the VM each node had at the last look
	ended map[string]endedVM       // each node's last VM that ended
	ran   map[string]bool          // VMs seen RUNNING

	alloc     map[string]time.Time // when ResumeProgram reported each job's current allocation
	startedAt map[string]time.Time // when each job's current attempt started
	rrs       map[string]computesim.ResizeRequest
	rrVersion uint64

	busy, running, held int // counts since the last integration
	integrated          time.Time
}

type outMsg struct {
	topic, id string
	data      []byte
	attempts  int
}

type liveVM struct {
	name string
	term time.Time
}

type endedVM struct {
	at      time.Time
	expired bool
}

// expirySlack: a VM gone within this much of its termination time ended
// by expiry (plan.Policy.ExpirySlack's default).
const expirySlack = 2 * time.Minute

// maxSettleRounds bounds the rounds of Slurm model updates and deliveries
// at one instant.
const maxSettleRounds = 200

func (r *runner) loop(ctx context.Context) error {
	nextTick := r.start
	r.integrated = r.start
	if err := r.settle(ctx); err != nil {
		return err
	}
	for r.now.Before(r.end) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !r.now.Before(r.windowEnd) && r.quiet() {
			break
		}
		next := minTime(nextTick, r.end)
		if r.next < len(r.jobs) {
			next = minTime(next, r.start.Add(r.jobs[r.next].Submit))
		}
		if t, ok := r.h.Sim.NextDue(); ok {
			next = minTime(next, t)
		}
		if t, ok := r.m.NextDue(r.now, r.vms); ok {
			next = minTime(next, t)
		}
		if next.Before(r.now) {
			next = r.now
		}
		r.integrate(next)
		if err := r.h.Advance(ctx, next.Sub(r.now)); err != nil {
			return fmt.Errorf("advancing to %s: %w", r.rel(next), err)
		}
		r.now = next
		for r.next < len(r.jobs) && !r.start.Add(r.jobs[r.next].Submit).After(r.now) {
			if err := r.submit(r.jobs[r.next]); err != nil {
				return err
			}
			r.next++
		}
		if !r.now.Before(nextTick) {
			nextTick = nextTick.Add(r.cfg.Tick)
			if err := r.tick(ctx); err != nil {
				return err
			}
		}
		if err := r.settle(ctx); err != nil {
			return err
		}
	}
	r.integrate(r.now)
	return nil
}

// quiet reports whether the replay is over: every job submitted and
// ended, no VM left and no resize request alive.
func (r *runner) quiet() bool {
	if r.next < len(r.jobs) || r.res.Completed+r.res.Refused < len(r.jobs) || len(r.vms) > 0 {
		return false
	}
	for _, rr := range r.h.Sim.ResizeRequests() {
		if rr.State == "ACCEPTED" || rr.State == "CREATING" {
			return false
		}
	}
	return true
}

func (r *runner) submit(j Job) error {
	r.res.Jobs++
	if err := r.m.Submit(r.now, lang.SubmitStep{ID: j.ID, Nodes: 1, GPUs: j.GPUs, Runtime: lang.Duration(j.Runtime), TimeLimit: lang.Duration(j.Limit)}); err != nil {
		return fmt.Errorf("submitting job %s (task %s): %w", j.ID, j.Task, err)
	}
	if mj, ok := r.m.Job(j.ID); ok && mj.State() == "REFUSED" {
		r.res.Refused++
		r.res.RefusedGPUTime += j.Runtime * time.Duration(j.GPUs)
	}
	return nil
}

// tick publishes the Slurm snapshot, redelivers what failed, and delivers
// a reconcile tick.
func (r *runner) tick(ctx context.Context) error {
	r.settleVMs()
	if err := r.deliver(ctx, config.TopicSlurmSnapshot, r.m.Snapshot(r.now)); err != nil {
		return err
	}
	retry := r.retry
	r.retry = nil
	for _, m := range retry {
		r.deliverMsg(ctx, m)
	}
	if err := r.deliver(ctx, config.TopicReconcile, event.Tick{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeReconcileTick}}); err != nil {
		return err
	}
	return nil
}

// settle brings Slurm and the functions to rest at now: the model sees the
// VMs, applies flexslurm's commands and updates; what it publishes is
// delivered; until nothing more happens.
func (r *runner) settle(ctx context.Context) error {
	for range maxSettleRounds {
		r.settleVMs()
		moved := r.applyCommands()
		r.m.Update(r.now, r.vms)
		// A job allocated to nodes that are up starts at the next update
		// (as PrologSlurmctld runs): the same instant.
		r.m.Update(r.now, r.vms)
		moved = r.applyCommands() || moved
		if len(r.out) > 0 {
			out := r.out
			r.out = nil
			for _, m := range out {
				r.deliverMsg(ctx, m)
			}
			moved = true
		}
		if err := r.h.DeliverAudit(ctx); err != nil {
			return err
		}
		if !moved {
			r.count()
			return nil
		}
	}
	return fmt.Errorf("the replay does not come to rest at %s", r.rel(r.now))
}

func (r *runner) deliver(ctx context.Context, topic string, payload any) error {
	data, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encoding a %s message: %w", topic, err)
	}
	r.deliverMsg(ctx, outMsg{topic: topic, id: r.h.NewID(), data: data})
	return nil
}

// deliverMsg hands a message to its function; one that fails is
// redelivered at the next tick, as Pub/Sub redelivers (at most 20 times).
func (r *runner) deliverMsg(ctx context.Context, m outMsg) {
	r.res.Deliveries++
	m.attempts++
	if err := r.h.Deliver(ctx, m.topic, m.id, m.data); err != nil {
		r.res.DeliveryErrors++
		if m.attempts < 20 {
			r.retry = append(r.retry, m)
		}
	}
}

// publish is the Slurm model's publisher: hooks and agent reports.
func (r *runner) publish(topic string, payload any) {
	data, err := json.Marshal(payload)
	if err != nil {
		panic(fmt.Sprintf("encoding a Slurm model report: %v", err))
	}
	r.out = append(r.out, outMsg{topic: topic, id: r.h.NewID(), data: data})
	j, ok := payload.(event.Job)
	if !ok {
		return
	}
	switch j.Type {
	case event.TypeJobPending:
		r.alloc[j.JobID] = r.now
	case event.TypeJobStarted:
		r.startedAt[j.JobID] = r.now
		if at, ok := r.alloc[j.JobID]; ok {
			if d, ok := r.addedDelay(at, j.Nodes); ok {
				r.res.AddedDelays = append(r.res.AddedDelays, d)
			}
			delete(r.alloc, j.JobID)
		}
	case event.TypeJobFinished:
		if j.NodesUp {
			if js, ok := r.spec[j.JobID]; ok {
				r.res.Completed++
				r.res.GPUTimeUsed += js.Runtime * time.Duration(js.GPUs)
			}
		}
		delete(r.startedAt, j.JobID)
	}
}

// trace reads the Slurm model's notes for its requeues: a running job
// requeued after its node's VM ended was killed by that end.
func (r *runner) trace(format string, args ...any) {
	if format != "slurm: job %s requeued (%s)" || len(args) != 2 {
		return
	}
	id, _ := args[0].(string)
	why, _ := args[1].(string)
	r.res.Requeues++
	start, running := r.startedAt[id]
	if !running {
		return
	}
	delete(r.startedAt, id)
	if js, ok := r.spec[id]; ok {
		r.res.GPUTimeLost += r.now.Sub(start) * time.Duration(js.GPUs)
	}
	node := why[strings.LastIndex(why, " ")+1:]
	if e, ok := r.ended[node]; ok && r.vms[node].Name == "" {
		if e.expired {
			r.res.KilledByExpiry++
		} else {
			r.res.KilledByDeletion++
		}
	}
}

// addedDelay is, for a job started now whose nodes Slurm powered up at
// alloc, the time flexslurm added: now − alloc − the longest capacity wait
// drawn for its nodes' resize requests − the boot time. It has none when a
// node's VM was requested before alloc (it was not this allocation's).
func (r *runner) addedDelay(alloc time.Time, nodes []string) (time.Duration, bool) {
	var wait time.Duration
	for _, n := range nodes {
		vm, ok := r.vms[n]
		if !ok {
			return 0, false
		}
		rr, ok := r.requestOf(vm.Name)
		if !ok || rr.Created.Before(alloc) || rr.CapacityAt.IsZero() {
			return 0, false
		}
		wait = max(wait, rr.CapacityAt.Sub(rr.Created))
	}
	return r.now.Sub(alloc) - wait - r.cfg.BootTime, true
}

// requestOf finds the resize request that created a VM.
func (r *runner) requestOf(vm string) (computesim.ResizeRequest, bool) {
	name := ""
	for _, in := range r.h.Sim.Instances() {
		if in.Name == vm {
			name = in.ResizeRequest
		}
	}
	if name == "" {
		return computesim.ResizeRequest{}, false
	}
	if rr, ok := r.rrs[name]; ok {
		return rr, true
	}
	if v := r.h.Sim.Version(); v != r.rrVersion {
		r.rrVersion = v
		for _, rr := range r.h.Sim.ResizeRequestHistory() {
			if !rr.CapacityAt.IsZero() {
				r.rrs[rr.Name] = rr
			}
		}
	}
	rr, ok := r.rrs[name]
	return rr, ok
}

// settleVMs takes each node's live VM (the newest that is not stopping)
// and notes the VMs that ended since the last look.
func (r *runner) settleVMs() {
	r.vms = map[string]slurmmodel.VM{}
	terms := map[string]time.Time{}
	for _, in := range r.h.Sim.Instances() {
		if in.Status == "STOPPING" {
			continue
		}
		node, _, _, _, ok := naming.ParseVMName(in.Name)
		if !ok {
			continue
		}
		if cur, seen := r.vms[node]; !seen || in.Created.After(cur.Created) {
			r.vms[node] = slurmmodel.VM{Name: in.Name, Zone: in.Zone, Status: in.Status, Created: in.Created}
			terms[node] = in.TerminationTime
		}
		if in.Status == "RUNNING" && !r.ran[in.Name] {
			r.ran[in.Name] = true
			r.res.NodeStarts++
		}
	}
	for node, l := range r.live {
		if r.vms[node].Name != l.name {
			r.ended[node] = endedVM{at: r.now, expired: !l.term.IsZero() && !r.now.Before(l.term.Add(-expirySlack))}
			delete(r.live, node)
		}
	}
	for node, vm := range r.vms {
		r.live[node] = liveVM{name: vm.Name, term: terms[node]}
	}
}

// applyCommands applies the Slurm commands flexslurm published, each id
// once, as the agent does; a strategy that ignores end-of-life
// reservations drops their creation. It reports whether any was applied.
func (r *runner) applyCommands() bool {
	moved := false
	for _, msg := range r.h.Publisher.Take(config.TopicSlurmCommands) {
		var c event.SlurmCommand
		var raw map[string]any
		if err := json.Unmarshal(msg.Data, &c); err != nil {
			continue
		}
		_ = json.Unmarshal(msg.Data, &raw)
		if r.seenCmds[c.ID] {
			continue
		}
		r.seenCmds[c.ID] = true
		if r.s.IgnoreReservations && c.Command == event.SlurmReservationCreate {
			continue
		}
		r.m.Apply(r.now, slurmmodel.Command{At: r.now, ID: c.ID, Command: c.Command, Nodes: c.Nodes, Job: c.JobID, Reason: c.Reason, Raw: raw})
		moved = true
	}
	return moved
}

// count takes the VMs running and those whose node runs a job, held until
// the next instant.
func (r *runner) count() {
	r.running, r.busy, r.held = 0, 0, 0
	for node, vm := range r.vms {
		if vm.Status != "RUNNING" {
			continue
		}
		r.running++
		n, ok := r.m.Node(node)
		if !ok {
			continue
		}
		// Jobs allocated to a node still booting do not run yet.
		held := 0
		for _, id := range n.JobIDs() {
			if j, ok := r.m.Job(id); ok && j.State() == "RUNNING" {
				held += max(j.GPUs(), 0)
				if j.GPUs() == 0 {
					held = n.GPUs()
				}
			}
		}
		if held > 0 {
			r.busy++
			r.held += min(held, n.GPUs())
		}
	}
}

// integrate adds the counts held since the last instant up to t.
func (r *runner) integrate(t time.Time) {
	if d := t.Sub(r.integrated); d > 0 {
		r.res.VMTime += time.Duration(r.running) * d
		r.res.IdleVMTime += time.Duration(r.running-r.busy) * d
		r.res.GPUTimeHeld += time.Duration(r.held) * d
		r.res.PackedVMTime += time.Duration((r.held+GPUsPerNode-1)/GPUsPerNode) * d
		r.integrated = t
	}
}

func (r *runner) rel(t time.Time) string { return t.Sub(r.start).String() }

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
