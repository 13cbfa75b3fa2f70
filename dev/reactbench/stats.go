// Package reactbench measures flexslurm's reaction times end to end on the
// real local path (dev/local): the Firestore and Pub/Sub emulators, push
// subscriptions delivering to the four functions over HTTP, the Compute
// simulator, and real Slurm with its hooks and the agent. It backs
// `flexslurm bench react`; docs/reaction-time.md says what each reaction
// is and where each of its two ends is read.
package reactbench

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is one kind of reaction.
type Kind string

// The four reactions measured.
const (
	// KindResume: slurmctld decides to power a node up (and calls
	// ResumeProgram) → the resize request for it exists in Compute.
	KindResume Kind = "resume"
	// KindRegister: a VM is RUNNING → its slurmd registered with
	// slurmctld, minus the simulated boot.
	KindRegister Kind = "register"
	// KindHealth: a prolog's health check fails → the node drained in
	// Slurm and its replacement requested from Compute.
	KindHealth Kind = "health"
	// KindExpiry: an expiry audit log published → the successor VM
	// requested from Compute.
	KindExpiry Kind = "expiry"
)

// Kinds are the kinds in report order.
var Kinds = []Kind{KindResume, KindRegister, KindHealth, KindExpiry}

// Title is the kind's row title in the report.
func (k Kind) Title() string {
	switch k {
	case KindResume:
		return "ResumeProgram called → resize request exists in Compute"
	case KindRegister:
		return "VM RUNNING → slurmd registered (simulated boot subtracted)"
	case KindHealth:
		return "prolog health failure → node drained and replacement requested"
	case KindExpiry:
		return "expiry audit log published → successor requested"
	}
	return string(k)
}

// Peer polling periods the report compares against.
const (
	// SlurmsyncPeriod is Cluster Toolkit's slurmsync period (30 s).
	SlurmsyncPeriod = 30 * time.Second
	// ClustermgtdPeriod is AWS ParallelCluster's clustermgtd loop (60 s).
	ClustermgtdPeriod = 60 * time.Second
	// Target is the p99 every reaction must meet: a tenth of the fastest
	// peer's period.
	Target = 3 * time.Second
)

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// ds: the smallest value with at least p % of the values at or below it
// (with 50 values, p99 is the largest). ds need not be sorted; it is not
// changed. It returns 0 for no values.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 || p <= 0 || p > 100 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}

// Summary is one kind's distribution in one phase.
type Summary struct {
	N             int
	P50, P99, Max time.Duration
}

// Summarize summarizes ds.
func Summarize(ds []time.Duration) Summary {
	return Summary{N: len(ds), P50: Percentile(ds, 50), P99: Percentile(ds, 99), Max: Percentile(ds, 100)}
}

// Ratio is d as a fraction of period, e.g. "1/25" for 1.2 s of 30 s, or
// "0.04" form when d is zero.
func Ratio(d, period time.Duration) string {
	if d <= 0 {
		return "0"
	}
	return fmt.Sprintf("1/%.0f", float64(period)/float64(d))
}

// Phase is one measured phase: events one at a time, or within a burst.
type Phase struct {
	Name    string
	Samples map[Kind][]Sample
	// Notes are what the phase could not pair (an event whose end was
	// never seen), and other remarks printed under the table.
	Notes []string
}

// Sample is one reaction: its two ends, each with where it was read.
type Sample struct {
	Node       string
	Start, End time.Time
	// Less is subtracted from End−Start (the simulated boot).
	Less time.Duration
}

// Duration is the reaction time.
func (s Sample) Duration() time.Duration { return s.End.Sub(s.Start) - s.Less }

// Durations returns the phase's reaction times of kind k.
func (p Phase) Durations(k Kind) []time.Duration {
	var out []time.Duration
	for _, s := range p.Samples[k] {
		out = append(out, s.Duration())
	}
	return out
}

// WriteTable writes the phases as one markdown table: p50, p99 and max per
// kind and phase, p99 against the target and as a fraction of the peers'
// polling periods.
func WriteTable(w io.Writer, phases []Phase) {
	fmt.Fprintln(w, "| reaction | phase | events | p50 | p99 | max | p99 ≤ 3 s | p99 ÷ slurmsync 30 s | p99 ÷ clustermgtd 60 s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, k := range Kinds {
		for _, p := range phases {
			s := Summarize(p.Durations(k))
			verdict := "met"
			switch {
			case s.N == 0:
				verdict = "no events"
			case s.P99 > Target:
				verdict = "**MISSED**"
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", k.Title(), p.Name, s.N,
				sec(s.P50), sec(s.P99), sec(s.Max), verdict, Ratio(s.P99, SlurmsyncPeriod), Ratio(s.P99, ClustermgtdPeriod))
		}
	}
	for _, p := range phases {
		for _, n := range p.Notes {
			fmt.Fprintf(w, "\n%s: %s\n", p.Name, n)
		}
	}
}

func sec(d time.Duration) string {
	return fmt.Sprintf("%.3f s", d.Seconds())
}

// WriteReport writes the run's report: the command, when and where it
// ran, the table, and where each end of each reaction is read.
func WriteReport(w io.Writer, res *Result, command string) {
	fmt.Fprintf(w, "Command: `%s`, %s–%s UTC (%s). %s\n\n", command,
		res.Started.UTC().Format("2006-01-02 15:04"), res.Ended.UTC().Format("15:04"), res.Ended.Sub(res.Started).Round(time.Second), Machine())
	fmt.Fprintf(w, "Pool: %d static and %d dynamic nodes; capacity wait %s per resize request (not part of any reaction); "+
		"simulated boot subtracted from each registration: %s.", res.Opts.StaticNodes, res.Opts.BurstNodes, res.Opts.CapacityDelay, res.Boot)
	if res.Opts.Burst > 0 {
		fmt.Fprintf(w, " Burst: %d single-node jobs of 3 s submitted at once, %d completed in %s, while the host of each busy dynamic node is faulted once and the static nodes expire in turn.",
			res.Opts.Burst, res.BurstCompleted, res.BurstTook.Round(time.Second))
	}
	fmt.Fprint(w, "\n\n")
	WriteTable(w, res.Phases)
	fmt.Fprint(w, `
Where each end is read (wall clock; the simulator's times converted from its clock, which runs at ×1 here):

- resume: start, when Slurm started ResumeProgram (the hook's own log, hooks-slurm.log: its "hook done" record's time minus its elapsed_ms); end, the creationTimestamp of the first resize request naming a VM of X (the Compute simulator), 0 if one was created in the 30 s before (the job's report from PrologSlurmctld came first).
- register: start, the VM's creationTimestamp (the simulator creates a VM RUNNING); end, slurmctld's log line "Node X now responding"; minus the simulated boot (dev/local starts the node's bootstrap MinNodeStartDelay after the VM is RUNNING).
- health: start, the publishTime of the health.failure message on its topic (a pull subscription of the benchmark's own); end, the later of slurmctld's log line "update_node: node X reason set to: …" (the drain) and the creationTimestamp of the first resize request for X after the message.
- expiry: start, the publishTime of the VM's first expiry audit log entry on the expiry topic; end, the creationTimestamp of the first resize request for the node after it.
`)
}

// Machine describes this machine: processors, memory, load averages.
func Machine() string {
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = strings.Join(f[:3], " ")
		}
	}
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					mem = fmt.Sprintf("%.1f GiB", kb/1024/1024)
				}
			}
		}
	}
	return fmt.Sprintf("Machine: nproc %d, memory %s, %s %s/%s, load average %s at the end", runtime.NumCPU(), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH, load)
}
