package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/health"
)

// TestHealthCheckFromDir runs `flexslurm health check --from-dir` on every
// recorded case of shared/health and checks the exit code against the
// verdict and the printed JSON against the case's want.json.
func TestHealthCheckFromDir(t *testing.T) {
	dirs, err := filepath.Glob("../../shared/health/testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 8 {
		t.Fatalf("found %d recorded cases, want at least 8", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var c struct {
				AcceleratorCount int     `json:"accelerator_count"`
				ExpectNVLink     bool    `json:"expect_nvlink"`
				NCCL             bool    `json:"nccl"`
				NCCLMinBusBW     float64 `json:"nccl_min_busbw"`
			}
			readJSON(t, filepath.Join(dir, "case.json"), &c)
			var want health.Result
			readJSON(t, filepath.Join(dir, "want.json"), &want)

			args := []string{"health", "check", "--from-dir", dir, "--accelerator-count", strconv.Itoa(c.AcceleratorCount)}
			if c.ExpectNVLink {
				args = append(args, "--expect-nvlink")
			}
			if c.NCCL {
				args = append(args, "--nccl")
			}
			if c.NCCLMinBusBW > 0 {
				args = append(args, "--nccl-min-busbw", strconv.FormatFloat(c.NCCLMinBusBW, 'f', -1, 64))
			}
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)

			wantCode := map[health.Verdict]int{health.Pass: 0, health.Fail: 1, health.Inconclusive: 2}[want.Verdict]
			if code != wantCode {
				t.Errorf("exit code %d, want %d for %s (stderr %q)", code, wantCode, want.Verdict, stderr.String())
			}
			var got health.Result
			dec := json.NewDecoder(&stdout)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("stdout is not a Result: %v\n%s", err, stdout.String())
			}
			for name, p := range got.Probes {
				if p.DurationMS < 0 {
					t.Errorf("probe %s: negative duration %d", name, p.DurationMS)
				}
				p.DurationMS = 0
				got.Probes[name] = p
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("printed result differs from want.json (-want +got):\n%s", diff)
			}
		})
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestHealthUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no subcommand", []string{"health"}, "usage: flexslurm health check"},
		{"unknown subcommand", []string{"health", "run"}, "usage: flexslurm health check"},
		{"unknown flag", []string{"health", "check", "--bogus"}, "flag provided but not defined"},
		{"extra argument", []string{"health", "check", "--from-dir", dir, "now"}, `unexpected arguments ["now"]`},
		{"missing dir", []string{"health", "check", "--from-dir", filepath.Join(dir, "nope")}, "is not a readable directory"},
		{"negative count", []string{"health", "check", "--accelerator-count", "-1"}, "--accelerator-count -1 is negative"},
		{"negative timeout", []string{"health", "check", "--timeout", "-5s"}, "--timeout -5s is negative"},
		{"unknown skip", []string{"health", "check", "--skip", "gpu_query,bogus"}, `--skip: unknown probe "bogus"`},
		{"bad budget", []string{"health", "check", "--budget", "dcgm_diag=soon"}, "--budget: dcgm_diag=soon is not a positive duration"},
		{"budget without value", []string{"health", "check", "--budget", "dcgm_diag"}, `--budget: "dcgm_diag" is not probe=duration`},
		{"relative tool", []string{"health", "check", "--nvidia-smi", "bin/nvidia-smi"}, `--nvidia-smi "bin/nvidia-smi" must be an absolute path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != healthUsageExit {
				t.Errorf("exit code %d, want %d", code, healthUsageExit)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing on a usage error", stdout.String())
			}
		})
	}
}

// TestHealthCheckOptions checks that the flags reach the check.
func TestHealthCheckOptions(t *testing.T) {
	// A copy of the healthy node whose GPU 0 link 4 has 3 CRC errors.
	crcDir := t.TempDir()
	for _, name := range []string{health.FileGPUQuery, health.FileKernelLog, health.FileDCGMDiag, health.FileNVLink} {
		data, err := os.ReadFile(filepath.Join("../../shared/health/testdata/healthy", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == health.FileNVLink {
			data = bytes.Replace(data, []byte("\t Link 4: CRC Errors: 0\n"), []byte("\t Link 4: CRC Errors: 3\n"), 1)
		}
		if err := os.WriteFile(filepath.Join(crcDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		// Skipping dcgm_diag turns the dcgmi-missing case from INCONCLUSIVE
		// into PASS.
		{"skip dcgm", []string{"--from-dir", "../../shared/health/testdata/dcgmi-missing", "--accelerator-count", "8", "--skip", "dcgm_diag"}, 0},
		// The accelerator count decides whether 7 GPUs are a fault.
		{"count 7", []string{"--from-dir", "../../shared/health/testdata/gpu-missing-7-of-8", "--accelerator-count", "7"}, 0},
		{"count 8", []string{"--from-dir", "../../shared/health/testdata/gpu-missing-7-of-8", "--accelerator-count", "8", "--budget", "gpu_query=5s,nvlink=5s"}, 1},
		{"CRC errors", []string{"--from-dir", crcDir, "--accelerator-count", "8"}, 1},
		{"CRC errors below a raised threshold", []string{"--from-dir", crcDir, "--accelerator-count", "8", "--nvlink-crc-fail-at", "10"}, 0},
		{"replay threshold does not cover CRC", []string{"--from-dir", crcDir, "--accelerator-count", "8", "--nvlink-replay-fail-at", "10"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runHealth(context.Background(), append([]string{"check"}, tt.args...), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\n%s%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
		})
	}
}
