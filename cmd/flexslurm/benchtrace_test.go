package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchTraceCommand: bench trace replays the sample trace and prints
// the strategies side by side with the oracle; a window with no job, a
// trace that does not parse and bad flags are errors.
func TestBenchTraceCommand(t *testing.T) {
	sample := filepath.Join("..", "..", "dev", "tracebench", "testdata", "sample.csv")
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "trace", "--days", "1", "--wait-sigma", "0", "--wait-median", "10m", sample}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"| measurement | flexslurm default | flexslurm, capacity as long as the job | Cluster Toolkit defaults | oracle lower bound |",
		"| GPU-hours paid (VM-hours × 8) | 21.3 | 20.0 | 18.7 | 14.3 |", "| jobs refused as fitting no node (their GPU-hours in the trace) | 1 (768.0) |", "Weng et al.",
		"flexslurm, capacity as long as the job: the pool sets use_job_duration", "5 GPU jobs submitted, 1 CPU-only tasks and 1 never-scheduled tasks skipped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"+
		"a,1,1,1,1000,,LS,Running,0,10,0\nb,1,1,one,1000,,LS,Running,0,10,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{bad}, 1, `line 3, column 4 (num_gpu) "one": not an integer`},
		{[]string{"--from", "30", sample}, 1, "no GPU task that ran was created in the window"},
		{[]string{"--days", "-1", sample}, 2, "--days -1"},
		{[]string{"--max-run-duration", "10h1ms", sample}, 2, "max run duration"},
		{[]string{filepath.Join(t.TempDir(), "none.csv")}, 1, "no such file"},
	} {
		out.Reset()
		errb.Reset()
		code := run(append([]string{"bench", "trace"}, tc.args...), &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("bench trace %q: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}
