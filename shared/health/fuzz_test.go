package health

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
)

// Each fuzz target is seeded with the recorded file of every golden case
// (testdata/*/<file>) plus hand-written edge cases, and checks, besides
// never panicking: that input above MaxOutputBytes is refused, that the
// judged evidence is within the health.failure bounds, and a property of
// the parser itself.

func addRecorded(f *testing.F, file string, extra ...string) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*", file))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

// checkBounded judges out with judge and checks the bounds every verdict
// must respect.
func checkBounded(t *testing.T, judge func(Output, Options) findings, data []byte) {
	t.Helper()
	f := judge(Output{Stdout: data}, Options{AcceleratorCount: 8, ExpectNVLink: true})
	for _, list := range [][]string{bound(f.reasons()), bound(f.warn)} {
		if len(list) > event.MaxHealthReasons {
			t.Fatalf("%d entries", len(list))
		}
		for _, s := range list {
			if len(s) > event.MaxHealthReasonBytes || !utf8.ValidString(s) || strings.ContainsAny(s, "\n\r\x00") {
				t.Fatalf("entry out of bounds: %q", s)
			}
		}
	}
	if v := f.verdict(); v != Pass && len(f.reasons()) == 0 {
		t.Fatalf("verdict %s without a reason", v)
	}
}

func FuzzParseGPUQuery(f *testing.F) {
	addRecorded(f, FileGPUQuery,
		"0, 00000000:04:00.0, [N/A], [Not Supported], Yes, No\n",
		"No devices were found\n",
		"Unable to determine the device handle for GPU0000:8A:00.0: GPU is lost.  Reboot the system to recover this GPU\n",
		"-1, x, 99999999999999999999, No, No, No\n,,,,,\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := parseGPUQuery(data)
		if len(data) > MaxOutputBytes {
			if err == nil {
				t.Fatal("input above MaxOutputBytes accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		// Rendering the parsed rows and parsing them again gives the same
		// rows.
		again, err := parseGPUQuery([]byte(q.format()))
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(q.Rows, again.Rows) {
			t.Fatalf("round trip differs:\n%s\nrendered as\n%s", data, q.format())
		}
		checkBounded(t, judgeGPUQuery, data)
	})
}

func FuzzParseNVLink(f *testing.F) {
	addRecorded(f, FileNVLink,
		"GPU 0: NVIDIA B200 (UUID: GPU-x)\n\t Link 0: FEC Errors - 3: 7\n\t Link 0: Link recovery failed events: 1\n",
		"GPU 0: NVIDIA L4\n",
		"\t Link 0: CRC Errors: 5\nGPU 9999: (UUID: )\n\t Link 1: : 2\n\t Link 2:  x : N/A\n",
		"GPU 0:  (UUID: )\nGPU 1:  (UUID:\nGPU 2: a (UUID: (b))\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseNVLink(data)
		if len(data) > MaxOutputBytes {
			if err == nil {
				t.Fatal("input above MaxOutputBytes accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseNVLink([]byte(r.format()))
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(r.GPUs, again.GPUs) {
			t.Fatalf("round trip differs:\n%s\nrendered as\n%s", data, r.format())
		}
		checkBounded(t, judgeNVLink, data)
	})
}

func FuzzParseKernelLog(f *testing.F) {
	addRecorded(f, FileKernelLog,
		"[1.0] NVRM: Xid (PCI:0008:06:00): 145, RLW_TAGSTATE Fatal XC0 i0 Link 04 (0x8 0x2)\n",
		"[1.0] NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)\n",
		"NVRM: Xid (): 99999999999, \r\nNVRM: GPU at 0000:01:00.0 has fallen off the bus.\nNVRM: GPU is lost\n",
		"NVRM: Xid (PCI:0000:0a:00): 010 000000000000000000000000000000\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := parseKernelLog(data)
		if len(data) > MaxOutputBytes {
			if err == nil {
				t.Fatal("input above MaxOutputBytes accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		// Every event comes from an NVRM line of the input, and an Xid
		// event's code is printed on that line.
		lines := strings.Split(string(data), "\n")
		for _, e := range events {
			if e.Line < 1 || e.Line > len(lines) {
				t.Fatalf("event on line %d of %d", e.Line, len(lines))
			}
			line := lines[e.Line-1]
			if !strings.Contains(line, "NVRM:") || !strings.Contains(line, e.Message) {
				t.Fatalf("event %+v does not come from line %q", e, line)
			}
			if e.Kind == eventXid && !strings.Contains(line, strconv.Itoa(e.Xid)) {
				t.Fatalf("Xid %d is not on line %q", e.Xid, line)
			}
		}
		checkBounded(t, judgeKernelLog, data)
	})
}

func FuzzParseDCGMDiag(f *testing.F) {
	addRecorded(f, FileDCGMDiag,
		`{"DCGM GPU Diagnostic": {"runtime_error": "no host engine"}}`,
		`{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", "results": [], "test_summary": {"status": "Fail"}}]}]}}`,
		`x{"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"results": [{"gpu_id": 1.5e3, "status": "Warn", "warnings": ["w", {"warning": "o", "error_category": -7}], "info": "i"}]}]}]}} trailing`)
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := parseDCGMDiag(data)
		if len(data) > MaxOutputBytes {
			if err == nil {
				t.Fatal("input above MaxOutputBytes accepted")
			}
			return
		}
		checkBounded(t, judgeDCGMDiag, data)
		if err != nil {
			return
		}
		// The parsed report, rendered as DCGM 4.x JSON and parsed again, is
		// the same report.
		out, err := rep.format()
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseDCGMDiag(out)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", out, err)
		}
		if diff := cmp.Diff(rep, again, cmpEmptyNil); diff != "" {
			t.Fatalf("round trip differs (-first +second):\n%s", diff)
		}
	})
}

// FuzzJudgeNCCL: any all_reduce_perf output is judged without panicking,
// and a verdict that is not FAIL never comes with a wrong value counted.
func FuzzJudgeNCCL(f *testing.F) {
	addRecorded(f, FileNCCL,
		"         8             2     float     sum      -1    135.8    0.00    0.00      0    123.5    0.00    0.00      0\n# Avg bus bandwidth    : 0.5\n",
		"         8             2     float     sum    135.8    0.00    0.00    N/A    123.5    0.00    0.00      7\n",
		"# Out of bounds values : 12 FAILED\n# Avg bus bandwidth : x\n",
		"flexvm-a3u-0: Test NCCL failure common.cu:1234 'unhandled cuda error'\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		rep := parseNCCL(data)
		got := judgeNCCL(Output{Stdout: data}, Options{NCCLMinBusBandwidth: 1})
		for _, r := range rep.rows {
			if (r.outWrong > 0 || r.inWrong > 0) && got.verdict() != Fail {
				t.Fatalf("row %+v with wrong values judged %s", r, got.verdict())
			}
		}
	})
}
