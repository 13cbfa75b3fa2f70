package tracebench

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/benchpool"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// Source describes the trace the jobs came from, for the report.
type Source struct {
	// File is the trace file's path; Tasks its rows.
	File  string
	Tasks int
	// Skipped are the window's tasks not submitted.
	Skipped Skipped
}

// Citation is the reference that every figure computed from the Alibaba
// trace must carry.
const Citation = "Alibaba PAI GPU trace cluster-trace-gpu-v2023 (openb_pod_list_default.csv), https://github.com/alibaba/clusterdata; " +
	"Q. Weng et al., \"Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent\", USENIX ATC '23"

// Oracle is the lower bound on what any policy pays for jobs: the GPU-time
// they used plus one boot of a whole node (GPUsPerNode GPUs) for each node
// start of the run given (flexslurm's default).
func Oracle(r *Result) time.Duration {
	return r.GPUTimeUsed + time.Duration(r.NodeStarts)*r.Config.BootTime*GPUsPerNode
}

// WriteReport prints how the replay was made and the strategies' results
// side by side, with the oracle lower bound (from the first result that
// ran) as the last column.
func WriteReport(w io.Writer, src Source, results []*Result) {
	if len(results) == 0 {
		return
	}
	cfg := results[0].Config
	// Each line is a paragraph of its own: in Markdown (BENCHMARKS.md)
	// lines without a blank one between them run together.
	fmt.Fprintf(w, "Trace replay: %s (%d tasks)\n\nSource: %s\n\n", src.File, src.Tasks, Citation)
	fmt.Fprintf(w, "Window: tasks created from day %s for %s of the trace; %d GPU jobs submitted, %d CPU-only tasks and %d never-scheduled tasks skipped.\n\n",
		fmtDays(cfg.From), fmtDays(cfg.Length), results[0].Jobs, src.Skipped.CPUOnly, src.Skipped.NeverRan)
	fmt.Fprintf(w, "Derived (the trace lacks them): a job runs deletion_time − scheduled_time on one node with num_gpu whole GPUs (gres/gpu:N; a share of a GPU asks for 1), "+
		"submitted at creation_time; its time limit is its runtime rounded up to the hour (at least 1 h); a node registers %s after its VM runs; "+
		"each resize request's capacity wait is drawn from a %s (seed %d).\n\n", fmtDur(cfg.BootTime), cfg.Wait, cfg.Seed)
	fmt.Fprintf(w, "Pool: %d × a3-ultragpu-8g (%d GPUs each), min 0, flex_start_max_duration %s; partition MaxTime = that duration (EnforcePartLimits=ALL); reconcile every %s with a Slurm snapshot before each tick.\n\n",
		cfg.MaxNodes, GPUsPerNode, fmtDur(cfg.MaxRunDuration), fmtDur(cfg.Tick))
	for _, r := range results {
		if r.Strategy.UseJobDuration && r.NotRun == "" {
			allowance := r.Strategy.Policy.BootAllowance
			if allowance <= 0 {
				allowance = plan.DefaultPolicy().BootAllowance
			}
			fmt.Fprintf(w, "%s: the pool sets use_job_duration; each job's resize request asks for its time limit plus a %s boot allowance, within Compute's 600 s and the pool's max run duration.\n\n",
				r.Strategy.Name, fmtDur(allowance))
		}
	}

	var ran *Result
	for _, r := range results {
		if r.NotRun == "" {
			ran = r
			break
		}
	}
	head := []string{"measurement"}
	for _, r := range results {
		head = append(head, r.Strategy.Name)
	}
	if ran != nil {
		head = append(head, "oracle lower bound")
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	row := func(name string, f func(r *Result) string, oracle string) {
		cells := []string{name}
		for _, r := range results {
			if r.NotRun != "" {
				cells = append(cells, "not run")
				continue
			}
			cells = append(cells, f(r))
		}
		if ran != nil {
			cells = append(cells, oracle)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	if ran == nil {
		row("—", func(*Result) string { return "" }, "")
		return
	}
	oracle := Oracle(ran)
	row("GPU-hours paid (VM-hours × 8)", func(r *Result) string { return hours(r.GPUTimePaid()) }, hours(oracle))
	row("paid ÷ oracle", func(r *Result) string { return ratio(r.GPUTimePaid(), oracle) }, "1.00")
	row("GPU-hours used by jobs (completed: runtime × GPUs)", func(r *Result) string { return hours(r.GPUTimeUsed) }, hours(ran.GPUTimeUsed))
	row("used ÷ paid", func(r *Result) string { return pct(r.GPUTimeUsed, r.GPUTimePaid()) }, pct(ran.GPUTimeUsed, oracle))
	row("GPU-hours paid that no job held (idle nodes, free GPUs of shared nodes)", func(r *Result) string { return hours(r.GPUTimePaid() - r.GPUTimeHeld) },
		hours(time.Duration(ran.NodeStarts)*ran.Config.BootTime*GPUsPerNode))
	row("GPU-hours if the running jobs were packed onto the fewest nodes at every instant (∫ ⌈GPUs held ÷ 8⌉ × 8)", func(r *Result) string {
		return hours(r.PackedVMTime * GPUsPerNode)
	}, "")
	row("VM-hours paid", func(r *Result) string { return hours(r.VMTime) }, hours(oracle/GPUsPerNode))
	row("idle VM-hours (VM running, no job on its node; boots included)", func(r *Result) string { return hours(r.IdleVMTime) },
		hours(time.Duration(ran.NodeStarts)*ran.Config.BootTime))
	row("node starts (VMs that ran)", func(r *Result) string { return fmt.Sprint(r.NodeStarts) }, fmt.Sprint(ran.NodeStarts))
	row("jobs submitted / completed / left at the end", func(r *Result) string {
		return fmt.Sprintf("%d / %d / %d", r.Jobs, r.Completed, r.PendingAtEnd)
	}, "")
	row("jobs refused as fitting no node (their GPU-hours in the trace)", func(r *Result) string {
		return fmt.Sprintf("%d (%s)", r.Refused, hours(r.RefusedGPUTime))
	}, "")
	row("jobs killed by a VM's end: expiry / deletion", func(r *Result) string {
		return fmt.Sprintf("%d / %d", r.KilledByExpiry, r.KilledByDeletion)
	}, "0 / 0")
	row("GPU-hours lost in killed attempts", func(r *Result) string { return hours(r.GPUTimeLost) }, "0")
	row("requeues (all causes)", func(r *Result) string { return fmt.Sprint(r.Requeues) }, "")
	row("delay added beyond capacity wait + boot: mean / p99 / max (jobs whose nodes Slurm powered up)", func(r *Result) string {
		if len(r.AddedDelays) == 0 {
			return "none"
		}
		return fmt.Sprintf("%s / %s / %s (%d jobs)", fmtDur(mean(r.AddedDelays)), fmtDur(quantile(r.AddedDelays, 0.99)), fmtDur(slices.Max(r.AddedDelays)), len(r.AddedDelays))
	}, "0 / 0 / 0")
	row("capacity waits drawn: mean / p99", func(r *Result) string {
		if len(r.CapacityWaits) == 0 {
			return "none"
		}
		return fmt.Sprintf("%s / %s (%d requests)", fmtDur(mean(r.CapacityWaits)), fmtDur(quantile(r.CapacityWaits, 0.99)), len(r.CapacityWaits))
	}, "")
	row("Compute calls per job", func(r *Result) string { return perJob(float64(total(r.ComputeCalls)), r) }, "")
	row("Compute mutations per job", func(r *Result) string { return perJob(float64(mutations(r.ComputeCalls)), r) }, "")
	row("Firestore transactions per job (store Update)", func(r *Result) string { return perJob(float64(r.StoreUpdates), r) }, "")
	row("Firestore reads outside transactions per job (store Read)", func(r *Result) string { return perJob(float64(r.StoreReads), r) }, "")
	row("deliveries to the functions (errors, redelivered)", func(r *Result) string {
		return fmt.Sprintf("%d (%d)", r.Deliveries, r.DeliveryErrors)
	}, "")
	row("simulated days / wall-clock s", func(r *Result) string {
		return fmt.Sprintf("%.2f / %.1f", r.Simulated.Hours()/24, r.Wall.Seconds())
	}, "")
	row("wall-clock s per simulated day", func(r *Result) string {
		if r.Simulated <= 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", r.Wall.Seconds()/(r.Simulated.Hours()/24))
	}, "")
	fmt.Fprintln(w)
	for _, r := range results {
		if r.NotRun != "" {
			fmt.Fprintf(w, "%s: not run: %s.\n", r.Strategy.Name, r.NotRun)
			continue
		}
		fmt.Fprintf(w, "%s: Compute calls %s.\n", r.Strategy.Name, callList(r.ComputeCalls))
	}
	fmt.Fprintf(w, "Oracle: the GPU-hours used plus one boot (%s × %d GPUs) per node start of %s's run.\n", fmtDur(ran.Config.BootTime), GPUsPerNode, ran.Strategy.Name)
	writeTargets(w, results, oracle)
}

// writeTargets prints the targets for flexslurm's default (the first
// result) against the oracle and the baseline (the last result that ran,
// when it is another).
func writeTargets(w io.Writer, results []*Result, oracle time.Duration) {
	def := results[0]
	if def.NotRun != "" {
		return
	}
	var base *Result
	for _, r := range results[1:] {
		if r.NotRun == "" {
			base = r
		}
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**MISSED**"
	}
	fmt.Fprintf(w, "\n| target (%s) | measured | verdict |\n|---|---|---|\n", def.Strategy.Name)
	paid := def.GPUTimePaid()
	fmt.Fprintf(w, "| GPU-hours paid ≤ 1.10 × the oracle's | %s ÷ %s = %s | %s |\n", hours(paid), hours(oracle), ratio(paid, oracle),
		verdict(oracle > 0 && float64(paid) <= 1.10*float64(oracle)))
	if base != nil {
		fmt.Fprintf(w, "| GPU-hours paid ≤ the %s column's | %s vs %s | %s |\n", base.Strategy.Name, hours(paid), hours(base.GPUTimePaid()), verdict(paid <= base.GPUTimePaid()))
	}
	killed := def.KilledByExpiry + def.KilledByDeletion
	fmt.Fprintf(w, "| no job killed by a VM's end | %d | %s |\n", killed, verdict(killed == 0))
	if len(def.AddedDelays) > 0 {
		p99 := quantile(def.AddedDelays, 0.99)
		fmt.Fprintf(w, "| delay added, p99 ≤ one reconcile period (%s) | %s | %s |\n", fmtDur(def.Config.Tick), fmtDur(p99), verdict(p99 <= def.Config.Tick))
	}
}

var mutating = map[string]bool{"EnsureInstanceTemplate": true, "EnsureMIG": true, "CreateResizeRequest": true, "CancelResizeRequest": true,
	"DeleteResizeRequest": true, "DeleteInstances": true, "DeleteMIG": true, "ReportHostAsFaulty": true, "StartInstance": true}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func mutations(m map[string]int) int {
	n := 0
	for k, v := range m {
		if mutating[k] {
			n += v
		}
	}
	return n
}

func callList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func perJob(n float64, r *Result) string {
	if r.Jobs == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", n/float64(r.Jobs))
}

func hours(d time.Duration) string { return fmt.Sprintf("%.1f", d.Hours()) }

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

func pct(a, b time.Duration) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(a)/float64(b))
}

func mean(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s / time.Duration(len(ds))
}

// quantile is the nearest-rank q-quantile.
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func fmtDays(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", d.Hours()/24), "0"), ".") + " d"
}

// fmtDur formats a duration compactly: 1d2h3m, 45m, 30s.
func fmtDur(d time.Duration) string { return benchpool.FormatDuration(d) }
