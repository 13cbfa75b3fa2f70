package health

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*/want.json from the current results")

// goldenCase is testdata/<case>/case.json: the options of the check.
type goldenCase struct {
	Note             string  `json:"note"`
	AcceleratorCount int     `json:"accelerator_count"`
	ExpectNVLink     bool    `json:"expect_nvlink"`
	NCCL             bool    `json:"nccl"`
	NCCLMinBusBW     float64 `json:"nccl_min_busbw"`
}

// goldenExpect pins what each case is about, independently of want.json:
// the verdict, one reason and one warning that must be present (by prefix).
var goldenExpect = map[string]struct {
	verdict         Verdict
	reason, warning string
}{
	"healthy":                          {verdict: Pass},
	"ecc-uncorrected-gpu3":             {verdict: Fail, reason: "gpu_query: GPU 3 (00000000:0B:00.0): 2 uncorrectable ECC errors"},
	"nvlink-errors-gpu5":               {verdict: Fail, reason: "nvlink: GPU 5 link 2: CRC Errors = 37"},
	"ecc-fields-na":                    {verdict: Pass, warning: "gpu_query: ecc.errors.uncorrected.volatile.total=[N/A] on GPUs 0,1,2,3,4,5,6,7: not available"},
	"dcgm-fail-only-in-header-or-skip": {verdict: Pass, warning: `dcgm_diag: test "Inforom" (Deployment) on GPUs 0,1,2,3,4,5,6,7: skipped`},
	"gpu-missing-7-of-8":               {verdict: Fail, reason: "gpu_query: nvidia-smi lists 7 usable GPUs, the pool expects 8 (accelerator_count): 1 missing"},
	"xid79":                            {verdict: Fail, reason: "kernel_log: Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS) on PCI 0000:8a:00, 1 time: hardware or driver failure"},
	"xid13-benign":                     {verdict: Pass, warning: "kernel_log: Xid 13 (ROBUST_CHANNEL_GR_EXCEPTION) on PCI 0000:0a:00, 3 times: application error"},
	"dcgmi-missing":                    {verdict: Inconclusive, reason: "dcgm_diag: tool missing: dcgmi-diag.json was not recorded"},
	"dcgm-config-failure":              {verdict: Inconclusive, reason: `dcgm_diag: test "software" (Deployment) on GPUs 0,1,2,3,4,5,6,7: failed for a software or configuration reason: Persistence Mode`},
	"dcgm-row-remap-failure":           {verdict: Fail, reason: `dcgm_diag: test "software" (Deployment) on GPU 6: failed: GPU 6 had uncorrectable memory errors`},
	"remap-pending-gpu2":               {verdict: Pass, warning: "gpu_query: GPU 2 (00000000:0A:00.0): rows are pending remapping"},
	"gpu-handle-unknown-error":         {verdict: Fail, reason: "gpu_query: GPU 0000:0B:00.0: the driver can no longer reach it: nvidia-smi cannot get its device handle (Unknown Error)"},
	"gpu-lost-stderr-exit15":           {verdict: Fail, reason: "gpu_query: GPU 0000:85:00.0: the driver can no longer reach it: nvidia-smi cannot get its device handle (GPU is lost."},
	"no-devices-found":                 {verdict: Fail, reason: "gpu_query: nvidia-smi lists 0 usable GPUs, the pool expects 8 (accelerator_count): 8 missing"},
	"nccl-healthy":                     {verdict: Pass},
	"nccl-wrong-values":                {verdict: Fail, reason: "nccl_all_reduce: all-reduce of 134217728 bytes: 3 wrong values out of place, 3 in place"},
	"nccl-slow-links":                  {verdict: Fail, reason: "nccl_all_reduce: average bus bandwidth 44.73 GB/s, below the minimum of 100.00 GB/s"},
	"nccl-unchecked":                   {verdict: Inconclusive, reason: "nccl_all_reduce: 8 of 8 message sizes were not checked for wrong values"},
	"nccl-missing":                     {verdict: Inconclusive, reason: "nccl_all_reduce: tool missing: all-reduce-perf.txt was not recorded"},
}

// loadGoldenCase reads the options of testdata/<name>.
func loadGoldenCase(t *testing.T, dir string) Options {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "case.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c goldenCase
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s/case.json: %v", dir, err)
	}
	return Options{AcceleratorCount: c.AcceleratorCount, ExpectNVLink: c.ExpectNVLink, NCCL: c.NCCL, NCCLMinBusBandwidth: c.NCCLMinBusBW}
}

// withoutDurations zeroes the probe durations, the only field that varies
// between runs.
func withoutDurations(r Result) Result {
	probes := make(map[ProbeName]ProbeResult, len(r.Probes))
	for k, p := range r.Probes {
		p.DurationMS = 0
		probes[k] = p
	}
	r.Probes = probes
	return r
}

func hasPrefixIn(list []string, prefix string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// TestGolden runs Check on every recorded case and compares the result
// with testdata/<case>/want.json (rewritten by -update), and with the
// case's pinned verdict and evidence.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			exp, ok := goldenExpect[name]
			if !ok {
				t.Fatalf("testdata/%s has no entry in goldenExpect", name)
			}
			got := withoutDurations(Check(context.Background(), DirSources{Dir: dir}, loadGoldenCase(t, dir)))
			if got.Verdict != exp.verdict {
				t.Errorf("verdict = %s, want %s; reasons %q", got.Verdict, exp.verdict, got.Reasons)
			}
			if exp.reason != "" && !hasPrefixIn(got.Reasons, exp.reason) {
				t.Errorf("no reason starting %q in %q", exp.reason, got.Reasons)
			}
			if exp.warning != "" && !hasPrefixIn(got.Warnings, exp.warning) {
				t.Errorf("no warning starting %q in %q", exp.warning, got.Warnings)
			}
			if exp.verdict == Pass && len(got.Reasons) != 0 {
				t.Errorf("PASS with reasons %q", got.Reasons)
			}
			wantPath := filepath.Join(dir, "want.json")
			if *update {
				data, err := json.MarshalIndent(got, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(wantPath, append(data, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			data, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
			}
			var want Result
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatalf("%s: %v", wantPath, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("result differs from %s (-want +got):\n%s", wantPath, diff)
			}
		})
	}
	for name := range goldenExpect {
		if !seen[name] {
			t.Errorf("goldenExpect names %q, which has no testdata directory", name)
		}
	}
}
