package event

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodeJobComment: a job_comment names a job, and its comment is
// flexslurm's (prefixed), one line and bounded, or empty (cleared).
func TestDecodeJobComment(t *testing.T) {
	tests := []struct {
		name   string
		job    string
		reason string
		ok     bool
	}{
		{name: "flexslurm's comment", job: "42", reason: "flexslurm: not provisioned: asks for 3 nodes, pool a3u has max_node_count 2", ok: true},
		{name: "empty clears it", job: "42", ok: true},
		{name: "an array task", job: "12_3", reason: "flexslurm: x", ok: true},
		{name: "no job", reason: "flexslurm: x"},
		{name: "without flexslurm's prefix", job: "42", reason: "my note"},
		{name: "two lines", job: "42", reason: "flexslurm: a\nb"},
		{name: "too long", job: "42", reason: "flexslurm: " + strings.Repeat("x", MaxJobComment)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, _ := json.Marshal(SlurmCommand{Header: Header{Version: SchemaVersion, Type: TypeSlurmCommand, Cluster: "flexvm"},
				ID: "c1", Command: SlurmJobComment, JobID: tc.job, Reason: tc.reason})
			_, err := DecodeSlurmCommand(data)
			if (err == nil) != tc.ok {
				t.Errorf("DecodeSlurmCommand: err %v, want ok %v", err, tc.ok)
			}
		})
	}
}
