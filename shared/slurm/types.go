package slurm

import (
	"slices"
	"strings"
	"time"
)

// Node flags flexslurm reads (Slurm's upper-case state flags, as
// `scontrol show node` prints them after the base state and `sinfo --json`
// lists them).
const (
	FlagCloud         = "CLOUD"
	FlagDrain         = "DRAIN"          // draining or drained: no new jobs
	FlagNotResponding = "NOT_RESPONDING" // '*' in sinfo
	FlagPoweredDown   = "POWERED_DOWN"   // '~': no VM, Slurm considers it off
	FlagPoweringUp    = "POWERING_UP"    // '#': ResumeProgram ran, slurmd not registered yet
	FlagPoweringDown  = "POWERING_DOWN"  // '%': SuspendProgram ran, within SuspendTimeout
	FlagPowerDown     = "POWER_DOWN"     // '!': power down requested, not started yet
	FlagPowerUp       = "POWER_UP"       // power up requested, ResumeProgram not run yet
	FlagCompleting    = "COMPLETING"     // jobs on the node are ending
	FlagMaint         = "MAINT"
	FlagReserved      = "RESERVED"
)

// Base node states, lower case as flexslurm reports them.
const (
	NodeIdle      = "idle"
	NodeAllocated = "allocated"
	NodeMixed     = "mixed"
	NodeDown      = "down"
	NodeError     = "error"
	NodeFuture    = "future"
	NodeUnknown   = "unknown"
)

var baseNodeStates = []string{NodeIdle, NodeAllocated, NodeMixed, NodeDown, NodeError, NodeFuture, NodeUnknown}

// NodeInfo is one Slurm node as scontrol or sinfo reports it.
type NodeInfo struct {
	// Name is the node name.
	Name string
	// State is the base state in lower case: idle, allocated, mixed, down,
	// error, future or unknown.
	State string
	// Flags are the state flags in upper case, in Slurm's order: CLOUD,
	// DRAIN, NOT_RESPONDING, POWERED_DOWN, POWERING_UP, …
	Flags []string
	// Reason is the reason set with a drain or down, without the
	// " [user@time]" suffix scontrol appends; empty when none.
	Reason string
	// Addr and Hostname are NodeAddr and NodeHostName.
	Addr, Hostname string
	// Port is the slurmd port; 0 when not reported.
	Port int
	// Partitions lists the node's partitions.
	Partitions []string
}

// Has reports whether the node carries state flag f (upper case).
func (n NodeInfo) Has(f string) bool { return slices.Contains(n.Flags, f) }

// Drained reports whether the node is draining or drained.
func (n NodeInfo) Drained() bool { return n.Has(FlagDrain) }

// DrainComplete reports whether Slurm has drained the node rather than
// still draining it: the DRAIN flag with no job left on it (base state
// neither allocated nor mixed, and not completing). sinfo shows it "drain",
// where a node still running jobs shows "drng".
func (n NodeInfo) DrainComplete() bool {
	return n.Has(FlagDrain) && n.State != NodeAllocated && n.State != NodeMixed && !n.Has(FlagCompleting)
}

// Down reports whether the node's base state is down.
func (n NodeInfo) Down() bool { return n.State == NodeDown }

// PoweredOff reports whether the node is powered down, powering down, or
// has a power down pending: Slurm no longer counts on its VM.
func (n NodeInfo) PoweredOff() bool {
	return n.Has(FlagPoweredDown) || n.Has(FlagPoweringDown) || n.Has(FlagPowerDown)
}

// Ready reports whether the node is up and registered: not down, error,
// future or unknown, responding, and neither powered down nor powering up or
// down. A drained node can be Ready.
func (n NodeInfo) Ready() bool {
	switch n.State {
	case NodeDown, NodeError, NodeFuture, NodeUnknown, "":
		return false
	}
	return !n.Has(FlagNotResponding) && !n.Has(FlagPoweredDown) && !n.Has(FlagPoweringUp) &&
		!n.Has(FlagPoweringDown) && !n.Has(FlagPowerDown)
}

// StateString renders the state the way scontrol does:
// "IDLE+CLOUD+POWERED_DOWN".
func (n NodeInfo) StateString() string {
	return strings.Join(append([]string{strings.ToUpper(n.State)}, n.Flags...), "+")
}

// splitNodeState turns Slurm's state words (the base state and flags, in any
// case, possibly with sinfo's compact suffixes) into a lower-case base state
// and upper-case flags.
func splitNodeState(words []string) (state string, flags []string) {
	for _, w := range words {
		w = strings.TrimRight(strings.TrimSpace(w), "*~#%!$@^-")
		if w == "" {
			continue
		}
		lw := strings.ToLower(w)
		if state == "" && slices.Contains(baseNodeStates, lw) {
			state = lw
			continue
		}
		flags = append(flags, strings.ToUpper(w))
	}
	if state == "" {
		state = NodeUnknown
	}
	return state, flags
}

// Job states, upper case as Slurm prints them.
const (
	JobPending     = "PENDING"
	JobConfiguring = "CONFIGURING"
	JobRunning     = "RUNNING"
	JobCompleting  = "COMPLETING"
	JobSuspended   = "SUSPENDED"
	JobCompleted   = "COMPLETED"
	JobCancelled   = "CANCELLED"
	JobFailed      = "FAILED"
	JobTimeout     = "TIMEOUT"
	JobNodeFail    = "NODE_FAIL"
	JobPreempted   = "PREEMPTED"
	JobBootFail    = "BOOT_FAIL"
	JobDeadline    = "DEADLINE"
	JobOOM         = "OUT_OF_MEMORY"
)

// terminalJobStates are the states of a job that has ended for good.
var terminalJobStates = []string{JobCompleted, JobCancelled, JobFailed, JobTimeout, JobNodeFail,
	JobPreempted, JobBootFail, JobDeadline, JobOOM}

// JobInfo is one Slurm job as scontrol or squeue reports it.
type JobInfo struct {
	// ID is the job's user-facing id: "123", or "12_3" for task 3 of array
	// job 12.
	ID string
	// JobID is Slurm's unique numeric id (an array task has its own).
	JobID int64
	// State is the base job state in upper case: PENDING, CONFIGURING,
	// RUNNING, COMPLETING, COMPLETED, CANCELLED, …
	State string
	// StateFlags are the extra state words of Slurm 23.02+ (REQUEUED,
	// COMPLETING, CONFIGURING when listed beside the base state, …).
	StateFlags []string
	// Reason is the state reason as the source spells it: "Resources",
	// "BeginTime", "JobHeldUser", "launch_failed_requeued_held", "None".
	Reason string
	// Description is squeue's state_description, e.g. "launch failed
	// requeued held"; empty from scontrol.
	Description string
	// Partition is the job's partition (the first, when several were
	// requested).
	Partition string
	// NodeList is the allocated nodes as a hostlist; empty while none.
	NodeList string
	// Nodes is NodeList expanded.
	Nodes []string
	// NodeCount is the number of nodes allocated or requested (the lower
	// bound of a requested range).
	NodeCount int
	// Restarts counts requeues.
	Restarts int
	// Comment is the job's comment (scontrol's Comment=); empty when none.
	Comment string
	// TimeLimit is the job's time limit; 0 when unlimited or unknown.
	TimeLimit time.Duration
	// Priority is the job's priority; 0 for a held job.
	Priority int64
	// SubmitTime is when the job was submitted, or last requeued (Slurm
	// resets it once a requeue completes). Only scontrol reports it.
	SubmitTime time.Time
	// StartTime is when the job started or is expected to (a requeue
	// resets it); zero when Slurm says Unknown. Only scontrol reports it.
	StartTime time.Time
	// EndTime is when the job ended or is expected to; zero when Slurm
	// says Unknown — as it does for a job being requeued, during its
	// EpilogSlurmctld. Only scontrol reports it.
	EndTime time.Time
}

// Pending reports whether the job waits in PENDING.
func (j JobInfo) Pending() bool { return j.State == JobPending }

// Finished reports whether the job has ended for good (COMPLETED,
// CANCELLED, FAILED, TIMEOUT, NODE_FAIL, …).
func (j JobInfo) Finished() bool { return slices.Contains(terminalJobStates, j.State) }

// Held reports whether a pending job is held (by a user, an administrator,
// or a requeue in held state): it will not start before `scontrol
// release`. The reasons differ by release and by output: JobHeldUser and
// JobHeldAdmin everywhere; after a launch failure
// "launch_failed_requeued_held" (scontrol) or the description "launch
// failed requeued held" (squeue --json); after `scontrol requeuehold`,
// 24.11's scontrol prints "job_requeued_in_held_state" (description "job
// requeued in held state"). docs/slurm-versions.md.
func (j JobInfo) Held() bool {
	if !j.Pending() {
		return false
	}
	r := strings.ReplaceAll(strings.ToLower(j.Reason), " ", "_")
	d := strings.ReplaceAll(strings.ToLower(j.Description), " ", "_")
	return strings.HasPrefix(r, "jobheld") || strings.Contains(r, "requeued_held") || strings.Contains(r, "requeued_in_held_state") ||
		strings.Contains(d, "requeued_held") || strings.Contains(d, "requeued_in_held_state")
}

// Reservation is one Slurm reservation as `scontrol show reservation`
// reports it.
type Reservation struct {
	Name      string
	Nodes     []string // expanded
	NodeList  string   // as Slurm prints it
	Flags     []string // upper case: MAINT, IGNORE_JOBS, SPEC_NODES, …
	State     string   // ACTIVE or INACTIVE
	StartTime time.Time
	EndTime   time.Time
}
