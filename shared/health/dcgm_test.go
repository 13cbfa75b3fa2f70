package health

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJudgeDCGMDiag(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want findings
	}{
		{
			name: "3.x all pass",
			out: `Successfully ran diagnostic for group.
{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
  {"name": "Denylist", "results": [{"gpu_ids": "0,1", "status": "Pass"}]},
  {"name": "Persistence Mode", "results": [{"gpu_ids": "0,1", "status": "Pass"}]}]}], "version": "3.3.7"}}`,
		},
		{
			name: "fail only in names, info and a skipped test",
			out: `Tests that fail are listed below.
{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
  {"name": "Failure Injection Guard", "results": [{"gpu_ids": "0", "status": "Pass", "info": ["no failures"]}]},
  {"name": "Inforom", "results": [{"gpu_ids": "0", "status": "Skip", "info": "failed to read the InfoROM; skipped"}]},
  {"name": "Graphics Processes", "results": [{"gpu_ids": "0", "status": "Warn", "warnings": ["a process failed to exit quickly"]}]}]}]}}`,
			want: findings{warn: []string{
				`test "Inforom" (Deployment) on GPU 0: skipped: failed to read the InfoROM; skipped`,
				`test "Graphics Processes" (Deployment) on GPU 0: warning: a process failed to exit quickly`,
			}},
		},
		{
			name: "3.x hardware failure with string warnings",
			out: `{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
  {"name": "Page Retirement/Row Remap", "results": [{"gpu_ids": "3", "status": "Fail", "warnings": ["GPU 3 had uncorrectable memory errors and row remapping failed."]}]}]},
  {"category": "Integration", "tests": [{"name": "PCIe", "results": [{"gpu_id": 5, "status": "Fail", "warnings": [{"warning": "PCIe replay rate exceeded", "error_id": 46}]}]}]}]}}`,
			want: findings{fail: []string{
				`test "Page Retirement/Row Remap" (Deployment) on GPU 3: failed: GPU 3 had uncorrectable memory errors and row remapping failed.`,
				`test "PCIe" (Integration) on GPU 5: failed: PCIe replay rate exceeded [DCGM error 46]`,
			}},
		},
		{
			name: "3.x software failure",
			out: `{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
  {"name": "Environment Variables", "results": [{"gpu_ids": "0,1,2", "status": "Fail", "warnings": ["Found CUDA performance-limiting environment variable 'CUDA_LAUNCH_BLOCKING'."]}]}]}]}}`,
			want: findings{inconclusive: []string{`test "Environment Variables" (Deployment) on GPUs 0,1,2: failed for a software or configuration reason: Found CUDA performance-limiting environment variable 'CUDA_LAUNCH_BLOCKING'.`}},
		},
		{
			name: "4.x failures grouped by error id",
			out: `{"DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [{"name": "software", "results": [
  {"entity_group": "GPU", "entity_id": 0, "status": "Fail", "warnings": [{"warning": "Persistence mode for GPU 0 is disabled.", "error_id": 29, "error_category": 3, "error_severity": 5}]},
  {"entity_group": "GPU", "entity_id": 1, "status": "Fail", "warnings": [{"warning": "Persistence mode for GPU 1 is disabled.", "error_id": 29, "error_category": 3, "error_severity": 5}]},
  {"entity_group": "GPU", "entity_id": 2, "status": "Fail", "warnings": [{"warning": "Row remap failure on GPU 2.", "error_id": 95, "error_category": 10, "error_severity": 2}]},
  {"entity_group": "GPU", "entity_id": 3, "status": "Pass"}]}]}]}}`,
			want: findings{
				fail:         []string{`test "software" (Deployment) on GPU 2: failed: Row remap failure on GPU 2. [DCGM error 95]`},
				inconclusive: []string{`test "software" (Deployment) on GPUs 0,1: failed for a software or configuration reason: Persistence mode for GPU 0 is disabled. [DCGM error 29]`},
			},
		},
		{
			name: "4.x failure without a category stands",
			out:  `{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", "results": [{"entity_group": "GPU", "entity_id": 4, "status": "Fail", "warnings": [{"warning": "memory mismatch", "error_severity": 4}]}]}]}]}}`,
			want: findings{fail: []string{`test "memory" (Hardware) on GPU 4: failed: memory mismatch`}},
		},
		{
			name: "test summary only",
			out:  `{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", "results": [], "test_summary": {"status": "Fail"}}]}]}}`,
			want: findings{fail: []string{`test "memory" (Hardware) on all GPUs: failed`}},
		},
		{
			name: "unknown status",
			out:  `{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Unknown"}]}]}]}}`,
			want: findings{inconclusive: []string{`test "memory" (Hardware) on GPU 0: unknown status "Unknown"`}},
		},
		{
			name: "runtime error",
			out:  `{"DCGM GPU Diagnostic": {"runtime_error": "Unable to create a group of GPUs: the host engine is not running"}}`,
			want: findings{inconclusive: []string{"dcgmi diag could not run: Unable to create a group of GPUs: the host engine is not running"}},
		},
		{
			name: "no JSON",
			out:  "Error: unable to establish a connection to the specified host: localhost\nError: Unable to connect to host engine. Host engine connection invalid/disconnected.\n",
			want: findings{inconclusive: []string{"no DCGM diagnostic JSON in the output: Error: unable to establish a connection to the specified host: localhost"}},
		},
		{
			name: "unknown top level",
			out:  `{"something": {}}`,
			want: findings{inconclusive: []string{`no DCGM diagnostic JSON in the output: neither "DCGM GPU Diagnostic" nor "DCGM Diagnostic" at the top level: {"something": {}}`}},
		},
		{
			name: "no results",
			out:  `{"DCGM Diagnostic": {"test_categories": []}}`,
			want: findings{inconclusive: []string{"dcgmi diag reported no test results"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeDCGMDiag(Output{Stdout: []byte(tt.out)}, Options{})
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(findings{}), cmpEmptyNil); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseDCGMDiagRejects(t *testing.T) {
	for name, in := range map[string]string{
		"bad warning": `{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": [{"status": "Fail", "warnings": [42]}]}]}]}}`,
		"bad gpu id":  `{"DCGM GPU Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": [{"gpu_ids": [1], "status": "Pass"}]}]}]}}`,
		"bad info":    `{"DCGM GPU Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": [{"status": "Pass", "info": {"a": 1}}]}]}]}}`,
		"too large":   string(make([]byte, MaxOutputBytes+1)),
	} {
		if _, err := parseDCGMDiag([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
