package slurm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/text"
)

// ErrNotFound marks a node, job or reservation slurmctld does not know.
var ErrNotFound = errors.New("not found in Slurm")

// notFound reports whether a scontrol/squeue failure says the object does
// not exist.
func notFound(err error) bool {
	var ce *CommandError
	if !errors.As(err, &ce) || ce.ExitCode <= 0 {
		return false
	}
	s := ce.Stderr
	return strings.Contains(s, "not found") || strings.Contains(s, "Invalid job id") ||
		strings.Contains(s, "Invalid node name") || strings.Contains(s, "Requested reservation is invalid")
}

// ShowNodes returns the nodes names, from `scontrol show node -o HOSTLIST`
// (every node when names is empty), in Slurm's order. A name Slurm does not
// know fails the whole call with an error wrapping ErrNotFound.
func (r *Runner) ShowNodes(ctx context.Context, names []string) ([]NodeInfo, error) {
	args := []string{"-o", "show", "node"}
	if len(names) > 0 {
		args = append(args, CompressHostlist(names))
	}
	out, err := r.Scontrol(ctx, args...)
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("showing nodes %s: %w: %v", CompressHostlist(names), ErrNotFound, err)
		}
		return nil, fmt.Errorf("showing nodes %s: %w", CompressHostlist(names), err)
	}
	nodes, err := ParseShowNodes(out)
	if err != nil {
		return nil, fmt.Errorf("showing nodes %s: %w", CompressHostlist(names), err)
	}
	return nodes, nil
}

// ShowNode returns one node, or an error wrapping ErrNotFound.
func (r *Runner) ShowNode(ctx context.Context, name string) (NodeInfo, error) {
	nodes, err := r.ShowNodes(ctx, []string{name})
	if err != nil {
		return NodeInfo{}, err
	}
	for _, n := range nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return NodeInfo{}, fmt.Errorf("showing node %s: %w", name, ErrNotFound)
}

// ShowJob returns one job from `scontrol show job -o ID` (ID as "123" or
// "12_3"), or an error wrapping ErrNotFound once slurmctld has forgotten it
// (MinJobAge after it ended).
func (r *Runner) ShowJob(ctx context.Context, id string) (JobInfo, error) {
	out, err := r.Scontrol(ctx, "-o", "show", "job", id)
	if err != nil {
		if notFound(err) {
			return JobInfo{}, fmt.Errorf("showing job %s: %w", id, ErrNotFound)
		}
		return JobInfo{}, fmt.Errorf("showing job %s: %w", id, err)
	}
	jobs, err := ParseShowJobs(out)
	if err != nil {
		return JobInfo{}, fmt.Errorf("showing job %s: %w", id, err)
	}
	var found []JobInfo
	for _, j := range jobs {
		if j.ID == id || strconv.FormatInt(j.JobID, 10) == id {
			found = append(found, j)
		}
	}
	switch len(found) {
	case 0:
		return JobInfo{}, fmt.Errorf("showing job %s: %w", id, ErrNotFound)
	case 1:
		return found[0], nil
	}
	// scontrol prints a job's own fields (its name, comment, working
	// directory) as they are: one holding a newline and "JobId=…" forges
	// a second record of the job. Trust neither.
	return JobInfo{}, fmt.Errorf("showing job %s: %w: scontrol printed %d records of it (a field of the job holds a newline)", id, ErrParse, len(found))
}

// ShowReservation returns one reservation, or an error wrapping
// ErrNotFound.
func (r *Runner) ShowReservation(ctx context.Context, name string) (Reservation, error) {
	out, err := r.Scontrol(ctx, "-o", "show", "reservation", name)
	if err != nil {
		if notFound(err) {
			return Reservation{}, fmt.Errorf("showing reservation %s: %w", name, ErrNotFound)
		}
		return Reservation{}, fmt.Errorf("showing reservation %s: %w", name, err)
	}
	rs, err := ParseShowReservations(out)
	if err != nil {
		return Reservation{}, fmt.Errorf("showing reservation %s: %w", name, err)
	}
	for _, res := range rs {
		if res.Name == name {
			return res, nil
		}
	}
	return Reservation{}, fmt.Errorf("showing reservation %s: %w", name, ErrNotFound)
}

// Nodes returns every node from `sinfo --json` (including powered-down
// cloud nodes, which Slurm shows only with PrivateData=cloud).
func (r *Runner) Nodes(ctx context.Context) ([]NodeInfo, error) {
	out, err := r.Run(ctx, "sinfo", "--json")
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	nodes, err := ParseSinfoJSON(out)
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return nodes, nil
}

// Jobs returns every job slurmctld knows from `squeue --json`, including
// jobs that ended less than MinJobAge ago: filter with JobInfo.Finished.
func (r *Runner) Jobs(ctx context.Context) ([]JobInfo, error) {
	out, err := r.Run(ctx, "squeue", "--json", "--all")
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	jobs, err := ParseSqueueJSON(out)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	return jobs, nil
}

// squeueFields is the --Format of JobsByID; '|' ends each field.
const squeueFields = "JobID:|,JobArrayID:|,State:|,Reason:|,Partition:|,NumNodes:|,TimeLimit:|,RestartCnt:|,NodeList:|"

// JobsByID returns the jobs with the given numeric ids from one
// `squeue -h -j IDS --Format …` call (text output honours the filter, and
// one call stays fast for many jobs). Ids slurmctld no longer knows are
// absent from the result.
func (r *Runner) JobsByID(ctx context.Context, ids []string) ([]JobInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := r.Run(ctx, "squeue", "-h", "--all", "-j", strings.Join(ids, ","), "--Format", squeueFields)
	if err != nil {
		if notFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing jobs %s: %w", strings.Join(ids, ","), err)
	}
	return parseSqueueFormat(out)
}

// parseSqueueFormat parses squeue -h --Format squeueFields output.
func parseSqueueFormat(out []byte) ([]JobInfo, error) {
	var jobs []JobInfo
	for _, l := range lines(out) {
		f := strings.Split(l, "|")
		if len(f) < 9 {
			return nil, fmt.Errorf("%w: squeue line %q has %d fields, want 9", ErrParse, text.Truncate(l, 200), len(f))
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		id, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: squeue line %q: job id %q", ErrParse, text.Truncate(l, 200), f[0])
		}
		j := JobInfo{JobID: id, ID: f[1], Reason: f[3], Partition: f[4]}
		if j.ID == "" || strings.ContainsAny(j.ID, "[]") {
			j.ID = f[0]
		}
		j.State, j.StateFlags = slurmstate.ParseJobState([]string{f[2]})
		j.NodeCount, _ = strconv.Atoi(f[5])
		j.TimeLimit, _ = ParseDuration(f[6])
		j.Restarts, _ = strconv.Atoi(f[7])
		if nl := f[8]; nl != "" && nl != "(null)" {
			j.NodeList = nl
			if j.Nodes, err = ExpandHostlist(nl); err != nil {
				return nil, fmt.Errorf("%w: job %s: %w", ErrParse, j.ID, err)
			}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// UpdateNodes runs `scontrol update nodename=HOSTLIST ARGS…`, each arg one
// "key=value" word (values may hold spaces: no shell is involved).
func (r *Runner) UpdateNodes(ctx context.Context, names []string, args ...string) error {
	if len(names) == 0 {
		return errors.New("updating nodes: no node given")
	}
	hl := CompressHostlist(names)
	if _, err := r.Scontrol(ctx, append([]string{"update", "nodename=" + hl}, args...)...); err != nil {
		return fmt.Errorf("updating nodes %s (%s): %w", hl, strings.Join(args, " "), err)
	}
	return nil
}

// JobsOnNodes returns the jobs with an allocation on any of nodes (squeue
// -w), in the states given (e.g. "CONFIGURING,RUNNING"; every state when
// empty), from one squeue --Format call.
func (r *Runner) JobsOnNodes(ctx context.Context, nodes []string, states string) ([]JobInfo, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	args := []string{"-h", "--all", "-w", CompressHostlist(nodes), "--Format", squeueFields}
	if states != "" {
		args = append(args, "-t", states)
	}
	out, err := r.Run(ctx, "squeue", args...)
	if err != nil {
		return nil, fmt.Errorf("listing jobs on %s: %w", CompressHostlist(nodes), err)
	}
	return parseSqueueFormat(out)
}
