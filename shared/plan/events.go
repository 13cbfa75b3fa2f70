package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// ClusterEvent is one thing a user or operator cares about that a decision
// did: a VM requested, running or ended, a health check that failed, a
// drain, a repair, a stockout, a backoff, a breaker, a job refused. Events
// are derived from a decision (Events), never decided: they change
// nothing, and the executor stores them after the decision's commit
// (docs/events.md, "Cluster events").
type ClusterEvent struct {
	// Type is one of the EventType constants: stable, part of the API.
	Type string
	Time time.Time
	// Pool, Node, VM, Generation and Job name what it concerns ("" or 0
	// when not one).
	Pool       string
	Node       string
	VM         string
	Generation int64
	Job        string
	// Message says what happened, in one line.
	Message string
	// Wait is, for VM_RUNNING, how long the VM's capacity took to come
	// (requested to running); 0 otherwise or when unknown.
	Wait time.Duration
	// Check is, for HEALTH_CHECK_FAILED, the node-side hook whose check
	// failed (event.HealthHooks; "" when not known).
	Check string
}

// Event types. Google's training-cluster pages name node states
// (RUNNING, REPAIRING) but no events; these names are flexslurm's, in the
// enum style of Google APIs (https://google.aip.dev/126), and never change
// meaning once published.
const (
	EventVMRequested         = "VM_REQUESTED"         // capacity asked for a node's first VM
	EventVMRecreated         = "VM_RECREATED"         // capacity asked for a node's next VM after one ended
	EventVMRunning           = "VM_RUNNING"           // the VM runs
	EventVMExpired           = "VM_EXPIRED"           // Compute Engine ended the VM at its run duration
	EventVMLost              = "VM_LOST"              // the VM vanished without an expiry
	EventVMReleased          = "VM_RELEASED"          // an idle or surplus node's VM is released
	EventCapacityFailed      = "CAPACITY_FAILED"      // a resize request was refused or failed
	EventCapacityTimedOut    = "CAPACITY_TIMED_OUT"   // a queued resize request outlived the queue timeout
	EventHealthCheckFailed   = "HEALTH_CHECK_FAILED"  // a health check (prolog, epilog, HealthCheckProgram) failed
	EventNodeDrained         = "NODE_DRAINED"         // Slurm is asked to drain the node
	EventRepairStarted       = "REPAIR_STARTED"       // host repair (reportHostAsFaulty) asked for
	EventRepairBlocked       = "REPAIR_BLOCKED"       // the pool's repair budget holds the repair back
	EventNodeRepaired        = "NODE_REPAIRED"        // the host-repaired node is back in service
	EventNodeReplaced        = "NODE_REPLACED"        // a failed node's VM is deleted (and replaced where it must serve)
	EventStockout            = "STOCKOUT"             // Compute Engine has no capacity for the pool
	EventQuotaExceeded       = "QUOTA_EXCEEDED"       // the project's quota stops the pool
	EventPoolBackoff         = "POOL_BACKOFF"         // no capacity is requested for the pool until a time
	EventBreakerOpened       = "BREAKER_OPENED"       // VMs failing to join Slurm stopped provisioning
	EventBreakerClosed       = "BREAKER_CLOSED"       // provisioning resumed
	EventJobRefused          = "JOB_REFUSED"          // no node of the job's pool can run it as asked
	EventJobRefusalCleared   = "JOB_FITS"             // a refused job fits again
	EventRequestResubmitted  = "CAPACITY_RESUBMITTED" // a queued request was cancelled and asked again
	EventNodeDiagnosisNeeded = "NODE_DIAGNOSIS"       // repeated inconclusive checks, or the repair limit, left the node drained for an operator
)

// EventTypes lists every event type, in the order docs/events.md lists them.
var EventTypes = []string{
	EventVMRequested, EventVMRecreated, EventVMRunning, EventVMExpired, EventVMLost, EventVMReleased,
	EventCapacityFailed, EventCapacityTimedOut, EventRequestResubmitted,
	EventHealthCheckFailed, EventNodeDrained, EventRepairStarted, EventRepairBlocked, EventNodeRepaired,
	EventNodeReplaced, EventNodeDiagnosisNeeded,
	EventStockout, EventQuotaExceeded, EventPoolBackoff, EventBreakerOpened, EventBreakerClosed,
	EventJobRefused, EventJobRefusalCleared,
}

// Events derives the cluster events of one decision: before is the state
// the decision read (not yet changed by its actions), acts its actions in
// order, now its time. It is pure and leaves before unchanged: record
// actions are compared with the records before them (or with the previous
// action on the same record), external actions and metrics are read as
// they are.
func Events(before *model.State, acts []Action, now time.Time) []ClusterEvent {
	nodes := map[string]model.Node{}
	pools := map[string]model.Pool{}
	jobs := map[string]model.Job{}
	if before != nil {
		for k, n := range before.Nodes {
			nodes[k] = *n
		}
		for k, p := range before.Pools {
			pools[k] = *p
		}
		for k, j := range before.Jobs {
			jobs[k] = *j
		}
	}
	var out []ClusterEvent
	add := func(e ClusterEvent) {
		e.Time = now
		out = append(out, e)
	}
	for _, a := range acts {
		switch a := a.(type) {
		case PutNode:
			old, had := nodes[a.Node.Name]
			nodeEvents(old, had, a.Node, add)
			nodes[a.Node.Name] = a.Node
		case PutPool:
			poolEvents(pools[a.Pool.ID], a.Pool, add)
			pools[a.Pool.ID] = a.Pool
		case PutJob:
			old := jobs[a.Job.ID]
			switch {
			case a.Job.Unfit != "" && old.Unfit != a.Job.Unfit:
				add(ClusterEvent{Type: EventJobRefused, Pool: a.Job.Pool, Job: a.Job.ID,
					Message: fmt.Sprintf("job %s refused: %s", a.Job.ID, a.Job.Unfit)})
			case a.Job.Unfit == "" && old.Unfit != "" && a.Job.State.Active():
				add(ClusterEvent{Type: EventJobRefusalCleared, Pool: a.Job.Pool, Job: a.Job.ID,
					Message: fmt.Sprintf("job %s fits pool %s again", a.Job.ID, a.Job.Pool)})
			}
			jobs[a.Job.ID] = a.Job
		case SlurmCommand:
			if a.Command == event.SlurmDrain {
				for _, n := range a.Nodes {
					cur := nodes[n]
					add(ClusterEvent{Type: EventNodeDrained, Pool: cur.Pool, Node: n, VM: cur.VMName, Generation: cur.Generation, Job: a.JobID,
						Message: fmt.Sprintf("node %s drained in Slurm: %s", n, a.Reason)})
				}
			}
		case ReportHostAsFaulty:
			add(ClusterEvent{Type: EventRepairStarted, Pool: a.Pool, Node: a.Node, VM: a.VM, Generation: a.Generation, Job: a.JobID,
				Message: fmt.Sprintf("host repair of %s asked for (%s)", a.VM, a.Behavior)})
		case Metric:
			metricEvent(a, add)
		}
	}
	return out
}

func nodeEvents(old model.Node, had bool, n model.Node, add func(ClusterEvent)) {
	base := ClusterEvent{Pool: n.Pool, Node: n.Name, VM: n.VMName, Generation: n.Generation, Job: n.JobID}
	with := func(t, msg string) ClusterEvent {
		e := base
		e.Type, e.Message = t, msg
		return e
	}
	// The previous generation ended, in this action or an earlier one.
	oldServing := had && (old.Phase == model.PhaseRequested || old.Phase == model.PhaseRunning)
	newGen := n.Generation > old.Generation || !had
	ended := oldServing && (newGen || n.Phase == model.PhaseDeleting || n.Phase == model.PhaseReleased)
	if ended {
		e := with("", "")
		e.VM, e.Generation, e.Job = old.VMName, old.Generation, old.JobID
		switch n.LastEnd {
		case model.EndExpired:
			e.Type, e.Message = EventVMExpired, fmt.Sprintf("VM %s ended at its run duration", old.VMName)
		case model.EndLost:
			e.Type, e.Message = EventVMLost, fmt.Sprintf("VM %s is gone without an expiry", old.VMName)
		case model.EndHealth:
			e.Type, e.Message = EventNodeReplaced, fmt.Sprintf("VM %s of node %s deleted after a failed health check: %s", old.VMName, n.Name, eventOr(old.RepairReason, n.Reason))
		case model.EndFailed:
			e.Type, e.Message = EventCapacityFailed, fmt.Sprintf("capacity for %s not obtained (resize request %s): %s", old.VMName, old.ResizeRequest, n.Reason)
		case model.EndTimeout:
			e.Type, e.Message = EventCapacityTimedOut, fmt.Sprintf("resize request %s for %s outlived the queue timeout", old.ResizeRequest, old.VMName)
		default:
			e.Type, e.Message = EventVMReleased, fmt.Sprintf("VM %s released: %s", old.VMName, n.Reason)
			if old.Phase == model.PhaseRequested {
				e.Message = fmt.Sprintf("capacity for VM %s no longer asked for: %s", old.VMName, n.Reason)
			}
		}
		add(e)
	}
	if n.Phase == model.PhaseRequested && newGen {
		role := ""
		if n.Predecessor != "" {
			role = fmt.Sprintf(", to take %s's place before its VM ends", n.Predecessor)
		}
		if n.Generation > 1 {
			add(with(EventVMRecreated, fmt.Sprintf("VM %s requested for node %s (resize request %s) after %s%s", n.VMName, n.Name, n.ResizeRequest, eventOr(string(n.LastEnd), "its previous VM ended"), role)))
		} else {
			add(with(EventVMRequested, fmt.Sprintf("VM %s requested for node %s (resize request %s)%s", n.VMName, n.Name, n.ResizeRequest, role)))
		}
	}
	if n.Phase == model.PhaseRunning && (newGen || old.Phase != model.PhaseRunning) {
		e := with(EventVMRunning, fmt.Sprintf("VM %s runs node %s until %s", n.VMName, n.Name, n.TerminationTime.UTC().Format(time.RFC3339)))
		if !n.RequestedAt.IsZero() && n.RunningAt.After(n.RequestedAt) {
			e.Wait = n.RunningAt.Sub(n.RequestedAt)
		}
		add(e)
	}
	if newGen || n.Phase != model.PhaseRunning {
		return
	}
	// Health and repair of the same generation.
	if !n.RepairSince.IsZero() && !n.RepairSince.Equal(old.RepairSince) && n.Repair != model.RepairDiagnosis {
		// The reason begins with what the message says already.
		why := strings.TrimPrefix(n.RepairReason, slurmstate.HealthReason+": ")
		e := with(EventHealthCheckFailed, fmt.Sprintf("%s failed on %s: %s", CheckName(n.RepairCheck), n.VMName, why))
		e.Check = n.RepairCheck
		add(e)
	}
	switch {
	case n.Repair == model.RepairBlocked && old.Repair != model.RepairBlocked:
		add(with(EventRepairBlocked, fmt.Sprintf("repair of %s waits for the pool's repair budget", n.Name)))
	case n.Repair == model.RepairDiagnosis && old.Repair != model.RepairDiagnosis:
		add(with(EventNodeDiagnosisNeeded, fmt.Sprintf("node %s drained for diagnosis: %s", n.Name, n.RepairReason)))
	case n.Repair == model.RepairLimit && old.Repair != model.RepairLimit:
		add(with(EventNodeDiagnosisNeeded, fmt.Sprintf("node %s left drained for an operator: repair limit reached (%d repairs since %s): %s",
			n.Name, n.RepairCount, n.RepairCountSince.UTC().Format(time.RFC3339), n.RepairReason)))
	case n.Repair == model.RepairNone && old.Repair == model.RepairHost:
		add(with(EventNodeRepaired, fmt.Sprintf("node %s is back in service after its host repair", n.Name)))
	}
}

func poolEvents(old, p model.Pool, add func(ClusterEvent)) {
	if p.BackoffUntil.After(old.BackoffUntil) {
		add(ClusterEvent{Type: EventPoolBackoff, Pool: p.ID,
			Message: fmt.Sprintf("pool %s backs off until %s (%s, attempt %d)", p.ID, p.BackoffUntil.UTC().Format(time.RFC3339), p.BackoffReason, p.BackoffAttempts)})
	}
	if !p.BreakerOpenedAt.IsZero() && !p.BreakerOpenedAt.Equal(old.BreakerOpenedAt) {
		add(ClusterEvent{Type: EventBreakerOpened, Pool: p.ID,
			Message: fmt.Sprintf("pool %s stops provisioning: %d VMs in a row never joined Slurm", p.ID, p.BootstrapFailures)})
	}
	if p.BreakerOpenedAt.IsZero() && !old.BreakerOpenedAt.IsZero() {
		add(ClusterEvent{Type: EventBreakerClosed, Pool: p.ID, Message: fmt.Sprintf("pool %s provisions again", p.ID)})
	}
	if s := p.Shortage; s != nil && (old.Shortage == nil || old.Shortage.Class != s.Class || old.Shortage.Code != s.Code) {
		t := EventStockout
		if s.Class == ClassQuota {
			t = EventQuotaExceeded
		}
		add(ClusterEvent{Type: t, Pool: p.ID, Message: fmt.Sprintf("resize request %s of pool %s waits: %s %s", s.Request, p.ID, s.Code, s.Message)})
	}
}

func metricEvent(m Metric, add func(ClusterEvent)) {
	pool := m.Labels["pool"]
	switch m.Name {
	case MetricProvisioningErrors:
		switch m.Labels["class"] {
		case ClassCapacity:
			add(ClusterEvent{Type: EventStockout, Pool: pool, Message: fmt.Sprintf("pool %s: no capacity (%s): %s", pool, m.Labels["code"], m.Reason)})
		case ClassQuota:
			add(ClusterEvent{Type: EventQuotaExceeded, Pool: pool, Message: fmt.Sprintf("pool %s: quota exceeded (%s): %s", pool, m.Labels["code"], m.Reason)})
		}
	case MetricResubmits:
		add(ClusterEvent{Type: EventRequestResubmitted, Pool: pool, Message: m.Reason})
	}
}

// CheckName names, in a message, the check a node-side hook ran
// (event.Health.Hook): "prolog health check", "epilog health check",
// "HealthCheckProgram health check", or "health check" when the hook is
// not known.
func CheckName(hook string) string {
	switch hook {
	case event.HealthHookProlog:
		return "prolog health check"
	case event.HealthHookEpilog:
		return "epilog health check"
	case event.HealthHookHealthCheck:
		return "HealthCheckProgram health check"
	}
	return "health check"
}

func eventOr(s, alt string) string {
	if s != "" {
		return s
	}
	return alt
}
