// Package check evaluates a scenario's assertions and invariants against a
// running scenario: the simulator's VMs and resize requests, flexslurm's
// stored records, the Slurm model, the Compute call log, the deliveries
// and the Slurm commands flexslurm published. A Checker holds what the
// checks follow over time (continuous invariants with their grace periods,
// always watches, incremental scans of the call and command logs) and the
// results, in evaluation order. It reads the run; it never changes it.
package check

import (
	"context"
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/scenario/computefault"
	"github.com/flexslurm/flexslurm/dev/scenario/delivery"
	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/dev/scenario/slurmmodel"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Result is one assertion's outcome.
type Result struct {
	// At is the simulated time of the evaluation, from the start.
	At time.Duration
	// Step is the index of the step that asserted it; -1 for invariants and
	// final checks.
	Step int
	// Line is the line of the check in the file (0 if unknown).
	Line int
	// Name says what was checked.
	Name string
	Pass bool
	// Expected and Actual describe the expectation and what was found.
	Expected, Actual string
}

func (r Result) String() string {
	status := "PASS"
	if !r.Pass {
		status = "FAIL"
	}
	loc := ""
	if r.Line > 0 {
		loc = fmt.Sprintf(" (line %d)", r.Line)
	}
	s := fmt.Sprintf("%s  at %-9s %s%s", status, lang.FormatDuration(r.At), r.Name, loc)
	if r.Pass {
		return s + ": " + r.Actual
	}
	return s + fmt.Sprintf("\n        expected: %s\n        actual:   %s", r.Expected, r.Actual)
}

// Run is what the checks observe of a run: the parts a runner composes and
// what it records as it goes.
type Run struct {
	Ctx   context.Context
	Start time.Time
	Now   func() time.Time
	// Cluster is the spec in force at the start (SpecApplied follows later
	// ones).
	Cluster *spec.Cluster
	Sim     *computesim.Sim
	// Store holds flexslurm's records; Generation changes with every write
	// to it, so that one read serves every check until the next write.
	Store      store.Store
	Generation func() uint64
	// View, when set, reads Store without copying (store.Memory.View):
	// the checks only look at the records.
	View       func(ctx context.Context, scope store.Scope) (*model.State, error)
	Slurm      *slurmmodel.Model
	Compute    *computefault.Layer
	Deliveries *delivery.Queue
	// Commands are the Slurm commands flexslurm published so far (the
	// list only grows).
	Commands func() []slurmmodel.Command
	// ResizeRequestsSeen are the names of every resize request seen so far.
	ResizeRequestsSeen func() map[string]bool
	// Foreign are the VMs flexslurm does not own (initial.foreign_vms).
	Foreign func() []lang.ForeignVM
	// CapacityDelay is the simulator's capacity delay in force.
	CapacityDelay func(zone, machineType string) time.Duration
	Simulator     lang.Simulator
	Invariants    lang.Invariants
	// StopOnFailure stops the run at the first failure (Stopped).
	StopOnFailure bool
	// NoStateReuse reads the store afresh for every check.
	NoStateReuse bool
	// Note records a remark for the report.
	Note func(format string, args ...any)
}

// Checker evaluates the checks of one run.
type Checker struct {
	ctx           context.Context
	start         time.Time
	now           func() time.Time
	sim           *computesim.Sim
	store         store.Store
	view          func(ctx context.Context, scope store.Scope) (*model.State, error)
	gen           func() uint64
	slurm         *slurmmodel.Model
	compute       *computefault.Layer
	deliveries    *delivery.Queue
	commands      func() []slurmmodel.Command
	rrSeen        func() map[string]bool
	foreign       func() []lang.ForeignVM
	capacityDelay func(zone, machineType string) time.Duration
	simulator     lang.Simulator
	stopOnFailure bool
	noStateReuse  bool
	note          func(format string, args ...any)

	// spec is the spec in force; specAt when a step last applied one.
	spec   *spec.Cluster
	specAt time.Time

	results []Result
	stopped bool
	watches []*watchState
	inv     *invariantState
	arrived *arrivedCapacity // arrived_capacity_kept's VMs
	// foreignScanned counts the calls foreignTouched has scanned;
	// foreignCalls are the calls it found naming a foreign resource.
	foreignScanned int
	foreignCalls   []string
	// stateCache is the whole state as of store generation stateGen
	// (Checker.state).
	stateCache *model.State
	stateGen   uint64
	// world is vmView's view as of simulator version worldVersion.
	world        world
	worldVersion uint64
	worldOK      bool
	// oneRequest are one_request_per_node's violations as of simulator
	// version oneRequestVersion.
	oneRequest        []string
	oneRequestVersion uint64
	oneRequestOK      bool
	// resvScanned counts the Slurm commands foreignReservations has
	// scanned for resvPrefix; resvFound are the violations it found.
	resvPrefix  string
	resvScanned int
	resvFound   []string
	// flex are the spec's flex pools (spec.Cluster.FlexPools) of flexOf.
	flex   []spec.NodePool
	flexOf *spec.Cluster
}

// New is a Checker of run with no result yet.
func New(run Run) *Checker {
	return &Checker{ctx: run.Ctx, start: run.Start, now: run.Now, sim: run.Sim, store: run.Store, view: run.View, gen: run.Generation,
		slurm: run.Slurm, compute: run.Compute, deliveries: run.Deliveries, commands: run.Commands, rrSeen: run.ResizeRequestsSeen,
		foreign: run.Foreign, capacityDelay: run.CapacityDelay, simulator: run.Simulator, stopOnFailure: run.StopOnFailure,
		noStateReuse: run.NoStateReuse, note: run.Note, spec: run.Cluster, inv: newInvariantState(run.Invariants), arrived: newArrivedCapacity()}
}

// SpecApplied follows a spec a step applied at at.
func (r *Checker) SpecApplied(c *spec.Cluster, at time.Time) {
	r.spec, r.specAt = c, at
	r.flex, r.flexOf = nil, nil
}

// flexPools is r.spec.FlexPools(), kept until the spec changes: callers
// must not change it.
func (r *Checker) flexPools() []spec.NodePool {
	if r.flexOf != r.spec || r.noStateReuse {
		r.flex, r.flexOf = r.spec.FlexPools(), r.spec
	}
	return r.flex
}

// Results are every result so far, in evaluation order.
func (r *Checker) Results() []Result { return r.results }

// Stopped reports whether a failure stopped the run (StopOnFailure).
func (r *Checker) Stopped() bool { return r.stopped }

// VMs is what the simulator shows now: every VM, and each node's live VM of
// this cluster (the newest when there are several).
func (r *Checker) VMs() ([]computesim.Instance, map[string]slurmmodel.VM) {
	w := r.vmView()
	return w.all, w.byNode
}

func (r *Checker) since() time.Duration { return r.now().Sub(r.start) }

// Assert evaluates a step's checks now and records the results.
func (r *Checker) Assert(step int, checks []lang.Check) {
	for _, c := range checks {
		r.record(r.evaluate(c, step))
	}
}

// Watch starts an always watch of step at now and checks it at once.
func (r *Checker) Watch(step int, w lang.Watch) {
	now := r.now()
	ws := &watchState{step: step, name: w.Name, checks: w.Checks, from: now}
	if ws.name == "" {
		ws.name = fmt.Sprintf("always (step %d)", step)
	}
	switch {
	case w.Until != nil:
		ws.until = r.start.Add(w.Until.Offset)
	case w.For > 0:
		ws.until = now.Add(w.For.D())
	}
	r.watches = append(r.watches, ws)
	r.checkWatches()
}

// AfterEvent checks the watches and the continuous invariants after
// anything happened.
func (r *Checker) AfterEvent() {
	r.checkWatches()
	r.checkInvariants()
}

// Finish closes the watches and evaluates the invariants that held and the
// final checks at the end.
func (r *Checker) Finish(final []lang.Check) {
	for _, w := range r.watches {
		r.closeWatch(w)
	}
	r.record(r.finalInvariants())
	for _, c := range final {
		r.record(r.evaluate(c, -1))
	}
}

// record adds results; with StopOnFailure a failure stops the run.
func (r *Checker) record(res []Result) {
	for _, x := range res {
		r.results = append(r.results, x)
		if !x.Pass && r.stopOnFailure {
			r.stopped = true
		}
	}
}

type watchState struct {
	step   int
	name   string
	checks []lang.Check
	from   time.Time
	until  time.Time // zero: the end
	failed bool
	evals  int
	done   bool
}
