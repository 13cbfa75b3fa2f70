package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// Two sources tell flexslurm about a node or a job, and they are not
// synchronised: its own records, changed by the events it processed (each
// change stamped with when it was made), and the Slurm snapshot the agent
// publishes (stamped with when it was taken, delivered later and possibly
// out of order). Every decision that could read a fact from either takes it
// from the newest source, through the functions of this file, and nowhere
// else:
//
//   - a snapshot is stored only when taken after the stored one (Snapshot);
//   - what Slurm says of a node counts only when the snapshot was taken
//     after flexslurm asked for the node's current VM (and, for a node that
//     is not running, after its record's last change): an older snapshot
//     says nothing of a VM it predates, so it never deletes one
//     (nodeSlurmClass);
//   - what Slurm says of a job counts only when the snapshot was taken after
//     flexslurm's record of the job last changed: an older snapshot never
//     revives a job whose end flexslurm processed, nor ends or starts one
//     flexslurm heard of since (slurmJobFact, endLostJobs, recordStartedJobs);
//   - a job.started report (PrologSlurmctld) recorded after a snapshot was
//     taken beats what that snapshot says of the report's nodes: a node
//     the snapshot shows idle or powered down may run the job now, so it is
//     neither released nor powered down on that snapshot (nodeRecordedAt),
//     nor on a node.suspend reported before it (startedSince); its idle
//     time starts again after the job (idleRestarts), and an old VM of the
//     node that no record names is not deleted as an orphan while it may
//     run the job (orphanRunsJob);
//   - capacity requested for a job alone is released once the job's
//     allocation, from its reports or a snapshot newer than its record,
//     no longer names the node (leaveBehind, cancelLeftBehind), and kept
//     when it arrived as its request was cancelled (past the queue
//     timeout, as the job ended, or as the job left one of the request's
//     nodes) while the job, or another pending job
//     whose record names the node, can still use it (adoptArrived, through
//     keptFor); Compute's answer to the cancellation that the request
//     SUCCEEDED is not the request's end (RequestsEnded), so a job report
//     made before the listing never requests the node again;
//   - a node.suspend counts only when reported after flexslurm asked for
//     the node's current VM (NodePower; ties go to the record);
//   - a node idle in Slurm is kept for a pending job only while that job can
//     still use it (keptFor);
//   - what Slurm says of a node under repair (drained, or drained by someone
//     else) counts only when the snapshot was taken after flexslurm asked
//     for the drain or the repair step it would answer (drainConfirmed,
//     hostRepaired); a node's own report that it is drained never counts;
//   - a job report counts only when made after the newest Slurm fact the
//     job's record holds that it could contradict, and after the end of
//     the previous job with the id (staleJobReport); a snapshot showing an
//     id pending on powering-up nodes after the job recorded with it ended
//     is a new job with that id (endedBefore);
//   - a drain flexslurm's hook set for a failed health check of the node's
//     current VM counts when the snapshot was taken after that VM was
//     asked for, and, once the reconciler awaits the report, after the
//     wait began (unreported.go).
//
// Ties go to the record: a change flexslurm made at the instant the
// snapshot was taken may not be in it.

// Source names where a fact was taken from.
type Source string

// Sources of a fact.
const (
	SourceRecord Source = "record" // flexslurm's own record
	SourceSlurm  Source = "slurm"  // the Slurm snapshot
)

// Newest returns the source a decision takes a fact from: Slurm's snapshot
// when it was taken after flexslurm's record of the fact last changed, the
// record otherwise (no snapshot, an older one, or one of the same instant).
// A zero recordedAt (flexslurm never recorded the fact) lets any snapshot
// speak.
func Newest(recordedAt time.Time, v *model.SlurmView) Source {
	if v != nil && v.TakenAt.After(recordedAt) {
		return SourceSlurm
	}
	return SourceRecord
}

// Snapshot decides what a Slurm snapshot from the agent requires: it
// becomes the stored snapshot unless the stored one was taken at the same
// time or later (snapshots may arrive out of order, and redelivered). A
// snapshot stored continues the repairs it confirms: a node of st awaiting
// its drain (its pool in st) that the snapshot, taken after the repair
// started, shows drained takes its repair step now (drainedRepairs); those
// are its only actions.
func Snapshot(st *model.State, snap *event.SlurmSnapshot, now time.Time, pol Policy) ([]Action, error) {
	if st.Cluster == nil {
		return nil, rejectf("Slurm snapshot for unknown cluster %s", snap.Cluster)
	}
	if snap.TakenAt.IsZero() {
		return nil, rejectf("Slurm snapshot for cluster %s has no taken_at", snap.Cluster)
	}
	if st.Slurm != nil && Newest(snap.TakenAt, st.Slurm) == SourceSlurm || st.Slurm != nil && st.Slurm.TakenAt.Equal(snap.TakenAt) {
		return nil, nil // the stored snapshot is as new or newer
	}
	v := &model.SlurmView{Version: model.SlurmViewVersion, TakenAt: snap.TakenAt, ReceivedAt: now, Nodes: map[string]model.SlurmNode{}}
	for _, n := range snap.Nodes {
		v.Nodes[n.Name] = n.Node // facts parsed when decoded (event.DecodeSnapshot)
	}
	for _, j := range snap.Jobs {
		v.Jobs = append(v.Jobs, model.SlurmJob{ID: j.ID, State: j.State, Reason: j.Reason, Partition: j.Partition,
			Nodes: append([]string(nil), j.Nodes...), NodeCount: j.NodeCount, TimeLimitSeconds: j.TimeLimitSeconds})
	}
	if c := snap.Config; c != nil {
		v.Config = &model.SlurmConfigCheck{SpecSHA256: c.SpecSHA256}
		for _, d := range c.Divergences {
			v.Config.Divergences = append(v.Config.Divergences, model.SlurmDivergence{Problem: d.Problem, Fix: d.Fix})
		}
	}
	st.Slurm = v
	b := newBuilder(st, now, pol)
	b.view = freshSlurm(st, now, b.pol)
	b.drainedRepairs()
	return b.out, nil
}

// SnapshotRepairNodes returns the nodes a snapshot shows drained (DRAIN
// with no job left): those whose repair it may continue (Snapshot). The
// snapshot's handler reads their records, and loads with the snapshot the
// pools of those SnapshotLoadsPool selects.
func SnapshotRepairNodes(snap *event.SlurmSnapshot) []string {
	var names []string
	for _, n := range snap.Nodes {
		if n.Node.Drained() {
			names = append(names, n.Name)
		}
	}
	return names
}

// SnapshotLoadsPool reports whether the pool of a node a snapshot shows
// drained is loaded with the snapshot: the node's repair awaits the drain
// (Snapshot may take its step), or a snapshot took that step already — the
// VM in host repair, or replaced and its replacement still requested — so
// that a redelivery of that snapshot finds the records its actions are
// replayed against (Replay). A drain that is not a repair's (an operator's)
// loads nothing.
func SnapshotLoadsPool(n *model.Node) bool {
	if n.Phase == model.PhaseRunning {
		return n.Repair == model.RepairAwaitDrain || n.Repair == model.RepairHost
	}
	return n.Phase == model.PhaseRequested && n.LastEnd == model.EndHealth
}

// nodeRecordedAt is when flexslurm last changed what it knows of a node's
// VM: when it asked for the current generation, and, for a node that is not
// running, its record's last change (a generation that ended or began);
// and when it last recorded a job.started report naming the node (a job
// runs there since: jobStartedOn). Later changes to a running node's
// record (idle tracking, repair bookkeeping) say nothing about its VM, so
// they do not silence Slurm.
func nodeRecordedAt(n model.Node) time.Time {
	t := n.RequestedAt
	if n.Phase != model.PhaseRunning && n.UpdatedAt.After(t) {
		t = n.UpdatedAt
	}
	if n.StartedAt.After(t) {
		t = n.StartedAt
	}
	return t
}

// startedSince reports whether flexslurm recorded a job.started report
// naming node n (model.Node.StartedAt) after t: a fact about the node
// newer than anything taken at t. Every decision that would release a VM
// or power a node down because Slurm showed it without a job — idle past
// the idle timeout (a snapshot: nodeSlurmClass), powered down by Slurm
// (node.suspend, reported at t) — yields to it: the job Slurm started
// there after that view must not be requeued, nor its VM deleted.
func startedSince(n model.Node, t time.Time) bool {
	return n.StartedJob != "" && n.StartedAt.After(t)
}

// orphanRunsJob reports whether a VM no record names may run a job Slurm
// started on its node: a job.started naming the node was recorded after
// the VM was created, and no Slurm snapshot taken since shows the node
// without a job. Such a VM is the node's old generation, still registered
// as the node in Slurm (its record moved on to a new generation while it
// ran); deleting it as an orphan would kill the job. It is deleted once a
// newer snapshot shows the node idle, powered down or gone.
func (b *builder) orphanRunsJob(vm VM) bool {
	i := strings.LastIndex(vm.Name, "-g")
	if i <= 0 {
		return false
	}
	n, ok := b.st.Nodes[vm.Name[:i]]
	if !ok || !startedSince(*n, vm.Created) {
		return false
	}
	if Newest(n.StartedAt, b.view) != SourceSlurm {
		return true
	}
	return slurmClass(b.view, n.Name) == SlurmBusy
}

// nodeSlurmClass is what Slurm says of a node with a record, when the
// snapshot is the newest source; SlurmUnknown when flexslurm changed the
// node (asked for its VM, ended a generation) or recorded a job.started
// naming it after the snapshot was taken.
func nodeSlurmClass(v *model.SlurmView, n model.Node) SlurmClass {
	if Newest(nodeRecordedAt(n), v) != SourceSlurm {
		return SlurmUnknown
	}
	return slurmClass(v, n.Name)
}

// slurmJobFact returns what the snapshot says of a job when the snapshot
// is the newest source for it: found reports whether the snapshot lists
// the job, newer whether the snapshot was taken after the record (rec nil:
// flexslurm holds no record of the job, so any snapshot is newer).
func slurmJobFact(v *model.SlurmView, rec *model.Job, id string) (sj model.SlurmJob, found, newer bool) {
	var recordedAt time.Time
	if rec != nil {
		recordedAt = rec.UpdatedAt
	}
	if Newest(recordedAt, v) != SourceSlurm {
		return model.SlurmJob{}, false, false
	}
	for _, j := range v.Jobs {
		if j.ID == id {
			return j, true, true
		}
	}
	return model.SlurmJob{}, false, true
}

// keptFor reports whether a node idle in Slurm is kept for the pending job
// j, and why not. A node is kept for a job only while the job can still
// use it: flexslurm holds the job pending, and the node is the one the job
// was provisioned for (Slurm has not placed it yet) or among the nodes
// flexslurm recorded for it; and, when the snapshot is newer than the job's
// record, Slurm still shows the job alive with the node among those it
// allocated it. A node idle past the idle timeout while Slurm holds the job
// pending without placing it here (waiting for other resources, held, or
// placed elsewhere) is not kept: powered down, it stays available to the
// job, which Slurm resumes it for when it places the job there.
func (b *builder) keptFor(j *model.Job, node model.Node) (bool, string) {
	if j.State != model.JobPending {
		return false, fmt.Sprintf("job %s is %s", j.ID, j.State)
	}
	if !slices.Contains(j.Nodes, node.Name) && !(provisionedFor(&node, j) && len(j.Nodes) == 0) {
		return false, fmt.Sprintf("job %s waits for other nodes", j.ID)
	}
	sj, found, newer := slurmJobFact(b.view, j, j.ID)
	switch {
	case !newer:
		return true, ""
	case !found || !sj.State.Alive():
		return false, fmt.Sprintf("Slurm no longer shows job %s", j.ID)
	case !sj.State.Unstarted():
		if slices.Contains(sj.Nodes, node.Name) {
			return true, ""
		}
		return false, fmt.Sprintf("job %s is %s on other nodes", j.ID, sj.State)
	case len(sj.Nodes) == 0:
		return false, fmt.Sprintf("Slurm holds job %s pending without placing it here (%s)", j.ID, sj.Reason)
	case !slices.Contains(sj.Nodes, node.Name):
		return false, fmt.Sprintf("Slurm allocated job %s other nodes", j.ID)
	}
	return true, ""
}

// staleJobReport reports whether a job report is older than what the job's
// record holds, so that it changes nothing:
//   - made at or before the end of the previous job with the id
//     (PreviousEnd): that job's, not this one's;
//   - for a record that holds Slurm's time of its newest fact (ReportedAt):
//     made before an end the record holds (a late report of a job that
//     ended), or, for a pending record, an end made before the pending
//     report the record holds (an earlier run's or an earlier job's end:
//     the job waits again since). A job.started made before the pending
//     report still counts: with power saving PrologSlurmctld runs when
//     Slurm allocates the nodes, before ResumeProgram reports the job;
//   - for a record stored before ReportedAt existed, made before its last
//     change while it is not pending (flexslurm's own clock, as before).
//
// A report without its time is never stale.
func staleJobReport(rec *model.Job, ev *event.Job) bool {
	if ev.ReportedAt.IsZero() {
		return false
	}
	if !rec.PreviousEnd.IsZero() && !ev.ReportedAt.After(rec.PreviousEnd) {
		return true
	}
	if rec.ReportedAt.IsZero() {
		return ev.ReportedAt.Before(rec.UpdatedAt) && rec.State != model.JobPending
	}
	ended := ev.Type == event.TypeJobFinished || ev.Type == event.TypeJobCancelled
	switch rec.State {
	case model.JobFinished, model.JobCancelled:
		return ev.ReportedAt.Before(rec.ReportedAt)
	case model.JobPending:
		return ended && ev.ReportedAt.Before(rec.ReportedAt)
	}
	return false
}

// endedBefore reports whether rec records a job that ended before the
// snapshot was taken: ended in the record, which changed before the
// snapshot was taken, at a Slurm time (ReportedAt) before it too.
func (b *builder) endedBefore(rec *model.Job, slurm *model.SlurmView) bool {
	if rec.State != model.JobFinished && rec.State != model.JobCancelled {
		return false
	}
	return Newest(rec.UpdatedAt, slurm) == SourceSlurm && slurm.TakenAt.After(rec.ReportedAt)
}

// laterOf returns the later of two times.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
