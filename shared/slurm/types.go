package slurm

import (
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// NodeInfo is one Slurm node as scontrol or sinfo reports it: its name,
// its state as typed facts (slurmstate.Node: base state, flags, reason and
// whose reason it is; Drained, Draining, Ready, PoweredOff, …), and where
// it is.
type NodeInfo struct {
	// Name is the node name.
	Name string
	slurmstate.Node
	// Addr and Hostname are NodeAddr and NodeHostName.
	Addr, Hostname string
	// Port is the slurmd port; 0 when not reported.
	Port int
	// Partitions lists the node's partitions.
	Partitions []string
}

// StateString renders the state the way scontrol does:
// "IDLE+CLOUD+POWERED_DOWN".
func (n NodeInfo) StateString() string { return n.Node.String() }

// JobInfo is one Slurm job as scontrol or squeue reports it.
type JobInfo struct {
	// ID is the job's user-facing id: "123", or "12_3" for task 3 of array
	// job 12.
	ID string
	// JobID is Slurm's unique numeric id (an array task has its own).
	JobID int64
	// State is the base job state: PENDING, CONFIGURING, RUNNING,
	// COMPLETING, COMPLETED, CANCELLED, …
	State slurmstate.JobState
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
func (j JobInfo) Pending() bool { return j.State.Pending() }

// Finished reports whether the job has ended for good (COMPLETED,
// CANCELLED, FAILED, TIMEOUT, NODE_FAIL, …).
func (j JobInfo) Finished() bool { return j.State.Finished() }

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
