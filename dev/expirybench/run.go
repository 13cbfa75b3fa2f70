package expirybench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flexslurm/flexslurm/dev/benchpool"
	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// The bench's cluster and pool.
const (
	clusterID = "bench"
	poolID    = "h200"
	zone      = "us-central1-a"
)

// clusterSpec is the bench's cluster_config.json: one Flex-Start H200 pool
// (and the login pool the managed Slurm API requires).
func clusterSpec(cfg Config) (*spec.Cluster, error) {
	return benchpool.Pool{Cluster: clusterID, ID: poolID, GPUs: 8, MaxRunDuration: cfg.MaxRunDuration, Min: cfg.Nodes, Max: cfg.MaxNodes}.Spec()
}

// Compare runs cfg once per strategy, concurrently (at most GOMAXPROCS at a
// time), and returns the results in the strategies' order.
func Compare(ctx context.Context, cfg Config, strategies []Strategy) ([]*Result, error) {
	return RunAll(ctx, []Config{cfg}, strategies)
}

// RunAll runs every configuration under every strategy, concurrently (at
// most GOMAXPROCS runs at a time), and returns the results configuration by
// configuration, strategies in order within each.
func RunAll(ctx context.Context, cfgs []Config, strategies []Strategy) ([]*Result, error) {
	out := make([]*Result, len(cfgs)*len(strategies))
	errs := make([]error, len(out))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		for j, s := range strategies {
			k := i*len(strategies) + j
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				out[k], errs[k] = Run(ctx, cfg, s)
				if errs[k] != nil {
					errs[k] = fmt.Errorf("%s, max run duration %s: %w", s.Name, fmtDur(cfg.withDefaults().MaxRunDuration), errs[k])
				}
			}()
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Run simulates cfg's warm-up and measured period under one strategy.
func Run(ctx context.Context, cfg Config, s Strategy) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c, err := clusterSpec(cfg)
	if err != nil {
		return nil, fmt.Errorf("bench cluster spec: %w", err)
	}
	waitRand := rand.New(rand.NewPCG(cfg.Seed, streamWaits))
	var waits []time.Duration // drawn under the simulator's lock, read after the run
	var h *harness.Harness
	cache := newReadCache(func() string { return simFingerprint(h.Sim) })
	h, err = harness.New(ctx, harness.Options{
		Policy: s.Policy,
		Sim: computesim.Options{Seed: cfg.Seed, CapacityDelay: func(string, string) time.Duration {
			d := cfg.Wait.Draw(waitRand)
			waits = append(waits, d)
			return d
		}},
		Compute: func(c apply.Compute) apply.Compute {
			if cfg.DirectCompute {
				return c
			}
			cache.inner = c
			return cache
		},
	})
	if err != nil {
		return nil, err
	}
	defer h.Close()

	r := newRunner(cfg, s, h)
	if err := h.Apply(ctx, c); err != nil {
		return nil, fmt.Errorf("applying the bench spec: %w", err)
	}
	if err := r.loop(ctx); err != nil {
		return nil, err
	}
	return r.result(ctx, waits)
}

// runner is one run: the harness, the Slurm model and the measurements.
type runner struct {
	cfg      Config
	strategy Strategy
	h        *harness.Harness

	start, winStart, winEnd, end time.Time
	now                          time.Time

	slots  []*slot
	byName map[string]*slot

	jobs     []*runJob // the workload, in submission order
	next     int       // next job to submit
	pending  []*runJob // submitted, not running, in submission order
	seenCmds map[string]bool
	commands map[string]int // Slurm commands applied, by name

	// links are the make-before-break hand-overs seen at reconcile ticks,
	// by successor VM, kept until the successor serves.
	links map[string]link

	meter meter
	tl    timeline
}

// slot is one node of the pool, as Compute and Slurm show it.
type slot struct {
	name  string
	index int

	vm        string    // the running VM's name, "" when none
	vmCreated time.Time // when it started running
	vmEnd     time.Time // its scheduled termination

	drained     bool
	drainReason string
	res         map[string]reservation // flexslurm's reservations on the node, by name
	job         *runJob

	waiting bool // a resize request for the node is queued
	phase   Phase
	since   time.Time
}

type reservation struct {
	start time.Time
	dur   time.Duration
}

// registered reports whether the node's slurmd has registered at t.
func (s *slot) registered(t time.Time, boot time.Duration) bool {
	return s.vm != "" && !t.Before(s.vmCreated.Add(boot))
}

// runJob is a job of the workload and its progress.
type runJob struct {
	spec    jobSpec
	submit  time.Time
	start   time.Time // of the current attempt
	node    *slot     // running on, nil when not running
	started bool      // has started at least once
	wait    time.Duration
}

func newRunner(cfg Config, s Strategy, h *harness.Harness) *runner {
	r := &runner{cfg: cfg, strategy: s, h: h, byName: map[string]*slot{}, seenCmds: map[string]bool{},
		commands: map[string]int{}, links: map[string]link{}}
	r.start = h.Clock.Now()
	r.now = r.start
	r.winStart = r.start.Add(cfg.WarmUp)
	r.winEnd = r.winStart.Add(cfg.Period)
	r.end = r.winEnd
	for i := range cfg.MaxNodes {
		sl := &slot{name: model.NodeName(clusterID, poolID, i), index: i, res: map[string]reservation{}, phase: PhaseNone, since: r.start}
		r.slots = append(r.slots, sl)
		r.byName[sl.name] = sl
	}
	for _, js := range workload(cfg, r.end.Sub(r.start)) {
		r.jobs = append(r.jobs, &runJob{spec: js, submit: r.start.Add(js.Submit)})
	}
	r.meter = meter{min: cfg.Nodes, winStart: r.winStart, winEnd: r.winEnd, last: r.start, fewest: -1}
	r.tl = timeline{lanes: make([][]Segment, cfg.MaxNodes)}
	return r
}

// loop advances the clock from event to event — reconcile ticks, the
// simulator's transitions, job arrivals and ends, node registrations — and
// plays Slurm at each.
func (r *runner) loop(ctx context.Context) error {
	nextTick := r.start
	stuck := 0 // steps in a row that did not move the clock
	for r.now.Before(r.end) {
		if err := ctx.Err(); err != nil {
			return err
		}
		next := minTime(minTime(nextTick, r.end), r.nextModelEvent())
		if due, ok := r.h.Sim.NextDue(); ok && due.Before(next) {
			next = due
		}
		if !next.After(r.now) {
			next = r.now
			if stuck++; stuck > maxStuckSteps {
				return fmt.Errorf("the simulation does not advance past %s", r.rel(r.now))
			}
		} else {
			stuck = 0
		}
		r.meter.advance(next)
		if err := r.h.Advance(ctx, next.Sub(r.now)); err != nil {
			return fmt.Errorf("advancing to %s: %w", r.rel(next), err)
		}
		r.now = next
		r.observe()
		r.applyCommands()
		r.finishJobs()
		r.submitJobs()
		if !r.now.Before(nextTick) {
			if err := r.tick(ctx); err != nil {
				return err
			}
			nextTick = nextTick.Add(r.cfg.Tick)
		}
		r.schedule()
		r.settle()
	}
	r.meter.advance(r.end)
	r.tl.close(r)
	return nil
}

// maxStuckSteps bounds the steps at one instant (each handles the
// simulator's transitions due then; a few suffice).
const maxStuckSteps = 10000

// nextModelEvent is the earliest job arrival, job end or node registration
// after now (r.end when none).
func (r *runner) nextModelEvent() time.Time {
	next := r.end
	if r.next < len(r.jobs) {
		next = minTime(next, r.jobs[r.next].submit)
	}
	for _, s := range r.slots {
		if s.job != nil {
			next = minTime(next, s.job.start.Add(s.job.spec.Runtime))
		}
		if reg := s.vmCreated.Add(r.cfg.BootTime); s.vm != "" && reg.After(r.now) {
			next = minTime(next, reg)
		}
	}
	return next
}

// tick publishes a Slurm snapshot, delivers a reconcile tick, applies the
// Slurm commands flexslurm published and notes the make-before-break links.
func (r *runner) tick(ctx context.Context) error {
	if _, err := r.h.Publish(ctx, config.TopicSlurmSnapshot, r.snapshot()); err != nil {
		return fmt.Errorf("slurm snapshot at %s: %w", r.rel(r.now), err)
	}
	if err := r.h.Tick(ctx); err != nil {
		return fmt.Errorf("reconcile tick at %s: %w", r.rel(r.now), err)
	}
	r.applyCommands()
	st, err := r.h.Store.Read(ctx, store.Scope{Cluster: clusterID, AllPools: true})
	if err != nil {
		return err
	}
	for name, n := range st.Nodes {
		// A hedge's predecessor is itself a successor still waiting (no
		// termination time yet): the hand-over it serves is that node's.
		if s := st.Nodes[n.Successor]; n.Successor != "" && s != nil && !s.Hedge {
			r.links[s.VMName] = link{old: name, oldVM: n.VMName, oldEnd: n.TerminationTime, succ: s.Name, succVM: s.VMName, requestedAt: s.RequestedAt}
		}
	}
	for vm, l := range r.links {
		if s := r.byName[l.succ]; (s.vm == vm && r.usable(s)) || r.requestDead(vm) {
			delete(r.links, vm)
		}
	}
	if p := st.Pools[poolID]; p != nil && !r.meter.recordedAtStartKnown && !r.now.Before(r.winStart) {
		r.meter.recordedAtStart, r.meter.recordedAtStartKnown = time.Duration(p.OverlapSeconds)*time.Second, true
	}
	return nil
}

// observe brings the slots up to date with the simulator's VMs: a VM that
// appeared runs from its creation; a VM that is gone ended at its
// termination time (an expiry) or now (a deletion), killing its job.
func (r *runner) observe() {
	running := map[string]computesim.Instance{}
	for _, in := range r.h.Sim.Instances() {
		if in.Status != "RUNNING" && in.Status != "REPAIRING" {
			continue
		}
		node, _, _, _, ok := naming.ParseVMName(in.Name)
		if !ok {
			continue
		}
		running[node] = in
	}
	queued := map[string]bool{}
	for _, rr := range r.h.Sim.ResizeRequests() {
		if rr.State != "ACCEPTED" && rr.State != "CREATING" {
			continue
		}
		for _, vm := range rr.Instances {
			if node, _, _, _, ok := naming.ParseVMName(vm); ok {
				queued[node] = true
			}
		}
	}
	for _, s := range r.slots {
		in, ok := running[s.name]
		if s.vm != "" && (!ok || in.Name != s.vm) {
			r.vmEnded(s)
		}
		if ok && s.vm == "" {
			s.vm, s.vmCreated, s.vmEnd = in.Name, in.Created, in.TerminationTime
		}
		s.waiting = queued[s.name] && s.vm == ""
	}
}

// vmEnded ends a slot's VM: its job is killed (and requeued).
func (r *runner) vmEnded(s *slot) {
	expired := !s.vmEnd.IsZero() && !r.now.Before(s.vmEnd)
	if j := s.job; j != nil {
		r.kill(j, expired)
	}
	r.meter.vmEnded(r, s, expired)
	if expired {
		r.tl.expiries = append(r.tl.expiries, r.now.Sub(r.start))
	}
	s.vm, s.vmCreated, s.vmEnd = "", time.Time{}, time.Time{}
}

// kill ends a running job's attempt abnormally; Slurm requeues it.
func (r *runner) kill(j *runJob, byExpiry bool) {
	s := j.node
	r.meter.jobKilled(r, j, byExpiry)
	r.tl.kills = append(r.tl.kills, Kill{Lane: s.index, At: r.now.Sub(r.start), ByExpiry: byExpiry})
	s.job, j.node = nil, nil
	r.enqueue(j)
}

func (r *runner) enqueue(j *runJob) {
	i := sort.Search(len(r.pending), func(i int) bool { return r.pending[i].submit.After(j.submit) })
	r.pending = append(r.pending, nil)
	copy(r.pending[i+1:], r.pending[i:])
	r.pending[i] = j
}

// finishJobs ends the jobs whose runtime has elapsed.
func (r *runner) finishJobs() {
	for _, s := range r.slots {
		if j := s.job; j != nil && !r.now.Before(j.start.Add(j.spec.Runtime)) {
			s.job, j.node = nil, nil
			r.meter.jobDone(r.now)
		}
	}
}

// submitJobs queues the jobs submitted by now.
func (r *runner) submitJobs() {
	for r.next < len(r.jobs) && !r.jobs[r.next].submit.After(r.now) {
		r.enqueue(r.jobs[r.next])
		r.next++
	}
}

// schedule starts pending jobs, in submission order, each on the
// lowest-numbered node that is registered, not drained, free, and — unless
// the strategy ignores them — whose end-of-life reservations leave room for
// the job's whole time limit.
func (r *runner) schedule() {
	keep := r.pending[:0]
	for _, j := range r.pending {
		if s := r.placeFor(j); s != nil {
			s.job, j.node, j.start = j, s, r.now
			if !j.started {
				j.started = true
				j.wait = r.now.Sub(j.submit)
			}
			continue
		}
		keep = append(keep, j)
	}
	clear(r.pending[len(keep):])
	r.pending = keep
}

func (r *runner) placeFor(j *runJob) *slot {
	for _, s := range r.slots {
		if s.job != nil || s.drained || !s.registered(r.now, r.cfg.BootTime) {
			continue
		}
		if !r.strategy.IgnoreReservations && !fits(s, r.now, j.spec.Limit) {
			continue
		}
		return s
	}
	return nil
}

// fits reports whether a job with the given time limit, started at t, ends
// before each of the node's reservations starts (or starts after it ended).
func fits(s *slot, t time.Time, limit time.Duration) bool {
	end := t.Add(limit)
	for _, res := range s.res {
		if end.After(res.start) && t.Before(res.start.Add(res.dur)) {
			return false
		}
	}
	return true
}

// applyCommands runs the Slurm commands flexslurm published since the last
// call, each id once, as the agent would.
func (r *runner) applyCommands() {
	for _, m := range r.h.Publisher.Take(config.TopicSlurmCommands) {
		c, err := event.DecodeSlurmCommand(m.Data)
		if err != nil {
			r.commands["undecodable"]++
			continue
		}
		if r.seenCmds[c.ID] {
			continue
		}
		r.seenCmds[c.ID] = true
		r.commands[string(c.Command)]++
		for _, name := range c.Nodes {
			s, ok := r.byName[name]
			if !ok {
				continue
			}
			switch c.Command {
			case event.SlurmDrain:
				s.drained, s.drainReason = true, c.Reason
			case event.SlurmResume:
				s.drained, s.drainReason = false, ""
			case event.SlurmDown, event.SlurmPowerDown, event.SlurmPowerDownForce:
				// Slurm ends (and requeues) the node's job.
				if s.job != nil {
					r.kill(s.job, false)
				}
				if c.Command == event.SlurmDown {
					s.drained, s.drainReason = true, c.Reason
				}
			case event.SlurmReservationCreate:
				s.res[c.Reservation] = reservation{start: c.StartTime, dur: time.Duration(c.DurationSeconds) * time.Second}
			case event.SlurmReservationDelete:
				delete(s.res, c.Reservation)
			}
		}
	}
}

// snapshot is the Slurm snapshot the agent would publish now. A node whose
// VM runs and has registered is idle or allocated (and DRAIN when drained);
// one whose VM still boots is powering up; one without a VM is powered down.
// A drain survives the node's power-down, as in Slurm.
func (r *runner) snapshot() event.SlurmSnapshot {
	snap := event.SlurmSnapshot{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeSlurmSnapshot, Cluster: clusterID}, TakenAt: r.now}
	for _, s := range r.slots {
		words, reason := []string{"IDLE", "CLOUD"}, ""
		switch {
		case s.vm == "":
			words = append(words, "POWERED_DOWN")
		case !s.registered(r.now, r.cfg.BootTime):
			words = append(words, "NOT_RESPONDING", "POWERING_UP")
		case s.job != nil:
			words[0] = "ALLOCATED"
		}
		if s.drained {
			words, reason = append(words, "DRAIN"), s.drainReason
		}
		snap.Nodes = append(snap.Nodes, event.SnapshotNode{Name: s.name, Node: slurmstate.ParseNode(s.name, words, reason)})
		if s.job != nil {
			snap.Jobs = append(snap.Jobs, event.SnapshotJob{ID: s.job.spec.ID, State: "RUNNING", Partition: poolID, Nodes: []string{s.name}, NodeCount: 1})
		}
	}
	for _, j := range r.pending {
		snap.Jobs = append(snap.Jobs, event.SnapshotJob{ID: j.spec.ID, State: "PENDING", Reason: "Resources", Partition: poolID, NodeCount: 1})
	}
	return snap
}

// settle records each slot's phase after everything at now happened.
func (r *runner) settle() {
	for _, s := range r.slots {
		p := r.phaseOf(s)
		if p != s.phase {
			r.tl.add(r, s, p)
		}
	}
	r.meter.observe(r)
}

// phaseOf is what a slot is doing now.
func (r *runner) phaseOf(s *slot) Phase {
	switch {
	case s.vm == "" && s.waiting:
		return PhaseWaiting
	case s.vm == "":
		return PhaseNone
	case !s.registered(r.now, r.cfg.BootTime):
		return PhaseBooting
	case s.drained && s.job != nil:
		return PhaseDrainedBusy
	case s.drained:
		return PhaseDrained
	case s.job != nil:
		return PhaseBusy
	}
	return PhaseIdle
}

// usable reports whether a node serves jobs now: its VM runs, its slurmd
// registered and it is not drained.
func (r *runner) usable(s *slot) bool {
	return s.registered(r.now, r.cfg.BootTime) && !s.drained
}

// simFingerprint spells out what the simulator's lists depend on: every
// VM's zone, name, id, status and termination, every resize request's name,
// state, error and VMs made, every MIG's target size and members.
func simFingerprint(sim *computesim.Sim) string {
	var b strings.Builder
	for _, in := range sim.Instances() {
		fmt.Fprintf(&b, "i %s %s %d %s %d\n", in.Zone, in.Name, in.ID, in.Status, in.TerminationTime.UnixNano())
	}
	for _, rr := range sim.ResizeRequests() {
		fmt.Fprintf(&b, "r %s %s %s %s %s %s %d\n", rr.Zone, rr.MIG, rr.Name, rr.State, rr.ErrorCode, rr.ErrorMessage, len(rr.Provisioned))
	}
	for _, m := range sim.MIGs() {
		fmt.Fprintf(&b, "m %s %s %d %s\n", m.Zone, m.Name, m.TargetSize, strings.Join(m.Instances, ","))
	}
	return b.String()
}

// rel formats t as time since the start of the run.
func (r *runner) rel(t time.Time) string { return fmtDur(t.Sub(r.start)) }

// fmtDur formats a duration compactly: 1d2h3m, 45m, 30s.
func fmtDur(d time.Duration) string { return benchpool.FormatDuration(d) }
