package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
)

// fakeSources serves canned outputs; a probe in block waits until release
// is closed, ignoring ctx unless it is also in honourCtx.
type fakeSources struct {
	outputs   map[ProbeName]Output
	errs      map[ProbeName]error
	block     map[ProbeName]bool
	honourCtx map[ProbeName]bool
	release   chan struct{}
	started   func(ProbeName)
}

var _ Sources = (*fakeSources)(nil)

func (f *fakeSources) Collect(ctx context.Context, p ProbeName) (Output, error) {
	if f.started != nil {
		f.started(p)
	}
	if f.block[p] {
		if f.honourCtx[p] {
			select {
			case <-f.release:
			case <-ctx.Done():
				return Output{}, ctx.Err()
			}
		} else {
			<-f.release
		}
	}
	if err := f.errs[p]; err != nil {
		return Output{}, err
	}
	return f.outputs[p], nil
}

// healthyOutputs reads the recorded healthy node.
func healthyOutputs(t *testing.T) map[ProbeName]Output {
	t.Helper()
	out := map[ProbeName]Output{}
	for _, p := range AllProbes {
		o, err := DirSources{Dir: "testdata/healthy"}.Collect(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = o
	}
	return out
}

func newFake(t *testing.T) *fakeSources {
	f := &fakeSources{outputs: healthyOutputs(t), errs: map[ProbeName]error{}, block: map[ProbeName]bool{}, honourCtx: map[ProbeName]bool{}, release: make(chan struct{})}
	t.Cleanup(func() { close(f.release) })
	return f
}

var eightGPUs = Options{AcceleratorCount: 8, ExpectNVLink: true}

func TestCheckHealthyFake(t *testing.T) {
	res := Check(context.Background(), newFake(t), eightGPUs)
	if res.Verdict != Pass || len(res.Reasons) != 0 || len(res.Warnings) != 0 {
		t.Fatalf("healthy node: %+v", res)
	}
	if len(res.Probes) != len(AllProbes) {
		t.Errorf("%d probes reported, want %d", len(res.Probes), len(AllProbes))
	}
}

func TestCheckCombinesVerdicts(t *testing.T) {
	f := newFake(t)
	f.outputs[ProbeGPUQuery] = Output{Stdout: []byte("0, 00000000:04:00.0, 0, No, No, No\n1, 00000000:05:00.0, 5, No, No, No\n")}
	f.errs[ProbeDCGMDiag] = fmt.Errorf("%w: /usr/bin/dcgmi", ErrToolMissing)
	res := Check(context.Background(), f, Options{AcceleratorCount: 2})
	if res.Verdict != Fail {
		t.Fatalf("verdict %s, want FAIL: %q", res.Verdict, res.Reasons)
	}
	want := []string{
		"gpu_query: GPU 1 (00000000:05:00.0): 5 uncorrectable ECC errors since the driver loaded (ecc.errors.uncorrected.volatile.total)",
		"dcgm_diag: tool missing: /usr/bin/dcgmi",
	}
	if diff := cmp.Diff(want, res.Reasons); diff != "" {
		t.Errorf("reasons: failures first, then inconclusive (-want +got):\n%s", diff)
	}
	if got := res.Probes[ProbeDCGMDiag]; got.Verdict != Inconclusive || got.Error != "tool missing: /usr/bin/dcgmi" {
		t.Errorf("dcgm_diag = %+v, want INCONCLUSIVE with the error", got)
	}

	// Without the ECC error the missing tool alone is INCONCLUSIVE.
	f.outputs[ProbeGPUQuery] = Output{Stdout: []byte("0, 00000000:04:00.0, 0, No, No, No\n1, 00000000:05:00.0, 0, No, No, No\n")}
	res = Check(context.Background(), f, Options{AcceleratorCount: 2})
	if res.Verdict != Inconclusive || len(res.Reasons) != 1 {
		t.Errorf("missing tool: %s %q, want INCONCLUSIVE with one reason", res.Verdict, res.Reasons)
	}
}

// TestCheckTimedOutProbe: a probe whose source blocks (and ignores ctx) is
// INCONCLUSIVE once its budget is spent, and Check does not wait for it.
func TestCheckTimedOutProbe(t *testing.T) {
	for _, honour := range []bool{false, true} {
		t.Run(fmt.Sprintf("honours ctx %v", honour), func(t *testing.T) {
			f := newFake(t)
			f.block[ProbeDCGMDiag] = true
			f.honourCtx[ProbeDCGMDiag] = honour
			opts := eightGPUs
			opts.Budgets = map[ProbeName]time.Duration{ProbeDCGMDiag: 50 * time.Millisecond}
			start := time.Now()
			res := Check(context.Background(), f, opts)
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("Check took %s with a 50ms budget", elapsed)
			}
			if res.Verdict != Inconclusive {
				t.Fatalf("verdict %s, want INCONCLUSIVE: %q", res.Verdict, res.Reasons)
			}
			if diff := cmp.Diff([]string{"dcgm_diag: timed out after 50ms"}, res.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			p := res.Probes[ProbeDCGMDiag]
			if p.Verdict != Inconclusive || p.Error != "timed out after 50ms" || p.DurationMS < 50 {
				t.Errorf("dcgm_diag = %+v", p)
			}
			for _, q := range []ProbeName{ProbeGPUQuery, ProbeNVLink, ProbeKernelLog} {
				if res.Probes[q].Verdict != Pass {
					t.Errorf("%s = %+v, want PASS", q, res.Probes[q])
				}
			}
		})
	}
}

func TestCheckParentCancelled(t *testing.T) {
	f := newFake(t)
	f.block[ProbeNVLink] = true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := Check(ctx, f, eightGPUs)
	if res.Verdict != Inconclusive || res.Probes[ProbeNVLink].Verdict != Inconclusive {
		t.Fatalf("cancelled check: %+v", res)
	}
	if !strings.HasPrefix(res.Probes[ProbeNVLink].Error, "check stopped before the probe finished") {
		t.Errorf("nvlink error %q", res.Probes[ProbeNVLink].Error)
	}
}

// TestCheckRunsProbesConcurrently: every probe waits until all four have
// started, which only completes if they run at the same time.
func TestCheckRunsProbesConcurrently(t *testing.T) {
	f := newFake(t)
	var wg sync.WaitGroup
	wg.Add(len(AllProbes))
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	f.started = func(ProbeName) {
		wg.Done()
		select {
		case <-all:
		case <-time.After(5 * time.Second):
		}
	}
	opts := eightGPUs
	opts.Budgets = map[ProbeName]time.Duration{}
	for _, p := range AllProbes {
		opts.Budgets[p] = 3 * time.Second
	}
	start := time.Now()
	res := Check(context.Background(), f, opts)
	if res.Verdict != Pass {
		t.Fatalf("verdict %s: %q", res.Verdict, res.Reasons)
	}
	// Run one after another, each probe would wait out its 3 s budget
	// for the others and be inconclusive: the Pass above is the proof. The
	// bound below is only a backstop, loose for a loaded machine.
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("probes did not run concurrently: %s", elapsed)
	}
}

func TestCheckExitStatus(t *testing.T) {
	f := newFake(t)
	healthy := f.outputs[ProbeGPUQuery]
	healthy.ExitCode = 9
	healthy.Stderr = []byte("\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
	f.outputs[ProbeGPUQuery] = healthy
	res := Check(context.Background(), f, eightGPUs)
	want := "gpu_query: tool exited with status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
	if res.Verdict != Inconclusive || len(res.Reasons) != 1 || res.Reasons[0] != want {
		t.Errorf("non-zero exit without evidence: %s %q, want INCONCLUSIVE %q", res.Verdict, res.Reasons, want)
	}

	// Evidence of a fault stands whatever the exit status.
	f.outputs[ProbeGPUQuery] = Output{ExitCode: 15, Stdout: []byte("Unable to determine the device handle for GPU0000:8A:00.0: GPU is lost.  Reboot the system to recover this GPU\n")}
	res = Check(context.Background(), f, eightGPUs)
	if res.Verdict != Fail || res.Probes[ProbeGPUQuery].Verdict != Fail {
		t.Errorf("lost GPU with exit 15: %s %q, want FAIL", res.Verdict, res.Reasons)
	}
}

func TestCheckSkip(t *testing.T) {
	f := newFake(t)
	f.errs[ProbeDCGMDiag] = ErrToolMissing
	opts := eightGPUs
	opts.Skip = []ProbeName{ProbeDCGMDiag}
	res := Check(context.Background(), f, opts)
	if res.Verdict != Pass {
		t.Fatalf("verdict %s, want PASS with dcgm_diag skipped: %q", res.Verdict, res.Reasons)
	}
	if _, ran := res.Probes[ProbeDCGMDiag]; ran {
		t.Error("skipped probe is reported as run")
	}
	if diff := cmp.Diff([]string{"dcgm_diag: skipped by configuration"}, res.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}

	opts.Skip = AllProbes
	if res := Check(context.Background(), f, opts); res.Verdict != Inconclusive {
		t.Errorf("everything skipped: verdict %s, want INCONCLUSIVE", res.Verdict)
	}
}

func TestCheckTruncatedKernelLogWarns(t *testing.T) {
	f := newFake(t)
	o := f.outputs[ProbeKernelLog]
	o.Truncated = true
	f.outputs[ProbeKernelLog] = o
	res := Check(context.Background(), f, eightGPUs)
	want := fmt.Sprintf("kernel_log: output was larger than %d bytes; only the last %d bytes were examined", MaxOutputBytes, MaxOutputBytes)
	if res.Verdict != Pass || len(res.Warnings) != 1 || res.Warnings[0] != want {
		t.Errorf("truncated log: %s %q", res.Verdict, res.Warnings)
	}
}

func TestCheckLogsEachProbe(t *testing.T) {
	var buf bytes.Buffer
	opts := eightGPUs
	opts.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	Check(context.Background(), newFake(t), opts)
	if n := strings.Count(buf.String(), "\n"); n != len(AllProbes) {
		t.Errorf("%d log records, want one per probe (%d)", n, len(AllProbes))
	}
}

func TestVerdictExitCode(t *testing.T) {
	for v, want := range map[Verdict]int{Pass: 0, Fail: 1, Inconclusive: 2, "": 2, "bogus": 2} {
		if got := v.ExitCode(); got != want {
			t.Errorf("%q.ExitCode() = %d, want %d", v, got, want)
		}
	}
}

func TestSummary(t *testing.T) {
	long := strings.Repeat("é", 300)
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{"pass", Result{Verdict: Pass}, "PASS"},
		{"one reason", Result{Verdict: Fail, Reasons: []string{"kernel_log: Xid 79 on PCI 0000:8a:00"}}, "FAIL: kernel_log: Xid 79 on PCI 0000:8a:00"},
		{"more reasons", Result{Verdict: Inconclusive, Reasons: []string{"a", "b", "c"}}, "INCONCLUSIVE: a (+2 more)"},
		{"newlines", Result{Verdict: Fail, Reasons: []string{"x\ny\tz"}}, "FAIL: x y z"},
		{"empty verdict", Result{}, "INCONCLUSIVE"},
		{"long", Result{Verdict: Fail, Reasons: []string{long, "b"}}, "FAIL: " + strings.Repeat("é", 90) + "… (+1 more)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.r.Summary()
			if got != tt.want {
				t.Errorf("Summary() = %q, want %q", got, tt.want)
			}
			if len(got) > 200 || !utf8.ValidString(got) || strings.ContainsAny(got, "\n\r\t") {
				t.Errorf("Summary() = %q: not one line of at most 200 bytes", got)
			}
		})
	}
}

func TestBound(t *testing.T) {
	var many []string
	for i := range 20 {
		many = append(many, fmt.Sprintf("reason %d", i))
	}
	got := bound(many)
	if len(got) != event.MaxHealthReasons || got[15] != "... and 5 more" || got[14] != "reason 14" {
		t.Errorf("bound(20 reasons) = %q", got)
	}
	if got := bound(many[:16]); len(got) != 16 || got[15] != "reason 15" {
		t.Errorf("bound(16 reasons) = %q, want all 16 kept", got)
	}
	huge := bound([]string{strings.Repeat("x", 2000), "bad \xff utf8\x00 and\r\nlines"})
	if len(huge[0]) != event.MaxHealthReasonBytes || !strings.HasSuffix(huge[0], "…") {
		t.Errorf("long reason: %d bytes, suffix %q", len(huge[0]), huge[0][len(huge[0])-5:])
	}
	if huge[1] != "bad utf8 and lines" {
		t.Errorf("sanitized reason = %q", huge[1])
	}
	if got := bound(nil); got == nil || len(got) != 0 {
		t.Errorf("bound(nil) = %#v, want an empty slice", got)
	}
	if again := bound(got); !cmp.Equal(again, got) {
		t.Errorf("bound is not idempotent: %q then %q", got, again)
	}
}

func TestFailureEvent(t *testing.T) {
	at := time.Date(2026, 11, 30, 3, 8, 57, 0, time.FixedZone("CET", 3600))
	res := Result{Verdict: Fail, Reasons: []string{"kernel_log: Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS) on PCI 0000:8a:00"}}
	h, err := res.FailureEvent(EventFields{Cluster: "c1", Node: "flexvm-a3u-1", Generation: 3, VMName: "flexvm-a3u-1-g3", JobID: "42", JobState: "running", CheckedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	want := &event.Health{
		Header: event.Header{Version: event.SchemaVersion, Type: event.TypeHealthFailure, Cluster: "c1"},
		Node:   "flexvm-a3u-1", Generation: 3, VMName: "flexvm-a3u-1-g3", JobID: "42", JobState: "running",
		Verdict: "FAIL", Reasons: res.Reasons, CheckedAt: at.UTC(),
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}

	if _, err := (Result{Verdict: Inconclusive}).FailureEvent(EventFields{Cluster: "c1", Node: "n1"}); err == nil {
		t.Error("an INCONCLUSIVE result became a health.failure event")
	}
	_, err = res.FailureEvent(EventFields{Cluster: "c1", Node: "Bad_Node"})
	if !errors.Is(err, event.ErrMalformed) {
		t.Errorf("invalid node name: err = %v, want ErrMalformed", err)
	}
}
