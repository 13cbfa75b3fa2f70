package tracebench

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Columns are the trace's columns, as the Alibaba cluster-trace-gpu-v2023
// pod lists have them (https://github.com/alibaba/clusterdata,
// cluster-trace-gpu-v2023/README.md). The header must name them all, in any
// order; other columns are ignored.
var Columns = []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
	"creation_time", "deletion_time", "scheduled_time"}

// Task is one row of the trace: a pod of the production cluster.
type Task struct {
	// Line is the row's line in the file (the header is line 1).
	Line int
	Name string
	// GPUs is num_gpu, the GPUs the task asked for (0–8); GPUMilli is
	// gpu_milli, the share of one GPU a one-GPU task asked for (0–1000).
	GPUs, GPUMilli int
	// Phase is pod_phase at the end of the trace.
	Phase string
	// Created and Deleted are creation_time and deletion_time since the
	// trace's start; Scheduled is scheduled_time, when the task started
	// running (Ran false when the column is empty: it never ran).
	Created, Deleted, Scheduled time.Duration
	Ran                         bool
}

// ParseError is a trace row that does not parse: it names the line, the
// column (1-based, and its name) and the value.
type ParseError struct {
	Line, Column int
	Name         string // the column's name ("" when the line is not a row)
	Value        string
	Err          error
}

func (e *ParseError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
	}
	return fmt.Sprintf("line %d, column %d (%s) %q: %v", e.Line, e.Column, e.Name, e.Value, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// maxTraceTime bounds the times of a row (a year): a larger value is a
// unit error, not a trace.
const maxTraceTime = 366 * 24 * time.Hour

// ParseTrace reads a trace in the pod-list CSV form (Columns).
func ParseTrace(r io.Reader) ([]Task, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, &ParseError{Line: pe.Line, Column: pe.Column, Err: pe.Err}
		}
		if err == io.EOF {
			return nil, &ParseError{Line: 1, Column: 1, Err: errors.New("empty file: want a header naming " + strings.Join(Columns, ","))}
		}
		return nil, err
	}
	idx := map[string]int{}
	for i, h := range head {
		idx[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	col := make([]int, len(Columns))
	for k, c := range Columns {
		i, ok := idx[c]
		if !ok {
			return nil, &ParseError{Line: 1, Column: len(head) + 1, Err: fmt.Errorf("the header lacks column %q (want %s)", c, strings.Join(Columns, ","))}
		}
		col[k] = i
	}
	var tasks []Task
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return tasks, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, &ParseError{Line: pe.Line, Column: pe.Column, Err: pe.Err}
			}
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		t, err := parseRow(rec, col, line)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
}

func parseRow(rec []string, col []int, line int) (Task, error) {
	field := func(k int) (string, *ParseError) {
		v := strings.TrimSpace(rec[col[k]])
		return v, &ParseError{Line: line, Column: col[k] + 1, Name: Columns[k], Value: v}
	}
	integer := func(k int, lo, hi int64, optional bool) (int64, bool, error) {
		v, pe := field(k)
		if v == "" {
			if optional {
				return 0, false, nil
			}
			pe.Err = errors.New("empty: a value is required")
			return 0, false, pe
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			pe.Err = errors.New("not an integer")
			return 0, false, pe
		}
		if n < lo || n > hi {
			pe.Err = fmt.Errorf("outside %d–%d", lo, hi)
			return 0, false, pe
		}
		return n, true, nil
	}
	const (
		cName = iota
		_     // cpu_milli
		_     // memory_mib
		cGPUs
		cMilli
		_ // gpu_spec
		_ // qos
		cPhase
		cCreated
		cDeleted
		cScheduled
	)
	secs := int64(maxTraceTime / time.Second)
	var t Task
	t.Line = line
	t.Name, _ = field(cName)
	t.Phase, _ = field(cPhase)
	gpus, _, err := integer(cGPUs, 0, 64, false)
	if err != nil {
		return t, err
	}
	milli, _, err := integer(cMilli, 0, 1000, true)
	if err != nil {
		return t, err
	}
	created, _, err := integer(cCreated, 0, secs, false)
	if err != nil {
		return t, err
	}
	deleted, hasDeleted, err := integer(cDeleted, 0, secs, true)
	if err != nil {
		return t, err
	}
	scheduled, ran, err := integer(cScheduled, 0, secs, true)
	if err != nil {
		return t, err
	}
	if ran && !hasDeleted {
		_, pe := field(cDeleted)
		pe.Err = errors.New("empty for a task that was scheduled: its end is unknown")
		return t, pe
	}
	if hasDeleted && deleted < created {
		_, pe := field(cDeleted)
		pe.Err = fmt.Errorf("before creation_time %d", created)
		return t, pe
	}
	if ran && (scheduled < created || scheduled > deleted) {
		_, pe := field(cScheduled)
		pe.Err = fmt.Errorf("outside creation_time %d – deletion_time %d", created, deleted)
		return t, pe
	}
	t.GPUs, t.GPUMilli, t.Ran = int(gpus), int(milli), ran
	t.Created, t.Deleted, t.Scheduled = time.Duration(created)*time.Second, time.Duration(deleted)*time.Second, time.Duration(scheduled)*time.Second
	return t, nil
}

// Job is a trace task as the replay submits it to Slurm.
type Job struct {
	// ID is the Slurm job id: the task's ordinal in the trace (1-based).
	ID string
	// Task is the trace row it comes from.
	Task string
	// Submit is when it is submitted, since the start of the replay's
	// window: the task's creation_time.
	Submit time.Duration
	// GPUs is the GPUs it asks for on its one node (--gres=gpu:N).
	GPUs int
	// Runtime is how long it runs once started: the task's
	// deletion_time − scheduled_time (at least 1 s).
	Runtime time.Duration
	// Limit is its time limit (sbatch --time), which the trace lacks:
	// LimitFor(Runtime).
	Limit time.Duration
}

// LimitFor is the time limit the replay gives a job of this runtime: the
// runtime rounded up to the next whole hour, at least one hour. The trace
// has no time limits; users ask for round hours above what their job
// needs, and Slurm schedules by the limit (a node's end-of-life
// reservation keeps a job off it unless the limit fits).
func LimitFor(runtime time.Duration) time.Duration {
	h := time.Duration(math.Ceil(runtime.Hours())) * time.Hour
	return max(h, time.Hour)
}

// Skipped counts the tasks of the window that the replay does not submit.
type Skipped struct {
	// CPUOnly asked for no GPU (num_gpu 0): the pool is a GPU pool.
	CPUOnly int
	// NeverRan were never scheduled in the production cluster (empty
	// scheduled_time, pod_phase Pending): their runtime is unknown.
	NeverRan int
}

// Window selects the trace's tasks created in [From, From+Days) and makes
// them jobs, their submissions relative to From. A task asking for a share
// of one GPU (gpu_milli below 1000) asks Slurm for one whole GPU: gres/gpu
// allocates whole devices.
func Window(tasks []Task, from, length time.Duration) ([]Job, Skipped) {
	var jobs []Job
	var sk Skipped
	for i, t := range tasks {
		if t.Created < from || t.Created >= from+length {
			continue
		}
		switch {
		case t.GPUs == 0:
			sk.CPUOnly++
			continue
		case !t.Ran:
			sk.NeverRan++
			continue
		}
		run := max(t.Deleted-t.Scheduled, time.Second)
		jobs = append(jobs, Job{ID: strconv.Itoa(i + 1), Task: t.Name, Submit: t.Created - from, GPUs: t.GPUs, Runtime: run, Limit: LimitFor(run)})
	}
	return jobs, sk
}
