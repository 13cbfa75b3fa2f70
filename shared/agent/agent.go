// Package agent is `flexslurm agent`, the process beside slurmctld that
// applies the Slurm commands the functions publish (topic slurm-commands)
// and reports Slurm's state back (topic slurm-snapshot).
//
// Each slurm.command is applied through scontrol, by absolute path and
// argument list, idempotently: the agent first reads the node, job or
// reservation and acts only when the command would change something (a
// drain of a drained node, a power_down of a powered-down node is reported
// as skipped), and a command id it has already handled (kept in an on-disk
// Ledger) is reported as skipped without touching Slurm. It acts only on
// the nodes of its cluster's Flex-Start pools (shared/slurm Topology) and
// only on reservations named with event.ReservationPrefix. Every handled
// command is reported as a slurm.command_result (topic
// slurm-command-results). Commands are acknowledged once handled; a command
// that failed because slurmctld was unreachable is not acknowledged and
// comes back.
//
// Every SnapshotEvery the agent publishes a slurm.snapshot of the cluster's
// nodes and unfinished jobs (from sinfo --json and squeue --json, filtered
// by the agent: Slurm 22.05 ignores filters with --json), and publishes the
// messages the hooks left in their spool.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/text"
)

// Agent applies Slurm commands for one cluster. Apply and Snapshot are
// safe for sequential use; Run calls them from one goroutine each.
type Agent struct {
	// Cluster is the cluster id.
	Cluster string
	// Topology holds the nodes the agent may act on.
	Topology *slurm.Topology
	// Slurm runs scontrol, squeue and sinfo.
	Slurm *slurm.Runner
	// Ledger records handled command ids; nil keeps no record (every
	// delivery is applied, still idempotently by state).
	Ledger *Ledger
	// Now is the clock (time.Now).
	Now func() time.Time
	// Log receives one line per command.
	Log *slog.Logger
}

// ErrRetry marks a command that could not be applied now but may succeed
// later (slurmctld unreachable, a node powering down): it is not recorded
// and its message is not acknowledged.
var ErrRetry = errors.New("retry later")

// maxDetail bounds CommandResult.Detail.
const maxDetail = 2048

func (a *Agent) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Agent) log() *slog.Logger {
	if a.Log != nil {
		return a.Log
	}
	return slog.New(slog.DiscardHandler)
}

// outcome is what applying a command did.
type outcome struct {
	skipped bool
	detail  string
}

// Handle applies one decoded command and returns its result. err is
// non-nil (wrapping ErrRetry) only when the command should be retried: it
// was neither recorded nor reported.
func (a *Agent) Handle(ctx context.Context, c *event.SlurmCommand) (event.CommandResult, error) {
	res := event.CommandResult{
		Header:  event.Header{Version: event.SchemaVersion, Type: event.TypeCommandResult, Cluster: a.Cluster},
		ID:      c.ID,
		Command: c.Command,
	}
	if a.Ledger != nil {
		if e, ok := a.Ledger.Get(c.ID); ok {
			res.OK, res.Skipped, res.At = e.OK, true, a.now().UTC()
			res.Detail = text.Truncate(fmt.Sprintf("command %s was already handled at %s (ok=%v): %s", c.ID,
				e.At.UTC().Format(time.RFC3339), e.OK, e.Detail), maxDetail)
			a.log().Info("slurm command already handled", "id", c.ID, "command", c.Command)
			return res, nil
		}
	}
	start := time.Now()
	out, err := a.apply(ctx, c)
	if errors.Is(err, ErrRetry) {
		a.log().Warn("slurm command deferred", "id", c.ID, "command", c.Command, "error", err)
		return res, err
	}
	res.At = a.now().UTC()
	res.OK, res.Skipped, res.Detail = err == nil, out.skipped, out.detail
	if err != nil {
		res.Detail = err.Error()
	}
	res.Detail = text.Truncate(res.Detail, maxDetail)
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelError
	}
	a.log().Log(ctx, level, "slurm command", "id", c.ID, "command", c.Command, "nodes", c.Nodes, "job_id", c.JobID,
		"reservation", c.Reservation, "ok", res.OK, "skipped", res.Skipped, "detail", res.Detail,
		"elapsed_ms", time.Since(start).Milliseconds())
	if a.Ledger != nil {
		if lerr := a.Ledger.Record(c.ID, LedgerEntry{At: res.At, Command: string(c.Command), OK: res.OK, Detail: text.Truncate(res.Detail, 256)}); lerr != nil {
			a.log().Error("recording the command in the ledger", "id", c.ID, "error", lerr)
		}
	}
	return res, nil
}

// apply checks and runs one command. A transient Slurm failure is returned
// wrapping ErrRetry.
func (a *Agent) apply(ctx context.Context, c *event.SlurmCommand) (outcome, error) {
	if c.Cluster != a.Cluster {
		return outcome{}, fmt.Errorf("refusing command %s: it is for cluster %q, this agent serves %q", c.ID, c.Cluster, a.Cluster)
	}
	for _, n := range c.Nodes {
		if _, _, err := a.Topology.Check(n); err != nil {
			return outcome{}, fmt.Errorf("refusing %s: %w", c.Command, err)
		}
	}
	var out outcome
	var err error
	switch c.Command {
	case event.SlurmPowerDown, event.SlurmPowerDownForce, event.SlurmPowerUp, event.SlurmResume,
		event.SlurmDrain, event.SlurmDown:
		out, err = a.nodeState(ctx, c)
	case event.SlurmUpdateAddress:
		out, err = a.updateAddress(ctx, c)
	case event.SlurmRequeue, event.SlurmStartNow, event.SlurmJobComment:
		out, err = a.job(ctx, c)
	case event.SlurmReservationCreate, event.SlurmReservationDelete:
		out, err = a.reservation(ctx, c)
	case event.SlurmSignal:
		out, err = a.signal(ctx, c)
	default:
		return outcome{}, fmt.Errorf("unknown command %q", c.Command)
	}
	if err != nil && !errors.Is(err, ErrRetry) && slurm.IsTransient(err) {
		err = fmt.Errorf("%w: %w", ErrRetry, err)
	}
	return out, err
}

// nodeState applies the node state commands to the nodes that need them.
func (a *Agent) nodeState(ctx context.Context, c *event.SlurmCommand) (outcome, error) {
	if len(c.Nodes) == 0 {
		return outcome{}, fmt.Errorf("%s needs nodes", c.Command)
	}
	nodes, err := a.Slurm.ShowNodes(ctx, c.Nodes)
	if err != nil {
		return outcome{}, fmt.Errorf("reading nodes before %s: %w", c.Command, err)
	}
	var todo, done, gone []string
	for _, n := range nodes {
		need, err := needs(c.Command, n)
		if err != nil {
			return outcome{}, err
		}
		if c.Command == event.SlurmPowerDownForce && withJobs(n) {
			gone = append(gone, n.Name)
		}
		if need {
			todo = append(todo, n.Name)
		} else {
			done = append(done, n.Name+" "+n.StateString())
		}
	}
	var details []string
	if len(gone) > 0 {
		// flexslurm forces a power down when the node's VM is gone: its
		// slurmd will never end the jobs there, and Slurm would hold them
		// COMPLETING for good. DOWN requeues them at once (the node then
		// powers down as asked).
		reason := c.Reason
		if reason == "" {
			reason = slurmstate.ReasonPrefix + " the node's VM is gone"
		}
		if err := a.Slurm.UpdateNodes(ctx, gone, "state=down", "reason="+reason); err != nil {
			return outcome{}, err
		}
		details = append(details, fmt.Sprintf("scontrol update nodename=%s state=down (its jobs requeued: the VM is gone)", slurm.CompressHostlist(gone)))
	}
	if len(todo) == 0 {
		if len(details) > 0 {
			return outcome{detail: strings.Join(append(details, "unchanged: "+strings.Join(done, ", ")), "; ")}, nil
		}
		return outcome{skipped: true, detail: "nothing to do: " + strings.Join(done, ", ")}, nil
	}
	args := []string{"state=" + string(c.Command)}
	if c.Command == event.SlurmDrain || c.Command == event.SlurmDown {
		reason := c.Reason
		if reason == "" {
			reason = slurmstate.ReasonPrefix + " " + string(c.Command)
		}
		args = append(args, "reason="+reason)
	}
	if err := a.Slurm.UpdateNodes(ctx, todo, args...); err != nil {
		return outcome{}, err
	}
	details = append(details, fmt.Sprintf("scontrol update nodename=%s %s", slurm.CompressHostlist(todo), strings.Join(args, " ")))
	if len(done) > 0 {
		details = append(details, "unchanged: "+strings.Join(done, ", "))
	}
	return outcome{detail: strings.Join(details, "; ")}, nil
}

// withJobs reports whether Slurm holds jobs on n: running, or ending
// (COMPLETING), not counting a node already down.
func withJobs(n slurm.NodeInfo) bool {
	return !n.Down() && (n.State == slurmstate.NodeAllocated || n.State == slurmstate.NodeMixed || n.Has(slurmstate.FlagCompleting))
}

// needs reports whether node n needs command cmd. A power_up of a node that
// is powering down cannot be applied now: ErrRetry.
func needs(cmd event.SlurmOp, n slurm.NodeInfo) (bool, error) {
	switch cmd {
	case event.SlurmPowerDown:
		return !n.PoweredOff(), nil
	case event.SlurmPowerDownForce:
		// A pending power down of a node whose jobs are gone or ending
		// goes ahead by itself; one waiting for running jobs needs the
		// force.
		pendingIdle := n.Has(slurmstate.FlagPowerDown) && (n.State == slurmstate.NodeIdle || n.Has(slurmstate.FlagCompleting))
		return !n.Has(slurmstate.FlagPoweredDown) && !n.Has(slurmstate.FlagPoweringDown) && !pendingIdle, nil
	case event.SlurmPowerUp:
		if n.Has(slurmstate.FlagPoweringDown) {
			return false, fmt.Errorf("%w: node %s is powering down; power_up after it is down", ErrRetry, n.Name)
		}
		if n.Has(slurmstate.FlagPowerUp) || n.Has(slurmstate.FlagPoweringUp) {
			return false, nil
		}
		return n.Has(slurmstate.FlagPoweredDown) || n.Has(slurmstate.FlagPowerDown), nil
	case event.SlurmResume:
		return n.DrainSet() || n.Down(), nil
	case event.SlurmDrain:
		return !n.DrainSet(), nil
	case event.SlurmDown:
		return !n.Down(), nil
	}
	return false, fmt.Errorf("unknown node command %q", cmd)
}

func (a *Agent) updateAddress(ctx context.Context, c *event.SlurmCommand) (outcome, error) {
	if len(c.Nodes) != 1 || c.Address == "" {
		return outcome{}, fmt.Errorf("update_address needs one node and an address")
	}
	n, err := a.Slurm.ShowNode(ctx, c.Nodes[0])
	if err != nil {
		return outcome{}, fmt.Errorf("reading node %s before update_address: %w", c.Nodes[0], err)
	}
	if n.Addr == c.Address {
		return outcome{skipped: true, detail: fmt.Sprintf("node %s already has NodeAddr=%s", n.Name, n.Addr)}, nil
	}
	if err := a.Slurm.UpdateNodes(ctx, c.Nodes, "nodeaddr="+c.Address); err != nil {
		return outcome{}, err
	}
	return outcome{detail: fmt.Sprintf("scontrol update nodename=%s nodeaddr=%s (was %s)", n.Name, c.Address, n.Addr)}, nil
}

func (a *Agent) job(ctx context.Context, c *event.SlurmCommand) (outcome, error) {
	j, err := a.Slurm.ShowJob(ctx, c.JobID)
	if errors.Is(err, slurm.ErrNotFound) {
		return outcome{skipped: true, detail: fmt.Sprintf("job %s is not known to Slurm (ended more than MinJobAge ago)", c.JobID)}, nil
	}
	if err != nil {
		return outcome{}, fmt.Errorf("reading job %s before %s: %w", c.JobID, c.Command, err)
	}
	if j.Finished() {
		return outcome{skipped: true, detail: fmt.Sprintf("job %s has ended (%s)", c.JobID, j.State)}, nil
	}
	switch c.Command {
	case event.SlurmJobComment:
		return a.jobComment(ctx, c, j)
	case event.SlurmRequeue:
		if j.Pending() {
			return outcome{skipped: true, detail: fmt.Sprintf("job %s is already pending (%s)", c.JobID, j.Reason)}, nil
		}
		if _, err := a.Slurm.Scontrol(ctx, "requeue", c.JobID); err != nil {
			return outcome{}, fmt.Errorf("requeueing job %s: %w", c.JobID, err)
		}
		return outcome{detail: fmt.Sprintf("scontrol requeue %s (was %s)", c.JobID, j.State)}, nil
	default: // start_now
		if !j.Pending() {
			return outcome{skipped: true, detail: fmt.Sprintf("job %s is not pending (%s)", c.JobID, j.State)}, nil
		}
		if j.Held() {
			return outcome{skipped: true, detail: fmt.Sprintf("job %s is held (%s): it starts once released", c.JobID, j.Reason)}, nil
		}
		// slurmd refuses ("Job credential revoked") a job relaunched on a
		// node within the same second as its requeue revoked the previous
		// credential; Slurm's requeue delay exists for that. Let that
		// second pass (SubmitTime is reset at the requeue).
		if wait := time.Until(j.SubmitTime.Add(1100 * time.Millisecond)); !j.SubmitTime.IsZero() && wait > 0 && wait < 2*time.Second {
			select {
			case <-ctx.Done():
				return outcome{}, fmt.Errorf("%w: %w", ErrRetry, ctx.Err())
			case <-time.After(wait):
			}
		}
		if _, err := a.Slurm.Scontrol(ctx, "update", "jobid="+c.JobID, "starttime=now"); err != nil {
			return outcome{}, fmt.Errorf("starting job %s now: %w", c.JobID, err)
		}
		return outcome{detail: fmt.Sprintf("scontrol update jobid=%s starttime=now (was pending: %s)", c.JobID, j.Reason)}, nil
	}
}

// jobComment sets (or clears) the comment flexslurm keeps on a job, so
// its user sees in Slurm (squeue -O comment, scontrol show job) why
// flexslurm does not provision it. A comment without flexslurm's prefix is
// the user's own and is left alone.
func (a *Agent) jobComment(ctx context.Context, c *event.SlurmCommand, j slurm.JobInfo) (outcome, error) {
	if j.Comment == c.Reason {
		return outcome{skipped: true, detail: fmt.Sprintf("job %s already has this comment", c.JobID)}, nil
	}
	if j.Comment != "" && !strings.HasPrefix(j.Comment, event.JobCommentPrefix) {
		return outcome{skipped: true, detail: fmt.Sprintf("job %s has its user's comment %q: kept (flexslurm's: %s)", c.JobID, text.Truncate(j.Comment, 128), c.Reason)}, nil
	}
	if c.Reason == "" && j.Comment == "" {
		return outcome{skipped: true, detail: fmt.Sprintf("job %s has no comment", c.JobID)}, nil
	}
	if _, err := a.Slurm.Scontrol(ctx, "update", "jobid="+c.JobID, "comment="+c.Reason); err != nil {
		return outcome{}, fmt.Errorf("setting job %s's comment: %w", c.JobID, err)
	}
	return outcome{detail: fmt.Sprintf("scontrol update jobid=%s comment=%q", c.JobID, c.Reason)}, nil
}

// signal sends c.Signal to the batch shell of each job running on c.Nodes
// (scancel --batch: the shell and its children, not the job's steps, which
// a trap in the batch script can tell; Slurm's own sbatch --signal=B:
// does the same). A node with no running job has nothing to do.
func (a *Agent) signal(ctx context.Context, c *event.SlurmCommand) (outcome, error) {
	if !slices.Contains(event.Signals, c.Signal) {
		return outcome{}, fmt.Errorf("refusing signal %q: flexslurm sends only %v", c.Signal, event.Signals)
	}
	jobs, err := a.Slurm.JobsOnNodes(ctx, c.Nodes, "RUNNING")
	if err != nil {
		return outcome{}, err
	}
	var ids []string
	for _, j := range jobs {
		if j.State == slurmstate.JobRunning {
			ids = append(ids, j.ID)
		}
	}
	if len(ids) == 0 {
		return outcome{skipped: true, detail: fmt.Sprintf("no job runs on %s", slurm.CompressHostlist(c.Nodes))}, nil
	}
	args := append([]string{"--batch", "--signal=" + c.Signal}, ids...)
	if _, err := a.Slurm.Run(ctx, "scancel", args...); err != nil {
		return outcome{}, fmt.Errorf("signalling jobs %s on %s: %w", strings.Join(ids, ","), slurm.CompressHostlist(c.Nodes), err)
	}
	return outcome{detail: fmt.Sprintf("scancel --batch --signal=%s %s (running on %s)", c.Signal, strings.Join(ids, " "), slurm.CompressHostlist(c.Nodes))}, nil
}

// slurmTime is how scontrol reads and prints times: local, to the second.
const slurmTime = "2006-01-02T15:04:05"

func (a *Agent) reservation(ctx context.Context, c *event.SlurmCommand) (outcome, error) {
	if !strings.HasPrefix(c.Reservation, event.ReservationPrefix) {
		return outcome{}, fmt.Errorf("refusing %s of reservation %q: flexslurm only touches reservations named %s…",
			c.Command, c.Reservation, event.ReservationPrefix)
	}
	cur, err := a.Slurm.ShowReservation(ctx, c.Reservation)
	exists := err == nil
	if err != nil && !errors.Is(err, slurm.ErrNotFound) {
		return outcome{}, fmt.Errorf("reading reservation %s: %w", c.Reservation, err)
	}
	if c.Command == event.SlurmReservationDelete {
		if !exists {
			return outcome{skipped: true, detail: fmt.Sprintf("reservation %s does not exist", c.Reservation)}, nil
		}
		if _, err := a.Slurm.Scontrol(ctx, "delete", "reservationname="+c.Reservation); err != nil {
			return outcome{}, fmt.Errorf("deleting reservation %s: %w", c.Reservation, err)
		}
		return outcome{detail: "scontrol delete reservationname=" + c.Reservation}, nil
	}
	if len(c.Nodes) == 0 || c.DurationSeconds <= 0 {
		return outcome{}, fmt.Errorf("reservation_create needs nodes and a duration")
	}
	now := a.now()
	start := c.StartTime
	if start.IsZero() || start.Before(now) {
		start = now
	}
	minutes := int64(math.Ceil(float64(c.DurationSeconds) / 60))
	end := start.Add(time.Duration(minutes) * time.Minute)
	hl := slurm.CompressHostlist(c.Nodes)
	if exists {
		sameNodes := slices.Equal(sortedCopy(cur.Nodes), sortedCopy(c.Nodes))
		// A reservation that has started cannot move into the past: it
		// is in place when it is active and ends when wanted.
		sameStart := absDur(cur.StartTime.Sub(start)) < time.Minute || cur.State == "ACTIVE" && !c.StartTime.After(now)
		sameEnd := absDur(cur.EndTime.Sub(end)) < time.Minute
		if sameNodes && sameStart && sameEnd {
			return outcome{skipped: true, detail: fmt.Sprintf("reservation %s already holds %s from %s to %s", c.Reservation,
				cur.NodeList, cur.StartTime.Format(slurmTime), cur.EndTime.Format(slurmTime))}, nil
		}
		args := []string{"update", "reservationname=" + c.Reservation, "nodes=" + hl, "duration=" + strconv.FormatInt(minutes, 10)}
		if !sameStart {
			args = append(args, "starttime="+startArg(start, now))
		}
		if _, err := a.Slurm.Scontrol(ctx, args...); err != nil {
			return outcome{}, fmt.Errorf("moving reservation %s: %w", c.Reservation, err)
		}
		return outcome{detail: "scontrol " + strings.Join(args, " ")}, nil
	}
	args := []string{"create", "reservation", "reservationname=" + c.Reservation, "nodes=" + hl,
		"starttime=" + startArg(start, now), "duration=" + strconv.FormatInt(minutes, 10),
		"flags=maint,ignore_jobs", "users=root"}
	if _, err := a.Slurm.Scontrol(ctx, args...); err != nil {
		return outcome{}, fmt.Errorf("creating reservation %s: %w", c.Reservation, err)
	}
	return outcome{detail: "scontrol " + strings.Join(args, " ")}, nil
}

func startArg(start, now time.Time) string {
	if !start.After(now) {
		return "now"
	}
	return start.Local().Format(slurmTime)
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
