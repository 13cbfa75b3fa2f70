package health

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rows8 is eight healthy GPU query lines, with line i replaced by the
// given overrides.
func rows8(over map[int]string) string {
	bus := []string{"00000000:04:00.0", "00000000:05:00.0", "00000000:0A:00.0", "00000000:0B:00.0", "00000000:84:00.0", "00000000:85:00.0", "00000000:8A:00.0", "00000000:8B:00.0"}
	var b strings.Builder
	for i, id := range bus {
		if line, ok := over[i]; ok {
			if line != "" {
				b.WriteString(line + "\n")
			}
			continue
		}
		b.WriteString(strings.Join([]string{string(rune('0' + i)), id, "0", "No", "No", "No"}, ", ") + "\n")
	}
	return b.String()
}

func TestJudgeGPUQuery(t *testing.T) {
	tests := []struct {
		name  string
		out   string
		count int
		want  findings
	}{
		{
			name: "healthy", out: rows8(nil), count: 8,
		},
		{
			name: "uncorrectable ECC on GPU 3", out: rows8(map[int]string{3: "3, 00000000:0B:00.0, 2, No, No, No"}), count: 8,
			want: findings{fail: []string{"GPU 3 (00000000:0B:00.0): 2 uncorrectable ECC errors since the driver loaded (ecc.errors.uncorrected.volatile.total)"}},
		},
		{
			name: "page retirement pending", out: rows8(map[int]string{1: "1, 00000000:05:00.0, 0, Yes, [N/A], [N/A]"}), count: 8,
			want: findings{
				fail: []string{"GPU 1 (00000000:05:00.0): memory pages are pending retirement (retired_pages.pending=Yes); they stay in use until the driver reloads"},
				warn: []string{
					"remapped_rows.failure=[N/A] on GPU 1: not available, not a fault",
					"remapped_rows.pending=[N/A] on GPU 1: not available, not a fault",
				},
			},
		},
		{
			name: "row remap failure", out: rows8(map[int]string{6: "6, 00000000:8A:00.0, 0, No, No, Yes"}), count: 8,
			want: findings{fail: []string{"GPU 6 (00000000:8A:00.0): a row remapping has failed (remapped_rows.failure=Yes); NVIDIA's RMA policy for row remapping applies"}},
		},
		{
			name: "row remap pending is a warning", out: rows8(map[int]string{2: "2, 00000000:0A:00.0, 0, No, Yes, No"}), count: 8,
			want: findings{warn: []string{"GPU 2 (00000000:0A:00.0): rows are pending remapping (remapped_rows.pending=Yes); new work can run, a GPU reset applies the remap"}},
		},
		{
			name: "not supported fields", out: "0, 00000000:04:00.0, [Not Supported], [Not Supported], No, No\n", count: 1,
			want: findings{warn: []string{
				"ecc.errors.uncorrected.volatile.total=[Not Supported] on GPU 0: not available, not a fault",
				"retired_pages.pending=[Not Supported] on GPU 0: not available, not a fault",
			}},
		},
		{
			name: "one of eight missing", out: rows8(map[int]string{7: ""}), count: 8,
			want: findings{fail: []string{"nvidia-smi lists 7 usable GPUs, the pool expects 8 (accelerator_count): 1 missing"}},
		},
		{
			name: "lost GPU", count: 8,
			out: rows8(map[int]string{6: "Unable to determine the device handle for GPU0000:8A:00.0: GPU is lost.  Reboot the system to recover this GPU"}),
			want: findings{fail: []string{
				"GPU 0000:8A:00.0: the driver can no longer reach it: nvidia-smi cannot get its device handle (GPU is lost.  Reboot the system to recover this GPU)",
				"nvidia-smi lists 7 usable GPUs, the pool expects 8 (accelerator_count): 1 missing",
			}},
		},
		{
			name: "no devices with a count", out: "No devices were found\n", count: 8,
			want: findings{fail: []string{"nvidia-smi lists 0 usable GPUs, the pool expects 8 (accelerator_count): 8 missing"}},
		},
		{
			name: "no devices without a count", out: "No devices were found\n",
			want: findings{fail: []string{`nvidia-smi found no GPU ("No devices were found"): the driver reaches none of the node's GPUs`}},
		},
		{
			name: "handle unknown error", count: 8,
			out: rows8(map[int]string{3: "Unable to determine the device handle for GPU0000:0B:00.0: Unknown Error"}),
			want: findings{fail: []string{
				"GPU 0000:0B:00.0: the driver can no longer reach it: nvidia-smi cannot get its device handle (Unknown Error)",
				"nvidia-smi lists 7 usable GPUs, the pool expects 8 (accelerator_count): 1 missing",
			}},
		},
		{
			name: "handle lost with a space and the reason on the next line", count: 1,
			out: "Unable to determine the device handle for GPU 0000:02:00.0:\nGPU is lost.  Reboot the system to recover this GPU\n",
			want: findings{fail: []string{
				"GPU 0000:02:00.0: the driver can no longer reach it: nvidia-smi cannot get its device handle (GPU is lost.  Reboot the system to recover this GPU)",
				"nvidia-smi lists 0 usable GPUs, the pool expects 1 (accelerator_count): 1 missing",
			}},
		},
		{
			name: "short domain", out: "Unable to determine the device handle for GPU 000:BA:80.0: Unknown Error\n",
			want: findings{fail: []string{"GPU 000:BA:80.0: the driver can no longer reach it: nvidia-smi cannot get its device handle (Unknown Error)"}},
		},
		{
			name: "handle by index without a count",
			out:  "Unable to determine the device handle for GPU2: Unknown Error\n",
			want: findings{fail: []string{"GPU 2: the driver can no longer reach it: nvidia-smi cannot get its device handle (Unknown Error)"}},
		},
		{
			name: "handle refused for permissions", count: 1,
			out: "Unable to determine the device handle for GPU 0000:04:00.0: Insufficient Permissions\n",
			want: findings{inconclusive: []string{
				"GPU 0000:04:00.0: nvidia-smi may not get its device handle (Insufficient Permissions): a configuration problem, not a fault (the check runs as root from the Slurm hooks)",
			}},
		},
		{
			name: "driver not loaded", count: 8,
			out:  "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n",
			want: findings{inconclusive: []string{`unexpected nvidia-smi output: line 1: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."`}},
		},
		{
			name: "empty output with a count", out: "", count: 8,
			want: findings{inconclusive: []string{"nvidia-smi printed no GPU rows; the pool expects 8 GPUs"}},
		},
		{
			name: "malformed row is not a missing GPU", out: rows8(map[int]string{4: "4, 00000000:84:00.0, lots, No, No, No"}), count: 8,
			want: findings{inconclusive: []string{`unexpected nvidia-smi output: line 5: ecc.errors.uncorrected.volatile.total "lots" is not a count: "4, 00000000:84:00.0, lots, No, No, No"`}},
		},
		{
			name: "rejected field", out: `Field "remapped_rows.pending" is not a valid field to query.` + "\n", count: 8,
			want: findings{inconclusive: []string{`nvidia-smi cannot run the query: Field "remapped_rows.pending" is not a valid field to query.`}},
		},
		{
			name: "more GPUs than expected", out: rows8(nil), count: 4,
			want: findings{warn: []string{"nvidia-smi lists 8 GPUs, more than the 4 the pool expects (accelerator_count)"}},
		},
		{
			name: "no count given", out: rows8(map[int]string{7: ""}),
		},
		{
			name: "bad flag value", out: "0, 00000000:04:00.0, 0, Maybe, No, No\n", count: 1,
			want: findings{inconclusive: []string{`unexpected nvidia-smi output: line 1: retired_pages.pending "Maybe" is not Yes, No or a bracketed note: "0, 00000000:04:00.0, 0, Maybe, No, No"`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeGPUQuery(Output{Stdout: []byte(tt.out)}, Options{AcceleratorCount: tt.count})
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(findings{}), cmpEmptyNil); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJudgeGPUQueryStderrAndExit: nvidia-smi may print its messages on
// standard error and exits with the NVML return code of the failure.
func TestJudgeGPUQueryStderrAndExit(t *testing.T) {
	tests := []struct {
		name string
		out  Output
		want findings
	}{
		{
			name: "handle message on stderr",
			out: Output{Stdout: []byte(rows8(map[int]string{5: ""})), ExitCode: 15,
				Stderr: []byte("Unable to determine the device handle for GPU0000:85:00.0: GPU is lost.  Reboot the system to recover this GPU\n")},
			want: findings{fail: []string{
				"GPU 0000:85:00.0: the driver can no longer reach it: nvidia-smi cannot get its device handle (GPU is lost.  Reboot the system to recover this GPU)",
				"nvidia-smi lists 7 usable GPUs, the pool expects 8 (accelerator_count): 1 missing",
			}},
		},
		{
			name: "exit 15 without a message",
			out:  Output{Stdout: []byte(rows8(map[int]string{5: ""})), ExitCode: 15},
			want: findings{fail: []string{
				"nvidia-smi exited with status 15 (NVML_ERROR_GPU_IS_LOST): a GPU has fallen off the bus or become inaccessible",
				"nvidia-smi lists 7 usable GPUs, the pool expects 8 (accelerator_count): 1 missing",
			}},
		},
		{
			name: "no devices on stderr", out: Output{Stderr: []byte("No devices were found\n"), ExitCode: 6},
			want: findings{fail: []string{"nvidia-smi lists 0 usable GPUs, the pool expects 8 (accelerator_count): 8 missing"}},
		},
		{
			name: "other stderr is not judged", out: Output{Stderr: []byte("Failed to initialize NVML: Driver/library version mismatch\n"), ExitCode: 18},
			want: findings{inconclusive: []string{"nvidia-smi printed no GPU rows; the pool expects 8 GPUs"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeGPUQuery(tt.out, Options{AcceleratorCount: 8})
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(findings{}), cmpEmptyNil); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseGPUQueryLimit(t *testing.T) {
	if _, err := parseGPUQuery(make([]byte, MaxOutputBytes+1)); err == nil {
		t.Error("input above MaxOutputBytes was accepted")
	}
	f := judgeGPUQuery(Output{Stdout: make([]byte, MaxOutputBytes+1)}, Options{})
	if f.verdict() != Inconclusive {
		t.Errorf("oversized input: verdict %s, want INCONCLUSIVE", f.verdict())
	}
}
