package event

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/inputs"
)

// TestAttackSlurmCommandReason: a Slurm command whose reason (a node's
// drain reason, a job's comment) would end a line of Slurm's state is
// refused when decoded, whatever the command; and a decision's why that
// carries a node's or a job's text — a health reason with a newline — is
// rendered on one line, so that the command flexslurm publishes is never
// the one refused.
func TestAttackSlurmCommandReason(t *testing.T) {
	for _, tc := range []struct {
		cmd    SlurmOp
		nodes  []string
		job    string
		reason string
	}{
		{SlurmDrain, []string{"flexvm-a3u-1"}, "", "flexslurm: GPU lost\nNodeName=flexvm-a3u-2 State=IDLE"},
		{SlurmDown, []string{"flexvm-a3u-1"}, "", "flexslurm: x\rNodeName=evil"},
		{SlurmPowerDownForce, []string{"flexvm-a3u-1"}, "", "flexslurm: x\x00"},
		{SlurmJobComment, nil, "42", "flexslurm: x\u2028JobId=1"},
		{SlurmRequeue, nil, "42", "flexslurm: x\nJobId=1 JobState=RUNNING"},
	} {
		t.Run(string(tc.cmd), func(t *testing.T) {
			data, _ := json.Marshal(SlurmCommand{Header: Header{Version: SchemaVersion, Type: TypeSlurmCommand, Cluster: "flexvm"},
				ID: "c1", Command: tc.cmd, Nodes: tc.nodes, JobID: tc.job, Reason: tc.reason})
			if _, err := DecodeSlurmCommand(data); err == nil {
				t.Fatalf("a %s with reason %q was accepted", tc.cmd, tc.reason)
			}
			for _, op := range []SlurmOp{tc.cmd, SlurmDrain} {
				r := RenderReason(op, strings.TrimPrefix(tc.reason, "flexslurm: "))
				if inputs.HasControl(r) {
					t.Errorf("RenderReason(%s, %q) = %q holds a control character", op, tc.reason, r)
				}
				ok, _ := json.Marshal(SlurmCommand{Header: Header{Version: SchemaVersion, Type: TypeSlurmCommand, Cluster: "flexvm"},
					ID: "c1", Command: tc.cmd, Nodes: tc.nodes, JobID: tc.job, Reason: RenderReason(tc.cmd, strings.TrimPrefix(tc.reason, "flexslurm: "))})
				if _, err := DecodeSlurmCommand(ok); err != nil {
					t.Errorf("the rendered reason is refused: %v", err)
				}
			}
		})
	}
}
