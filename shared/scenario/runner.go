package scenario

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/computesim"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/harness"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// DefaultStart is the simulated start time when a scenario sets none.
var DefaultStart = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// Delivery defaults (a push subscription's retry policy: 10 s to 600 s; the
// dead-letter policy's default of 5 attempts).
const (
	DefaultMinBackoff  = 10 * time.Second
	DefaultMaxBackoff  = 10 * time.Minute
	DefaultMaxAttempts = 5
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
	// JSON and simulator code, without a socket, several times faster.
	Loopback bool
	// noStateReuse makes every check read the store afresh (tests check
	// that reusing a read until the next write changes no outcome).
	noStateReuse bool
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
		return Report{File: f.path, Name: f.Name}, err
	}
	defer r.close()
	err = r.run()
	rep := r.report()
	rep.Wall = time.Since(wall)
	return rep, err
}

// message is one Pub/Sub message.
type message struct {
	seq      int
	id       string
	topic    string
	data     []byte
	typ      string // payload type, or "audit" for Compute audit entries
	vm       string // audit entries: the instance
	nodes    []string
	job      string
	ident    string // stable identity for random faults
	label    string
	crash    []string // crash points by attempt
	dups     []Duration
	attempts int
	acked    bool
	dead     bool
	lastErr  string
	// published is when the message was published.
	published time.Time
}

func (m *message) describe() string {
	d := m.typ
	if m.job != "" {
		d += " job " + m.job
	}
	if m.vm != "" {
		d += " " + m.vm
	}
	if len(m.nodes) > 0 {
		d += " " + strings.Join(m.nodes, ",")
	}
	return d
}

type deliveryKind int

const (
	firstDelivery deliveryKind = iota
	retryDelivery
	duplicateDelivery
)

func (k deliveryKind) String() string {
	switch k {
	case retryDelivery:
		return "redeliver"
	case duplicateDelivery:
		return "duplicate"
	}
	return "deliver"
}

type delivery struct {
	due  time.Time
	seq  int
	msg  *message
	kind deliveryKind
}

type deliveryHeap []*delivery

func (h deliveryHeap) Len() int { return len(h) }
func (h deliveryHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h deliveryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *deliveryHeap) Push(x any)   { *h = append(*h, x.(*delivery)) }
func (h *deliveryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// deliveryRecord is one delivery attempt, for counters.
type deliveryRecord struct {
	at      time.Time
	topic   string
	typ     string
	label   string
	kind    deliveryKind
	outcome string // ack, nack, crash
}

type ruleState struct {
	DeliveryRule
	vm        *regexp.Regexp
	remaining int // < 0: unlimited
	until     time.Time
}

type crashState struct {
	CrashStep
	point     crashPoint
	remaining int
}

// slurmCommandRecord is one Slurm command flexslurm published.
type slurmCommandRecord struct {
	At      time.Time
	ID      string
	Command event.SlurmOp
	Nodes   []string
	Job     string
	Reason  string
	Raw     map[string]any
}

type watchState struct {
	step   int
	name   string
	checks []Check
	from   time.Time
	until  time.Time // zero: the end
	failed bool
	evals  int
	done   bool
}

// runner plays one scenario.
type runner struct {
	f     *File
	o     RunOptions
	ctx   context.Context
	spec  *spec.Cluster
	start time.Time
	end   time.Time

	h       *harness.Harness
	srv     *httptest.Server // flexslurm's Compute endpoint, through faults
	oobSrv  *httptest.Server // out-of-band endpoint (the scenario's own calls)
	client  *gce.Client
	oob     *gce.Client
	compute *computeFaults
	// specAt is when the spec in force was last applied by a step.
	specAt time.Time

	capMu    sync.Mutex
	capacity []CapacityDelay

	queue   deliveryHeap
	seq     int
	msgs    []*message
	holds   map[string][]*message
	idents  map[string]int
	rules   []*ruleState
	crashes []*crashState
	crash   *crashPlan
	dlog    []deliveryRecord
	dead    []DeadLetter

	cmds    []slurmCommandRecord
	applied map[string]bool // command ids the agent applied

	rrStates, vmStates map[string]string // for the trace
	rrSeen             map[string]bool
	slurm              *slurmModel
	watches            []*watchState
	inv                *invariantState
	foreign            []ForeignVM
	// foreignScanned counts the calls foreignTouched has scanned;
	// foreignCalls are the calls it found naming a foreign resource.
	foreignScanned int
	foreignCalls   []string
	// store is the harness's store; stateCache is the whole state as of
	// store generation stateGen (runner.state).
	store      *genStore
	stateCache *model.State
	stateGen   uint64
	// resvScanned counts the Slurm commands foreignReservations has
	// scanned for resvPrefix; resvFound are the violations it found.
	resvPrefix  string
	resvScanned int
	resvFound   []string

	nextTick, nextSnapshot time.Time
	step                   int
	results                []Result
	notes                  []string
	trace                  []string
	stats                  Stats
	stopped                bool
	lastInstant            time.Time
	instantEvents          int
}

// genStore counts the writes to a store, so that a read can be reused
// until the next one (runner.state).
type genStore struct {
	store.Store
	gen atomic.Uint64
}

func (g *genStore) Update(ctx context.Context, scope store.Scope, fn func(st *model.State) error) error {
	defer g.gen.Add(1)
	return g.Store.Update(ctx, scope, fn)
}

func (g *genStore) ForgetEvents(ctx context.Context, cluster string, before time.Time) (int, error) {
	defer g.gen.Add(1)
	return g.Store.ForgetEvents(ctx, cluster, before)
}

// forward is an http.Handler whose target is set once the simulator exists.
type forward struct{ compute *computeFaults }

func (f *forward) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.compute.ServeHTTP(w, r) }

func newRunner(ctx context.Context, f *File, o RunOptions) (*runner, error) {
	c, err := f.Cluster.load()
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
	r := &runner{f: f, o: o, ctx: ctx, spec: c, start: start, holds: map[string][]*message{}, idents: map[string]int{},
		rrSeen: map[string]bool{}, applied: map[string]bool{}, rrStates: map[string]string{}, vmStates: map[string]string{}, step: -1}
	r.capacity = append([]CapacityDelay(nil), f.Simulator.CapacityDelays...)
	r.compute = &computeFaults{rids: map[string]time.Time{}}

	r.store = &genStore{Store: store.NewMemory(func() time.Time { return r.h.Clock.Now() })}
	var pol plan.Policy
	if err := f.Policy.ApplyTo(&pol); err != nil {
		return nil, err
	}
	// flexslurm's Compute client reaches the simulator through the fault
	// layer; the harness's own client is left unused.
	r.client, err = r.computeClient(ctx, &forward{compute: r.compute})
	if err != nil {
		return nil, fmt.Errorf("creating the Compute client: %w", err)
	}
	logw := o.Log
	if logw == nil {
		logw = io.Discard
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
		},
		Policy:  pol,
		Log:     logw,
		Store:   r.store,
		Compute: func(apply.Compute) apply.Compute { return r.client },
		Fault:   r.fault,
	})
	if err != nil {
		r.client.Close()
		r.srv.Close()
		return nil, fmt.Errorf("starting the harness: %w", err)
	}
	r.compute.now = r.h.Clock.Now
	r.compute.sim = r.h.Sim
	next := http.Handler(r.h.Sim)
	r.compute.next.Store(&next)
	r.oob, err = r.computeClient(ctx, r.h.Sim)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("creating the out-of-band Compute client: %w", err)
	}
	r.slurm = newSlurmModel(f.Slurm, c, start, r.publishModel, r.tracef)
	r.inv = newInvariantState(f.Invariants)
	times := f.stepTimes()
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
	times := r.f.stepTimes()
	for i := range r.f.Steps {
		if err := r.runUntil(r.start.Add(times[i])); err != nil {
			return err
		}
		if r.stopped {
			return nil
		}
		r.step = i
		if err := r.exec(i, &r.f.Steps[i]); err != nil {
			line := ""
			if l := r.f.Steps[i].line; l > 0 {
				line = fmt.Sprintf(" (line %d)", l)
			}
			return fmt.Errorf("step %d%s at %s: %w", i, line, FormatDuration(times[i]), err)
		}
		if err := r.settle(); err != nil {
			return err
		}
		if r.stopped {
			return nil
		}
	}
	r.step = -1
	if err := r.runUntil(r.end); err != nil {
		return err
	}
	if r.stopped {
		return nil
	}
	r.finish()
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
				if err := strictJSON(raw, &n); err != nil {
					return fmt.Errorf("initial node: %w", err)
				}
				st.Nodes[n.Name] = &n
			}
			for _, raw := range in.Jobs {
				var j model.Job
				if err := strictJSON(raw, &j); err != nil {
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
	if err := r.oob.CreateResizeRequest(ctx, zone, mig, gce.ResizeRequestSpec{Name: "user-rr", Instances: []string{v.Name}}, ""); err != nil {
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
	if len(r.queue) > 0 {
		consider(r.queue[0].due, dueDelivery)
	}
	if !r.nextTick.IsZero() {
		consider(r.nextTick, dueTick)
	}
	if !r.nextSnapshot.IsZero() {
		consider(r.nextSnapshot, dueSnapshot)
	}
	if t, ok := r.slurm.nextDue(r.now(), r.vmView().byNode); ok {
		consider(t, dueSlurm)
	}
	return best, kind
}

// runUntil processes everything due up to t, in time order, and leaves the
// clock at t.
func (r *runner) runUntil(t time.Time) error {
	for !r.stopped {
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
	if r.stopped {
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
		d := heap.Pop(&r.queue).(*delivery)
		r.deliver(d)
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
	w := r.vmView()
	r.slurm.update(r.now(), w.byNode)
	r.collectCommands()
	for _, rr := range r.h.Sim.ResizeRequestHistory() {
		r.rrSeen[rr.Name] = true
		if r.o.Trace && r.rrStates[rr.Name] != rr.State {
			r.tracef("resize request %s %s (%s)", rr.Name, rr.State, strings.Join(rr.Instances, ","))
			r.rrStates[rr.Name] = rr.State
		}
	}
	if r.o.Trace {
		now := map[string]string{}
		for _, vm := range w.all {
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
	r.checkWatches()
	r.checkInvariants()
}

// collectAudit turns the audit entries the simulator wrote into
// instance-expiry messages.
func (r *runner) collectAudit() {
	for _, m := range r.h.TakeAudit() {
		msg := &message{id: m.ID, topic: config.TopicExpiry, data: m.Data, typ: "audit"}
		method, first := "", false
		if a, err := event.DecodeAudit(m.Data); err == nil {
			msg.vm = a.Instance
			method, first = a.Method, a.First
			if node, _, _, _, ok := naming.ParseVMName(a.Instance); ok {
				msg.nodes = []string{node}
			}
		}
		msg.ident = fmt.Sprintf("audit|%s|%s|%t", msg.vm, method, first)
		r.enqueue(msg, nil, "")
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
		rec := slurmCommandRecord{At: r.now(), ID: c.ID, Command: c.Command, Nodes: c.Nodes, Job: c.JobID, Reason: c.Reason, Raw: raw}
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
		if !r.slurm.command(r.now(), rec) {
			r.note("the Slurm model does not know command %q: Slurm state unchanged", c.Command)
		}
	}
}

// --- publishing and delivery ---

func (r *runner) newMessage(topic string, payload any) (*message, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encoding %s payload: %w", topic, err)
	}
	m := &message{id: r.h.NewID(), topic: topic, data: data}
	switch p := payload.(type) {
	case event.Job:
		m.typ, m.job, m.nodes = p.Type, p.JobID, p.Nodes
		m.ident = fmt.Sprintf("%s|%s|%s|%s", topic, p.Type, p.JobID, strings.Join(p.Nodes, ","))
	case event.Health:
		m.typ, m.job, m.nodes = p.Type, p.JobID, []string{p.Node}
		m.ident = fmt.Sprintf("%s|%s|%s", topic, p.Type, p.Node)
	case event.Node:
		m.typ, m.nodes = p.Type, p.Nodes
		m.ident = fmt.Sprintf("%s|%s|%s", topic, p.Type, strings.Join(p.Nodes, ","))
	case event.Cluster:
		m.typ = p.Type
		m.ident = topic + "|" + p.Type
	case event.Tick:
		m.typ = event.TypeReconcileTick
		m.ident = fmt.Sprintf("%s|%s", topic, FormatDuration(r.since()))
	case event.SlurmSnapshot:
		m.typ = p.Type
		m.ident = fmt.Sprintf("%s|%s", topic, FormatDuration(r.since()))
	}
	return m, nil
}

// publish sends a payload as a new message with the step's faults.
func (r *runner) publish(topic string, payload any, faults *DeliveryFaults, label string) error {
	m, err := r.newMessage(topic, payload)
	if err != nil {
		return err
	}
	r.enqueue(m, faults, label)
	return nil
}

// publishModel publishes an event of the Slurm model (a hook or the agent).
func (r *runner) publishModel(topic string, payload any) {
	if err := r.publish(topic, payload, nil, ""); err != nil {
		r.note("Slurm model: %v", err)
	}
}

// enqueue applies delivery rules, the step's faults and random faults to a
// new message and schedules its first delivery (or holds it).
func (r *runner) enqueue(m *message, faults *DeliveryFaults, label string) {
	r.seq++
	m.seq = r.seq
	m.published = r.now()
	r.idents[m.ident]++
	m.ident = fmt.Sprintf("%s#%d", m.ident, r.idents[m.ident])
	r.msgs = append(r.msgs, m)
	var f DeliveryFaults
	now := r.now()
	for _, rule := range r.rules {
		if !rule.matches(m, now) {
			continue
		}
		if rule.remaining > 0 {
			rule.remaining--
		}
		merge(&f, rule.DeliveryFaults)
		if rule.Label != "" && m.label == "" {
			m.label = rule.Label
		}
	}
	if faults != nil {
		merge(&f, *faults)
	}
	if label != "" {
		m.label = label
	}
	if rf := r.f.RandomFaults; rf != nil && r.randomFaultsOn(m) {
		r.randomFaults(rf, m, &f)
	}
	m.crash = f.Crash
	m.dups = append(m.dups, f.Duplicates...)
	if f.RedeliverEvery > 0 {
		for t := f.RedeliverEvery; t <= f.RedeliverFor; t += f.RedeliverEvery {
			m.dups = append(m.dups, t)
		}
	}
	if f.Hold != "" {
		r.holds[f.Hold] = append(r.holds[f.Hold], m)
		r.tracef("publish %s %s (%s)%s: held in %q", m.topic, m.id, m.describe(), labelSuffix(m.label), f.Hold)
		return
	}
	r.tracef("publish %s %s (%s)%s%s", m.topic, m.id, m.describe(), labelSuffix(m.label), delaySuffix(f.Delay.D()))
	r.scheduleFirst(m, now.Add(f.Delay.D()))
}

func delaySuffix(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return ", delayed " + FormatDuration(d)
}

// merge adds b's faults to a.
func merge(a *DeliveryFaults, b DeliveryFaults) {
	a.Delay = max(a.Delay, b.Delay)
	a.Duplicates = append(a.Duplicates, b.Duplicates...)
	if b.RedeliverEvery > 0 && a.RedeliverEvery == 0 {
		a.RedeliverEvery, a.RedeliverFor = b.RedeliverEvery, b.RedeliverFor
	}
	if a.Hold == "" {
		a.Hold = b.Hold
	}
	if len(a.Crash) == 0 {
		a.Crash = b.Crash
	}
}

func (rule *ruleState) matches(m *message, now time.Time) bool {
	if rule.remaining == 0 || (!rule.until.IsZero() && !now.Before(rule.until)) {
		return false
	}
	if rule.Topic != "" && rule.Topic != m.topic {
		return false
	}
	if rule.Type != "" && rule.Type != m.typ {
		return false
	}
	if rule.vm != nil && !rule.vm.MatchString(m.vm) {
		return false
	}
	if rule.Node != "" && !contains(m.nodes, rule.Node) {
		return false
	}
	if rule.Job != "" && rule.Job != m.job {
		return false
	}
	return true
}

// randomFaults decides a message's random duplicates and delay from its
// identity.
func (r *runner) randomFaults(rf *RandomFaults, m *message, f *DeliveryFaults) {
	within := rf.DuplicateWithin.D()
	if within == 0 {
		within = 15 * time.Minute
	}
	if rf.Duplicate > 0 && hashUnit(rf.Seed, m.ident, "dup") < rf.Duplicate {
		n := 1 + int(hashUnit(rf.Seed, m.ident, "dups")*2)
		for k := 0; k < n; k++ {
			off := time.Duration(hashUnit(rf.Seed, m.ident, "dup", strconv.Itoa(k)) * float64(within)).Round(time.Second)
			f.Duplicates = append(f.Duplicates, Duration(off))
		}
	}
	topics := rf.DelayTopics
	if len(topics) == 0 {
		topics = []string{config.TopicJobs, config.TopicHealthFailure, config.TopicExpiry, config.TopicSlurmSnapshot}
	}
	maxDelay := rf.MaxDelay.D()
	if maxDelay == 0 {
		maxDelay = 10 * time.Minute
	}
	if rf.Delay > 0 && contains(topics, m.topic) && hashUnit(rf.Seed, m.ident, "delay") < rf.Delay {
		d := time.Duration(hashUnit(rf.Seed, m.ident, "delay-by") * float64(maxDelay)).Round(time.Second)
		f.Delay = max(f.Delay, Duration(d))
	}
}

// randomFaultsOn reports whether random faults apply to a message: one
// published before random_faults.until.
func (r *runner) randomFaultsOn(m *message) bool {
	u := r.f.RandomFaults.Until.D()
	return u == 0 || m.published.Before(r.start.Add(u))
}

func (r *runner) scheduleFirst(m *message, at time.Time) {
	r.push(at, m, firstDelivery)
	for _, off := range m.dups {
		r.push(at.Add(off.D()), m, duplicateDelivery)
	}
}

func (r *runner) push(at time.Time, m *message, kind deliveryKind) {
	r.seq++
	heap.Push(&r.queue, &delivery{due: at, seq: r.seq, msg: m, kind: kind})
}

// crashPlanFor picks the crash for a delivery attempt: the message's own
// list, then crash steps, then random faults.
func (r *runner) crashPlanFor(m *message) *crashPlan {
	if k := m.attempts - 1; k < len(m.crash) && m.crash[k] != "" && m.crash[k] != "none" {
		if p, err := parseCrashPoint(m.crash[k]); err == nil {
			return &crashPlan{point: p, source: fmt.Sprintf("delivery crash list, attempt %d", m.attempts)}
		}
	}
	for _, c := range r.crashes {
		if c.remaining == 0 || (c.Topic != "" && c.Topic != m.topic) || (c.Type != "" && c.Type != m.typ) || (c.Label != "" && c.Label != m.label) {
			continue
		}
		c.remaining--
		return &crashPlan{point: c.point, source: "crash step"}
	}
	if rf := r.f.RandomFaults; rf != nil && rf.Crash > 0 && r.randomFaultsOn(m) {
		limit := rf.CrashAttempts
		if limit == 0 {
			limit = 2
		}
		a := strconv.Itoa(m.attempts)
		if m.attempts <= limit && hashUnit(rf.Seed, m.ident, "crash", a) < rf.Crash {
			pt := randomCrashPoints[int(hashUnit(rf.Seed, m.ident, "crash-at", a)*float64(len(randomCrashPoints)))]
			p, _ := parseCrashPoint(pt)
			return &crashPlan{point: p, source: "random faults"}
		}
	}
	return nil
}

// fault is apply.Deps.Fault.
func (r *runner) fault(point string, a plan.Action) error {
	if r.crash == nil {
		return nil
	}
	return r.crash.boundary(point, a)
}

// deliver hands a message to its function and applies Pub/Sub's rules to
// the result.
func (r *runner) deliver(d *delivery) {
	m := d.msg
	if m.dead {
		return
	}
	m.attempts++
	r.stats.Deliveries++
	switch d.kind {
	case retryDelivery:
		r.stats.Redeliveries++
	case duplicateDelivery:
		r.stats.Duplicates++
	}
	r.crash = r.crashPlanFor(m)
	err := r.h.Deliver(r.ctx, m.topic, m.id, m.data)
	cp := r.crash
	r.crash = nil
	outcome := "ack"
	crashed := cp != nil && (cp.fired || cp.armed)
	if crashed && err == nil {
		err = fmt.Errorf("%w %s after its last side effect (%s)", errInjectedCrash, cp.point, cp.source)
	}
	kind := d.kind.String()
	rec := deliveryRecord{at: r.now(), topic: m.topic, typ: m.typ, label: m.label, kind: d.kind}
	switch {
	case err == nil:
		m.acked = true
		r.stats.Acks++
		r.tracef("%s %s %s (%s), attempt %d: ack", kind, m.topic, m.id, m.describe(), m.attempts)
	default:
		outcome = "nack"
		if crashed {
			outcome = "crash"
			r.stats.Crashes++
		}
		r.stats.Nacks++
		m.lastErr = err.Error()
		r.tracef("%s %s %s (%s), attempt %d: %s: %v", kind, m.topic, m.id, m.describe(), m.attempts, outcome, err)
		switch {
		case m.acked:
			// Acknowledged by an earlier delivery: Pub/Sub has no more to
			// deliver.
		case m.attempts >= r.maxAttempts():
			m.dead = true
			r.dead = append(r.dead, DeadLetter{At: r.since(), Topic: m.topic, ID: m.id, Type: m.typ, Label: m.label, Attempts: m.attempts, LastError: m.lastErr})
			r.stats.DeadLetters++
			r.tracef("dead letter %s %s after %d attempts", m.topic, m.id, m.attempts)
		default:
			r.push(r.now().Add(r.backoff(m.attempts)), m, retryDelivery)
		}
	}
	rec.outcome = outcome
	r.dlog = append(r.dlog, rec)
}

func (r *runner) maxAttempts() int {
	if n := r.f.Delivery.MaxAttempts; n > 0 {
		return n
	}
	return DefaultMaxAttempts
}

// backoff is the redelivery delay after the given number of attempts.
func (r *runner) backoff(attempts int) time.Duration {
	lo, hi := r.f.Delivery.MinBackoff.D(), r.f.Delivery.MaxBackoff.D()
	if lo == 0 {
		lo = DefaultMinBackoff
	}
	if hi == 0 {
		hi = DefaultMaxBackoff
	}
	d := lo
	for i := 1; i < attempts && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// --- steps ---

func (r *runner) exec(i int, s *Step) error {
	now := r.now()
	switch {
	case s.Apply != nil:
		return r.publishApply(s.Apply.Cluster, s.Delivery, s.Label)
	case s.Job != nil:
		j := s.Job
		ev := event.Job{Header: r.header(jobTypes[j.Type]), JobID: j.ID, Partition: j.Partition, NodeCount: j.Count,
			Nodes: j.Nodes, Requeued: j.Requeued, TimeLimitSeconds: int64(j.TimeLimit.D() / time.Second), ReportedAt: now}
		if j.ReportedAt != nil {
			ev.ReportedAt = r.start.Add(j.ReportedAt.Offset)
		}
		return r.publish(config.TopicJobs, ev, s.Delivery, s.Label)
	case s.Health != nil:
		return r.publishHealth(s)
	case s.Power != nil:
		ev := event.Node{Header: r.header(powerTypes[s.Power.Type]), Nodes: s.Power.Nodes, Reason: s.Power.Reason, ReportedAt: now}
		return r.publish(config.TopicJobs, ev, s.Delivery, s.Label)
	case s.Snapshot != nil:
		for _, n := range s.Snapshot.Nodes {
			if err := r.slurm.setNode(now, n); err != nil {
				return err
			}
		}
		if s.Snapshot.Jobs != nil || !r.f.Slurm.Simulate {
			r.slurm.setJobs(s.Snapshot.Jobs)
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
		mig := naming.MIG(r.spec.ID, p.ID)
		r.tracef("delete MIG %s out of band", mig)
		if err := r.oob.DeleteMIG(r.ctx, p.Zone, mig, ""); err != nil {
			return fmt.Errorf("delete_mig %s: %w", mig, err)
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
		return r.slurm.submit(now, *s.Submit)
	case s.Cancel != nil:
		r.tracef("scancel %s", s.Cancel.ID)
		r.slurm.cancel(now, s.Cancel.ID)
		return nil
	case s.Deliveries != nil:
		rule := &ruleState{DeliveryRule: *s.Deliveries, remaining: -1}
		if rule.Times > 0 {
			rule.remaining = rule.Times
		}
		if rule.For > 0 {
			rule.until = now.Add(rule.For.D())
		}
		if rule.DeliveryRule.VM != "" {
			rule.vm = regexp.MustCompile(rule.DeliveryRule.VM)
		}
		r.rules = append(r.rules, rule)
		return nil
	case s.Duplicate != nil:
		n := max(s.Duplicate.Times, 1)
		found := false
		for _, m := range r.msgs {
			if m.label != s.Duplicate.Label {
				continue
			}
			found = true
			for k := 0; k < n; k++ {
				r.push(now.Add(s.Duplicate.After.D()), m, duplicateDelivery)
			}
		}
		if !found {
			return fmt.Errorf("duplicate: no message labelled %q was published", s.Duplicate.Label)
		}
		return nil
	case s.Release != nil:
		return r.release(*s.Release)
	case s.Crash != nil:
		p, _ := parseCrashPoint(s.Crash.Point)
		r.crashes = append(r.crashes, &crashState{CrashStep: *s.Crash, point: p, remaining: max(s.Crash.Times, 1)})
		return nil
	case s.ComputeError != nil:
		r.addComputeFault(i, *s.ComputeError)
		return nil
	case s.ListOmit != nil:
		r.addListOmit(i, *s.ListOmit)
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
		r.compute.addShortage(cs.Until)
		r.h.Sim.SetShortage(cs)
		return nil
	case len(s.Assert) > 0:
		for _, c := range s.Assert {
			r.record(r.evaluate(c, i))
		}
		return nil
	case s.Always != nil:
		w := &watchState{step: i, name: s.Always.Name, checks: s.Always.Checks, from: now}
		if w.name == "" {
			w.name = fmt.Sprintf("always (step %d)", i)
		}
		switch {
		case s.Always.Until != nil:
			w.until = r.start.Add(s.Always.Until.Offset)
		case s.Always.For > 0:
			w.until = now.Add(s.Always.For.D())
		}
		r.watches = append(r.watches, w)
		r.checkWatches()
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
		if c, err = ref.load(); err != nil {
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
		r.specAt = r.now()
		r.slurm.reconfigure(r.now(), c)
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
	if err := r.publish(config.TopicSlurmSnapshot, r.slurm.snapshot(r.now()), faults, label); err != nil {
		r.note("snapshot: %v", err)
	}
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
		vm, up := r.vmView().byNode[h.Node]
		if !up && h.VM == "" && h.Generation == 0 {
			// The hooks run on the node: without a VM there is no check.
			r.tracef("health: node %s has no VM to check: skipped", h.Node)
			return nil
		}
		vmName := h.VM
		if vmName == "" && up {
			vmName = vm.name
		}
		if verdict == event.VerdictFail {
			// The hook drains the node, then asks Slurm whether it is
			// drained (no job left).
			job, state := r.slurm.healthFailure(r.now(), h.Node, reasons[0], vmName)
			if ev.JobID == "" && ev.JobState == "" {
				ev.JobID, ev.JobState = job, state
			}
			if h.Drained == nil {
				ev.Drained = r.slurm.drainComplete(h.Node)
			}
		}
		if ev.VMName == "" && ev.Generation == 0 && up {
			ev.VMName = vm.name
		}
	}
	return r.publish(config.TopicHealthFailure, ev, s.Delivery, s.Label)
}

func (r *runner) release(s ReleaseStep) error {
	held := r.holds[s.Hold]
	delete(r.holds, s.Hold)
	switch s.Order {
	case "reverse":
		for i, j := 0, len(held)-1; i < j; i, j = i+1, j-1 {
			held[i], held[j] = held[j], held[i]
		}
	case "shuffle":
		sort.SliceStable(held, func(i, j int) bool {
			return hashUnit(s.Seed, held[i].id) < hashUnit(s.Seed, held[j].id)
		})
	}
	for _, m := range held {
		r.tracef("release %s %s (%s) from %q", m.topic, m.id, m.describe(), s.Hold)
		r.scheduleFirst(m, r.now())
	}
	return nil
}

func (r *runner) addComputeFault(i int, ce ComputeErrorStep) {
	f := &computeFault{name: ce.Name, method: strings.ToUpper(ce.Method), status: ce.Status, reason: ce.Reason, code: ce.Code, message: ce.Message}
	if f.name == "" {
		f.name = fmt.Sprintf("compute-error-%d", i)
	}
	if ce.Path != "" {
		f.path = regexp.MustCompile(ce.Path)
	}
	if ce.Body != "" {
		f.body = regexp.MustCompile(ce.Body)
	}
	if f.status == 0 {
		switch {
		case strings.Contains(ce.Code, "QUOTA"):
			f.status = 403
		case ce.Code != "":
			f.status = 503
		default:
			f.status = 500
		}
	}
	if f.reason == "" && ce.Code == "" {
		f.reason = "backendError"
	}
	if f.message == "" {
		f.message = "scenario fault " + f.name
	}
	switch {
	case ce.Until != nil:
		f.until = r.start.Add(ce.Until.Offset)
	case ce.For > 0:
		f.until = r.now().Add(ce.For.D())
	}
	f.remaining = ce.Times
	if f.remaining == 0 {
		if f.until.IsZero() {
			f.remaining = 1
		} else {
			f.remaining = -1
		}
	}
	r.compute.add(f)
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
	if vm, ok := r.vmView().byNode[ref.Node]; ok {
		return resolvedVM{vm.zone, vm.name}, nil
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
		if s.Node != "" && !namesNode(rr.Instances, s.Node) {
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

// namesNode reports whether a list of VM names has a VM of the node.
func namesNode(vms []string, node string) bool {
	for _, vm := range vms {
		if n, _, _, _, ok := naming.ParseVMName(vm); ok && n == node {
			return true
		}
	}
	return false
}

// record adds results; with StopOnFailure a failure stops the run.
func (r *runner) record(res []Result) {
	for _, x := range res {
		r.results = append(r.results, x)
		if !x.Pass && r.o.StopOnFailure {
			r.stopped = true
		}
	}
}

// finish evaluates the final checks and invariants at the end.
func (r *runner) finish() {
	for _, w := range r.watches {
		r.closeWatch(w)
	}
	r.record(r.finalInvariants())
	for _, c := range r.f.Final {
		r.record(r.evaluate(c, -1))
	}
}

func (r *runner) report() Report {
	rep := Report{File: r.f.path, Name: r.f.Name, Results: r.results, DeadLetters: r.dead, Notes: r.notes,
		Simulated: r.since(), Stats: r.stats, Trace: r.trace}
	for _, d := range r.queue {
		if !d.msg.dead && !(d.kind != firstDelivery && d.msg.acked) {
			rep.Unsettled = append(rep.Unsettled, fmt.Sprintf("%s %s (%s) due at %s", d.msg.topic, d.msg.id, d.msg.describe(), FormatDuration(d.due.Sub(r.start))))
		}
	}
	sort.Strings(rep.Unsettled)
	for _, h := range sortedKeys(r.holds) {
		for _, m := range r.holds[h] {
			rep.Unsettled = append(rep.Unsettled, fmt.Sprintf("%s %s (%s) held in %q", m.topic, m.id, m.describe(), h))
		}
	}
	calls, faults := r.compute.snapshot()
	rep.Stats.ComputeCalls = len(calls)
	for _, f := range faults {
		rep.Stats.InjectedErrors += f.fired
	}
	return rep
}
