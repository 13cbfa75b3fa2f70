package slurmmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// The Slurm model plays slurmctld, its power-saving hooks and the flexslurm
// agent, with the behaviour observed on a real Slurm 22.05 with CLOUD nodes
// (https://slurm.schedmd.com/power_save.html):
//
//   - allocation of powered-down nodes calls ResumeProgram (job.pending with
//     the allocated nodes); a node shows ALLOCATED+CLOUD+NOT_RESPONDING+
//     POWERING_UP until its slurmd registers (its VM has run for BootTime);
//   - a job runs once all its nodes registered (job.started, from
//     PrologSlurmctld) and ends after its runtime (job.finished);
//   - a dynamic node idle for SuspendTime is powered down and SuspendProgram
//     runs (node.suspend); so does an explicit power_down;
//   - a node still powering up after ResumeTimeout becomes
//     DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING ("ResumeTimeout reached"),
//     ResumeFailProgram runs (node.resume_failed) and its job is requeued;
//   - scontrol resume takes a DOWN node to IDLE (a down~ node to idle~) and
//     lifts DRAIN; power_down and power_down_force power a node down
//     (force requeues its job first); drain adds DRAIN; power_up starts a
//     resume;
//   - a powered-up node whose VM is gone stops responding and, after
//     SlurmdTimeout, is marked DOWN and its job requeued; it returns to
//     service when a VM registers again (ReturnToService=2).
//
// Requeued jobs become eligible 121 s later, as Slurm's requeue does.

// Slurm node flags and base states the model sets.
const (
	flagCloud         = lang.SlurmFlagCloud
	flagPoweredDown   = lang.SlurmFlagPoweredDown
	flagPoweringUp    = lang.SlurmFlagPoweringUp
	flagPoweringDown  = lang.SlurmFlagPoweringDown
	flagPowerDown     = lang.SlurmFlagPowerDown
	flagNotResponding = lang.SlurmFlagNotResponding
	flagDrain         = lang.SlurmFlagDrain
	flagFail          = lang.SlurmFlagFail

	baseIdle      = lang.SlurmIdle
	baseAllocated = lang.SlurmAllocated
	baseMixed     = "MIXED"
	baseDown      = lang.SlurmDown
)

// Node is a Slurm node as the model holds it.
type Node struct {
	name   string
	pool   string
	index  int
	static bool
	// suspendExcluded: the node is in slurm.conf's SuspendExcNodes, so
	// Slurm never powers it down on its own. flexslurm's generated
	// slurm.conf lists every node of a flex-start pool there: flexslurm,
	// not SuspendTime, decides when a flex node is released.
	suspendExcluded bool
	base            string
	flags           map[string]bool
	reason          string
	job             string // allocated job ("" if none; the first, if several)
	// shared are the other jobs allocated to the node beside job, each
	// with GPUs of its own (gres/gpu): a node's jobs are job then shared.
	shared []string
	// gpus is the node's GRES gpu count (its pool's accelerator_count, as
	// gres.conf says), gpusUsed what its jobs hold: a job that asks for
	// no GPUs holds them all.
	gpus, gpusUsed int

	idleSince    time.Time
	powerUpSince time.Time
	lostSince    time.Time
	freedAt      time.Time // last time the node had a job taken away or finished
	undrainedAt  time.Time // last time a resume lifted the node's DRAIN
	powerDownDue bool      // power_down asked while a job runs
	// removed: the applied spec no longer has the node (its pool is gone
	// or shrank below it). Slurm schedules nothing more on it, and it
	// leaves the model once powered down with no job.
	removed bool

	// snap is the node's snapshot entry as of base snapBase, the flags
	// of snapFlags (flagMask) and reason snapReason, when snapOK
	// (Model.snapshotNode).
	snap       event.SnapshotNode
	snapJSON   []byte // snap encoded, once asked for (nil: not yet)
	snapOK     bool
	snapBase   string
	snapFlags  uint16
	snapReason string
}

// knownFlags are the flags flagMask represents, one bit each.
var knownFlags = [...]string{flagCloud, lang.SlurmFlagCompleting, flagDrain, flagFail, lang.SlurmFlagMaintenance, lang.SlurmFlagReserved,
	flagNotResponding, flagPoweredDown, flagPoweringUp, flagPoweringDown, flagPowerDown}

// flagMask is the set of the node's flags as bits of knownFlags; ok is
// false when the flags map holds any other entry (an unknown flag, or a
// flag set to false), which the mask cannot tell apart.
func (n *Node) flagMask() (mask uint16, ok bool) {
	k := 0
	for i, f := range knownFlags {
		if n.flags[f] {
			mask |= 1 << i
			k++
		}
	}
	return mask, k == len(n.flags)
}

func (n *Node) state() string { return lang.FormatSlurmState(n.base, n.flags) }

func (n *Node) up() bool {
	return !n.flags[flagPoweredDown] && !n.flags[flagPoweringUp] && !n.flags[flagPoweringDown]
}

// Job is a Slurm job the model schedules (submitted by a submit step).
type Job struct {
	id, partition, pool string
	want                int
	gpus                int // GPUs per node (sbatch --gres=gpu:N); 0: whole nodes
	runtime             time.Duration
	timeLimit           time.Duration // sbatch --time; 0: none
	comment             string        // scontrol's Comment
	state               string        // PENDING, CONFIGURING, RUNNING, COMPLETED, CANCELLED
	nodes               []string
	endAt, eligibleAt   time.Time
	restarts            int
}

func (j *Job) active() bool {
	return j.state == "PENDING" || j.state == "CONFIGURING" || j.state == "RUNNING"
}

// VM is a node's live VM.
type VM struct {
	Name    string
	Zone    string
	Status  string
	Created time.Time
}

// Model is the Slurm model.
type Model struct {
	cfg     lang.Slurm
	cluster string
	spec    *spec.Cluster
	nodes   map[string]*Node
	// sorted is sortedNodes' answer while no node was added or dropped
	// (nil: to be sorted again). Nobody changes it; a new one replaces it.
	sorted  []*Node
	noReuse bool // NoReuse
	jobs    map[string]*Job
	order   []string           // job ids in submission order
	extra   []lang.SnapshotJob // jobs set by snapshot steps (published as given)
	// reservations are the maintenance reservations flexslurm created, by
	// name (nodes); they do not change node states in the model.
	reservations map[string][]string
	// reservedFrom is when each of them starts: the scheduler starts no
	// job with a time limit on a node before a reservation there would
	// cut it short (jobs without one are not checked).
	reservedFrom map[string]time.Time
	// signalled are the jobs a SlurmSignal reached, in order.
	signalled []Signalled
	// dropped are the partitions an applied spec no longer has.
	dropped map[string]bool

	// powerSaveFlex: Slurm's SuspendTime powers idle flex-start nodes
	// down too (PowerSaveFlexNodes).
	powerSaveFlex bool

	publish func(topic string, payload any)
	trace   func(format string, args ...any)
}

const (
	defaultSuspendTime   = 10 * time.Minute
	defaultSlurmdTimeout = 5 * time.Minute
	requeueDelay         = 121 * time.Second
)

// New is the Slurm model of cluster c as configured by a scenario's slurm
// section: it publishes the events of Slurm's hooks and the agent with
// publish and notes what it does with trace.
func New(cfg lang.Slurm, c *spec.Cluster, now time.Time, publish func(string, any), trace func(string, ...any)) *Model {
	if cfg.SuspendTime == 0 {
		cfg.SuspendTime = lang.Duration(defaultSuspendTime)
	}
	if cfg.SlurmdTimeout == 0 {
		cfg.SlurmdTimeout = lang.Duration(defaultSlurmdTimeout)
	}
	m := &Model{cfg: cfg, cluster: c.ID, spec: c, nodes: map[string]*Node{}, jobs: map[string]*Job{},
		reservations: map[string][]string{}, reservedFrom: map[string]time.Time{}, dropped: map[string]bool{}, publish: publish, trace: trace}
	if cfg.Simulate {
		m.addNodes(now)
	}
	return m
}

// addNodes adds the nodes of the spec's flex-start pools the model lacks.
func (m *Model) addNodes(now time.Time) {
	for _, p := range m.spec.FlexPools() {
		for i := 0; i < p.MaxNodeCount; i++ {
			name := model.NodeName(m.cluster, p.ID, i)
			if _, ok := m.nodes[name]; ok {
				continue
			}
			n := m.node(name)
			if n.static {
				// Static nodes are resumed at start (they are not in
				// power saving) and wait for their VM.
				n.flags = map[string]bool{flagCloud: true, flagNotResponding: true, flagPoweringUp: true}
				n.powerUpSince = now
			}
		}
	}
}

// Reconfigure follows a newly applied spec, as slurm.conf regenerated from
// it would: the nodes of new pools and of raised max_node_count appear
// (powered down; static ones resumed), static-ness follows min_node_count,
// and nodes the spec no longer has (pool removed, max lowered) are
// scheduled no more and leave once powered down with no job.
func (m *Model) Reconfigure(now time.Time, c *spec.Cluster) {
	for _, p := range m.spec.Slurm.Partitions {
		m.dropped[p.ID] = true
	}
	for _, p := range c.Slurm.Partitions {
		delete(m.dropped, p.ID)
	}
	m.spec = c
	for _, n := range m.nodes {
		p, ok := c.Pool(n.pool)
		n.removed = !ok || !p.IsFlexStart() || n.index >= p.MaxNodeCount
		if ok {
			n.static = n.index < p.MinNodeCount
			n.suspendExcluded = p.IsFlexStart() && !m.powerSaveFlex
			n.gpus = p.MachineSpec.AcceleratorCount
		}
	}
	if m.cfg.Simulate {
		m.addNodes(now)
	}
	m.dropRemoved()
}

// dropRemoved forgets the removed nodes that are powered down with no job,
// in node order (the trace is deterministic).
func (m *Model) dropRemoved() {
	for _, n := range m.sortedNodes() {
		if n.removed && n.job == "" && n.flags[flagPoweredDown] && !n.flags[flagPoweringUp] {
			m.trace("slurm: node %s left the configuration", n.name)
			delete(m.nodes, n.name)
			m.sorted = nil
		}
	}
}

// node returns the model's node, creating it powered down.
func (m *Model) node(name string) *Node {
	if n, ok := m.nodes[name]; ok {
		return n
	}
	n := &Node{name: name, base: baseIdle, flags: map[string]bool{flagCloud: true, flagPoweredDown: true}}
	if _, pool, idx, ok := naming.ParseNodeName(name); ok {
		n.pool, n.index = pool, idx
		if p, ok := m.spec.Pool(pool); ok {
			n.static = idx < p.MinNodeCount
			n.suspendExcluded = p.IsFlexStart() && !m.powerSaveFlex
			n.gpus = p.MachineSpec.AcceleratorCount
		}
	}
	m.nodes[name] = n
	m.sorted = nil
	return n
}

// PowerSaveFlexNodes models a slurm.conf without flexslurm's
// SuspendExcNodes, as Cluster Toolkit's slurm-gcp writes it: Slurm powers
// every dynamic node down after SuspendTime idle, flex-start ones included
// (SuspendProgram reports node.suspend). Call it before any node exists
// (before a simulate model's first Reconfigure, or on a model made with
// Simulate off).
func (m *Model) PowerSaveFlexNodes() {
	m.powerSaveFlex = true
	for _, n := range m.nodes {
		n.suspendExcluded = false
	}
}

// NoReuse makes the model sort its nodes afresh each time (a debug mode
// for tests: a run's report must be the same either way).
func (m *Model) NoReuse() { m.noReuse = true }

// sortedNodes returns the nodes by pool, index and name: the same slice
// until a node is added or dropped, so callers must not change it. The
// order depends on nothing a node changes after it is created.
func (m *Model) sortedNodes() []*Node {
	if m.sorted != nil && !m.noReuse {
		return m.sorted
	}
	out := make([]*Node, 0, len(m.nodes))
	for _, n := range m.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].pool != out[j].pool {
			return out[i].pool < out[j].pool
		}
		if out[i].index != out[j].index {
			return out[i].index < out[j].index
		}
		return out[i].name < out[j].name
	})
	m.sorted = out
	return out
}

// SetNode sets a node's state from a snapshot step.
func (m *Model) SetNode(now time.Time, sn lang.SnapshotNode) error {
	base, flags, err := lang.ParseSlurmState(sn.State)
	if err != nil {
		return err
	}
	n := m.node(sn.Name)
	n.base, n.flags, n.reason = base, flags, sn.Reason
	if flags[flagPoweringUp] {
		n.powerUpSince = now
	}
	if n.job == "" && base == baseIdle {
		n.idleSince = now
	}
	return nil
}

// SetJobs replaces the snapshot-step jobs; active jobs naming nodes
// allocate them, and nodes no such job names are free.
func (m *Model) SetJobs(jobs []lang.SnapshotJob) {
	m.extra = append([]lang.SnapshotJob(nil), jobs...)
	for _, n := range m.nodes {
		if _, simulated := m.jobs[n.job]; !simulated {
			n.job, n.shared, n.gpusUsed = "", nil, 0
		}
	}
	for _, j := range jobs {
		for _, name := range j.Nodes {
			if n, ok := m.nodes[name]; ok && activeSlurmJobState(j.State) {
				n.job = j.ID
			}
		}
	}
}

func activeSlurmJobState(s string) bool {
	switch strings.ToUpper(s) {
	case "PENDING", "CONFIGURING", "RUNNING", "COMPLETING":
		return true
	}
	return false
}

// Snapshot is the agent's view of Slurm. Its nodes' Flags slices may be
// shared with earlier and later snapshots (snapshotNode): callers must not
// change them.
func (m *Model) Snapshot(now time.Time) event.SlurmSnapshot {
	s := m.snapshotJobs(now)
	nodes := m.sortedNodes()
	s.Nodes = make([]event.SnapshotNode, 0, len(nodes))
	for _, n := range nodes {
		s.Nodes = append(s.Nodes, m.snapshotNode(n))
	}
	return s
}

// snapshotJobs is Snapshot(now) without its nodes (nil).
func (m *Model) snapshotJobs(now time.Time) event.SlurmSnapshot {
	s := event.SlurmSnapshot{
		Header:  event.Header{Version: event.SchemaVersion, Type: event.TypeSlurmSnapshot, Cluster: m.cluster},
		TakenAt: now, Jobs: []event.SnapshotJob{},
	}
	for _, id := range m.order {
		j := m.jobs[id]
		if !j.active() {
			continue
		}
		s.Jobs = append(s.Jobs, event.SnapshotJob{ID: j.id, State: slurmstate.JobState(j.state), Partition: j.partition, Nodes: j.nodes, NodeCount: j.want, Restarts: j.restarts,
			TimeLimitSeconds: int64(j.timeLimit / time.Second)})
	}
	for _, j := range m.extra {
		state, _ := slurmstate.ParseJobState([]string{j.State})
		s.Jobs = append(s.Jobs, event.SnapshotJob{ID: j.ID, State: state, Partition: j.Partition, Nodes: j.Nodes, NodeCount: j.NodeCount, Reason: j.Reason})
	}
	return s
}

// snapshotNode is n's entry in a snapshot. It depends on the node's name,
// base state, flags and reason alone, so it is kept until one of them
// changes (the flags compared as a flagMask; flags it cannot represent
// are parsed afresh each time, as is everything with NoReuse): its Flags
// slice is shared by the snapshots that hold it, which must not change it.
func (m *Model) snapshotNode(n *Node) event.SnapshotNode {
	sn, _ := m.snapshotNodeKept(n)
	return sn
}

// snapshotNodeKept is snapshotNode, also reporting whether the entry is
// the one kept in n (n.snap).
func (m *Model) snapshotNodeKept(n *Node) (event.SnapshotNode, bool) {
	mask, known := n.flagMask()
	if known && !m.noReuse && n.snapOK && n.snapBase == n.base && n.snapFlags == mask && n.snapReason == n.reason {
		return n.snap, true
	}
	sn := event.SnapshotNode{Name: n.name, Node: slurmstate.ParseNode(n.name, strings.Split(n.state(), "+"), n.reason)}
	if known && !m.noReuse {
		n.snap, n.snapJSON, n.snapOK, n.snapBase, n.snapFlags, n.snapReason = sn, nil, true, n.base, mask, n.reason
		return sn, true
	}
	return sn, false
}

// nodesNull is how the encoding of a snapshot without nodes ends its
// header and begins its jobs: the first such text in it, since every
// string before is escaped (its quotes are \").
var nodesNull = []byte(`,"nodes":null,`)

// SnapshotJSON is the JSON encoding of Snapshot(now), as json.Marshal
// gives it, with each node's entry encoded once and kept with the entry
// (snapshotNode), instead of every node encoded again for every snapshot
// (TestSnapshotJSONIsSnapshot).
func (m *Model) SnapshotJSON(now time.Time) ([]byte, error) {
	if m.noReuse {
		return json.Marshal(m.Snapshot(now))
	}
	nodes := m.sortedNodes()
	head, err := json.Marshal(m.snapshotJobs(now))
	if err != nil {
		return nil, err
	}
	i := bytes.Index(head, nodesNull)
	if i < 0 {
		return nil, fmt.Errorf("encoding a Slurm snapshot: no %s in %s", nodesNull, head)
	}
	encoded := make([][]byte, len(nodes))
	size := len(head) + len(nodes)
	for k, n := range nodes {
		sn, kept := m.snapshotNodeKept(n)
		b := n.snapJSON
		if !kept || b == nil {
			if b, err = json.Marshal(sn); err != nil {
				return nil, err
			}
			if kept {
				n.snapJSON = b
			}
		}
		encoded[k] = b
		size += len(b)
	}
	out := make([]byte, 0, size+len(`,"nodes":[],`))
	out = append(out, head[:i]...)
	out = append(out, `,"nodes":[`...)
	for k, b := range encoded {
		if k > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	out = append(out, "],"...)
	return append(out, head[i+len(nodesNull):]...), nil
}

// Signalled is a job a SlurmSignal reached: when, on which node.
type Signalled struct {
	At        time.Time
	Node, Job string
}

// Signalled returns the jobs SlurmSignal commands reached, in order.
func (m *Model) Signalled() []Signalled { return append([]Signalled(nil), m.signalled...) }

// Apply applies a Slurm command flexslurm published, as the agent's
// scontrol call would. It returns false for a command the model does not
// know (reported in the trace, state unchanged).
func (m *Model) Apply(now time.Time, c Command) bool {
	switch c.Command {
	case event.SlurmRequeue:
		if j, ok := m.jobs[c.Job]; ok && j.active() {
			m.requeue(now, j, "scontrol requeue")
		}
		return true
	case event.SlurmStartNow:
		if j, ok := m.jobs[c.Job]; ok && j.state == "PENDING" {
			j.eligibleAt = now
		}
		return true
	case event.SlurmJobComment:
		// As the agent: a user's own comment is kept.
		if j, ok := m.jobs[c.Job]; ok && j.active() && (j.comment == "" || strings.HasPrefix(j.comment, event.JobCommentPrefix)) {
			j.comment = c.Reason
		}
		return true
	case event.SlurmReservationCreate:
		name, _ := c.Raw["reservation"].(string)
		m.reservations[name] = append([]string(nil), c.Nodes...)
		start, _ := c.Raw["start_time"].(string)
		if t, err := time.Parse(time.RFC3339Nano, start); err == nil {
			m.reservedFrom[name] = t
		}
		return true
	case event.SlurmReservationDelete:
		name, _ := c.Raw["reservation"].(string)
		delete(m.reservations, name)
		delete(m.reservedFrom, name)
		return true
	case event.SlurmUpdateAddress:
		return true
	case event.SlurmSignal:
		// As scancel --batch --signal: the job's batch script decides what
		// a signal does; the model's jobs ignore it. It is recorded.
		for _, name := range c.Nodes {
			if n, ok := m.nodes[name]; ok {
				for _, j := range n.JobIDs() {
					m.signalled = append(m.signalled, Signalled{At: now, Node: name, Job: j})
				}
			}
		}
		return true
	}
	known := true
	for _, name := range c.Nodes {
		n, ok := m.nodes[name]
		if !ok {
			continue
		}
		switch c.Command {
		case event.SlurmDrain:
			n.flags[flagDrain] = true
			n.reason = c.Reason
		case event.SlurmDown:
			n.base = baseDown
			n.reason = c.Reason
			m.requeueOn(now, n, "node set DOWN")
		case event.SlurmResume:
			if n.flags[flagDrain] {
				n.undrainedAt = now
			}
			delete(n.flags, flagDrain)
			delete(n.flags, flagFail)
			if n.flags[flagPoweredDown] {
				// down~ (or drain~) becomes idle~: a powered-down node
				// is not expected to respond.
				delete(n.flags, flagNotResponding)
			}
			if n.base == baseDown {
				n.base = baseIdle
				if n.job != "" {
					n.base = allocBase(n)
				}
				if n.job == "" {
					n.idleSince = now
				}
			}
			n.reason = ""
		case event.SlurmPowerDown:
			if n.job != "" && m.jobs[n.job] != nil && m.jobs[n.job].active() {
				n.powerDownDue = true
				continue
			}
			m.powerDown(now, n)
		case event.SlurmPowerDownForce:
			m.requeueOn(now, n, "power_down_force")
			m.powerDown(now, n)
		case event.SlurmPowerUp:
			if n.flags[flagPoweredDown] {
				delete(n.flags, flagPoweredDown)
				n.flags[flagPoweringUp] = true
				n.flags[flagNotResponding] = true
				n.powerUpSince = now
			}
		default:
			known = false
		}
	}
	return known
}

// powerDown powers a node down; SuspendProgram runs (node.suspend).
func (m *Model) powerDown(now time.Time, n *Node) {
	for _, f := range []string{flagPoweringUp, flagNotResponding, flagPoweringDown, flagPowerDown} {
		delete(n.flags, f)
	}
	n.flags[flagPoweredDown] = true
	n.base = baseIdle
	n.job, n.shared, n.gpusUsed = "", nil, 0
	n.powerDownDue = false
	n.lostSince = time.Time{}
	if m.cfg.Simulate {
		m.publish(config.TopicJobs, event.Node{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeNodeSuspend, Cluster: m.cluster},
			Nodes: []string{n.name}, Reason: "SuspendProgram (power down)", ReportedAt: now})
	}
}

// requeueOn requeues the jobs allocated to node n.
func (m *Model) requeueOn(now time.Time, n *Node, why string) {
	for _, id := range append([]string{n.job}, n.shared...) {
		if j, ok := m.jobs[id]; ok && j.active() {
			m.requeue(now, j, why+" on "+n.name)
		}
	}
	n.job, n.shared, n.gpusUsed = "", nil, 0
}

// requeue puts a job back to PENDING and frees its nodes.
func (m *Model) requeue(now time.Time, j *Job, why string) {
	m.trace("slurm: job %s requeued (%s)", j.id, why)
	m.freeNodes(now, j)
	j.state = "PENDING"
	j.restarts++
	j.nodes = nil
	j.eligibleAt = now.Add(requeueDelay)
}

func (m *Model) freeNodes(now time.Time, j *Job) {
	for _, name := range j.nodes {
		n, ok := m.nodes[name]
		if !ok || (n.job != j.id && !slices.Contains(n.shared, j.id)) {
			continue
		}
		n.gpusUsed = max(0, n.gpusUsed-m.gpusHeld(n, j))
		if n.job == j.id {
			n.job = ""
			if len(n.shared) > 0 {
				n.job, n.shared = n.shared[0], n.shared[1:]
			}
		} else {
			n.shared = slices.DeleteFunc(slices.Clone(n.shared), func(id string) bool { return id == j.id })
		}
		n.freedAt = now
		if n.job != "" {
			// Other jobs still hold some of its GPUs.
			if n.base == baseAllocated || n.base == baseMixed {
				n.base = baseMixed
			}
			continue
		}
		n.gpusUsed = 0
		n.idleSince = now
		if n.base == baseAllocated || n.base == baseMixed {
			n.base = baseIdle
		}
		if n.powerDownDue {
			m.powerDown(now, n)
		}
	}
}

// Submit queues a job. An id whose job has ended may be given again, as
// Slurm's ids repeat (a controller rebuilt without its StateSaveLocation
// counts from the start again; ids wrap at MaxJobId): the new job replaces
// the ended one, which Slurm no longer knows.
func (m *Model) Submit(now time.Time, s lang.SubmitStep) error {
	if old, ok := m.jobs[s.ID]; ok {
		if old.active() {
			return fmt.Errorf("job %s was already submitted and has not ended", s.ID)
		}
		m.order = slices.DeleteFunc(m.order, func(id string) bool { return id == s.ID })
		m.trace("slurm: job id %s given again: a new job (the earlier one ended %s)", s.ID, old.state)
	}
	part := s.Partition
	pool := ""
	for _, p := range m.spec.Slurm.Partitions {
		if part != "" && p.ID != part {
			continue
		}
		for _, id := range p.NodePoolIDs {
			if sp, ok := m.spec.Pool(id); ok && sp.IsFlexStart() {
				part, pool = p.ID, id
				break
			}
		}
		if pool != "" {
			break
		}
	}
	if pool == "" && m.dropped[s.Partition] {
		// The partition left with its pool: sbatch refuses the job.
		m.jobs[s.ID] = &Job{id: s.ID, partition: s.Partition, want: s.Nodes, state: "REFUSED"}
		m.order = append(m.order, s.ID)
		m.trace("slurm: sbatch refuses job %s: invalid partition %s", s.ID, s.Partition)
		return nil
	}
	if pool == "" {
		return fmt.Errorf("no partition %q with a flex-start pool", s.Partition)
	}
	j := &Job{id: s.ID, partition: part, pool: pool, want: s.Nodes, gpus: s.GPUs, runtime: s.Runtime.D(), timeLimit: s.TimeLimit.D(), state: "PENDING", eligibleAt: now, comment: s.Comment}
	m.jobs[s.ID] = j
	m.order = append(m.order, s.ID)
	if why := m.refused(j); why != "" {
		j.state = "REFUSED"
		m.trace("slurm: sbatch refuses job %s: %s", j.id, why)
	}
	return nil
}

// refused says why sbatch refuses a job, or "". A job asking for more
// nodes than its partition has is refused ("Requested node configuration
// is not available"); with partition limits (MaxTime, MaxNodes,
// EnforcePartLimits=ALL) so is one beyond them.
func (m *Model) refused(j *Job) string {
	nodes := 0
	for _, n := range m.nodes {
		if n.pool == j.pool && !n.removed {
			nodes++
		}
	}
	p, _ := m.spec.Pool(j.pool)
	if m.cfg.PartitionLimits {
		if j.timeLimit > p.FlexStartMaxDuration {
			return fmt.Sprintf("Requested time limit is invalid (missing or exceeds some limit): %s > MaxTime %s", j.timeLimit, p.FlexStartMaxDuration)
		}
		if j.want > p.MaxNodeCount {
			return fmt.Sprintf("Node count specification invalid: %d > MaxNodes %d", j.want, p.MaxNodeCount)
		}
	}
	if m.cfg.Simulate && j.want > nodes {
		return fmt.Sprintf("Requested node configuration is not available: %d nodes, partition %s has %d", j.want, j.partition, nodes)
	}
	if j.gpus > p.MachineSpec.AcceleratorCount {
		return fmt.Sprintf("Requested node configuration is not available: gres/gpu:%d per node, pool %s's nodes have %d", j.gpus, j.pool, p.MachineSpec.AcceleratorCount)
	}
	return ""
}

// Cancel cancels a job (scancel): EpilogSlurmctld reports it.
func (m *Model) Cancel(now time.Time, id string) {
	j, ok := m.jobs[id]
	if !ok || !j.active() {
		return
	}
	typ, st := event.TypeJobCancelled, "CANCELLED"
	if j.state == "RUNNING" {
		typ, st = event.TypeJobFinished, "COMPLETED"
	}
	m.freeNodes(now, j)
	j.state = st
	j.endAt = now
	m.publish(config.TopicJobs, m.jobEnd(now, j, typ))
}

// jobEnd is what EpilogSlurmctld publishes for a job that ends: its nodes,
// and for a job that ran (its nodes up) job.finished with nodes_up.
func (m *Model) jobEnd(now time.Time, j *Job, typ string) event.Job {
	ev := event.Job{Header: event.Header{Version: event.SchemaVersion, Type: typ, Cluster: m.cluster},
		JobID: j.id, Partition: j.partition, ReportedAt: now}
	if len(j.nodes) > 0 {
		ev.Nodes, ev.NodeCount = slices.Clone(j.nodes), len(j.nodes)
		ev.NodesUp = typ == event.TypeJobFinished
	}
	return ev
}

// HealthFailure drains a node as a health hook does and requeues its job;
// it returns the job and its state for the health.failure report.
func (m *Model) HealthFailure(now time.Time, name, reason, vm string) (string, string) {
	n, ok := m.nodes[name]
	if !ok {
		return "", ""
	}
	n.flags[flagDrain] = true
	// As flexslurm's node-side hook writes it: its prefix, and the VM the
	// check ran on, so the drain is lifted once another VM backs the node.
	n.reason = "flexslurm: health check failed: " + reason
	if vm != "" {
		n.reason += " (" + vm + ")"
	}
	if n.job == "" {
		return "", ""
	}
	j, ok := m.jobs[n.job]
	if !ok || !j.active() {
		return "", ""
	}
	id := j.id
	m.requeue(now, j, "health check failed")
	return id, "requeued"
}

// DrainComplete reports whether the model shows a node drained: DRAIN
// with no job left on it.
func (m *Model) DrainComplete(name string) bool {
	n, ok := m.nodes[name]
	return ok && n.flags[flagDrain] && n.job == ""
}

// Update brings the model to now given the nodes' live VMs (by node name):
// registrations, lost nodes, and with Simulate the scheduler, job starts
// and ends, suspends and resume timeouts. Events are published through
// m.publish.
func (m *Model) Update(now time.Time, vms map[string]VM) {
	for _, n := range m.sortedNodes() {
		vm, hasVM := vms[n.name]
		if hasVM && vm.Status == "RUNNING" && !now.Before(vm.Created.Add(m.cfg.BootTime.D())) {
			n.lostSince = time.Time{}
			switch {
			case n.flags[flagPoweringUp]:
				delete(n.flags, flagPoweringUp)
				delete(n.flags, flagNotResponding)
				if n.job == "" {
					n.idleSince = now
				}
			case !n.flags[flagPoweredDown]:
				delete(n.flags, flagNotResponding)
				if n.base == baseDown && n.reason == "Not responding" {
					n.base, n.reason = baseIdle, ""
					if n.job != "" {
						n.base = allocBase(n)
					} else {
						n.idleSince = now
					}
				}
			}
			continue
		}
		if !m.cfg.Simulate || hasVM {
			continue
		}
		if n.up() && n.base != baseDown {
			if n.lostSince.IsZero() {
				n.lostSince = now
			}
			if !now.Before(n.lostSince.Add(m.cfg.SlurmdTimeout.D())) {
				n.flags[flagNotResponding] = true
				n.base = baseDown
				// slurmctld keeps a reason already set (a drain's) and
				// writes "Not responding" only where there is none.
				if n.reason == "" {
					n.reason = "Not responding"
				}
				m.requeueOn(now, n, "node not responding")
			}
		}
	}
	m.dropRemoved()
	if !m.cfg.Simulate {
		return
	}
	// Resume timeouts.
	if rt := m.cfg.ResumeTimeout.D(); rt > 0 {
		var failed []string
		for _, n := range m.sortedNodes() {
			if n.flags[flagPoweringUp] && !now.Before(n.powerUpSince.Add(rt)) {
				delete(n.flags, flagPoweringUp)
				n.flags[flagPoweredDown] = true
				n.flags[flagNotResponding] = true
				n.base, n.reason = baseDown, "ResumeTimeout reached"
				m.requeueOn(now, n, "ResumeTimeout")
				failed = append(failed, n.name)
			}
		}
		if len(failed) > 0 {
			m.publish(config.TopicJobs, event.Node{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeResumeFailed, Cluster: m.cluster},
				Nodes: failed, Reason: "ResumeTimeout reached", ReportedAt: now})
		}
	}
	// Job ends, then starts.
	for _, id := range m.order {
		j := m.jobs[id]
		if j.state == "RUNNING" && !now.Before(j.endAt) {
			m.freeNodes(now, j)
			j.state = "COMPLETED"
			m.publish(config.TopicJobs, m.jobEnd(now, j, event.TypeJobFinished))
		}
	}
	for _, id := range m.order {
		j := m.jobs[id]
		if j.state != "CONFIGURING" {
			continue
		}
		ready := true
		for _, name := range j.nodes {
			n := m.nodes[name]
			if _, hasVM := vms[name]; !hasVM || !n.up() || n.flags[flagNotResponding] || n.base == baseDown {
				ready = false
				break
			}
		}
		if ready {
			j.state = "RUNNING"
			j.endAt = now.Add(j.runtime)
			m.publish(config.TopicJobs, event.Job{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeJobStarted, Cluster: m.cluster},
				JobID: j.id, Partition: j.partition, Nodes: j.nodes, ReportedAt: now})
		}
	}
	// Scheduling, first come first served.
	for _, id := range m.order {
		j := m.jobs[id]
		if j.state != "PENDING" || now.Before(j.eligibleAt) {
			continue
		}
		m.schedule(now, j)
	}
	// Suspend idle dynamic nodes.
	var suspended []string
	for _, n := range m.sortedNodes() {
		if n.static || n.suspendExcluded || n.job != "" || !n.up() || n.base == baseDown || n.idleSince.IsZero() {
			continue
		}
		if !now.Before(n.idleSince.Add(m.cfg.SuspendTime.D())) {
			delete(n.flags, flagNotResponding)
			n.flags[flagPoweredDown] = true
			n.base = baseIdle
			n.lostSince = time.Time{}
			suspended = append(suspended, n.name)
		}
	}
	if len(suspended) > 0 {
		m.publish(config.TopicJobs, event.Node{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeNodeSuspend, Cluster: m.cluster},
			Nodes: suspended, Reason: "SuspendProgram (idle)", ReportedAt: now})
	}
}

// schedule allocates nodes to a pending job if enough are free: powered-up
// idle nodes first, then nodes powering up, then powered-down nodes, lowest
// index first. Powering up nodes calls ResumeProgram (job.pending).
func (m *Model) schedule(now time.Time, j *Job) {
	var up, powering, down []*Node
	for _, n := range m.sortedNodes() {
		if n.pool != j.pool || n.removed || !m.gpusFree(n, j) || n.flags[flagDrain] || n.flags[flagFail] || n.base == baseDown ||
			n.flags[flagPoweringDown] || n.flags[flagPowerDown] || m.reservedWithin(n.name, now, j.timeLimit) {
			continue
		}
		switch {
		case n.flags[flagPoweredDown]:
			down = append(down, n)
		case n.flags[flagPoweringUp]:
			powering = append(powering, n)
		case !n.flags[flagNotResponding]:
			up = append(up, n)
		}
	}
	cands := append(append(up, powering...), down...)
	if len(cands) < j.want {
		return
	}
	resumed := false
	j.nodes = nil
	for _, n := range cands[:j.want] {
		if n.job == "" {
			n.job = j.id
		} else {
			n.shared = append(slices.Clone(n.shared), j.id)
		}
		n.gpusUsed += m.gpusHeld(n, j)
		n.base = allocBase(n)
		if n.flags[flagPoweredDown] {
			delete(n.flags, flagPoweredDown)
			n.flags[flagPoweringUp] = true
			n.flags[flagNotResponding] = true
			n.powerUpSince = now
			resumed = true
		}
		j.nodes = append(j.nodes, n.name)
	}
	j.state = "CONFIGURING"
	m.trace("slurm: job %s allocated %s", j.id, strings.Join(j.nodes, ","))
	if resumed {
		m.publish(config.TopicJobs, event.Job{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeJobPending, Cluster: m.cluster},
			JobID: j.id, Partition: j.partition, NodeCount: len(j.nodes), Nodes: j.nodes, Requeued: j.restarts > 0,
			TimeLimitSeconds: int64(j.timeLimit / time.Second), ReportedAt: now})
	}
}

// gpusFree reports whether node n can take job j beside its jobs: a node
// with no job can; one with jobs only if j asks for GPUs (gres/gpu) and
// they are free there.
func (m *Model) gpusFree(n *Node, j *Job) bool {
	if n.job == "" {
		return true
	}
	return j.gpus > 0 && n.gpus-n.gpusUsed >= j.gpus
}

// gpusHeld is how many of node n's GPUs job j holds: those it asked for,
// or all of them for a job that asked for none.
func (m *Model) gpusHeld(n *Node, j *Job) int {
	if j.gpus > 0 {
		return j.gpus
	}
	return n.gpus
}

// allocBase is the base state of a node with jobs: MIXED while some of
// its GPUs are free, ALLOCATED once they are all held (Slurm shows a node
// whose CPUs are partly allocated as MIXED; a GPU job holds its share of
// them).
func allocBase(n *Node) string {
	if n.gpus > 0 && n.gpusUsed < n.gpus {
		return baseMixed
	}
	return baseAllocated
}

// reservedWithin reports whether a reservation on the node starts before
// a job of this time limit started now would end (0: not checked).
func (m *Model) reservedWithin(node string, now time.Time, limit time.Duration) bool {
	if limit <= 0 {
		return false
	}
	for name, nodes := range m.reservations {
		if from, ok := m.reservedFrom[name]; ok && from.Before(now.Add(limit)) && slices.Contains(nodes, node) {
			return true
		}
	}
	return false
}

// NextDue is the next instant after now at which update would change
// something by the passage of time alone.
func (m *Model) NextDue(now time.Time, vms map[string]VM) (time.Time, bool) {
	var best time.Time
	consider := func(t time.Time) {
		if t.After(now) && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	for _, n := range m.nodes {
		if vm, ok := vms[n.name]; ok && vm.Status == "RUNNING" && (n.flags[flagPoweringUp] || (n.flags[flagNotResponding] && !n.flags[flagPoweredDown]) || n.base == baseDown) {
			consider(vm.Created.Add(m.cfg.BootTime.D()))
		}
		if !m.cfg.Simulate {
			continue
		}
		if rt := m.cfg.ResumeTimeout.D(); rt > 0 && n.flags[flagPoweringUp] {
			consider(n.powerUpSince.Add(rt))
		}
		if !n.lostSince.IsZero() {
			consider(n.lostSince.Add(m.cfg.SlurmdTimeout.D()))
		}
		if !n.static && !n.suspendExcluded && n.job == "" && n.up() && n.base != baseDown && !n.idleSince.IsZero() {
			consider(n.idleSince.Add(m.cfg.SuspendTime.D()))
		}
	}
	if m.cfg.Simulate {
		for _, j := range m.jobs {
			switch j.state {
			case "RUNNING":
				consider(j.endAt)
			case "PENDING":
				consider(j.eligibleAt)
			}
		}
	}
	return best, !best.IsZero()
}

// Serviceable reports whether Slurm can run a job on the node, and why not:
// no DRAIN, DOWN or FAIL; not on its way down; and its power state agrees
// with Compute — powered down with no VM (dynamic nodes only: static nodes
// must be up), powering up with a VM requested or running, or up and
// responding with a live VM.
func (m *Model) Serviceable(name string, vms map[string]VM, vmWanted func(string) bool) (bool, string) {
	n, ok := m.nodes[name]
	if !ok {
		return false, "node unknown to Slurm"
	}
	st := n.state()
	switch {
	case n.flags[flagDrain]:
		return false, st + ": drained"
	case n.flags[flagFail] || n.base == "FAIL" || n.base == "ERROR" || n.base == "UNKNOWN" || n.base == "FUTURE":
		return false, st + ": not usable"
	case n.base == baseDown:
		return false, st + ": DOWN"
	case n.flags[flagPoweringDown] || n.flags[flagPowerDown]:
		return false, st + ": powering down"
	}
	_, hasVM := vms[name]
	switch {
	case n.flags[flagPoweredDown]:
		if n.static {
			return false, st + ": a static node is powered down in Slurm"
		}
		if hasVM {
			return false, st + ": powered down in Slurm while its VM runs"
		}
		return true, st
	case n.flags[flagPoweringUp]:
		if !hasVM && !vmWanted(name) {
			return false, st + ": powering up with no VM requested"
		}
		return true, st
	case n.flags[flagNotResponding]:
		return false, st + ": not responding"
	case !hasVM:
		return false, st + ": up in Slurm with no VM"
	}
	return true, st
}
