package plan

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// Capacity as long as the job (docs/design/jobduration.md). A pool that opts in
// (the extension "use_job_duration", model.Pool.UseJobDuration) asks
// Compute, in each resize request made for pending jobs, for as long as
// those jobs may run rather than for the pool's max run duration: the
// resize request's requestedRunDuration (Compute API, discovery document
// field InstanceGroupManagerResizeRequest.requestedRunDuration; 600–604800 s,
// https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig).
// Cluster Toolkit's use_job_duration does the same with the job's TimeLimit
// (https://github.com/GoogleCloudPlatform/cluster-toolkit/blob/main/docs/slurm-dws-flex.md).
//
// The node's end-of-life reservation starts at its VM's real end
// (reserveEndOfLife), so a node kept after its job is offered by Slurm only to
// jobs whose time limit ends before it, and no job is started to be killed.

// RequestRunDuration is the run duration a resize request made for jobs
// whose time limits are limits asks Compute for, on pool:
//
//   - the pool's RunDuration when the pool has not opted in, when no job is
//     named, or when any of the jobs has no time limit (0: UNLIMITED, or a
//     partition default flexslurm was not told);
//   - otherwise the longest limit plus allowance (the boot allowance),
//     rounded up to whole seconds, at least Compute's 600 s and at most the
//     pool's RunDuration (its flex_start_max_duration, itself within
//     Compute's 604800 s).
//
// Static nodes and their successors are never sized by a job: their
// callers do not call it.
func RequestRunDuration(pool *model.Pool, limits []time.Duration, allowance time.Duration) time.Duration {
	if !pool.UseJobDuration || pool.RunDuration <= 0 || len(limits) == 0 {
		return pool.RunDuration
	}
	longest := time.Duration(0)
	for _, l := range limits {
		if l <= 0 {
			return pool.RunDuration
		}
		longest = max(longest, l)
	}
	d := longest + max(allowance, 0)
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return min(max(d, spec.ComputeMinRunDuration), pool.RunDuration)
}

// jobRunDuration is the model.Node.RunDuration of a dynamic node requested
// for job j: 0 when it is the pool's own (the record then reads as before
// the setting existed).
func (b *builder) jobRunDuration(pool *model.Pool, j model.Job) time.Duration {
	d := RequestRunDuration(pool, []time.Duration{j.TimeLimit}, b.pol.BootAllowance)
	if d == pool.RunDuration {
		return 0
	}
	return d
}

// requestedRunDuration is the run duration n's current request asked for.
func requestedRunDuration(pool *model.Pool, n model.Node) time.Duration {
	if n.RunDuration > 0 {
		return n.RunDuration
	}
	return pool.RunDuration
}

// bootReservation places the end-of-life reservation of a node whose
// request was sized by its job (n.RunDuration set) when the request is
// made, before its VM exists: Slurm places other jobs on a node that is
// powering up, and one whose time limit is longer than the VM's life would
// run into its end. The VM is created no earlier than now, so it ends no
// earlier than now + its run duration; a job placed before it runs starts
// only once it has booted, so the reservation starts the boot allowance
// before that (the job the request is for already holds the node). When
// the VM runs, reserveEndOfLife moves the reservation to its real end, less the
// allowance. Nodes of the pool's run duration have theirs placed then only,
// as before.
func (b *builder) bootReservation(n model.Node) {
	if n.RunDuration <= 0 {
		return
	}
	start := b.now.Add(n.RunDuration - b.pol.BootAllowance)
	b.add(SlurmCommand{
		ID:      naming.CommandID(b.cluster, string(event.SlurmReservationCreate), n.Name, n.VMName, start.Format(time.RFC3339)),
		Command: event.SlurmReservationCreate, Nodes: []string{n.Name}, Reservation: eolName(n.Name),
		StartTime: start, DurationSeconds: int64(b.pol.EOLReservation / time.Second),
		Reason: fmt.Sprintf("%s is asked for %s for job %s: it ends no earlier than %s; reserved from the boot allowance %s before, while it is on its way",
			n.VMName, n.RunDuration, n.JobID, b.now.Add(n.RunDuration).Format(time.RFC3339), b.pol.BootAllowance),
	})
}
