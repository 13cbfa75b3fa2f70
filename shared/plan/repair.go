package plan

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/text"
)

// Metric names of health repair (labels: pool; repair_fallback also
// reason: "refused" or "timeout").
const (
	MetricHostRepairs     = "host_repairs"        // a host repair (reportHostAsFaulty) was asked for
	MetricRepairSucceeded = "repair_succeeded"    // a host-repaired VM runs again and its node is back in service
	MetricRepairFallback  = "repair_fallback"     // a host repair failed or timed out: the VM is deleted and replaced
	MetricRepairBlocked   = "repair_blocked"      // a FAIL beyond the pool's repair budget: the repair waits
	MetricRepairDiagnosis = "repair_diagnosis"    // repeated INCONCLUSIVE verdicts drained a node for diagnosis
	MetricInconclusive    = "health_inconclusive" // one INCONCLUSIVE verdict recorded
)

// FaultBehavior is the fault reason flexslurm reports with a host repair
// (instances.reportHostAsFaulty faultReasons[].behavior, https://cloud.google.com/compute/docs/reference/rest/v1/instances/reportHostAsFaulty). The
// node-side checks report GPU faults (Xid, ECC, NVLink, DCGM) as free text
// that does not tell the API's other behaviors (CHIP_ERROR, PERFORMANCE,
// SILENT_DATA_CORRUPTION) apart reliably, so one behavior is used for all.
const FaultBehavior = "UNRECOVERABLE_GPU_ERROR"

// MaxFaultDescription bounds ReportHostAsFaulty.Description and
// Node.RepairReason, in bytes.
const MaxFaultDescription = event.MaxHealthReasonBytes

// Repair decides what a node-side health verdict requires. An event naming
// an unknown node, another generation than the current one (the VM was
// already replaced) or a node with no VM is rejected.
//
// FAIL:
//   - a node already under repair for this generation (awaiting drain or in
//     host repair) gets no new external action: another hook reported the
//     same fault; it is noted, and a node awaiting drain that a snapshot
//     taken since its repair started shows drained takes its repair step;
//   - beyond the pool's repair budget (Policy.RepairMaxUnhealthy,
//     Policy.RepairMinBudget) the repair is blocked: the node is drained,
//     an alert and the repair_blocked metric say so, and the reconciler
//     (or the snapshot that frees the budget) starts it, oldest first;
//   - otherwise Slurm drains the node (reason naming the fault and the VM)
//     and the node awaits the drain: the repair step is taken once a Slurm
//     snapshot taken after the repair started shows it DRAIN with no job
//     (drainConfirmed) — by Snapshot when it stores that snapshot, or by
//     the reconciler.
//
// What the report says of Slurm — its drained flag, its checked_at, its
// job_state — decides nothing: a node is not the authority on Slurm's
// state, and whoever controls one could claim anything. The drained flag
// is noted in the node's record.
//
// The repair step: a dynamic node no job waits for has its VM deleted and
// is not replaced; otherwise the VM's host is reported faulty so that
// Compute Engine restarts the VM on a healthy host (the repaired VM is the
// replacement, keeping the capacity Flex-Start granted), unless host repair
// is disabled, the VM was already host-repaired, or it ends within
// Policy.RepairTimeout — then the VM is deleted and replaced at once (a
// static node by a new generation, a dynamic node for the job that waits).
// The job that waits is the one the report named (else the node's), when
// flexslurm's records or Slurm's snapshot show it waiting
// (repairJobWaiting); one Slurm shows waiting again after running is
// recorded pending again (Requeues+1).
//
// INCONCLUSIVE: counted per generation within Policy.InconclusiveWindow; at
// Policy.InconclusiveLimit the node is drained for diagnosis (alert,
// repair_diagnosis metric), never deleted; below it, only recorded.
func Repair(st *model.State, h *event.Health, now time.Time, pol Policy) ([]Action, error) {
	return repair(st, h, now, pol, false)
}

// RepairByOperator is Repair for an operator's report (the API's
// reportFaultyNodes): as Repair, except that a node left drained at its
// repair limit (model.RepairLimit) is repaired, and the limit holds no
// repair back (repairlimit.go).
func RepairByOperator(st *model.State, h *event.Health, now time.Time, pol Policy) ([]Action, error) {
	return repair(st, h, now, pol, true)
}

func repair(st *model.State, h *event.Health, now time.Time, pol Policy, operator bool) ([]Action, error) {
	pol = pol.withDefaults()
	if st.Cluster == nil {
		return nil, rejectf("no cluster record")
	}
	cl, poolID, _, ok := naming.ParseNodeName(h.Node)
	if !ok || cl != st.Cluster.ID || cl != h.Cluster {
		return nil, rejectf("node %s is not a node of cluster %s", h.Node, st.Cluster.ID)
	}
	pool, ok := st.Pools[poolID]
	if !ok {
		return nil, rejectf("node %s: pool %s is not a flex-start pool of cluster %s", h.Node, poolID, cl)
	}
	n, ok := st.Nodes[h.Node]
	if !ok {
		return nil, rejectf("node %s has no record", h.Node)
	}
	gen := h.Generation
	if h.VMName != "" {
		vmNode, _, _, g, ok := naming.ParseVMName(h.VMName)
		if !ok || vmNode != h.Node {
			return nil, rejectf("health %s on %s names VM %s, which is not one of its VMs", h.Verdict, h.Node, h.VMName)
		}
		if gen == 0 {
			gen = g
		}
	}
	if gen == 0 {
		gen = n.Generation
	}
	if gen != n.Generation {
		return nil, rejectf("health %s for generation %d of %s, which is at generation %d: already replaced", h.Verdict, gen, h.Node, n.Generation)
	}
	if !n.Phase.Serving() {
		return nil, rejectf("node %s generation %d is %s: no VM to repair", h.Node, gen, n.Phase)
	}
	b := newBuilder(st, now, pol)
	b.view = freshSlurm(st, now, pol)
	b.operator = operator
	node := *n
	if h.Verdict == event.VerdictInconclusive {
		b.countInconclusive(pool, node, h)
		return b.out, nil
	}

	reason := faultReason(h.Reasons)
	why := fmt.Sprintf("%s on %s", reason, node.VMName)
	if h.Drained {
		// The hook's word, kept for diagnosis only: whether the node is
		// drained is Slurm's to say (drainConfirmed).
		why += " (the hook saw the node drained)"
	}

	// The job the failure involved: the one the hook names, else the one
	// the node was provisioned for. It is a candidate only: whether it
	// waits for the node's replacement is decided at the repair step from
	// flexslurm's records and Slurm's snapshot (repairJobWaiting), never
	// from the hook's job_state.
	jobID := h.JobID
	if jobID == "" {
		jobID = node.JobID
	}
	if node.RepairJob == "" || node.Repair == model.RepairAwaitReport {
		// A repair the reconciler awaited this report for takes the job
		// the report names (unreported.go guessed the node's own).
		node.RepairJob = jobID
	}

	switch node.Repair {
	case model.RepairAwaitDrain:
		if b.drainConfirmed(node.Name, node.RepairSince) {
			b.repairStep(pool, node, why+": reported again, and Slurm has drained the node")
			return b.out, nil
		}
		fallthrough
	case model.RepairHost, model.RepairBlocked:
		// Another hook reported the fault being handled: nothing new to do.
		b.putNode(node, fmt.Sprintf("%s reported again: repair already %s since %s", why, node.Repair, node.RepairSince.Format(time.RFC3339)))
		return b.out, nil
	case model.RepairLimit:
		if !b.operator {
			b.putNode(node, fmt.Sprintf("%s reported again: left drained for an operator since %s (repair limit)", why, node.RepairSince.Format(time.RFC3339)))
			return b.out, nil
		}
	}

	// A new repair (or a FAIL on a node drained for diagnosis): flexslurm
	// asks for the drain now, so only a snapshot taken after now can
	// confirm it.
	node.Repair, node.RepairSince, node.RepairReason = model.RepairNone, now, text.Truncate(reason, MaxFaultDescription)
	node.RepairCheck = h.Hook
	if b.overRepairLimit(&node) {
		b.leaveForOperator(pool, node, why)
		return b.out, nil
	}
	b.slurm(event.SlurmDrain, []string{node.Name}, "", fmt.Sprintf("%s (%s)", reason, node.VMName), b.drainParts(node)...)
	b.warnOfRepair(&node, reason)
	if unhealthy, allowed, serving := b.repairBudget(pool, node.Name); unhealthy >= allowed {
		node.Repair = model.RepairBlocked
		msg := fmt.Sprintf("repair of %s blocked: %d of pool %s's %d serving nodes are under repair, the budget is %d (max(%d, ⌊%g × %d⌋)); the node stays drained and is repaired when a repair finishes",
			node.Name, unhealthy, pool.ID, serving, allowed, b.pol.RepairMinBudget, b.pol.RepairMaxUnhealthy, serving)
		b.putNode(node, why+": "+msg)
		b.add(Alert{Pool: pool.ID, Node: node.Name, Reason: msg})
		b.add(Metric{Name: MetricRepairBlocked, Labels: map[string]string{"pool": pool.ID}, Reason: msg})
		return b.out, nil
	}
	b.startRepair(pool, node, b.drainConfirmed(node.Name, now), why)
	return b.out, nil
}

// HostRepairFailed decides what a host repair that Compute Engine refused
// (a permanent error: invalid, unsupported, not ready, not found) requires:
// the node, already drained, has its VM deleted and replaced as if host
// repair were not possible (a static node by a new generation, a dynamic
// node for the job that waits, or not at all when none does), with an
// alert and the repair_fallback metric. code is the Compute error code. The
// decision is rejected when the node has left that host repair (another
// generation, or the repair already ended).
func HostRepairFailed(st *model.State, nodeName string, generation int64, code string, now time.Time, pol Policy) ([]Action, error) {
	b := newBuilder(st, now, pol)
	b.view = freshSlurm(st, now, b.pol)
	n, ok := b.st.Nodes[nodeName]
	if !ok {
		return nil, rejectf("node %s has no record", nodeName)
	}
	if n.Generation != generation || n.Repair != model.RepairHost || n.Phase != model.PhaseRunning {
		return nil, rejectf("node %s is at generation %d, %s, repair %q: the host repair of generation %d is no longer in progress",
			nodeName, n.Generation, n.Phase, n.Repair, generation)
	}
	pool, ok := b.st.Pools[n.Pool]
	if !ok {
		return nil, rejectf("node %s: pool %s has no record", nodeName, n.Pool)
	}
	why := fmt.Sprintf("host repair of %s refused by Compute Engine (%s)", n.VMName, code)
	b.hostRepairFallback(pool, *n, why, "refused")
	return b.out, nil
}

// hostRepairFallback ends a host repair that cannot succeed: the VM is
// deleted and replaced.
func (b *builder) hostRepairFallback(pool *model.Pool, node model.Node, why, label string) {
	node.HostRepaired = node.Generation
	jobID, waiting := b.repairJob(node)
	b.add(Alert{Pool: pool.ID, Node: node.Name, Reason: why + ": the VM is deleted and replaced"})
	b.add(Metric{Name: MetricRepairFallback, Labels: map[string]string{"pool": pool.ID, "reason": label}, Reason: why})
	b.replaceVM(pool, node, why, jobIfWaiting(jobID, waiting), waiting)
}

// startRepair takes the repair step now when Slurm has confirmed the
// drain, or records that the repair waits for it.
func (b *builder) startRepair(pool *model.Pool, node model.Node, drained bool, why string) {
	if b.overRepairLimit(&node) {
		b.leaveForOperator(pool, node, why)
		return
	}
	node.RepairCount++
	if drained {
		b.repairStep(pool, node, why)
		return
	}
	node.Repair, node.RepairSince = model.RepairAwaitDrain, b.now
	b.putNode(node, why+": node draining in Slurm; its VM is repaired once a Slurm snapshot taken after the drain was asked for shows it drained")
}

// repairStep repairs a drained node: a dynamic node no job waits for is
// deleted, not replaced; otherwise its host is reported faulty when host
// repair is possible, else its VM is deleted and replaced at once. The job
// that waits is the node's RepairJob when flexslurm's records or Slurm
// confirm it waits (repairJob).
func (b *builder) repairStep(pool *model.Pool, node model.Node, why string) {
	jobID, waiting := b.repairJob(node)
	needed := (node.Kind == model.NodeStatic && node.Successor == "") || waiting
	switch {
	case !needed:
		b.replaceVM(pool, node, why, "", false)
	case b.hostRepairPossible(pool, node):
		b.hostRepair(pool, node, why)
	default:
		if ok, whyNot := poolHostRepair(pool); !ok {
			why += ": no host repair (" + whyNot + ")"
		}
		b.replaceVM(pool, node, why, jobIfWaiting(jobID, waiting), waiting)
	}
}

// hostRepairPossible reports whether a node's VM can be moved to a healthy
// host: Compute Engine repairs hosts of the pool's VMs (HostRepairSupported:
// reservation-bound, an eligible machine family — never Flex-Start), host
// repair is enabled, the VM runs, it was not host-repaired already, and it
// does not end within the repair timeout.
func (b *builder) hostRepairPossible(pool *model.Pool, n model.Node) bool {
	if ok, _ := poolHostRepair(pool); !ok {
		return false
	}
	return !b.pol.DisableHostRepair && n.Phase == model.PhaseRunning && n.VMName != "" && n.HostRepaired != n.Generation &&
		(n.TerminationTime.IsZero() || n.TerminationTime.Sub(b.now) > b.pol.RepairTimeout)
}

// hostRepair asks Compute Engine to restart the VM on a healthy host.
func (b *builder) hostRepair(pool *model.Pool, node model.Node, why string) {
	node.Repair, node.RepairSince = model.RepairHost, b.now
	b.add(b.reportHost(pool, node, why+": host reported faulty, the VM restarts on a healthy host"))
	b.add(Metric{Name: MetricHostRepairs, Labels: map[string]string{"pool": pool.ID}, Reason: node.VMName})
	b.putNode(node, fmt.Sprintf("%s: host repair asked for; the VM is replaced if it does not run again within %s", why, shortDuration(b.pol.RepairTimeout)))
}

func (b *builder) reportHost(pool *model.Pool, node model.Node, reason string) ReportHostAsFaulty {
	return ReportHostAsFaulty{Pool: pool.ID, Node: node.Name, Generation: node.Generation, VM: node.VMName,
		Behavior: FaultBehavior, Description: text.Truncate(node.RepairReason, MaxFaultDescription), JobID: node.RepairJob,
		RequestID: naming.ReportHostAsFaultyRequestID(pool.Zone, node.VMName), Reason: reason}
}

// replaceVM deletes a failed node's VM and, when the node must serve
// (static, or a job waits), requests its replacement at once: a static
// node gets a new generation, a dynamic node is provisioned for the job.
func (b *builder) replaceVM(pool *model.Pool, node model.Node, why, jobID string, waiting bool) {
	b.releaseVM(pool, node, why)
	node.LastEnd = model.EndHealth
	b.endOfLifeDone(node)
	j, known := b.st.Jobs[jobID]
	switch {
	case node.Kind == model.NodeStatic && node.Successor == "":
		node.Phase = model.PhaseReleased
		b.provisionNode(pool, node, jobIfWaiting(jobID, waiting), why+": static node replaced at once")
	case waiting && known:
		node.Phase = model.PhaseReleased
		b.putNode(node, why)
		b.provisionJob(*j, fmt.Sprintf("%s; job %s waits for it: replacement requested at once", why, jobID))
	case waiting:
		node.Phase = model.PhaseReleased
		b.provisionNode(pool, node, jobID, fmt.Sprintf("%s; job %s waits for it: replacement requested at once", why, jobID))
	default:
		node.Phase = model.PhaseDeleting
		b.putNode(node, why+": no job waits for this dynamic node, not replaced")
	}
}

// repairBudget counts the pool's serving nodes and those under repair
// (awaiting drain or in host repair) other than except, and returns the
// budget: max(RepairMinBudget, ⌊RepairMaxUnhealthy × serving⌋).
func (b *builder) repairBudget(pool *model.Pool, except string) (unhealthy, allowed, serving int) {
	for _, n := range b.st.Nodes {
		if n.Pool != pool.ID || !n.Phase.Serving() {
			continue
		}
		serving++
		if n.Name != except && n.Repair.UnderRepair() {
			unhealthy++
		}
	}
	// The epsilon keeps 0.29 × 100 from flooring to 28.
	allowed = max(b.pol.RepairMinBudget, int(math.Floor(b.pol.RepairMaxUnhealthy*float64(serving)+1e-9)))
	return unhealthy, allowed, serving
}

// slurmDrained reports whether the fresh Slurm snapshot, the newest source
// for what happened after after (Newest: taken after it, ties going to the
// record), shows the node drained: the DRAIN flag with no job left on it
// (base state neither allocated nor mixed, not completing). A node still
// draining (DRAIN with a job) is not drained.
func (b *builder) slurmDrained(node string, after time.Time) bool {
	if Newest(after, b.view) != SourceSlurm {
		return false
	}
	n, ok := b.view.Nodes[node]
	return ok && n.Drained()
}

// drainConfirmed reports whether Slurm confirms that a node under repair
// is drained: the snapshot taken after flexslurm asked for the drain
// (asked: the repair's start, flexslurm's own time) shows it drained. It
// is the only source of that fact for a repair: a node's own report (the
// health event's drained flag, its checked_at) is never trusted to
// delete a VM, since whoever controls a node could claim it.
func (b *builder) drainConfirmed(node string, asked time.Time) bool {
	return b.slurmDrained(node, asked)
}

// repairJobWaiting returns the job recorded with a node's repair
// (RepairJob: the job the failure involved, as the hook named it) and
// whether it waits for the node's replacement, as flexslurm's records or
// Slurm say, whichever is newer (slurmJobFact): the record holds it
// pending, or the snapshot shows it waiting (pending or being requeued).
// A job neither source shows waiting does not wait, whatever the hook
// said: a node's report never buys capacity for a job on its own word.
func (b *builder) repairJobWaiting(n model.Node) (string, bool) {
	id := n.RepairJob
	if id == "" {
		return "", false
	}
	rec := b.st.Jobs[id]
	if sj, found, newer := slurmJobFact(b.view, rec, id); newer {
		return id, found && sj.State.Waiting()
	}
	return id, rec != nil && rec.State == model.JobPending
}

// repairJob is repairJobWaiting at the repair step: a job Slurm shows
// waiting again (requeued after the failure) while flexslurm's record
// still has it running or ended is recorded pending again (Requeues+1).
func (b *builder) repairJob(n model.Node) (string, bool) {
	id, waiting := b.repairJobWaiting(n)
	if j, ok := b.st.Jobs[id]; ok && waiting && j.State != model.JobPending {
		jj := *j
		jj.State = model.JobPending
		jj.Requeues++
		b.putJob(jj, fmt.Sprintf("Slurm shows job %s waiting again (snapshot of %s) after the failed health check on %s",
			id, b.view.TakenAt.Format(time.RFC3339), n.Name))
	}
	return id, waiting
}

// drainedRepairs continues the repairs that wait for a drain (awaiting
// drain, running) of the nodes st holds whose pool it holds, when the
// fresh Slurm snapshot, taken after the repair started, shows the node
// drained: the repair step is taken at once, and the pool's blocked
// repairs the freed budget allows start, as the reconciler would on its
// next pass. Called when a snapshot is stored, so that a repair continues
// as soon as Slurm confirms the drain.
func (b *builder) drainedRepairs() {
	var names []string
	for name, n := range b.st.Nodes {
		if n.Phase == model.PhaseRunning && n.Repair == model.RepairAwaitDrain {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var stepped []string
	for _, name := range names {
		node := *b.st.Nodes[name]
		pool, ok := b.st.Pools[node.Pool]
		if !ok || !b.drainConfirmed(node.Name, node.RepairSince) {
			continue
		}
		b.repairStep(pool, node, fmt.Sprintf("Slurm's snapshot of %s shows %s drained: %s on %s",
			b.view.TakenAt.Format(time.RFC3339), node.Name, node.RepairReason, node.VMName))
		if !slices.Contains(stepped, pool.ID) {
			stepped = append(stepped, pool.ID)
		}
	}
	// A repair step that replaced a VM frees the pool's repair budget: the
	// blocked repairs start now, as the reconciler's next pass would.
	for _, id := range stepped {
		b.unblockRepairs(b.st.Pools[id])
	}
}

// drainParts are the id parts of a node's health drain: one drain per VM,
// and another after its host repair (same VM name, second fault).
func (b *builder) drainParts(n model.Node) []string {
	if n.HostRepaired == n.Generation {
		return []string{n.VMName, "health", "after-host-repair"}
	}
	return []string{n.VMName, "health"}
}

// countInconclusive records an INCONCLUSIVE verdict and drains the node for
// diagnosis when the count reaches the limit within the window.
func (b *builder) countInconclusive(pool *model.Pool, node model.Node, h *event.Health) {
	limit, window := b.pol.InconclusiveLimit, b.pol.InconclusiveWindow
	if node.InconclusiveSince.IsZero() || b.now.Sub(node.InconclusiveSince) >= window {
		node.InconclusiveCount, node.InconclusiveSince = 0, b.now
	}
	node.InconclusiveCount++
	detail := "no reason given"
	if len(h.Reasons) > 0 {
		detail = h.Reasons[0]
	}
	seen := fmt.Sprintf("health check inconclusive on %s (%s): %d within %s", node.VMName, text.Truncate(detail, 200), node.InconclusiveCount, shortDuration(window))
	b.add(Metric{Name: MetricInconclusive, Labels: map[string]string{"pool": pool.ID}, Reason: seen})
	switch {
	case node.Repair.UnderRepair() || node.Repair == model.RepairBlocked:
		b.putNode(node, seen+": recorded, the node is already being repaired")
	case limit < 0 || node.InconclusiveCount < limit:
		b.putNode(node, seen+": recorded")
	case node.Repair == model.RepairDiagnosis && !node.RepairSince.Before(node.InconclusiveSince):
		b.putNode(node, seen+": recorded, the node is already drained for diagnosis")
	default:
		msg := fmt.Sprintf("health check inconclusive %d times within %s: drained for diagnosis", node.InconclusiveCount, shortDuration(window))
		b.slurm(event.SlurmDrain, []string{node.Name}, "", fmt.Sprintf("%s (%s)", msg, node.VMName),
			node.VMName, "diagnosis", node.InconclusiveSince.UTC().Format(time.RFC3339Nano))
		node.Repair, node.RepairSince, node.RepairReason = model.RepairDiagnosis, b.now, text.Truncate("health check inconclusive: "+detail, MaxFaultDescription)
		b.putNode(node, seen+": "+msg)
		b.add(Alert{Pool: pool.ID, Node: node.Name, Reason: fmt.Sprintf("%s: %s (last: %s); no VM action, an operator resumes or replaces it", node.Name, msg, text.Truncate(detail, 200))})
		b.add(Metric{Name: MetricRepairDiagnosis, Labels: map[string]string{"pool": pool.ID}, Reason: msg})
	}
}

// reconcileRepair follows a running node's repair in a reconcile pass. It
// returns true when it decided for the node (the table is not consulted).
//   - host repair: the VM RUNNING again, restarted at or after the repair
//     was asked for → Slurm resumes the node, the repair ends
//     (repair_succeeded); TERMINATED (a VM without automaticRestart stays
//     stopped after its repair) within Policy.RepairTimeout → started
//     (StartVM, deterministic request id); still REPAIRING, stopped, or
//     RUNNING not restarted past Policy.RepairTimeout → deleted and
//     replaced with an alert; RUNNING and not restarted past
//     Policy.RequestGrace → asked for again (same request id: a crash
//     between the commit and the call); otherwise wait. A VM gone or
//     stopping is left to the table (the generation ends).
//   - awaiting drain: the fresh snapshot, taken after the repair started,
//     shows the node drained → the repair step.
func (b *builder) reconcileRepair(pool *model.Pool, node model.Node, vm VM, present bool) bool {
	if node.Phase != model.PhaseRunning {
		return false
	}
	switch node.Repair {
	case model.RepairHost:
		class := ClassifyVM(vm.Status, present)
		stopped := present && vm.Status == "TERMINATED"
		if class != VMRunning && class != VMRepairing && class != VMProvisioning && !stopped {
			return false
		}
		since := b.now.Sub(node.RepairSince)
		switch {
		case class == VMRunning && !vm.LastStart.IsZero() && !vm.LastStart.Before(node.RepairSince.Truncate(time.Second)):
			b.hostRepaired(pool, node, vm)
		case stopped && since < b.pol.RepairTimeout:
			b.add(StartVM{Pool: pool.ID, Node: node.Name, Generation: node.Generation, VM: node.VMName,
				RequestID: naming.StartInstanceRequestID(pool.Zone, node.VMName),
				Reason: fmt.Sprintf("reconciler: VM %s is stopped after its host repair (asked for at %s; automaticRestart is off): starting it",
					node.VMName, node.RepairSince.Format(time.RFC3339))})
		case since >= b.pol.RepairTimeout:
			b.hostRepairFallback(pool, node, fmt.Sprintf("reconciler: host repair of %s asked for at %s is not done after %s (VM %s)",
				node.VMName, node.RepairSince.Format(time.RFC3339), shortDuration(b.pol.RepairTimeout), vm.Status), "timeout")
		case class == VMRunning && since >= b.pol.RequestGrace:
			b.add(b.reportHost(pool, node, fmt.Sprintf("reconciler: VM %s still runs on its host %s after the host repair was recorded: asking again (same request id)",
				node.VMName, since.Round(time.Second))))
		}
		return true
	case model.RepairAwaitDrain:
		if !present || vm.Status != "RUNNING" || !b.drainConfirmed(node.Name, node.RepairSince) {
			b.drainAgainIfLifted(node)
			return false
		}
		b.repairStep(pool, node, fmt.Sprintf("reconciler: Slurm has drained %s: %s on %s", node.Name, node.RepairReason, node.VMName))
		return true
	case model.RepairLimit:
		b.resumedByOperator(node) // repairlimit.go
	}
	return false
}

// drainAgainIfLifted asks Slurm again for the drain a repair waits for
// when a snapshot taken after the repair started shows the node without
// any drain: the drain command was lost, or a resume applied after it (an
// earlier resume delivered late, or someone's) lifted it. flexslurm
// finishes what it started: the repair would otherwise wait for a drain
// that never comes. The command's id names the snapshot, so each newer
// snapshot that still shows no drain asks once more.
func (b *builder) drainAgainIfLifted(node model.Node) {
	if Newest(node.RepairSince, b.view) != SourceSlurm {
		return
	}
	sn, ok := b.view.Nodes[node.Name]
	if !ok || sn.DrainSet() {
		return
	}
	parts := append(b.drainParts(node), "again", b.view.TakenAt.UTC().Format(time.RFC3339Nano))
	b.slurm(event.SlurmDrain, []string{node.Name}, "", fmt.Sprintf("%s (%s)", node.RepairReason, node.VMName), parts...)
}

// hostRepaired ends a successful host repair: the VM runs again on a
// healthy host, so Slurm resumes the node — unless someone else drained it
// meanwhile (a drain reason without flexslurm's prefix), which is left to
// them.
func (b *builder) hostRepaired(pool *model.Pool, node model.Node, vm VM) {
	why := fmt.Sprintf("reconciler: VM %s runs again on a healthy host (restarted at %s, host repair asked for at %s)",
		node.VMName, vm.LastStart.Format(time.RFC3339), node.RepairSince.Format(time.RFC3339))
	foreign := false
	if Newest(node.RepairSince, b.view) == SourceSlurm {
		foreign = b.view.Nodes[node.Name].ForeignDrain()
	}
	if foreign {
		why += ": left drained, its drain reason is not flexslurm's"
	} else {
		b.slurm(event.SlurmResume, []string{node.Name}, "", node.VMName+" repaired on a healthy host: back in service", node.VMName, "host-repaired")
		why += ": node resumed in Slurm"
	}
	node.HostRepaired = node.Generation
	node.ClearRepair()
	b.putNode(node, why)
	b.add(Metric{Name: MetricRepairSucceeded, Labels: map[string]string{"pool": pool.ID}, Reason: why})
}

// unblockRepairs starts blocked repairs of the pool, oldest first, while
// the repair budget allows.
func (b *builder) unblockRepairs(pool *model.Pool) {
	var blocked []model.Node
	for _, n := range b.poolNodes(pool.ID) {
		if n.Repair == model.RepairBlocked && n.Phase == model.PhaseRunning {
			blocked = append(blocked, *n)
		}
	}
	sort.Slice(blocked, func(i, j int) bool {
		if !blocked[i].RepairSince.Equal(blocked[j].RepairSince) {
			return blocked[i].RepairSince.Before(blocked[j].RepairSince)
		}
		return blocked[i].Name < blocked[j].Name
	})
	for _, node := range blocked {
		unhealthy, allowed, serving := b.repairBudget(pool, node.Name)
		if unhealthy >= allowed {
			return
		}
		why := fmt.Sprintf("reconciler: repair budget of pool %s freed (%d of %d under repair, %d serving): %s on %s, blocked since %s",
			pool.ID, unhealthy, allowed, serving, node.RepairReason, node.VMName, node.RepairSince.Format(time.RFC3339))
		b.startRepair(pool, node, b.drainConfirmed(node.Name, node.RepairSince), why)
	}
}

// faultReason is a health failure's reason for drains and records:
// "health check failed: <first reason>" (and how many more), bounded.
func faultReason(reasons []string) string {
	r := slurmstate.HealthReason
	if len(reasons) > 0 {
		r += ": " + text.Truncate(reasons[0], 300)
		if len(reasons) > 1 {
			r += fmt.Sprintf(" (+%d more)", len(reasons)-1)
		}
	}
	return r
}

// shortDuration prints 24h0m0s as 24h and 20m0s as 20m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func jobIfWaiting(id string, waiting bool) string {
	if waiting {
		return id
	}
	return ""
}

// unblockRepairsPass starts the repairs the pool's repair budget now
// allows.
type unblockRepairsPass struct{}

func (unblockRepairsPass) apply(b *builder, pc *poolContext) {
	if cur, ok := b.st.Pools[pc.pool.ID]; ok {
		b.unblockRepairs(cur)
	}
}
