// Package health judges the GPU health of a flexslurm node for the Slurm
// prolog, epilog and HealthCheckProgram hooks, and for `flexslurm health
// check`.
//
// Check runs four probes concurrently, each under its own time budget:
//
//   - gpu_query: `nvidia-smi --query-gpu=index,pci.bus_id,
//     ecc.errors.uncorrected.volatile.total,retired_pages.pending,
//     remapped_rows.pending,remapped_rows.failure --format=csv,noheader`:
//     uncorrectable ECC errors, pending page retirement, row-remap failure,
//     GPUs the driver can no longer reach (no device handle, "GPU is lost",
//     "No devices were found") and the GPU count against the pool's
//     accelerator_count;
//   - nvlink: `nvidia-smi nvlink -e`: the error counters of every link of
//     every GPU;
//   - kernel_log: `dmesg`: NVRM Xid events, classified by the table in
//     xid.go (from NVIDIA's Xid catalogue), and "fallen off the bus" /
//     "GPU is lost" messages;
//   - dcgm_diag: `dcgmi diag -r LEVEL -j`: every test result of the DCGM
//     diagnostic, level 1 by default (Options.DCGMLevel: 2 or 3 on
//     demand).
//
// On demand (Options.NCCL) a fifth probe runs:
//
//   - nccl_all_reduce: NCCL's `all_reduce_perf` (nccl-tests) across the
//     node's GPUs with data checking: any wrong value or out-of-bounds
//     value FAILs, and so does an average bus bandwidth below
//     Options.NCCLMinBusBandwidth when one is set.
//
// Each probe is PASS, FAIL or INCONCLUSIVE. A probe whose tool is missing,
// times out, exits non-zero without evidence of a fault, or prints output it
// cannot parse is INCONCLUSIVE, never FAIL: FAIL means evidence of a hardware
// or driver fault. The overall verdict is FAIL if any probe FAILs, else
// INCONCLUSIVE if any probe is INCONCLUSIVE, else PASS. No probe reads
// utilization, so an idle GPU is never a fault.
//
// Evidence is bounded to the limits of a health.failure event
// (event.MaxHealthReasons strings of at most event.MaxHealthReasonBytes
// bytes, printable text only) and tool output to MaxOutputBytes.
//
// This package imports only shared/event from flexslurm.
package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/text"
)

// Verdict is the outcome of a probe or of a whole check.
type Verdict string

// Verdicts.
const (
	Pass         Verdict = "PASS"
	Fail         Verdict = "FAIL"
	Inconclusive Verdict = "INCONCLUSIVE"
)

// ExitCode is the exit status `flexslurm health check` uses for v: 0 PASS,
// 1 FAIL, 2 INCONCLUSIVE (and anything else).
func (v Verdict) ExitCode() int {
	switch v {
	case Pass:
		return 0
	case Fail:
		return 1
	}
	return 2
}

// ProbeName names a probe; it is the key of Result.Probes.
type ProbeName string

// Probes, in report order.
const (
	ProbeGPUQuery  ProbeName = "gpu_query"
	ProbeNVLink    ProbeName = "nvlink"
	ProbeKernelLog ProbeName = "kernel_log"
	ProbeDCGMDiag  ProbeName = "dcgm_diag"
	ProbeNCCL      ProbeName = "nccl_all_reduce"
)

// AllProbes lists every probe a check runs by default, in report order;
// ProbeNCCL runs after them when Options.NCCL asks for it.
var AllProbes = []ProbeName{ProbeGPUQuery, ProbeNVLink, ProbeKernelLog, ProbeDCGMDiag}

// DefaultBudget is the time budget of probe p when Options.Budgets has none:
// 30 s for each nvidia-smi call (NVML initialisation takes a few seconds per
// GPU when persistence mode is off), 10 s for dmesg and 120 s for the
// level-1 DCGM diagnostic (deployment checks, normally well under a minute).
// The probes run concurrently, so a check takes at most its largest budget;
// a caller with a tighter deadline sets Options.Budgets or a ctx deadline.
func DefaultBudget(p ProbeName) time.Duration {
	switch p {
	case ProbeKernelLog:
		return 10 * time.Second
	case ProbeDCGMDiag:
		return DCGMBudget(1)
	case ProbeNCCL:
		return 10 * time.Minute
	}
	return 30 * time.Second
}

// DCGMBudget is the default budget of the DCGM diagnostic at a level: NVIDIA
// gives level 1 "seconds", level 2 "approximately two minutes" and level 3
// "approximately 15 minutes"
// (https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html);
// each budget is about twice that, and at least two minutes.
func DCGMBudget(level int) time.Duration {
	switch level {
	case 2:
		return 6 * time.Minute
	case 3:
		return 30 * time.Minute
	}
	return 120 * time.Second
}

// MaxDCGMLevel is the deepest DCGM diagnostic flexslurm runs: level 4
// (extended, hours) is for an administrator's post-mortem, not a check.
const MaxDCGMLevel = 3

// DefaultNVLinkFailAt is the default of Options.NVLinkReplayFailAt and
// Options.NVLinkCRCFailAt: any error fails.
const DefaultNVLinkFailAt = 1

// Options configures Check. The zero value checks everything with the
// default budgets and no GPU count.
type Options struct {
	// AcceleratorCount is the number of GPUs the node must have (the pool's
	// machine_spec.accelerator_count). Fewer GPUs is FAIL, more is a
	// warning; 0 skips the count.
	AcceleratorCount int
	// ExpectNVLink makes an nvlink probe that reports no link at all
	// INCONCLUSIVE instead of PASS with a warning. Set it for machine types
	// whose GPUs are NVLink-connected (A100, H100, H200, B200 pools).
	ExpectNVLink bool
	// NVLinkReplayFailAt and NVLinkCRCFailAt are the per-link, per-counter
	// counts of replay errors and of CRC errors at which the link FAILs; a
	// non-zero count below is a warning. 0 means DefaultNVLinkFailAt (1).
	// Recovery errors always FAIL at 1.
	//
	// The defaults follow the rule (any NVLink error fails) and,
	// for replays, NVIDIA's DCGM health watch, which fails a GPU on any
	// replay or recovery error ("Replay and recovery errors are failures,
	// not warnings", DcgmHealthWatch.cpp). DCGM judges CRC errors by rate
	// instead (a failure at 100 or more per second,
	// DCGM_LIMIT_MAX_NVLINK_CRC_ERROR, "RM has informed us that CRC errors
	// only matter at rates of 100+ per second"), which a single reading of
	// cumulative counters cannot measure. The counters start at zero when
	// the driver loads, so on a Flex-Start VM they cover at most its 7-day
	// life; a fleet that sees rare, benign CRC errors or replays (a replay
	// is a link-level retransmission that delivered the data intact) can
	// raise these thresholds.
	NVLinkReplayFailAt uint64
	NVLinkCRCFailAt    uint64
	// Budgets overrides DefaultBudget per probe; non-positive values are
	// ignored.
	Budgets map[ProbeName]time.Duration
	// Skip lists probes not to run (for example dcgm_diag on an image
	// without DCGM); a skipped probe is reported as a warning and is absent
	// from Result.Probes.
	Skip []ProbeName
	// DCGMLevel is the DCGM diagnostic's level, 1 (0 means 1) to
	// MaxDCGMLevel; the Sources run it (ExecSources.DCGMLevel), and the
	// probe's default budget follows it (DCGMBudget).
	DCGMLevel int
	// NCCL runs ProbeNCCL after the default probes (on demand: it takes
	// the node's GPUs for a minute or more). NCCLMinBusBandwidth, in GB/s
	// as all_reduce_perf prints it, FAILs an average bus bandwidth below
	// it; 0 judges only the data.
	NCCL                bool
	NCCLMinBusBandwidth float64
	// Logger receives one record per probe; nil logs nothing.
	Logger *slog.Logger
}

func (o Options) budget(p ProbeName) time.Duration {
	if d, ok := o.Budgets[p]; ok && d > 0 {
		return d
	}
	if p == ProbeDCGMDiag {
		return DCGMBudget(o.DCGMLevel)
	}
	return DefaultBudget(p)
}

// failAt returns a threshold, or DefaultNVLinkFailAt for 0.
func failAt(threshold uint64) uint64 {
	if threshold == 0 {
		return DefaultNVLinkFailAt
	}
	return threshold
}

// ProbeResult is the outcome of one probe.
type ProbeResult struct {
	Verdict Verdict `json:"verdict"`
	// Reasons is the evidence for FAIL or INCONCLUSIVE (failures first);
	// empty for PASS. Bounded like Result.Reasons.
	Reasons []string `json:"reasons"`
	// DurationMS is how long the probe ran, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// Error says why the tool gave no usable output: missing, timed out,
	// too much output, or could not be run. Empty otherwise.
	Error string `json:"error,omitempty"`
}

// Result is the verdict of a whole check, as printed by `flexslurm health
// check`:
//
//	{"verdict": "FAIL", "reasons": ["gpu_query: GPU 3 …"], "warnings": [],
//	 "probes": {"gpu_query": {"verdict": "FAIL", "reasons": […],
//	 "duration_ms": 812}, …}}
type Result struct {
	Verdict Verdict `json:"verdict"`
	// Reasons is the evidence, each prefixed with its probe name: the
	// failing probes' reasons first, then the inconclusive probes'. At
	// most event.MaxHealthReasons entries of at most
	// event.MaxHealthReasonBytes bytes, so it can go into a health.failure
	// event unchanged.
	Reasons []string `json:"reasons"`
	// Warnings are observations that are not faults ([N/A] fields, benign
	// Xids, pending row remaps, skipped DCGM tests), bounded the same way.
	Warnings []string `json:"warnings"`
	// Probes holds every probe that ran.
	Probes map[ProbeName]ProbeResult `json:"probes"`
}

// findings collects what one probe found.
type findings struct {
	fail, inconclusive, warn []string
}

func (f *findings) failf(format string, args ...any) {
	f.fail = append(f.fail, fmt.Sprintf(format, args...))
}

func (f *findings) inconclusivef(format string, args ...any) {
	f.inconclusive = append(f.inconclusive, fmt.Sprintf(format, args...))
}

func (f *findings) warnf(format string, args ...any) {
	f.warn = append(f.warn, fmt.Sprintf(format, args...))
}

func (f *findings) verdict() Verdict {
	switch {
	case len(f.fail) > 0:
		return Fail
	case len(f.inconclusive) > 0:
		return Inconclusive
	}
	return Pass
}

// reasons returns the evidence for the verdict: failures, then what made
// the probe (or another part of it) inconclusive.
func (f *findings) reasons() []string {
	return append(slices.Clip(f.fail), f.inconclusive...)
}

// judges maps each probe to the function that judges its output.
var judges = map[ProbeName]func(Output, Options) findings{
	ProbeGPUQuery:  judgeGPUQuery,
	ProbeNVLink:    judgeNVLink,
	ProbeKernelLog: judgeKernelLog,
	ProbeDCGMDiag:  judgeDCGMDiag,
	ProbeNCCL:      judgeNCCL,
}

// Check runs the probes of opts concurrently against src, each under its
// own budget (and ctx), and returns the combined verdict. It never returns
// before every probe has finished or reached its deadline, and never blocks
// past the largest budget even if src ignores ctx.
func Check(ctx context.Context, src Sources, opts Options) Result {
	var probes []ProbeName
	var skipped []string
	all := AllProbes
	if opts.NCCL {
		all = append(slices.Clip(AllProbes), ProbeNCCL)
	}
	for _, p := range all {
		if slices.Contains(opts.Skip, p) {
			skipped = append(skipped, fmt.Sprintf("%s: skipped by configuration", p))
			continue
		}
		probes = append(probes, p)
	}
	outcomes := make([]probeOutcome, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() { outcomes[i] = runProbe(ctx, src, p, opts) })
	}
	wg.Wait()

	res := Result{Probes: make(map[ProbeName]ProbeResult, len(probes))}
	var fails, inconclusive, warns []string
	warns = append(warns, skipped...)
	for i, p := range probes {
		o := outcomes[i]
		res.Probes[p] = o.result
		for _, s := range o.found.fail {
			fails = append(fails, string(p)+": "+s)
		}
		for _, s := range o.found.inconclusive {
			inconclusive = append(inconclusive, string(p)+": "+s)
		}
		for _, s := range o.found.warn {
			warns = append(warns, string(p)+": "+s)
		}
	}
	switch {
	case len(fails) > 0:
		res.Verdict = Fail
	case len(inconclusive) > 0:
		res.Verdict = Inconclusive
	case len(probes) == 0:
		res.Verdict = Inconclusive
		inconclusive = append(inconclusive, "every probe was skipped")
	default:
		res.Verdict = Pass
	}
	res.Reasons = bound(append(fails, inconclusive...))
	res.Warnings = bound(warns)
	return res
}

type probeOutcome struct {
	result ProbeResult
	found  findings
}

// runProbe collects and judges one probe under its budget.
func runProbe(ctx context.Context, src Sources, p ProbeName, opts Options) probeOutcome {
	budget := opts.budget(p)
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	type collected struct {
		out Output
		err error
	}
	ch := make(chan collected, 1) // buffered: a late Collect never blocks
	go func() {
		out, err := src.Collect(pctx, p)
		ch <- collected{out, err}
	}()
	var c collected
	select {
	case c = <-ch:
	case <-pctx.Done():
		c.err = pctx.Err()
	}
	elapsed := time.Since(start)

	var f findings
	var errText string
	if c.err != nil {
		errText = describeCollectError(ctx, c.err, budget)
		f.inconclusivef("%s", errText)
	} else {
		f = judges[p](c.out, opts)
		if c.out.Truncated {
			f.warnf("output was larger than %d bytes; only the last %d bytes were examined", MaxOutputBytes, MaxOutputBytes)
		}
		if c.out.ExitCode != 0 && len(f.fail) == 0 {
			f.inconclusivef("tool exited with status %d%s", c.out.ExitCode, quoteFirstLine(c.out.Stderr))
		}
	}
	f.fail, f.inconclusive, f.warn = dedupe(f.fail), dedupe(f.inconclusive), dedupe(f.warn)
	r := ProbeResult{Verdict: f.verdict(), Reasons: bound(f.reasons()), DurationMS: elapsed.Milliseconds(), Error: sanitize(errText)}
	if opts.Logger != nil {
		level := slog.LevelInfo
		if r.Verdict != Pass {
			level = slog.LevelWarn
		}
		opts.Logger.LogAttrs(ctx, level, "health probe finished",
			slog.String("probe", string(p)), slog.String("verdict", string(r.Verdict)),
			slog.Int64("duration_ms", r.DurationMS), slog.Any("reasons", r.Reasons))
	}
	return probeOutcome{result: r, found: f}
}

// describeCollectError turns a Collect error into evidence.
func describeCollectError(parent context.Context, err error, budget time.Duration) string {
	switch {
	case errors.Is(err, ErrToolMissing):
		return err.Error()
	case parent.Err() != nil:
		return fmt.Sprintf("check stopped before the probe finished: %v", parent.Err())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("timed out after %s", budget)
	}
	return err.Error()
}

// quoteFirstLine returns ": <first non-empty line of b>" or "".
func quoteFirstLine(b []byte) string {
	for line := range strings.Lines(string(b)) {
		if s := strings.TrimSpace(line); s != "" {
			return ": " + s
		}
	}
	return ""
}

// Summary is r in one line of at most 200 bytes of printable text, for a
// Slurm drain reason: the verdict, then the first reason and how many more
// there are, e.g. "FAIL: kernel_log: Xid 79 on PCI 0000:3b:00 … (+2 more)".
func (r Result) Summary() string {
	const limit = 200
	s := string(r.Verdict)
	if s == "" {
		s = string(Inconclusive)
	}
	if len(r.Reasons) == 0 {
		return text.Truncate(sanitize(s), limit)
	}
	more := ""
	if n := len(r.Reasons) - 1; n > 0 {
		more = fmt.Sprintf(" (+%d more)", n)
	}
	head := sanitize(s + ": " + r.Reasons[0])
	return text.Truncate(head, limit-len(more)) + more
}

// sanitize replaces control characters and invalid UTF-8 with spaces and
// collapses runs of white space, so evidence stays on one line.
func sanitize(s string) string {
	var b strings.Builder
	space := false
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				r = ' '
			}
		}
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return strings.TrimRight(b.String(), " ")
}

// dedupe removes repeated strings, keeping the first occurrence.
func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// bound sanitizes evidence and limits it to event.MaxHealthReasons entries
// of at most event.MaxHealthReasonBytes bytes; when entries are dropped the
// last one says how many. It never returns nil.
func bound(in []string) []string {
	out := make([]string, 0, min(len(in), event.MaxHealthReasons))
	for i, s := range in {
		if len(out) == event.MaxHealthReasons-1 && len(in)-i > 1 {
			out = append(out, fmt.Sprintf("... and %d more", len(in)-i))
			break
		}
		out = append(out, text.Truncate(sanitize(s), event.MaxHealthReasonBytes))
	}
	return out
}
