// Package slurmstate holds Slurm's node and job states as typed facts,
// parsed once from the words Slurm prints (`scontrol show node|job -o`,
// `sinfo --json`, `squeue --json` of Slurm 22.05 and 24.11, the agent's
// snapshot) by ParseNode and ParseJobState, and read by every decision
// through methods: no decision compares Slurm's words itself.
//
// A node's facts are its base state (NodeBase), its state flags as a set
// (NodeFlags), its reason as Slurm shows it (for display), and, decided
// from that reason when parsed, whose reason it is (Owner: flexslurm's
// reasons start with ReasonPrefix) and which of the node's VMs a
// flexslurm reason was set for (ReasonGeneration).
//
// The values are strings in Slurm's own spelling, so a node or job encodes
// to the same JSON and Firestore fields as Slurm's words did (the agent's
// snapshot, the stored snapshot); Owner and ReasonGeneration never travel
// in a snapshot (they are decided from the reason on decoding).
//
// It imports nothing of flexslurm's and does no I/O.
package slurmstate

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// NodeBase is a node's base state, lower case as flexslurm records it.
// Slurm prints it upper case (`scontrol show node`: State=IDLE+CLOUD; 23.02+
// `sinfo --json`: ["IDLE", "CLOUD"]) or lower case (22.05 `sinfo --json`:
// "idle"); sinfo's compound words (drained, draining, completing) are a
// base state plus flags (ParseNode).
type NodeBase string

// Base node states (Slurm's node_state_string: the NODE_STATE_BASE values).
const (
	NodeIdle      NodeBase = "idle"
	NodeAllocated NodeBase = "allocated"
	NodeMixed     NodeBase = "mixed"
	NodeDown      NodeBase = "down"
	NodeError     NodeBase = "error"
	NodeFuture    NodeBase = "future"
	NodeUnknown   NodeBase = "unknown"
)

// NodeBases lists every base state.
var NodeBases = []NodeBase{NodeIdle, NodeAllocated, NodeMixed, NodeDown, NodeError, NodeFuture, NodeUnknown}

// NodeFlag is one node state flag, upper case as Slurm prints it.
type NodeFlag string

// Node flags flexslurm reads (`scontrol show node` prints them after the
// base state, `sinfo --json` lists them; sinfo's compact suffixes are
// given for reference).
const (
	FlagCloud         NodeFlag = "CLOUD"
	FlagDrain         NodeFlag = "DRAIN"          // draining or drained: no new jobs
	FlagNotResponding NodeFlag = "NOT_RESPONDING" // '*'
	FlagPoweredDown   NodeFlag = "POWERED_DOWN"   // '~': no VM, Slurm considers it off
	FlagPoweringUp    NodeFlag = "POWERING_UP"    // '#': ResumeProgram ran, slurmd not registered yet
	FlagPoweringDown  NodeFlag = "POWERING_DOWN"  // '%': SuspendProgram ran, within SuspendTimeout
	FlagPowerDown     NodeFlag = "POWER_DOWN"     // '!': power down requested, not started yet
	FlagPowerUp       NodeFlag = "POWER_UP"       // power up requested, ResumeProgram not run yet
	FlagCompleting    NodeFlag = "COMPLETING"     // jobs on the node are ending
	FlagMaint         NodeFlag = "MAINT"
	FlagFail          NodeFlag = "FAIL" // failing: no new jobs, as DRAIN, after an administrator's state=fail
	FlagReserved      NodeFlag = "RESERVED"
)

// NodeFlags is a set of node flags: sorted, without duplicates (the zero
// value is the empty set). Build one with NewNodeFlags or ParseNode.
type NodeFlags []NodeFlag

// NewNodeFlags returns the set of fs.
func NewNodeFlags(fs ...NodeFlag) NodeFlags {
	var s NodeFlags
	return s.With(fs...)
}

// Has reports whether f is in the set.
func (s NodeFlags) Has(f NodeFlag) bool {
	return slices.Contains(s, f)
}

// With returns the set with fs added (s is not changed).
func (s NodeFlags) With(fs ...NodeFlag) NodeFlags {
	out := append(NodeFlags(nil), s...)
	for _, f := range fs {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

// Without returns the set with fs removed (s is not changed).
func (s NodeFlags) Without(fs ...NodeFlag) NodeFlags {
	out := slices.DeleteFunc(append(NodeFlags(nil), s...), func(f NodeFlag) bool { return slices.Contains(fs, f) })
	if len(out) == 0 {
		return nil
	}
	return out
}

// Owner says whose reason a node carries.
type Owner string

// Reason owners.
const (
	OwnerNone      Owner = ""          // no reason
	OwnerFlexslurm Owner = "flexslurm" // the reason starts with ReasonPrefix
	OwnerOther     Owner = "other"     // an administrator's, a user's or Slurm's own
)

// ReasonPrefix starts every node reason (drain, down) flexslurm sets and
// every job comment it sets; a reason without it is someone else's.
const ReasonPrefix = "flexslurm:"

// HealthReason starts the words after ReasonPrefix of every reason
// flexslurm sets for a failed health check: the node-side hook's drain
// ("flexslurm: health check failed on <vm>: <reasons>") and the Repair
// function's ("flexslurm: health check failed: <reason> (<vm>)").
const HealthReason = "health check failed"

// Node is what Slurm says of one node: the facts every decision reads.
type Node struct {
	// State is the base state.
	State NodeBase `firestore:"state" json:"state"`
	// Flags are the state flags.
	Flags NodeFlags `firestore:"flags,omitempty" json:"flags,omitempty"`
	// Reason is the node's reason as Slurm shows it (without scontrol's
	// " [user@time]" suffix): for display only; decisions read Owner and
	// ReasonGeneration.
	Reason string `firestore:"reason,omitempty" json:"reason,omitempty"`
	// Owner is whose Reason it is, decided when parsed.
	Owner Owner `firestore:"owner,omitempty" json:"-"`
	// ReasonGeneration is the generation of the node's VM that flexslurm's
	// reason names ("… (<node>-g<k>)", "… on <node>-g<k>: …"); 0 when the
	// reason is not flexslurm's or names none of the node's VMs.
	ReasonGeneration int64 `firestore:"reason_generation,omitempty" json:"-"`
	// ReasonHealth is true when flexslurm's reason is a failed health
	// check's (ReasonPrefix, a space, HealthReason), decided when parsed.
	ReasonHealth bool `firestore:"reason_health,omitempty" json:"-"`
}

// sinfoWords are sinfo's compound state words: a base state plus flags.
var sinfoWords = map[string]struct {
	base  NodeBase
	flags []NodeFlag
}{
	"ALLOC":      {NodeAllocated, nil},
	"MIX":        {NodeMixed, nil},
	"COMP":       {NodeIdle, []NodeFlag{FlagCompleting}},
	"COMPLETING": {NodeIdle, []NodeFlag{FlagCompleting}},
	"DRAINED":    {NodeIdle, []NodeFlag{FlagDrain}},
	"DRAINING":   {NodeAllocated, []NodeFlag{FlagDrain}},
	"DRNG":       {NodeAllocated, []NodeFlag{FlagDrain}},
}

// ParseNode parses a node's state words — the base state and flags in any
// case and order, as `scontrol show node` (State=IDLE+CLOUD+DRAIN split on
// '+'), `sinfo --json` (22.05: "idle" and state_flags; 23.02+: ["IDLE",
// "CLOUD", "DRAIN"]) or a snapshot (state and flags) give them, sinfo's
// compact suffixes (*~#%!$@^-) dropped — and its reason into the node's
// facts. name is the node's name: a flexslurm reason's generation is read
// from the VM name "<name>-g<k>" it contains. Without a base state the
// node is unknown.
func ParseNode(name string, words []string, reason string) Node {
	var n Node
	var flags []NodeFlag
	for _, w := range words {
		w = strings.TrimRight(strings.TrimSpace(w), "*~#%!$@^-")
		if w == "" {
			continue
		}
		if b, ok := baseState(w); ok {
			if n.State == "" {
				n.State = b
			}
			continue
		}
		w = strings.ToUpper(w)
		if c, ok := sinfoWords[w]; ok {
			if n.State == "" && c.base != "" {
				n.State = c.base
			}
			flags = append(flags, c.flags...)
			continue
		}
		if flags == nil {
			flags = make([]NodeFlag, 0, len(words))
		}
		flags = append(flags, NodeFlag(w))
	}
	if n.State == "" {
		n.State = NodeUnknown
	}
	n.Flags = flagSet(flags)
	n.Reason = reason
	n.Owner, n.ReasonGeneration = parseReason(name, reason)
	n.ReasonHealth = n.Owner == OwnerFlexslurm && strings.HasPrefix(reason, ReasonPrefix+" "+HealthReason)
	return n
}

// baseState finds the base state a word (trimmed, not empty) names, in
// any case: the NodeBases entry equal to strings.ToLower(strings.ToUpper(w)),
// compared without building either for a word of ASCII letters (Slurm's),
// whose case folding is ASCII's.
func baseState(w string) (NodeBase, bool) {
	for i := 0; i < len(w); i++ {
		if w[i] >= utf8.RuneSelf {
			b := NodeBase(strings.ToLower(strings.ToUpper(w)))
			return b, slices.Contains(NodeBases, b)
		}
	}
	for _, b := range NodeBases {
		if strings.EqualFold(w, string(b)) {
			return b, true
		}
	}
	return "", false
}

// flagSet is NewNodeFlags(fs...) for a slice the caller gives up: sorted
// and without duplicates in place.
func flagSet(fs []NodeFlag) NodeFlags {
	fs = slices.DeleteFunc(fs, func(f NodeFlag) bool { return f == "" })
	if len(fs) == 0 {
		return nil
	}
	slices.Sort(fs)
	fs = slices.Compact(fs)
	return NodeFlags(fs[:len(fs):len(fs)])
}

// parseReason decides whose reason it is and, for flexslurm's, which
// generation of the node's VM it names (the first "<name>-g<k>").
func parseReason(name, reason string) (Owner, int64) {
	switch {
	case reason == "":
		return OwnerNone, 0
	case !strings.HasPrefix(reason, ReasonPrefix):
		return OwnerOther, 0
	}
	if name == "" {
		return OwnerFlexslurm, 0
	}
	prefix := name + "-g"
	for rest := reason; ; {
		i := strings.Index(rest, prefix)
		if i < 0 {
			return OwnerFlexslurm, 0
		}
		rest = rest[i+len(prefix):]
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		// "<name>-g12" and not "<name>-g12x" nor the prefix of another
		// node's name ("<name>-gpu-…"); "<name>-g12-x7k2" is a VM its MIG
		// named from the base "<name>-g12" (naming.ParseVMName).
		if j > 0 && (j == len(rest) || !isNameChar(rest[j]) || migSuffix(rest[j:])) {
			if g, err := strconv.ParseInt(rest[:j], 10, 64); err == nil && g > 0 {
				return OwnerFlexslurm, g
			}
		}
	}
}

// migSuffix reports whether s starts with the suffix a MIG appends to its
// base instance name (a hyphen and four lowercase letters or digits),
// followed by the end of s or a character no name has.
func migSuffix(s string) bool {
	if len(s) < 5 || s[0] != '-' || (len(s) > 5 && isNameChar(s[5])) {
		return false
	}
	for i := 1; i < 5; i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
}

// Words returns the node's state words: the base state, then the flags.
// ParseNode(name, n.Words(), n.Reason) gives n back.
func (n Node) Words() []string {
	w := []string{string(n.State)}
	for _, f := range n.Flags {
		w = append(w, string(f))
	}
	return w
}

// String renders the state the way scontrol does: "IDLE+CLOUD+POWERED_DOWN".
func (n Node) String() string {
	w := []string{strings.ToUpper(string(n.State))}
	for _, f := range n.Flags {
		w = append(w, string(f))
	}
	return strings.Join(w, "+")
}

// Has reports whether the node carries flag f.
func (n Node) Has(f NodeFlag) bool { return n.Flags.Has(f) }

// Busy reports whether jobs run or end on the node: allocated or mixed, or
// completing.
func (n Node) Busy() bool {
	return n.State == NodeAllocated || n.State == NodeMixed || n.Has(FlagCompleting)
}

// DrainSet reports whether the node is drained or draining (the DRAIN
// flag): Slurm starts no new job on it.
func (n Node) DrainSet() bool { return n.Has(FlagDrain) }

// Drained reports whether Slurm has drained the node: the DRAIN flag and no
// job left on it (sinfo's "drain"; a node still running jobs is draining,
// "drng").
func (n Node) Drained() bool { return n.DrainSet() && !n.Busy() }

// Draining reports whether the node is draining: the DRAIN flag with jobs
// still running or ending on it.
func (n Node) Draining() bool { return n.DrainSet() && n.Busy() }

// Down reports whether the node's base state is down.
func (n Node) Down() bool { return n.State == NodeDown }

// PoweredOff reports whether the node is powered down, powering down, or
// has a power down pending: Slurm no longer counts on its VM.
func (n Node) PoweredOff() bool {
	return n.Has(FlagPoweredDown) || n.Has(FlagPoweringDown) || n.Has(FlagPowerDown)
}

// Ready reports whether the node is up and registered: not down, error,
// future or unknown, responding, and neither powered down nor powering up
// or down. A drained node can be Ready.
func (n Node) Ready() bool {
	switch n.State {
	case NodeDown, NodeError, NodeFuture, NodeUnknown, "":
		return false
	}
	return !n.Has(FlagNotResponding) && !n.Has(FlagPoweredDown) && !n.Has(FlagPoweringUp) &&
		!n.Has(FlagPoweringDown) && !n.Has(FlagPowerDown)
}

// OwnReasonFor reports whether the node carries a reason flexslurm set
// for an earlier VM of the node than generation gen: a drain that
// survived the node's reboot into a new VM.
func (n Node) OwnReasonFor(gen int64) bool {
	return n.Owner == OwnerFlexslurm && n.ReasonGeneration > 0 && n.ReasonGeneration < gen
}

// OwnDrainUpTo reports whether the node is drained or draining with a
// reason flexslurm set for VM generation gen of the node or an earlier
// one.
func (n Node) OwnDrainUpTo(gen int64) bool {
	return n.DrainSet() && n.Owner == OwnerFlexslurm && n.ReasonGeneration > 0 && n.ReasonGeneration <= gen
}

// OwnHealthDrainOf reports whether the node is drained or draining with
// flexslurm's reason for a failed health check of VM generation gen of the
// node: the drain its node-side hook (or the Repair function) set for that
// VM.
func (n Node) OwnHealthDrainOf(gen int64) bool {
	return n.DrainSet() && n.Owner == OwnerFlexslurm && n.ReasonHealth && gen > 0 && n.ReasonGeneration == gen
}

// ForeignDrain reports whether the node is drained or draining with a
// reason that is not flexslurm's (an administrator's): left to them.
func (n Node) ForeignDrain() bool { return n.DrainSet() && n.Owner == OwnerOther }

// JobState is a job's base state, upper case as Slurm prints it.
type JobState string

// Job states (Slurm's job_state_string).
const (
	JobPending     JobState = "PENDING"
	JobConfiguring JobState = "CONFIGURING"
	JobRunning     JobState = "RUNNING"
	JobCompleting  JobState = "COMPLETING"
	JobSuspended   JobState = "SUSPENDED"
	JobCompleted   JobState = "COMPLETED"
	JobCancelled   JobState = "CANCELLED"
	JobFailed      JobState = "FAILED"
	JobTimeout     JobState = "TIMEOUT"
	JobNodeFail    JobState = "NODE_FAIL"
	JobPreempted   JobState = "PREEMPTED"
	JobBootFail    JobState = "BOOT_FAIL"
	JobDeadline    JobState = "DEADLINE"
	JobOOM         JobState = "OUT_OF_MEMORY"
	// The states below are job state flags that 22.05's squeue prints as
	// the state itself (squeue -t accepts them): the job is alive.
	JobRequeued    JobState = "REQUEUED"
	JobRequeueHold JobState = "REQUEUE_HOLD"
	JobRequeueFed  JobState = "REQUEUE_FED"
	JobResizing    JobState = "RESIZING"
	JobSignaling   JobState = "SIGNALING"
	JobStageOut    JobState = "STAGE_OUT"
)

// baseJobStates are the states ParseJobState takes as the base state when
// listed among flags (JOB_STATE_BASE).
var baseJobStates = []JobState{JobPending, JobRunning, JobSuspended, JobCompleted, JobCancelled, JobFailed,
	JobTimeout, JobNodeFail, JobPreempted, JobBootFail, JobDeadline, JobOOM}

// ParseJobState parses a job's state words (scontrol's JobState split on
// '+', squeue's state or 23.02+ job_state list) into its base state and the
// other words, upper case. Without a base word, the first word is the
// state (22.05 squeue prints CONFIGURING, COMPLETING, REQUEUED as the
// state).
func ParseJobState(words []string) (JobState, []string) {
	var state JobState
	var flags []string
	for _, w := range words {
		w = strings.ToUpper(strings.TrimSpace(w))
		if w == "" {
			continue
		}
		if state == "" && slices.Contains(baseJobStates, JobState(w)) {
			state = JobState(w)
			continue
		}
		flags = append(flags, w)
	}
	if state == "" && len(flags) > 0 {
		state, flags = JobState(flags[0]), flags[1:]
	}
	if len(flags) == 0 {
		flags = nil
	}
	return state, flags
}

// Pending reports whether the job waits in PENDING.
func (s JobState) Pending() bool { return s == JobPending }

// Unstarted reports whether the job has not started: PENDING, or
// CONFIGURING (its nodes boot).
func (s JobState) Unstarted() bool { return s == JobPending || s == JobConfiguring }

// Waiting reports whether the job waits to run: pending, or being
// requeued.
func (s JobState) Waiting() bool {
	return s == JobPending || s == JobRequeued || s == JobRequeueHold || s == JobRequeueFed
}

// Running reports whether the job runs (RUNNING).
func (s JobState) Running() bool { return s == JobRunning }

// OnNodes reports whether the job runs on its nodes or ends there:
// RUNNING or COMPLETING.
func (s JobState) OnNodes() bool { return s == JobRunning || s == JobCompleting }

// Alive reports whether the job still needs nodes: it has not ended.
func (s JobState) Alive() bool {
	switch s {
	case JobPending, JobConfiguring, JobRunning, JobCompleting, JobSuspended, JobRequeued, JobRequeueHold,
		JobRequeueFed, JobResizing, JobSignaling, JobStageOut:
		return true
	}
	return false
}

// Finished reports whether the job has ended for good (COMPLETED,
// CANCELLED, FAILED, TIMEOUT, NODE_FAIL, …).
func (s JobState) Finished() bool {
	switch s {
	case JobCompleted, JobCancelled, JobFailed, JobTimeout, JobNodeFail, JobPreempted, JobBootFail, JobDeadline, JobOOM:
		return true
	}
	return false
}
