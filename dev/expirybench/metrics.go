package expirybench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/store"
)

// Result is what one run measured. Availability, jobs and overlap are
// measured over the measured period only (after the warm-up).
type Result struct {
	Strategy Strategy
	// Config is the configuration run, with its defaults filled in.
	Config Config

	// Availability is the fraction of the measured period during which
	// the number of usable nodes — VM running, registered in Slurm and not
	// drained — was at least min_node_count. The pool has no dynamic jobs,
	// so every usable node is a static node or a static node's successor.
	Availability float64
	// NodeTimeAvailability is ∫ min(usable, min_node_count) dt divided by
	// min_node_count × the measured period: the fraction of the static
	// node-time that was served.
	NodeTimeAvailability float64
	// BelowMin is how long the pool had fewer usable nodes than
	// min_node_count (in the measured period); Availability is
	// 1 − BelowMin / Period.
	BelowMin time.Duration
	// FewestUsable is the fewest usable nodes at any instant of the
	// measured period.
	FewestUsable int
	// Episodes are the intervals with fewer usable nodes than
	// min_node_count that overlap the measured period.
	Episodes []Episode

	// JobsKilled counts job attempts killed because their node's VM
	// reached its max run duration; JobsKilledOther those ended by a
	// deletion or a power-down flexslurm asked for. Each killed job is
	// requeued and runs again.
	JobsKilled, JobsKilledOther int
	// WorkLost is the runtime the killed attempts had accumulated
	// (node-time, one node per job).
	WorkLost time.Duration
	// JobsStarted and JobsCompleted count first starts and completions
	// in the measured period; MeanJobWait is the mean time from submission
	// to first start of the jobs that first started in it.
	JobsStarted, JobsCompleted int
	MeanJobWait                time.Duration
	// JobsPendingAtEnd is the queue at the end of the run.
	JobsPendingAtEnd int

	// Overlap is ∫ max(0, VMs running − min_node_count) dt: the node-time
	// paid above the static pool's size, which with no dynamic jobs is the
	// cost of running successors beside the nodes they replace.
	Overlap time.Duration
	// RecordedOverlap is the overlap flexslurm itself accounted on the pool
	// (model.Pool.OverlapSeconds) during the measured period.
	RecordedOverlap time.Duration
	// VMTime is ∫ VMs running dt: the node-time paid for.
	VMTime time.Duration
	// Expiries counts the VMs that reached their max run duration, and
	// Deletions those that ended earlier (flexslurm deleted them).
	Expiries, Deletions int

	// CapacityWaits are the waits drawn for every resize request of the
	// run, in request order (warm-up included).
	CapacityWaits []time.Duration
	// Commands counts the Slurm commands flexslurm published, by name.
	Commands map[string]int
	// Timeline holds each node's phases over the whole run.
	Timeline Timeline
}

// Episode is an interval during which the pool had fewer usable nodes than
// min_node_count.
type Episode struct {
	Start, End time.Duration // since the start of the run
	// Fewest is the fewest usable nodes during the episode.
	Fewest int
	// Cause says which nodes stopped serving when it began, and why.
	Cause string
	// Kind classifies the episode (the Episode* constants).
	Kind string
	// Diagnosis says, for make-before-break, where the successors whose
	// predecessor had already ended stood: requested how long before the
	// termination, capacity when.
	Diagnosis string
}

// Episode kinds.
const (
	// EpisodeFill: the pool had not yet reached min_node_count.
	EpisodeFill = "fill"
	// EpisodeRecreate: a static node's VM ended and, without
	// make-before-break, its replacement was requested only then.
	EpisodeRecreate = "recreate"
	// EpisodeCapacityLate: a successor's capacity arrived after the
	// termination of the node it replaces (the wait exceeded the lead).
	EpisodeCapacityLate = "capacity-late"
	// EpisodeNoSuccessor: a static node's VM expired with no successor
	// requested for it (none was requested in its lead time, or the pool
	// had no free slot).
	EpisodeNoSuccessor = "no-successor"
	// EpisodeBooting: a successor's capacity arrived before the
	// termination, but its node registered in Slurm only after it.
	EpisodeBooting = "booting"
	// EpisodeStaleDrain: a successor had registered before the
	// termination, on a node that flexslurm had drained for an earlier VM;
	// that drain is lifted only at the next reconcile pass.
	EpisodeStaleDrain = "stale-drain"
	// EpisodeDrainWhileShort: flexslurm drained a node whose successor
	// had registered while another successor was still missing; the
	// drained node could have served until its own termination.
	EpisodeDrainWhileShort = "drain-while-short"
	// EpisodeUnexplained: none of the above.
	EpisodeUnexplained = "unexplained"
)

// meter integrates the pool's counts over the measured period.
type meter struct {
	min              int
	winStart, winEnd time.Time
	last             time.Time // integrated up to here

	usable, running int             // counts since last
	prevUsable      map[string]bool // usable nodes at the last observation
	fewest          int
	atOrAbove       time.Duration
	nodeTime        float64 // ∫ min(usable, min) dt, node-nanoseconds
	overlap         float64 // ∫ max(0, running − min) dt
	vmTime          float64 // ∫ running dt

	episodes []Episode
	below    bool
	reached  bool                 // the pool has been at min_node_count
	ended    map[string]endReason // why nodes stopped serving at the current instant
	endedAt  time.Time

	killed, killedOther  int
	workLost             time.Duration
	started, completed   int
	waitSum              time.Duration
	expiries, deletions  int
	recordedAtStart      time.Duration // flexslurm's pool overlap when the period began
	recordedAtStartKnown bool
	recordedAtEnd        time.Duration
}

func (m *meter) inWindow(t time.Time) bool { return !t.Before(m.winStart) && t.Before(m.winEnd) }

// advance integrates the counts held since m.last up to t.
func (m *meter) advance(t time.Time) {
	from, to := maxTime(m.last, m.winStart), minTime(t, m.winEnd)
	if to.After(from) {
		d := to.Sub(from)
		if m.usable < m.fewest || m.fewest < 0 {
			m.fewest = m.usable
		}
		if m.usable >= m.min {
			m.atOrAbove += d
		}
		m.nodeTime += float64(min(m.usable, m.min)) * float64(d)
		m.overlap += float64(max(0, m.running-m.min)) * float64(d)
		m.vmTime += float64(m.running) * float64(d)
	}
	if t.After(m.last) {
		m.last = t
	}
}

// endReason is why a node stopped serving.
type endReason struct {
	why     string
	vm      string // the VM that ended ("" for a drain)
	expired bool   // its VM reached its max run duration
}

func (m *meter) why(name string, e endReason, at time.Time) {
	if m.ended == nil || !at.Equal(m.endedAt) {
		m.ended, m.endedAt = map[string]endReason{}, at
	}
	m.ended[name] = e
}

func (m *meter) vmEnded(r *runner, s *slot, expired bool) {
	what := "deleted"
	if expired {
		what = "expired"
	}
	m.why(s.name, endReason{why: fmt.Sprintf("%s %s at %s", s.vm, what, r.rel(r.now)), vm: s.vm, expired: expired}, r.now)
	if !m.inWindow(r.now) {
		return
	}
	if expired {
		m.expiries++
	} else {
		m.deletions++
	}
}

func (m *meter) jobKilled(r *runner, j *runJob, byExpiry bool) {
	if !m.inWindow(r.now) {
		return
	}
	if byExpiry {
		m.killed++
	} else {
		m.killedOther++
	}
	m.workLost += r.now.Sub(j.start)
}

func (m *meter) jobDone(now time.Time) {
	if m.inWindow(now) {
		m.completed++
	}
}

// observe takes the counts after everything at r.now happened, and opens
// or closes an episode below min_node_count.
func (m *meter) observe(r *runner) {
	usable := map[string]bool{}
	m.usable, m.running = 0, 0
	for _, s := range r.slots {
		if s.vm != "" {
			m.running++
		}
		if r.usable(s) {
			m.usable++
			usable[s.name] = true
		}
	}
	for _, s := range r.slots {
		if _, known := m.ended[s.name]; m.prevUsable[s.name] && !usable[s.name] && (!known || !m.endedAt.Equal(r.now)) {
			m.why(s.name, endReason{why: fmt.Sprintf("%s drained with %s of its VM's life left (%s)", s.name, fmtDur(s.vmEnd.Sub(r.now)), s.drainReason)}, r.now)
		}
	}
	m.prevUsable = usable
	switch {
	case m.usable < m.min && !m.below:
		m.below = true
		e := Episode{Start: r.now.Sub(r.start), Fewest: m.usable}
		r.classify(&e)
		m.episodes = append(m.episodes, e)
	case m.below && m.usable < m.min:
		e := &m.episodes[len(m.episodes)-1]
		e.Fewest = min(e.Fewest, m.usable)
	case m.below:
		m.below = false
		m.episodes[len(m.episodes)-1].End = r.now.Sub(r.start)
	}
	if m.usable >= m.min {
		m.reached = true
	}
}

// classify fills in why an episode began.
func (r *runner) classify(e *Episode) {
	m := &r.meter
	var causes []string
	expired, drained := false, false
	if m.endedAt.Equal(r.now) {
		for _, name := range sortedKeys(m.ended) {
			end := m.ended[name]
			causes = append(causes, end.why)
			expired = expired || end.expired
			drained = drained || end.vm == ""
		}
	}
	e.Cause = strings.Join(causes, "; ")
	if !m.reached {
		e.Kind, e.Cause = EpisodeFill, "the pool has not reached min_node_count yet"
		return
	}
	if r.strategy.Policy.RecreateAfterTermination {
		e.Kind = EpisodeRecreate
		return
	}
	var diags []string
	late, booting, stale := false, false, false
	for _, l := range r.pendingSuccessors() {
		capAt := r.capacityAt(l.succVM)
		succ := r.byName[l.succ]
		d := fmt.Sprintf("successor %s of %s requested %s before its termination at %s", l.succ, l.oldVM, fmtDur(l.oldEnd.Sub(l.requestedAt)), r.rel(l.oldEnd))
		switch {
		case capAt.IsZero():
			d += ": capacity not granted yet"
			late = true
		case capAt.After(l.oldEnd):
			d += fmt.Sprintf(": capacity wait %s, %s after the termination", fmtDur(capAt.Sub(l.requestedAt)), fmtDur(capAt.Sub(l.oldEnd)))
			late = true
		case succ.vm == l.succVM && succ.registered(r.now, r.cfg.BootTime) && succ.drained:
			d += fmt.Sprintf(": capacity %s before the termination, registered at %s, still drained by %q", fmtDur(l.oldEnd.Sub(capAt)),
				r.rel(capAt.Add(r.cfg.BootTime)), succ.drainReason)
			stale = true
		default:
			d += fmt.Sprintf(": capacity %s before the termination, registers at %s (boot %s)", fmtDur(l.oldEnd.Sub(capAt)),
				r.rel(capAt.Add(r.cfg.BootTime)), fmtDur(r.cfg.BootTime))
			booting = true
		}
		diags = append(diags, d)
	}
	// A node whose VM expired without any successor requested for it.
	orphaned := false
	if expired {
		inUse := 0
		for _, s := range r.slots {
			if s.vm != "" || s.waiting {
				inUse++
			}
		}
		for _, name := range sortedKeys(m.ended) {
			if end := m.ended[name]; end.expired && !r.hadSuccessor(name, end.vm) {
				diags = append(diags, fmt.Sprintf("%s expired with no successor requested (%d of %d slots with a VM or a request)", end.vm, inUse, r.cfg.MaxNodes))
				orphaned = true
			}
		}
	}
	e.Diagnosis = strings.Join(diags, "; ")
	switch {
	case !expired && drained:
		// flexslurm drains a node once its successor registered: another
		// position was already vacant.
		e.Kind = EpisodeDrainWhileShort
	case !expired:
		e.Kind = EpisodeUnexplained // a usable node's VM was deleted
	case late:
		e.Kind = EpisodeCapacityLate
	case orphaned:
		e.Kind = EpisodeNoSuccessor
	case booting:
		e.Kind = EpisodeBooting
	case stale:
		e.Kind = EpisodeStaleDrain
	default:
		e.Kind = EpisodeUnexplained
	}
}

// hadSuccessor reports whether a make-before-break successor was requested
// for the node's VM vm.
func (r *runner) hadSuccessor(node, vm string) bool {
	for _, l := range r.links {
		if l.old == node && l.oldVM == vm {
			return true
		}
	}
	return false
}

// pendingSuccessors are the make-before-break successors whose predecessor's
// VM has ended but which do not serve yet (and whose request is alive).
func (r *runner) pendingSuccessors() []link {
	var out []link
	for _, vm := range sortedKeys(r.links) {
		l := r.links[vm]
		old, succ := r.byName[l.old], r.byName[l.succ]
		if old.vm == l.oldVM || (succ.vm == l.succVM && r.usable(succ)) || r.requestDead(l.succVM) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// capacityAt is when capacity for a VM's resize request arrives (zero while
// it is not ACCEPTED).
func (r *runner) capacityAt(vm string) time.Time {
	for _, rr := range r.h.Sim.ResizeRequestHistory() {
		if slices.Contains(rr.Instances, vm) {
			return rr.CapacityAt
		}
	}
	return time.Time{}
}

// requestDead reports whether the resize request for vm was cancelled or failed.
func (r *runner) requestDead(vm string) bool {
	for _, rr := range r.h.Sim.ResizeRequestHistory() {
		if slices.Contains(rr.Instances, vm) {
			return rr.State == "CANCELLED" || rr.State == "FAILED"
		}
	}
	return false
}

// link is a make-before-break hand-over, as the store showed it at a tick.
type link struct {
	old, oldVM   string
	oldEnd       time.Time // the old VM's termination
	succ, succVM string
	requestedAt  time.Time // when the successor was requested
}

// result assembles the run's Result.
func (r *runner) result(ctx context.Context, waits []time.Duration) (*Result, error) {
	st, err := r.h.Store.Read(ctx, store.Scope{Cluster: clusterID, AllPools: true})
	if err != nil {
		return nil, err
	}
	m := &r.meter
	if p := st.Pools[poolID]; p != nil {
		m.recordedAtEnd = time.Duration(p.OverlapSeconds) * time.Second
	}
	m.finish(r)
	res := &Result{
		Strategy: r.strategy, Config: r.cfg,
		Availability:         m.atOrAbove.Seconds() / r.cfg.Period.Seconds(),
		NodeTimeAvailability: m.nodeTime / (float64(m.min) * float64(r.cfg.Period)),
		BelowMin:             r.cfg.Period - m.atOrAbove,
		FewestUsable:         m.fewest,
		JobsKilled:           m.killed, JobsKilledOther: m.killedOther, WorkLost: m.workLost,
		JobsStarted: m.started, JobsCompleted: m.completed, JobsPendingAtEnd: len(r.pending),
		Overlap:         time.Duration(m.overlap),
		RecordedOverlap: m.recordedAtEnd - m.recordedAtStart,
		VMTime:          time.Duration(m.vmTime),
		Expiries:        m.expiries, Deletions: m.deletions,
		CapacityWaits: waits, Commands: r.commands,
		Timeline: r.tl.export(r),
	}
	if m.started > 0 {
		res.MeanJobWait = m.waitSum / time.Duration(m.started)
	}
	winStart, winEnd := r.winStart.Sub(r.start), r.winEnd.Sub(r.start)
	for _, e := range m.episodes {
		if e.End > winStart && e.Start < winEnd {
			res.Episodes = append(res.Episodes, e)
		}
	}
	return res, nil
}

// finish closes an open episode and counts the jobs' first starts.
func (m *meter) finish(r *runner) {
	if m.below {
		m.episodes[len(m.episodes)-1].End = r.end.Sub(r.start)
	}
	for _, j := range r.jobs {
		if j.started && m.inWindow(j.submit.Add(j.wait)) {
			m.started++
			m.waitSum += j.wait
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
