package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/scenario/check"
	"github.com/flexslurm/flexslurm/dev/scenario/computefault"
	"github.com/flexslurm/flexslurm/dev/scenario/delivery"
	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/dev/scenario/slurmmodel"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// DefaultStart is the simulated start time when a scenario sets none.
var DefaultStart = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// Delivery defaults (see package delivery).
const (
	DefaultMinBackoff  = delivery.DefaultMinBackoff
	DefaultMaxBackoff  = delivery.DefaultMaxBackoff
	DefaultMaxAttempts = delivery.DefaultMaxAttempts
)

// maxEventsPerInstant guards against a livelock at one simulated instant.
const maxEventsPerInstant = 20000

// RunOptions tunes a run.
type RunOptions struct {
	// Trace records the run's timeline in Report.Trace.
	Trace bool
	// Log receives the functions' and simulator's logs; nil discards them.
	Log io.Writer
	// StopOnFailure ends the run at the first failed assertion or
	// invariant (the report holds what ran).
	StopOnFailure bool
	// Loopback serves the simulator to flexslurm's Compute clients on a
	// loopback HTTP server, as `flexslurm local` does. By default the same
	// clients reach it in-process (computesim.InProcess): the same requests,
	// JSON and simulator code, without a socket, several times faster; and
	// the list calls of a reconcile pass that no fault acts on are answered
	// by the simulator's code without JSON (computesim.ListShortcut).
	Loopback bool
	// NoReuse is a debug mode for tests: every check reads the store (a
	// copy, as store.Read gives) and the simulator afresh, the simulator
	// evaluates every list call afresh (computesim.ListShortcut.NoReuse)
	// and the Slurm model sorts its nodes afresh, instead of reusing an
	// uncopied view, a VM view, a list answer, a sorted list or a result
	// until the store, the simulator or the model changes; a run's report
	// must be the same either way (TestStateReuseChangesNothing, and over
	// chaos seeds TestReuseChangesNothing in dev/chaos). It is slower.
	NoReuse bool
	// ComputeReadings, if set, replaces the file's simulator.compute_readings
	// (computesim.ParseReadings form: "lenient", "strict", or a comma
	// list): how the simulator behaves on each open point of Compute
	// behaviour (docs/compute-contract.md, "Open points").
	ComputeReadings string
}

// Run loads a scenario file and runs it. The error is for a file that does
// not load or a run that cannot proceed (a step that cannot be carried
// out); failed assertions are in the report.
func Run(ctx context.Context, path string) (Report, error) {
	f, err := Load(path)
	if err != nil {
		return Report{File: path}, err
	}
	return RunFile(ctx, f, RunOptions{})
}

// RunFile runs a loaded or generated scenario.
func RunFile(ctx context.Context, f *File, o RunOptions) (Report, error) {
	wall := time.Now()
	r, err := newRunner(ctx, f, o)
	if err != nil {
		return Report{File: f.Path(), Name: f.Name}, err
	}
	defer r.close()
	err = r.run()
	rep := r.report()
	rep.Wall = time.Since(wall)
	return rep, err
}

// runner plays one scenario: it composes the system under test (the
// harness: the four functions, the store, the simulator) with the parts
// that play the world around it — the Compute fault layer, the Pub/Sub
// deliveries, the Slurm model — and the checks, and moves them through
// time. Each part keeps its own state; the runner keeps what is its own:
// the event loop's clock and what the run recorded.
type runner struct {
	// The scenario.
	f     *File
	o     RunOptions
	ctx   context.Context
	spec  *spec.Cluster // the spec in force
	start time.Time
	end   time.Time

	// The system under test and the clients that reach the simulator.
	h      *harness.Harness
	store  *genStore        // the harness's store
	mem    *store.Memory    // what store wraps
	srv    *httptest.Server // flexslurm's Compute endpoint, through faults
	oobSrv *httptest.Server // out-of-band endpoint (the scenario's own calls)
	client *gce.Client
	oob    *gce.Client

	// The parts.
	compute    *computefault.Layer
	deliveries *delivery.Queue
	slurm      *slurmmodel.Model
	checks     *check.Checker

	// Capacity delays in force (read by the simulator).
	capMu    sync.Mutex
	capacity []CapacityDelay

	// What the run recorded.
	cmds               []slurmmodel.Command
	applied            map[string]bool // command ids the agent applied
	rrSeen             map[string]bool
	foreign            []ForeignVM
	rrStates, vmStates map[string]string // for the trace
	notes              []string
	trace              []string
	stats              Stats

	// The event loop.
	nextTick, nextSnapshot time.Time
	step                   int
	lastInstant            time.Time
	instantEvents          int
	// rrVersion is the simulator version (computesim.Sim.Version) whose
	// resize request history afterEvent last scanned, if rrScanned.
	rrVersion uint64
	rrScanned bool
	// horizon is the time the innermost runUntil runs to; late holds the
	// late_decision rule and pass (late.go).
	horizon time.Time
	late    lateDecisions
}

// genStore counts the writes to a store, so that a read can be reused
// until the next one (runner.state).
type genStore struct {
	store.Store
	gen atomic.Uint64
	// beforeUpdate, if set, is called before every transaction.
	beforeUpdate func(store.Scope)
}

func (g *genStore) Update(ctx context.Context, scope store.Scope, fn func(st *model.State) error) error {
	defer g.gen.Add(1)
	if g.beforeUpdate != nil {
		g.beforeUpdate(scope)
	}
	return g.Store.Update(ctx, scope, fn)
}

func (g *genStore) ForgetEvents(ctx context.Context, cluster string, before time.Time) (int, error) {
	defer g.gen.Add(1)
	return g.Store.ForgetEvents(ctx, cluster, before)
}

func newRunner(ctx context.Context, f *File, o RunOptions) (*runner, error) {
	c, err := f.Cluster.Load()
	if err != nil {
		return nil, err
	}
	if len(c.FlexPools()) == 0 {
		return nil, fmt.Errorf("cluster %s has no flex-start node pool", c.ID)
	}
	start := DefaultStart
	if f.Start != "" {
		if start, err = time.Parse(time.RFC3339, f.Start); err != nil {
			return nil, fmt.Errorf("start: %w", err)
		}
	}
	r := &runner{f: f, o: o, ctx: ctx, spec: c, start: start,
		rrSeen: map[string]bool{}, applied: map[string]bool{}, rrStates: map[string]string{}, vmStates: map[string]string{}, step: -1}
	r.capacity = append([]CapacityDelay(nil), f.Simulator.CapacityDelays...)
	r.compute = computefault.New()
	r.deliveries = delivery.New(f.Delivery, f.RandomFaults, start, r.tracef)

	r.mem = store.NewMemory(func() time.Time { return r.h.Clock.Now() })
	r.store = &genStore{Store: r.mem}
	if hasLateDecisions(f) {
		r.store.beforeUpdate = r.lateUpdate
	}
	var pol plan.Policy
	if err := f.Policy.ApplyTo(&pol); err != nil {
		return nil, err
	}
	readingsText := f.Simulator.ComputeReadings
	if o.ComputeReadings != "" {
		readingsText = o.ComputeReadings
	}
	readings, err := computesim.ParseReadings(readingsText)
	if err != nil {
		return nil, err
	}
	// flexslurm's Compute client reaches the simulator through the fault
	// layer; the harness's own client is left unused.
	r.client, err = r.computeClient(ctx, r.compute)
	if err != nil {
		return nil, fmt.Errorf("creating the Compute client: %w", err)
	}
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	r.client.SetLogger(slog.New(slog.NewTextHandler(logw, nil)))
	if readings.RefuseNamedRequestsOnV1 && readings.RefuseNamedRequestsOnBeta {
		// Compute names no VM of a resize request: flexslurm is set up
		// as flexslurm probe tells an operator to (resize_request_api
		// "count"): every node through a request of its own.
		if err := r.client.SetResizeRequestAPI(gce.ResizeRequestAPICount); err != nil {
			r.client.Close()
			r.srv.Close()
			return nil, err
		}
		pol.OneNodePerRequest = true
	}
	r.h, err = harness.New(ctx, harness.Options{
		Start: start,
		Sim: computesim.Options{
			Seed:           f.Simulator.Seed,
			CapacityDelay:  r.capacityDelay,
			AcceptDelay:    f.Simulator.AcceptDelay.D(),
			DeleteDelay:    f.Simulator.DeleteDelay.D(),
			RepairDelay:    f.Simulator.RepairDelay.D(),
			ExpiryLogStyle: f.Simulator.ExpiryLogStyle,
			Readings:       readings,
		},
		Policy:  pol,
		Log:     logw,
		Store:   r.store,
		Compute: r.functionsCompute,
		Fault:   r.deliveries.Fault,
	})
	if err != nil {
		r.client.Close()
		r.srv.Close()
		return nil, fmt.Errorf("starting the harness: %w", err)
	}
	r.compute.Attach(r.h.Clock.Now, r.h.Sim)
	if !r.o.Loopback {
		// List calls that no fault acts on skip the JSON round trip
		// (docs/chaos.md); the others go over HTTP as before.
		r.client.SetListShortcut(computesim.ListShortcut{Sim: r.h.Sim,
			Allow: r.compute.ShortcutAllows, Answered: r.compute.ShortcutAnswered, NoReuse: r.o.NoReuse})
	}
	r.oob, err = r.computeClient(ctx, r.h.Sim)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("creating the out-of-band Compute client: %w", err)
	}
	r.oob.SetLogger(slog.New(slog.NewTextHandler(logw, nil)))
	r.slurm = slurmmodel.New(f.Slurm, c, start, r.publishModel, r.tracef)
	if o.NoReuse {
		r.slurm.NoReuse()
	}
	r.checks = check.New(check.Run{Ctx: ctx, Start: start, Now: r.now, Cluster: c, Sim: r.h.Sim, Store: r.store, View: r.mem.View, Generation: r.store.gen.Load,
		Slurm: r.slurm, Compute: r.compute, Deliveries: r.deliveries, Commands: func() []slurmmodel.Command { return r.cmds },
		ResizeRequestsSeen: func() map[string]bool { return r.rrSeen }, Foreign: func() []ForeignVM { return r.foreign },
		CapacityDelay: r.capacityDelay, Simulator: f.Simulator, Invariants: f.Invariants, StopOnFailure: o.StopOnFailure,
		NoStateReuse: o.NoReuse, Note: r.note})
	times := f.StepTimes()
	end := time.Duration(0)
	if len(times) > 0 {
		end = times[len(times)-1]
		if s := f.Steps[len(f.Steps)-1]; s.Advance != nil {
			end += s.Advance.D()
		}
	}
	if f.End != nil {
		end = max(end, f.End.D())
	}
	r.end = start.Add(end)
	if e := f.Reconcile.Every.D(); e > 0 {
		r.nextTick = start.Add(e)
	}
	if e := f.Slurm.SnapshotEvery.D(); e > 0 {
		r.nextSnapshot = start.Add(e)
	}
	return r, nil
}

// computeClient is a Compute client served by h: over a loopback server
// (RunOptions.Loopback, closed by close) or in-process.
func (r *runner) computeClient(ctx context.Context, h http.Handler) (*gce.Client, error) {
	if !r.o.Loopback {
		return gce.New(ctx, harness.Project, option.WithEndpoint(computesim.InProcessEndpoint),
			option.WithHTTPClient(computesim.InProcessClient(h)))
	}
	srv := httptest.NewServer(h)
	c, err := gce.New(ctx, harness.Project, option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		srv.Close()
		return nil, err
	}
	if r.srv == nil {
		r.srv = srv
	} else {
		r.oobSrv = srv
	}
	return c, nil
}

func (r *runner) close() {
	if r.oob != nil {
		r.oob.Close()
	}
	if r.oobSrv != nil {
		r.oobSrv.Close()
	}
	if r.h != nil {
		r.h.Close()
	}
	if r.client != nil {
		r.client.Close()
	}
	if r.srv != nil {
		r.srv.Close()
	}
}

// capacityDelay is the simulator's CapacityDelay: the latest matching
// capacity step or simulator.capacity_delays entry, else capacity_delay.
func (r *runner) capacityDelay(zone, machineType string) time.Duration {
	r.capMu.Lock()
	defer r.capMu.Unlock()
	for i := len(r.capacity) - 1; i >= 0; i-- {
		c := r.capacity[i]
		if (c.Zone == "" || c.Zone == zone) && (c.MachineType == "" || c.MachineType == machineType) {
			return c.Delay.D()
		}
	}
	return r.f.Simulator.CapacityDelay.D()
}

func (r *runner) now() time.Time { return r.h.Clock.Now() }

// vmsByNode is each node's live VM now.
func (r *runner) vmsByNode() map[string]slurmmodel.VM {
	_, byNode := r.checks.VMs()
	return byNode
}

func (r *runner) since() time.Duration { return r.now().Sub(r.start) }

func (r *runner) tracef(format string, args ...any) {
	if !r.o.Trace {
		return
	}
	r.trace = append(r.trace, fmt.Sprintf("%-9s ", FormatDuration(r.since()))+fmt.Sprintf(format, args...))
}

func (r *runner) note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	for _, x := range r.notes {
		if x == n {
			return
		}
	}
	r.notes = append(r.notes, n)
}

// run plays the initial state, the steps and the tail up to the end.
func (r *runner) run() error {
	if err := r.initial(); err != nil {
		return err
	}
	times := r.f.StepTimes()
	for i := range r.f.Steps {
		if err := r.runUntil(r.start.Add(times[i])); err != nil {
			return err
		}
		if r.checks.Stopped() {
			return nil
		}
		r.step = i
		if err := r.exec(i, &r.f.Steps[i]); err != nil {
			line := ""
			if l := r.f.Steps[i].Line(); l > 0 {
				line = fmt.Sprintf(" (line %d)", l)
			}
			return fmt.Errorf("step %d%s at %s: %w", i, line, FormatDuration(times[i]), err)
		}
		if err := r.settle(); err != nil {
			return err
		}
		if r.checks.Stopped() {
			return nil
		}
	}
	r.step = -1
	if err := r.runUntil(r.end); err != nil {
		return err
	}
	// The last tick at the end may publish (a job the Slurm model starts
	// then reports it): what is due at the end is processed before the
	// final checks, as at any other instant, a bounded number of rounds.
	for i := 0; i < 10 && !r.checks.Stopped(); i++ {
		if next, kind := r.nextDue(); kind == dueNone || next.After(r.end) {
			break
		}
		if err := r.runUntil(r.end); err != nil {
			return err
		}
	}
	if r.checks.Stopped() {
		return nil
	}
	r.checks.Finish(r.f.Final)
	return nil
}

// initial applies the spec, preloads records and creates foreign VMs.
func (r *runner) initial() error {
	in := r.f.Initial
	if in.Apply {
		if err := r.publishApply(nil, nil, ""); err != nil {
			return err
		}
		if err := r.settle(); err != nil {
			return err
		}
	}
	if len(in.Nodes) > 0 || len(in.Jobs) > 0 {
		err := r.h.Store.Update(r.ctx, store.Scope{Cluster: r.spec.ID, AllPools: true}, func(st *model.State) error {
			for _, raw := range in.Nodes {
				var n model.Node
				if err := lang.StrictJSON(raw, &n); err != nil {
					return fmt.Errorf("initial node: %w", err)
				}
				st.Nodes[n.Name] = &n
			}
			for _, raw := range in.Jobs {
				var j model.Job
				if err := lang.StrictJSON(raw, &j); err != nil {
					return fmt.Errorf("initial job: %w", err)
				}
				st.Jobs[j.ID] = &j
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("preloading records: %w", err)
		}
	}
	for i, v := range in.ForeignVMs {
		if err := r.createForeign(i, v); err != nil {
			return fmt.Errorf("initial.foreign_vms[%d] %s: %w", i, v.Name, err)
		}
	}
	r.afterEvent()
	return nil
}

// createForeign creates a VM flexslurm does not own, through its own
// template, MIG and resize request, with capacity at once.
func (r *runner) createForeign(i int, v ForeignVM) error {
	p := r.spec.FlexPools()[0]
	zone := v.Zone
	if zone == "" {
		zone = p.Zone
	}
	mig := v.MIG
	if mig == "" {
		mig = "user-" + v.Name
		if len(mig) > 58 {
			mig = mig[:58]
		}
	}
	tmpl := fmt.Sprintf("user-tmpl-%d", i)
	ctx := r.ctx
	err := r.oob.EnsureInstanceTemplate(ctx, instancetemplate.Template{Name: tmpl, Description: "not flexslurm's", Properties: instancetemplate.Properties{
		MachineType: "n2-standard-8",
		Disks: []instancetemplate.Disk{{Boot: true, AutoDelete: true, Type: "PERSISTENT",
			InitializeParams: instancetemplate.InitializeParams{SourceImage: computesim.DebianImage}}},
		NetworkInterfaces: []instancetemplate.NetworkInterface{{Network: r.spec.Network.Network, Subnetwork: r.spec.Network.Subnetwork}},
		Scheduling:        instancetemplate.Scheduling{ProvisioningModel: "STANDARD"},
		Labels:            v.Labels,
	}}, "")
	if err != nil {
		return err
	}
	if err := r.oob.EnsureMIG(ctx, gce.MIGSpec{Zone: zone, Name: mig, Template: tmpl, BaseInstanceName: mig}, ""); err != nil {
		return err
	}
	r.capMu.Lock()
	r.capacity = append(r.capacity, CapacityDelay{Zone: zone, MachineType: "n2-standard-8", Delay: 0})
	r.capMu.Unlock()
	// The user's VM has the name the file gives it, whichever way the
	// simulator answers named requests: this is the file's set-up, not a
	// call of flexslurm's.
	err = r.h.Sim.AcceptNamedRequests(func() error {
		return r.oob.CreateResizeRequest(ctx, zone, mig, gce.ResizeRequestSpec{Name: "user-rr", Instances: []string{v.Name}}, "")
	})
	if err != nil {
		return err
	}
	r.h.Sim.Tick(r.now())
	r.collectAudit()
	for _, vm := range r.h.Sim.Instances() {
		if vm.Name == v.Name && vm.Zone == zone {
			v.Zone, v.MIG = zone, mig
			r.foreign = append(r.foreign, v)
			return nil
		}
	}
	return fmt.Errorf("the simulator did not create it")
}

// --- the event loop ---

type dueKind int

const (
	dueNone dueKind = iota
	dueSim
	dueDelivery
	dueTick
	dueSnapshot
	dueSlurm
)

func (r *runner) nextDue() (time.Time, dueKind) {
	var best time.Time
	kind := dueNone
	consider := func(t time.Time, k dueKind) {
		if kind == dueNone || t.Before(best) {
			best, kind = t, k
		}
	}
	if t, ok := r.h.Sim.NextDue(); ok {
		consider(t, dueSim)
	}
	if t, ok := r.deliveries.Next(); ok {
		consider(t, dueDelivery)
	}
	if !r.nextTick.IsZero() {
		consider(r.nextTick, dueTick)
	}
	if !r.nextSnapshot.IsZero() {
		consider(r.nextSnapshot, dueSnapshot)
	}
	if t, ok := r.slurm.NextDue(r.now(), r.vmsByNode()); ok {
		consider(t, dueSlurm)
	}
	return best, kind
}

// runUntil processes everything due up to t, in time order, and leaves the
// clock at t.
func (r *runner) runUntil(t time.Time) error {
	prev := r.horizon
	r.horizon = t
	defer func() { r.horizon = prev }()
	for !r.checks.Stopped() {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		next, kind := r.nextDue()
		if kind == dueNone || next.After(t) {
			break
		}
		if err := r.process(next, kind); err != nil {
			return err
		}
	}
	if r.checks.Stopped() {
		return nil
	}
	r.h.Clock.Set(t)
	r.h.Sim.Tick(t)
	r.collectAudit()
	r.afterEvent()
	return nil
}

// settle processes what is due now (messages a step published).
func (r *runner) settle() error { return r.runUntil(r.now()) }

func (r *runner) process(at time.Time, kind dueKind) error {
	if at.Before(r.now()) {
		at = r.now()
	}
	if at.Equal(r.lastInstant) {
		r.instantEvents++
		if r.instantEvents > maxEventsPerInstant {
			return fmt.Errorf("more than %d events at %s: the run does not progress (a delivery or transition keeps recurring)", maxEventsPerInstant, FormatDuration(at.Sub(r.start)))
		}
	} else {
		r.lastInstant, r.instantEvents = at, 0
	}
	r.stats.Events++
	r.h.Clock.Set(at)
	switch kind {
	case dueSim:
		r.h.Sim.Tick(at)
		r.collectAudit()
	case dueDelivery:
		r.deliveries.DeliverNext(at, func(topic, id string, data []byte) error {
			return r.h.Deliver(r.ctx, topic, id, data)
		})
		if err := r.late.err; err != nil {
			r.late.err = nil
			return err
		}
	case dueTick:
		r.nextTick = r.nextTick.Add(r.f.Reconcile.Every.D())
		r.publishTick("", nil, "")
	case dueSnapshot:
		r.nextSnapshot = r.nextSnapshot.Add(r.f.Slurm.SnapshotEvery.D())
		r.publishSnapshot(nil, "")
	case dueSlurm:
	}
	r.afterEvent()
	return nil
}

// afterEvent runs after anything happened: Slurm commands are applied by
// the agent, the Slurm model reacts, and watches and invariants are checked.
func (r *runner) afterEvent() {
	// Deletions flexslurm asked for write their audit entries during its
	// calls: they are published as soon as the call returns.
	r.collectAudit()
	r.collectCommands()
	all, byNode := r.checks.VMs()
	r.slurm.Update(r.now(), byNode)
	r.collectCommands()
	// The history changes only with the simulator's state
	// (computesim.Sim.Version).
	if v := r.h.Sim.Version(); !r.rrScanned || v != r.rrVersion || r.o.NoReuse {
		for _, rr := range r.h.Sim.ResizeRequestHistory() {
			r.rrSeen[rr.Name] = true
			if r.o.Trace && r.rrStates[rr.Name] != rr.State {
				r.tracef("resize request %s %s (%s)", rr.Name, rr.State, strings.Join(rr.Instances, ","))
				r.rrStates[rr.Name] = rr.State
			}
		}
		r.rrVersion, r.rrScanned = v, true
	}
	if r.o.Trace {
		now := map[string]string{}
		for _, vm := range all {
			now[vm.Name] = vm.Status
			if r.vmStates[vm.Name] != vm.Status {
				r.tracef("VM %s %s", vm.Name, vm.Status)
			}
		}
		for _, name := range sortedKeys(r.vmStates) {
			if _, ok := now[name]; !ok {
				r.tracef("VM %s gone", name)
			}
		}
		r.vmStates = now
	}
	r.checks.AfterEvent()
}

// collectAudit turns the audit entries the simulator wrote into
// instance-expiry messages.
func (r *runner) collectAudit() {
	for _, m := range r.h.TakeAudit() {
		msg := &delivery.Message{ID: m.ID, Topic: config.TopicExpiry, Data: m.Data, Type: "audit"}
		method, first := "", false
		if a, err := event.DecodeAudit(m.Data); err == nil {
			msg.VM = a.Instance
			method, first = a.Method, a.First
			if node, _, _, _, ok := naming.ParseVMName(a.Instance); ok {
				msg.Nodes = []string{node}
			}
		}
		msg.Ident = fmt.Sprintf("audit|%s|%s|%t", msg.VM, method, first)
		r.deliveries.Publish(msg, r.now(), nil, "")
	}
}

// collectCommands records the Slurm commands flexslurm published and hands
// them to the Slurm model.
func (r *runner) collectCommands() {
	for _, m := range r.h.Publisher.Take(config.TopicSlurmCommands) {
		var c event.SlurmCommand
		_ = json.Unmarshal(m.Data, &c)
		var raw map[string]any
		_ = json.Unmarshal(m.Data, &raw)
		rec := slurmmodel.Command{At: r.now(), ID: c.ID, Command: c.Command, Nodes: c.Nodes, Job: c.JobID, Reason: c.Reason, Raw: raw}
		r.cmds = append(r.cmds, rec)
		r.stats.SlurmCommands++
		target := strings.Join(c.Nodes, ",")
		if c.JobID != "" {
			target = "job " + c.JobID
		}
		r.tracef("slurm command %s %s (%s)", c.Command, target, c.Reason)
		if r.applied[c.ID] {
			continue // the agent applies each command id once
		}
		r.applied[c.ID] = true
		if !r.slurm.Apply(r.now(), rec) {
			r.note("the Slurm model does not know command %q: Slurm state unchanged", c.Command)
		}
	}
}

// --- publishing and delivery ---

func (r *runner) newMessage(topic string, payload any) (*delivery.Message, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encoding %s payload: %w", topic, err)
	}
	return r.message(topic, data, payload), nil
}

// message is a new message of payload encoded as data.
func (r *runner) message(topic string, data []byte, payload any) *delivery.Message {
	m := &delivery.Message{ID: r.h.NewID(), Topic: topic, Data: data}
	switch p := payload.(type) {
	case event.Job:
		m.Type, m.Job, m.Nodes = p.Type, p.JobID, p.Nodes
		m.Ident = fmt.Sprintf("%s|%s|%s|%s", topic, p.Type, p.JobID, strings.Join(p.Nodes, ","))
	case event.Health:
		m.Type, m.Job, m.Nodes = p.Type, p.JobID, []string{p.Node}
		m.Ident = fmt.Sprintf("%s|%s|%s", topic, p.Type, p.Node)
	case event.Node:
		m.Type, m.Nodes = p.Type, p.Nodes
		m.Ident = fmt.Sprintf("%s|%s|%s", topic, p.Type, strings.Join(p.Nodes, ","))
	case event.Cluster:
		m.Type = p.Type
		m.Ident = topic + "|" + p.Type
	case event.Tick:
		m.Type = event.TypeReconcileTick
		m.Ident = fmt.Sprintf("%s|%s", topic, FormatDuration(r.since()))
	case event.SlurmSnapshot:
		m.Type = p.Type
		m.Ident = fmt.Sprintf("%s|%s", topic, FormatDuration(r.since()))
	}
	return m
}

// publish sends a payload as a new message with the step's faults.
func (r *runner) publish(topic string, payload any, faults *DeliveryFaults, label string) error {
	m, err := r.newMessage(topic, payload)
	if err != nil {
		return err
	}
	r.deliveries.Publish(m, r.now(), faults, label)
	return nil
}

// publishModel publishes an event of the Slurm model (a hook or the agent).
func (r *runner) publishModel(topic string, payload any) {
	if err := r.publish(topic, payload, nil, ""); err != nil {
		r.note("Slurm model: %v", err)
	}
}

// --- steps ---

func (r *runner) exec(i int, s *Step) error {
	now := r.now()
	switch {
	case s.Apply != nil:
		return r.publishApply(s.Apply.Cluster, s.Delivery, s.Label)
	case s.Job != nil:
		j := s.Job
		ev := event.Job{Header: r.header(j.EventType()), JobID: j.ID, Partition: j.Partition, NodeCount: j.Count,
			Nodes: j.Nodes, Requeued: j.Requeued, NodesUp: j.NodesUp, TimeLimitSeconds: int64(j.TimeLimit.D() / time.Second), ReportedAt: now}
		if j.ReportedAt != nil {
			ev.ReportedAt = r.start.Add(j.ReportedAt.Offset)
		}
		return r.publish(config.TopicJobs, ev, s.Delivery, s.Label)
	case s.Health != nil:
		return r.publishHealth(s)
	case s.Power != nil:
		ev := event.Node{Header: r.header(s.Power.EventType()), Nodes: s.Power.Nodes, Reason: s.Power.Reason, ReportedAt: now}
		return r.publish(config.TopicJobs, ev, s.Delivery, s.Label)
	case s.Snapshot != nil:
		for _, n := range s.Snapshot.Nodes {
			if err := r.slurm.SetNode(now, n); err != nil {
				return err
			}
		}
		if s.Snapshot.Jobs != nil || !r.f.Slurm.Simulate {
			r.slurm.SetJobs(s.Snapshot.Jobs)
		}
		r.publishSnapshot(s.Delivery, s.Label)
		return nil
	case s.Tick != nil:
		r.publishTick(s.Tick.Cluster, s.Delivery, s.Label)
		return nil
	case s.Advance != nil:
		return r.runUntil(now.Add(s.Advance.D()))
	case s.Expire != nil:
		vm, err := r.resolveVM(*s.Expire)
		if err != nil {
			if s.Expire.Optional {
				r.tracef("expire: %v: skipped", err)
				return nil
			}
			return err
		}
		if err := r.h.Sim.ExpireNow(vm.zone, vm.name); err != nil {
			return err
		}
		r.tracef("expire %s now", vm.name)
		r.collectAudit()
		return nil
	case s.DeleteVM != nil:
		vm, err := r.resolveVM(*s.DeleteVM)
		if err != nil {
			if s.DeleteVM.Optional {
				r.tracef("delete_vm: %v: skipped", err)
				return nil
			}
			return err
		}
		return r.deleteVMOutOfBand(vm)
	case s.DeleteMIG != nil:
		p, ok := r.spec.Pool(s.DeleteMIG.Pool)
		if !ok {
			return fmt.Errorf("delete_mig: no pool %q", s.DeleteMIG.Pool)
		}
		// Every MIG of the pool: the MIG of each resize request, and the
		// pool's MIG of the layout before one MIG per request.
		migs, err := r.oob.ListMIGs(r.ctx, p.Zone, naming.MIG(r.spec.ID, p.ID))
		if err != nil {
			return fmt.Errorf("delete_mig: listing the MIGs of pool %s: %w", p.ID, err)
		}
		for _, m := range migs {
			if _, ok := naming.IsRequestMIG(r.spec.ID, p.ID, m.Name, m.Description); !ok && m.Name != naming.MIG(r.spec.ID, p.ID) {
				continue
			}
			r.tracef("delete MIG %s out of band", m.Name)
			if err := r.oob.DeleteMIG(r.ctx, p.Zone, m.Name, ""); err != nil {
				return fmt.Errorf("delete_mig %s: %w", m.Name, err)
			}
		}
		r.collectAudit()
		return nil
	case s.FailResizeRequest != nil:
		return r.failResizeRequests(*s.FailResizeRequest)
	case s.Capacity != nil:
		r.capMu.Lock()
		r.capacity = append(r.capacity, *s.Capacity)
		r.capMu.Unlock()
		r.tracef("capacity delay %s/%s now %s", orAny(s.Capacity.Zone), orAny(s.Capacity.MachineType), FormatDuration(s.Capacity.Delay.D()))
		return nil
	case s.Submit != nil:
		r.tracef("submit job %s (%d nodes, %s)", s.Submit.ID, s.Submit.Nodes, FormatDuration(s.Submit.Runtime.D()))
		return r.slurm.Submit(now, *s.Submit)
	case s.Cancel != nil:
		r.tracef("scancel %s", s.Cancel.ID)
		r.slurm.Cancel(now, s.Cancel.ID)
		return nil
	case s.Deliveries != nil:
		r.deliveries.AddRule(*s.Deliveries, now)
		return nil
	case s.Duplicate != nil:
		return r.deliveries.Duplicate(*s.Duplicate, now)
	case s.Release != nil:
		r.deliveries.Release(*s.Release, now)
		return nil
	case s.Crash != nil:
		r.deliveries.AddCrash(*s.Crash)
		return nil
	case s.ComputeError != nil:
		r.compute.AddError(i, *s.ComputeError, r.start, now)
		return nil
	case s.ListOmit != nil:
		r.tracef("%s", r.compute.AddListOmit(i, *s.ListOmit, r.start, now))
		return nil
	case s.Shortage != nil:
		sh := *s.Shortage
		cs := computesim.Shortage{Name: sh.Name, Zone: sh.Zone, MachineType: sh.MachineType, Code: sh.Code, Message: sh.Message,
			Metric: sh.Metric, Limit: sh.Limit}
		if cs.Name == "" {
			cs.Name = fmt.Sprintf("shortage-%d", i)
		}
		switch {
		case sh.Until != nil:
			cs.Until = r.start.Add(sh.Until.Offset)
		case sh.For > 0:
			cs.Until = now.Add(sh.For.D())
		}
		until := "the end"
		if !cs.Until.IsZero() {
			until = FormatDuration(cs.Until.Sub(r.start))
		}
		r.tracef("shortage %s (%s) in %s/%s until %s", cs.Name, orAny(cs.Code), orAny(cs.Zone), orAny(cs.MachineType), until)
		r.compute.AddShortage(cs.Until)
		r.h.Sim.SetShortage(cs)
		return nil
	case s.LateDecision != nil:
		r.setLateDecision(*s.LateDecision)
		return nil
	case len(s.Assert) > 0:
		r.checks.Assert(i, s.Assert)
		return nil
	case s.Always != nil:
		r.checks.Watch(i, *s.Always)
		return nil
	}
	return errors.New("step has no action")
}

func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func (r *runner) header(typ string) event.Header {
	return event.Header{Version: event.SchemaVersion, Type: typ, Cluster: r.spec.ID}
}

func (r *runner) publishApply(ref *ClusterRef, faults *DeliveryFaults, label string) error {
	c := r.spec
	if ref != nil {
		var err error
		if c, err = ref.Load(); err != nil {
			return err
		}
	}
	eff, err := c.EffectiveJSON()
	if err != nil {
		return err
	}
	if ref != nil && c.ID == r.spec.ID {
		// The operator regenerates slurm.conf from the spec applied: the
		// Slurm model's nodes follow it.
		r.spec = c
		r.checks.SpecApplied(c, r.now())
		r.slurm.Reconfigure(r.now(), c)
	}
	node := harness.NodeSettings(c)
	return r.publish(config.TopicClusterSpec, event.Cluster{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeClusterApply, Cluster: c.ID},
		Spec: eff, Node: &node, AppliedAt: r.now()}, faults, label)
}

func (r *runner) publishTick(cluster string, faults *DeliveryFaults, label string) {
	tick := event.Tick{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeReconcileTick, Cluster: cluster}}
	if err := r.publish(config.TopicReconcile, tick, faults, label); err != nil {
		r.note("tick: %v", err)
	}
}

func (r *runner) publishSnapshot(faults *DeliveryFaults, label string) {
	// The snapshot's encoding keeps its nodes' entries encoded
	// (slurmmodel.Model.SnapshotJSON); the message is the one publish
	// makes of Snapshot.
	data, err := r.slurm.SnapshotJSON(r.now())
	if err != nil {
		r.note("snapshot: encoding %s payload: %v", config.TopicSlurmSnapshot, err)
		return
	}
	head := event.SlurmSnapshot{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeSlurmSnapshot}}
	r.deliveries.Publish(r.message(config.TopicSlurmSnapshot, data, head), r.now(), faults, label)
}

func (r *runner) publishHealth(s *Step) error {
	h := s.Health
	reasons := h.Reasons
	if len(reasons) == 0 {
		reasons = []string{"GPU 0: uncorrectable ECC errors"}
	}
	verdict := h.Verdict
	if verdict == "" {
		verdict = event.VerdictFail
	}
	ev := event.Health{Header: r.header(event.TypeHealthFailure), Node: h.Node, Generation: h.Generation, VMName: h.VM,
		JobID: h.Job, JobState: h.JobState, Verdict: verdict, Reasons: reasons, CheckedAt: r.now()}
	if h.Drained != nil {
		ev.Drained = *h.Drained
	}
	if r.f.Slurm.Simulate {
		vm, up := r.vmsByNode()[h.Node]
		if !up && h.VM == "" && h.Generation == 0 {
			// The hooks run on the node: without a VM there is no check.
			r.tracef("health: node %s has no VM to check: skipped", h.Node)
			return nil
		}
		vmName := h.VM
		if vmName == "" && up {
			vmName = vm.Name
		}
		if verdict == event.VerdictFail {
			// The hook drains the node, then asks Slurm whether it is
			// drained (no job left).
			job, state := r.slurm.HealthFailure(r.now(), h.Node, reasons[0], vmName)
			if ev.JobID == "" && ev.JobState == "" {
				ev.JobID, ev.JobState = job, state
			}
			if h.Drained == nil {
				ev.Drained = r.slurm.DrainComplete(h.Node)
			}
		}
		if ev.VMName == "" && ev.Generation == 0 && up {
			ev.VMName = vm.Name
		}
	}
	return r.publish(config.TopicHealthFailure, ev, s.Delivery, s.Label)
}

type resolvedVM struct{ zone, name string }

// resolveVM finds a VM by name, or a node's live VM.
func (r *runner) resolveVM(ref VMRef) (resolvedVM, error) {
	if ref.VM != "" {
		for _, vm := range r.h.Sim.Instances() {
			if vm.Name == ref.VM {
				return resolvedVM{vm.Zone, vm.Name}, nil
			}
		}
		return resolvedVM{}, fmt.Errorf("no VM named %s", ref.VM)
	}
	if vm, ok := r.vmsByNode()[ref.Node]; ok {
		return resolvedVM{vm.Zone, vm.Name}, nil
	}
	return resolvedVM{}, fmt.Errorf("node %s has no live VM", ref.Node)
}

// deleteVMOutOfBand deletes a VM with instances.delete, as an operator
// would.
func (r *runner) deleteVMOutOfBand(vm resolvedVM) error {
	req := httptest.NewRequest(http.MethodDelete, "/compute/v1/projects/"+harness.Project+"/zones/"+vm.zone+"/instances/"+vm.name, nil)
	w := httptest.NewRecorder()
	r.h.Sim.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		return fmt.Errorf("delete_vm %s: HTTP %d: %s", vm.name, w.Code, strings.TrimSpace(w.Body.String()))
	}
	r.tracef("delete VM %s out of band", vm.name)
	r.collectAudit()
	return nil
}

func (r *runner) failResizeRequests(s FailResizeRequestStep) error {
	code := s.Code
	if code == "" {
		code = "ZONE_RESOURCE_POOL_EXHAUSTED"
	}
	msg := s.Message
	if msg == "" {
		msg = "The zone does not have enough resources available to fulfill the request (scenario)."
	}
	var re *regexp.Regexp
	if s.Match != "" {
		re = regexp.MustCompile(s.Match)
	}
	n := 0
	for _, rr := range r.h.Sim.ResizeRequests() {
		if rr.State != "CREATING" && rr.State != "ACCEPTED" {
			continue
		}
		if s.Name != "" && rr.Name != s.Name {
			continue
		}
		if re != nil && !re.MatchString(rr.Name) {
			continue
		}
		if s.Node != "" && !check.NamesNode(rr.Instances, s.Node) {
			continue
		}
		if err := r.h.Sim.FailResizeRequest(rr.Zone, rr.MIG, rr.Name, code, msg); err != nil {
			return err
		}
		r.tracef("resize request %s FAILED (%s)", rr.Name, code)
		n++
	}
	if n == 0 {
		return fmt.Errorf("fail_resize_request: no active resize request matches")
	}
	return nil
}

func (r *runner) report() Report {
	rep := Report{File: r.f.Path(), Name: r.f.Name, Results: r.checks.Results(), DeadLetters: r.deliveries.DeadLetters(), Notes: r.notes,
		Simulated: r.since(), Stats: r.stats, Trace: r.trace, Unsettled: r.deliveries.Unsettled()}
	c := r.deliveries.Counts()
	rep.Stats.Deliveries, rep.Stats.Acks, rep.Stats.Nacks, rep.Stats.Redeliveries = c.Deliveries, c.Acks, c.Nacks, c.Redeliveries
	rep.Stats.Duplicates, rep.Stats.DeadLetters, rep.Stats.Crashes = c.Duplicates, c.DeadLetters, c.Crashes
	rep.Stats.ComputeCalls = len(r.compute.Calls())
	rep.Stats.InjectedErrors = r.compute.InjectedErrors()
	return rep
}
