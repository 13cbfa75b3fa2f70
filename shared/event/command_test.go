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

// TestRenderReason: a decision's why becomes the reason Slurm shows,
// after flexslurm's prefix (which the snapshot's parser reads back as the
// reason's owner), once.
func TestRenderReason(t *testing.T) {
	long := strings.Repeat("x", 600)
	tests := []struct {
		op        SlurmOp
		why, want string
	}{
		{SlurmDrain, "health check failed (flexvm-a3u-0-g1)", "flexslurm: health check failed (flexvm-a3u-0-g1)"},
		{SlurmPowerDownForce, "", ""},
		{SlurmJobComment, "", ""},
		{SlurmDrain, "flexslurm: decided before reasons were rendered", "flexslurm: decided before reasons were rendered"},
		{SlurmJobComment, "not provisioned: too long", "flexslurm: not provisioned: too long"},
		{SlurmJobComment, long, ("flexslurm: " + long)[:MaxJobComment-len("…")] + "…"},
		// Cut within a character: never half of one.
		{SlurmJobComment, strings.Repeat("é", 300), "flexslurm: " + strings.Repeat("é", (MaxJobComment-len("flexslurm: ")-len("…"))/2) + "…"},
	}
	for _, tc := range tests {
		if got := RenderReason(tc.op, tc.why); got != tc.want {
			t.Errorf("RenderReason(%s, %.40q) = %.60q, want %.60q", tc.op, tc.why, got, tc.want)
		}
	}
	// A comment rendered so is one the agent's decoder accepts.
	data, _ := json.Marshal(SlurmCommand{Header: Header{Version: SchemaVersion, Type: TypeSlurmCommand, Cluster: "flexvm"},
		ID: "c", Command: SlurmJobComment, JobID: "7", Reason: RenderReason(SlurmJobComment, long)})
	if _, err := DecodeSlurmCommand(data); err != nil {
		t.Errorf("rendered comment refused: %v", err)
	}
}

// TestDecodeSignal: a signal names nodes and one of the signals a batch
// script traps to be told of an end; nothing else (KILL, STOP, a number,
// a name with SIG, another word) reaches scancel.
func TestDecodeSignal(t *testing.T) {
	for _, tc := range []struct {
		signal string
		nodes  []string
		ok     bool
	}{
		{"USR1", []string{"flexvm-a3u-0"}, true},
		{"TERM", []string{"flexvm-a3u-0", "flexvm-a3u-1"}, true},
		{"USR1", nil, false},
		{"", []string{"flexvm-a3u-0"}, false},
		{"KILL", []string{"flexvm-a3u-0"}, false},
		{"STOP", []string{"flexvm-a3u-0"}, false},
		{"9", []string{"flexvm-a3u-0"}, false},
		{"SIGUSR1", []string{"flexvm-a3u-0"}, false},
		{"USR1 --full", []string{"flexvm-a3u-0"}, false},
	} {
		data, _ := json.Marshal(SlurmCommand{Header: Header{Version: SchemaVersion, Type: TypeSlurmCommand, Cluster: "flexvm"},
			ID: "c1", Command: SlurmSignal, Nodes: tc.nodes, Signal: tc.signal})
		if _, err := DecodeSlurmCommand(data); (err == nil) != tc.ok {
			t.Errorf("signal %q to %v: err %v, want ok %v", tc.signal, tc.nodes, err, tc.ok)
		}
	}
}
