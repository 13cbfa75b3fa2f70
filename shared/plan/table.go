package plan

import (
	"fmt"
	"slices"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// SlurmClass is what Slurm says of a node, reduced to what the reconciler
// acts on (from the base state and flags of `sinfo --json` / the agent's
// snapshot; the compact `sinfo` suffixes are given for reference).
type SlurmClass string

// Slurm node classes.
const (
	SlurmUnknown      SlurmClass = "unknown"       // no recent snapshot, or the node is not in it
	SlurmPoweredDown  SlurmClass = "powered_down"  // idle~ : IDLE+CLOUD+POWERED_DOWN (also with NOT_RESPONDING)
	SlurmDownPowered  SlurmClass = "down_powered"  // down~ : DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING (ResumeTimeout reached)
	SlurmPoweringUp   SlurmClass = "powering_up"   // #     : …+POWERING_UP (ResumeProgram called, waiting for slurmd)
	SlurmPoweringDown SlurmClass = "powering_down" // % or ! : …+POWERING_DOWN / POWER_DOWN
	SlurmIdle         SlurmClass = "idle"          // idle  : registered, no job
	SlurmBusy         SlurmClass = "busy"          // alloc, mix, comp : registered, running or ending jobs
	SlurmDrain        SlurmClass = "drain"         // drng, drain : DRAIN flag
	SlurmDown         SlurmClass = "down"          // down, idle*, … : DOWN or NOT_RESPONDING without a power flag
)

// SlurmClasses lists every class.
var SlurmClasses = []SlurmClass{SlurmUnknown, SlurmPoweredDown, SlurmDownPowered, SlurmPoweringUp, SlurmPoweringDown, SlurmIdle, SlurmBusy, SlurmDrain, SlurmDown}

// ClassifySlurm reduces a snapshot node's facts to its class. Power flags
// come first (a powered-down node is powered down whatever else it says),
// then DRAIN, then down, not responding, future or unknown, then whether
// jobs run or end there, then idle; anything else (error) is down.
func ClassifySlurm(n model.SlurmNode) SlurmClass {
	switch {
	case n.Has(slurmstate.FlagPoweringDown) || n.Has(slurmstate.FlagPowerDown):
		return SlurmPoweringDown
	case n.Has(slurmstate.FlagPoweredDown) && n.Down():
		return SlurmDownPowered
	case n.Has(slurmstate.FlagPoweredDown):
		return SlurmPoweredDown
	case n.Has(slurmstate.FlagPoweringUp):
		return SlurmPoweringUp
	case n.DrainSet():
		return SlurmDrain
	case n.Down() || n.Has(slurmstate.FlagNotResponding) || n.State == slurmstate.NodeFuture || n.State == slurmstate.NodeUnknown:
		return SlurmDown
	case n.Busy():
		return SlurmBusy
	case n.State == slurmstate.NodeIdle:
		return SlurmIdle
	}
	return SlurmDown
}

// VMClass is what Compute says of a node's current-generation VM.
type VMClass string

// VM classes (Compute instance status, Compute API).
const (
	VMAbsent       VMClass = "absent"       // not in the list
	VMProvisioning VMClass = "provisioning" // PENDING, PROVISIONING, STAGING
	VMRunning      VMClass = "running"      // RUNNING
	VMStopping     VMClass = "stopping"     // STOPPING, DEPROVISIONING, SUSPENDING, PENDING_STOP: on its way out
	VMStopped      VMClass = "stopped"      // TERMINATED, STOPPED, SUSPENDED: exists but does not run
	VMRepairing    VMClass = "repairing"    // REPAIRING: host repair (reportHostAsFaulty) in progress
)

// VMClasses lists every class.
var VMClasses = []VMClass{VMAbsent, VMProvisioning, VMRunning, VMStopping, VMStopped, VMRepairing}

// ClassifyVM reduces an instance status to its class.
func ClassifyVM(status string, present bool) VMClass {
	if !present {
		return VMAbsent
	}
	switch status {
	case "PENDING", "PROVISIONING", "STAGING":
		return VMProvisioning
	case "RUNNING":
		return VMRunning
	case "STOPPING", "DEPROVISIONING", "SUSPENDING", "PENDING_STOP":
		return VMStopping
	case "REPAIRING":
		return VMRepairing
	}
	return VMStopped
}

// Combo is one combination the reconciler can find a node in.
type Combo struct {
	Slurm SlurmClass
	VM    VMClass
	Phase model.Phase
	Kind  model.NodeKind
}

func (c Combo) String() string {
	return fmt.Sprintf("slurm=%s vm=%s phase=%s kind=%s", c.Slurm, c.VM, c.Phase, c.Kind)
}

// Outcome is what the reconciler does with a node in a combination.
type Outcome string

// Outcomes.
const (
	// OutcomeOK: consistent; nothing to do.
	OutcomeOK Outcome = "ok"
	// OutcomeWait: a transition in progress (capacity queue, boot, deletion,
	// host repair); it resolves by itself or through an event.
	OutcomeWait Outcome = "wait"
	// OutcomeMarkRunning: the requested VM runs: record it.
	OutcomeMarkRunning Outcome = "mark_running"
	// OutcomeCheckRequest: requested, no VM yet: consult the resize request
	// (wait while queued, issue it again if it was lost, end the generation
	// if it failed or was cancelled).
	OutcomeCheckRequest Outcome = "check_request"
	// OutcomeVMGone: the VM the record says runs is not listed: after
	// enough consecutive misses (eventual consistency), end the generation
	// as an expiry or a loss.
	OutcomeVMGone Outcome = "vm_gone"
	// OutcomeEndStopped: the VM exists but is stopped or terminated (a STOP
	// termination action, or an interruption): delete it and end the
	// generation.
	OutcomeEndStopped Outcome = "end_stopped"
	// OutcomeEndGoing: the VM flexslurm holds as running is being deleted
	// by Compute (max run duration) or by someone else: end its generation
	// now, without waiting for the deletion to finish. The next generation
	// has a new VM name, so it never collides with the old VM, and the old
	// VM, named by no record, can only finish going away (or is deleted as
	// an orphan should it stop instead).
	OutcomeEndGoing Outcome = "end_going"
	// OutcomeDeleteAgain: the VM should be deleted and is not on its way
	// out: issue the deletion again.
	OutcomeDeleteAgain Outcome = "delete_again"
	// OutcomeMarkReleased: the VM flexslurm deleted is gone: record it.
	OutcomeMarkReleased Outcome = "mark_released"
	// OutcomeDeleteStray: a VM of the current generation exists although
	// none is wanted (a request fulfilled after it was released): delete it.
	OutcomeDeleteStray Outcome = "delete_stray"
	// OutcomeReleaseIdle: a dynamic node's VM runs but Slurm has powered
	// the node down (the suspend report was lost): release the VM.
	OutcomeReleaseIdle Outcome = "release_idle"
	// OutcomeSlurmResume: Slurm holds the node DOWN (ResumeTimeout) or
	// powered down while its static VM runs: tell Slurm to resume it.
	OutcomeSlurmResume Outcome = "slurm_resume"
	// OutcomeResumeFailed: Slurm gave up resuming a dynamic node whose
	// capacity flexslurm still waits for (its ResumeFailProgram report was
	// lost or is late): as on that report, release the capacity, resume the
	// node in Slurm and let its job wait for Slurm's next allocation.
	OutcomeResumeFailed Outcome = "resume_failed"
	// OutcomeSlurmPowerDown: Slurm thinks the node is up but there is no
	// VM and none is wanted: power it down in Slurm (which requeues any job
	// there), so the node can be resumed cleanly.
	OutcomeSlurmPowerDown Outcome = "slurm_power_down"
	// OutcomeReplace: the VM runs but its node never came up in Slurm:
	// delete it and (static) request a new generation.
	OutcomeReplace Outcome = "replace"
	// OutcomeObserve: unexpected. Watch it; if it lasts past the observe
	// grace period, apply Rule.Fallback and raise an alert.
	OutcomeObserve Outcome = "observe"
)

// Rule is one row of the decision table.
type Rule struct {
	// Slurm, VM, Phase and Kind match a Combo; an empty list matches any.
	Slurm []SlurmClass
	VM    []VMClass
	Phase []model.Phase
	Kind  []model.NodeKind
	// Outcome is what to do; Fallback is what OutcomeObserve does after the
	// grace period.
	Outcome  Outcome
	Fallback Outcome
	// Why explains the row, for logs and operators.
	Why string
}

func (r Rule) matches(c Combo) bool {
	return (len(r.Slurm) == 0 || slices.Contains(r.Slurm, c.Slurm)) &&
		(len(r.VM) == 0 || slices.Contains(r.VM, c.VM)) &&
		(len(r.Phase) == 0 || slices.Contains(r.Phase, c.Phase)) &&
		(len(r.Kind) == 0 || slices.Contains(r.Kind, c.Kind))
}

var (
	static    = []model.NodeKind{model.NodeStatic}
	dynamic   = []model.NodeKind{model.NodeDynamic}
	upInSlurm = []SlurmClass{SlurmIdle, SlurmBusy, SlurmDrain, SlurmDown}
)

// Table is THE decision table of the reconciler: Slurm node class × VM
// class × stored phase × static/dynamic. The first matching row wins.
// There is deliberately no catch-all row: TestTableIsExhaustive enumerates
// every combination and fails on one that no row maps, and unexpected
// combinations are mapped explicitly to OutcomeObserve.
var Table = []Rule{
	// ── Requested: capacity was asked for this generation.
	{Phase: []model.Phase{model.PhaseRequested}, Slurm: []SlurmClass{SlurmDownPowered}, Kind: dynamic, Outcome: OutcomeResumeFailed,
		Why: "Slurm gave up resuming the node (ResumeTimeout) and requeued its job: it no longer allocates the node"},
	{Phase: []model.Phase{model.PhaseRequested}, Slurm: []SlurmClass{SlurmDownPowered}, Kind: static, Outcome: OutcomeSlurmResume,
		Why: "Slurm gave up resuming the static node (ResumeTimeout): resume it in Slurm; its capacity stays requested"},
	{Phase: []model.Phase{model.PhaseRequested}, VM: []VMClass{VMAbsent}, Outcome: OutcomeCheckRequest,
		Why: "capacity requested, no VM yet: follow the resize request"},
	{Phase: []model.Phase{model.PhaseRequested}, VM: []VMClass{VMProvisioning}, Outcome: OutcomeObserve, Fallback: OutcomeEndStopped,
		Why: "the VM is being created (a resize request creates it once capacity is granted, so it should not stay provisioning)"},
	{Phase: []model.Phase{model.PhaseRequested}, VM: []VMClass{VMRepairing}, Outcome: OutcomeWait,
		Why: "the VM is being repaired on another host"},
	{Phase: []model.Phase{model.PhaseRequested}, VM: []VMClass{VMRunning}, Outcome: OutcomeMarkRunning,
		Why: "the requested VM runs"},
	{Phase: []model.Phase{model.PhaseRequested}, VM: []VMClass{VMStopped}, Outcome: OutcomeEndStopped,
		Why: "the requested VM exists but is stopped"},
	{Phase: []model.Phase{model.PhaseRequested}, VM: []VMClass{VMStopping}, Outcome: OutcomeObserve, Fallback: OutcomeVMGone,
		Why: "the requested VM is being deleted although flexslurm did not ask"},

	// ── Running: the record says the VM runs.
	{Phase: []model.Phase{model.PhaseRunning}, VM: []VMClass{VMAbsent}, Outcome: OutcomeVMGone,
		Why: "the VM is not listed: expired or lost, once the misses confirm it"},
	{Phase: []model.Phase{model.PhaseRunning}, VM: []VMClass{VMStopping}, Outcome: OutcomeEndGoing,
		Why: "the VM is going away (expired, or deleted outside flexslurm): its generation ends now, and the next one, under a new VM name, need not wait for the deletion"},
	{Phase: []model.Phase{model.PhaseRunning}, VM: []VMClass{VMStopped}, Outcome: OutcomeEndStopped,
		Why: "the VM stopped (STOP at max run duration, or an interruption)"},
	{Phase: []model.Phase{model.PhaseRunning}, VM: []VMClass{VMProvisioning, VMRepairing}, Outcome: OutcomeWait,
		Why: "the VM restarts (host repair)"},
	{Phase: []model.Phase{model.PhaseRunning}, VM: []VMClass{VMRunning}, Slurm: []SlurmClass{SlurmUnknown, SlurmIdle, SlurmBusy, SlurmDrain}, Outcome: OutcomeOK,
		Why: "the VM runs and Slurm uses (or drained) the node"},
	{Phase: []model.Phase{model.PhaseRunning}, VM: []VMClass{VMRunning}, Slurm: []SlurmClass{SlurmPoweringUp, SlurmPoweringDown}, Outcome: OutcomeWait,
		Why: "Slurm is powering the node up or down"},
	{Phase: []model.Phase{model.PhaseRunning}, VM: []VMClass{VMRunning}, Slurm: []SlurmClass{SlurmPoweredDown}, Kind: dynamic, Outcome: OutcomeReleaseIdle,
		Why: "Slurm powered the dynamic node down but its VM still runs (suspend report lost)"},
	{Phase: []model.Phase{model.PhaseRunning}, VM: []VMClass{VMRunning}, Slurm: []SlurmClass{SlurmPoweredDown, SlurmDownPowered}, Kind: static, Outcome: OutcomeSlurmResume,
		Why: "Slurm holds a static node powered down or DOWN while its VM runs"},
	{Phase: []model.Phase{model.PhaseRunning}, VM: []VMClass{VMRunning}, Slurm: []SlurmClass{SlurmDownPowered}, Kind: dynamic, Outcome: OutcomeReleaseIdle,
		Why: "Slurm gave up on the dynamic node (ResumeTimeout) but its VM runs"},
	{Phase: []model.Phase{model.PhaseRunning}, VM: []VMClass{VMRunning}, Slurm: []SlurmClass{SlurmDown}, Outcome: OutcomeObserve, Fallback: OutcomeReplace,
		Why: "the VM runs but Slurm says the node is down or not responding (booting, or slurmd never started)"},

	// ── Deleting: flexslurm asked for the VM to go.
	{Phase: []model.Phase{model.PhaseDeleting}, VM: []VMClass{VMAbsent}, Outcome: OutcomeMarkReleased,
		Why: "the VM flexslurm deleted is gone"},
	{Phase: []model.Phase{model.PhaseDeleting}, VM: []VMClass{VMStopping}, Outcome: OutcomeWait,
		Why: "the deletion is in progress"},
	{Phase: []model.Phase{model.PhaseDeleting}, VM: []VMClass{VMProvisioning, VMRunning, VMStopped, VMRepairing}, Outcome: OutcomeDeleteAgain,
		Why: "the VM should be deleted and is still there"},

	// ── Released: no VM wanted for this node.
	{Phase: []model.Phase{model.PhaseReleased}, VM: []VMClass{VMStopping}, Outcome: OutcomeWait,
		Why: "a VM of this generation is going away"},
	{Phase: []model.Phase{model.PhaseReleased}, VM: []VMClass{VMProvisioning, VMRunning, VMStopped, VMRepairing}, Outcome: OutcomeDeleteStray,
		Why: "a VM exists although none is wanted (a request fulfilled after the node was released)"},
	{Phase: []model.Phase{model.PhaseReleased}, VM: []VMClass{VMAbsent}, Slurm: []SlurmClass{SlurmUnknown, SlurmPoweredDown, SlurmPoweringDown}, Outcome: OutcomeOK,
		Why: "no VM, and Slurm has the node powered down"},
	{Phase: []model.Phase{model.PhaseReleased}, VM: []VMClass{VMAbsent}, Slurm: []SlurmClass{SlurmDownPowered}, Outcome: OutcomeSlurmResume,
		Why: "Slurm left the node DOWN after ResumeTimeout: resume it so it can be powered up again"},
	{Phase: []model.Phase{model.PhaseReleased}, VM: []VMClass{VMAbsent}, Slurm: []SlurmClass{SlurmPoweringUp}, Kind: dynamic, Outcome: OutcomeObserve, Fallback: OutcomeSlurmPowerDown,
		Why: "Slurm is resuming the node but no VM was asked for (the job report may be late)"},
	{Phase: []model.Phase{model.PhaseReleased}, VM: []VMClass{VMAbsent}, Slurm: []SlurmClass{SlurmPoweringUp}, Kind: static, Outcome: OutcomeWait,
		Why: "a static node without a VM is requested again in this pass"},
	{Phase: []model.Phase{model.PhaseReleased}, VM: []VMClass{VMAbsent}, Slurm: upInSlurm, Kind: dynamic, Outcome: OutcomeSlurmPowerDown,
		Why: "Slurm thinks the node is up but it has no VM: power it down in Slurm (its jobs are requeued)"},
	{Phase: []model.Phase{model.PhaseReleased}, VM: []VMClass{VMAbsent}, Slurm: upInSlurm, Kind: static, Outcome: OutcomeWait,
		Why: "a static node without a VM is requested again in this pass; Slurm follows when it registers"},
}

// Decide returns the first row matching c, and false when none does.
func Decide(c Combo) (Rule, bool) {
	for _, r := range Table {
		if r.matches(c) {
			return r, true
		}
	}
	return Rule{}, false
}
