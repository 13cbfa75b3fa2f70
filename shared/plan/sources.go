package plan

import (
	"fmt"
	"slices"
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
//     flexslurm heard of since (slurmJobFact, lostJobEnds, jobsStarted);
//   - a node idle in Slurm is kept for a pending job only while that job can
//     still use it (keptFor);
//   - what Slurm says of a node under repair (drained, or drained by someone
//     else) counts only when the snapshot was taken after flexslurm asked
//     for the drain or the repair step it would answer (drainConfirmed,
//     hostRepaired); a node's own report that it is drained never counts.
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
// running, its record's last change (a generation that ended or began).
// Later changes to a running node's record (idle tracking, repair
// bookkeeping) say nothing about its VM, so they do not silence Slurm.
func nodeRecordedAt(n model.Node) time.Time {
	t := n.RequestedAt
	if n.Phase != model.PhaseRunning && n.UpdatedAt.After(t) {
		t = n.UpdatedAt
	}
	return t
}

// nodeSlurmClass is what Slurm says of a node with a record, when the
// snapshot is the newest source; SlurmUnknown when flexslurm changed the
// node (asked for its VM, ended a generation) after the snapshot was taken.
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
