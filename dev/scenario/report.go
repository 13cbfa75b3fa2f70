package scenario

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/scenario/check"
	"github.com/flexslurm/flexslurm/dev/scenario/delivery"
)

// Result is one assertion's outcome.
type Result = check.Result

// DeadLetter is a message that reached the maximum number of delivery
// attempts without being acknowledged.
type DeadLetter = delivery.DeadLetter

// Stats counts what happened in a run.
type Stats struct {
	// Deliveries are delivery attempts; Acks and Nacks their outcomes
	// (crashes count as nacks); Redeliveries the attempts after a nack;
	// Duplicates the injected extra deliveries; DeadLetters the messages
	// that ran out of attempts.
	Deliveries, Acks, Nacks, Redeliveries, Duplicates, DeadLetters int
	// Crashes are delivery attempts stopped by an injected crash.
	Crashes int
	// ComputeCalls are HTTP calls flexslurm made to Compute;
	// InjectedErrors those a compute_error fault failed.
	ComputeCalls, InjectedErrors int
	// SlurmCommands are the Slurm commands flexslurm published.
	SlurmCommands int
	// Events counts the runner's steps through time: deliveries,
	// simulator transitions, ticks, snapshots and Slurm timers.
	Events int
	// LateDecisions are the reconcile passes that decided late
	// (late_decision steps).
	LateDecisions int
}

// Report is the outcome of a run.
type Report struct {
	// File is the scenario file ("" when run from memory); Name its name.
	File, Name string
	// Results are every assertion's outcome, in evaluation order.
	Results []Result
	// DeadLetters are messages dead-lettered during the run.
	DeadLetters []DeadLetter
	// Unsettled lists messages still queued or held at the end.
	Unsettled []string
	// Notes are remarks about the run (unmodelled Slurm commands, skipped
	// faults).
	Notes []string
	// Simulated is the simulated time covered; Wall the wall time spent.
	Simulated, Wall time.Duration
	Stats           Stats
	// Trace is the run's timeline (RunOptions.Trace).
	Trace []string
}

// Failed reports whether any assertion failed.
func (r *Report) Failed() bool { return len(r.Failures()) > 0 }

// Failures returns the failed results.
func (r *Report) Failures() []Result {
	var out []Result
	for _, res := range r.Results {
		if !res.Pass {
			out = append(out, res)
		}
	}
	return out
}

// Write prints the report: every assertion (only failures unless verbose),
// dead letters, unsettled messages and a summary line.
func (r *Report) Write(w io.Writer, verbose bool) {
	title := r.Name
	if r.File != "" {
		title = r.File + ": " + r.Name
	}
	fmt.Fprintln(w, title)
	for _, res := range r.Results {
		if verbose || !res.Pass {
			fmt.Fprintln(w, "  "+strings.ReplaceAll(res.String(), "\n", "\n  "))
		}
	}
	for _, d := range r.DeadLetters {
		fmt.Fprintf(w, "  dead letter at %s: %s %s (%s%s) after %d attempts: %s\n", FormatDuration(d.At), d.Topic, d.ID, d.Type, labelSuffix(d.Label), d.Attempts, d.LastError)
	}
	if len(r.Unsettled) > 0 {
		fmt.Fprintf(w, "  still queued or held at the end: %s\n", strings.Join(r.Unsettled, ", "))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if verbose {
		for _, t := range r.Trace {
			fmt.Fprintln(w, "  | "+t)
		}
	}
	failed := len(r.Failures())
	status := "ok"
	if failed > 0 {
		status = "FAILED"
	}
	fmt.Fprintf(w, "  %s: %d assertions, %d failed; %d deliveries (%d nacked, %d duplicates, %d crashes, %d dead letters), %d Compute calls; simulated %s in %s\n",
		status, len(r.Results), failed, r.Stats.Deliveries, r.Stats.Nacks, r.Stats.Duplicates, r.Stats.Crashes, len(r.DeadLetters),
		r.Stats.ComputeCalls, FormatDuration(r.Simulated), r.Wall.Round(time.Millisecond))
}

func labelSuffix(l string) string {
	if l == "" {
		return ""
	}
	return ", label " + l
}
