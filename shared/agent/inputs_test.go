package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
)

// TestAttackAgentCommandInjection hands the agent commands whose reason
// would add a line to Slurm's state or whose words look like options, as
// a forged or corrupted command would (Handle does not decode): the
// agent's scontrol never runs an update with them, and a reason with
// blanks and "=" stays one argument.
func TestAttackAgentCommandInjection(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	// A scontrol that records each call on one line (arguments joined by
	// "|") and shows an idle node or a running job.
	script := `#!/bin/sh
(IFS='|'; printf '%s\n' "$*") >> ` + log + `
case "$3 $4" in
"show node") echo "NodeName=$5 Arch=x86_64 State=IDLE+CLOUD Reason=(null)" ;;
"show job") echo "JobId=$5 JobName=x JobState=RUNNING Reason=None Comment=(null) Partition=a3u NodeList=flexvm-a3u-1 NumNodes=1 RestartCnt=0 TimeLimit=01:00:00" ;;
esac
exit 0
`
	if err := os.WriteFile(filepath.Join(dir, "scontrol"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := loadSpec(t)
	a := &Agent{Cluster: c.ID, Topology: slurm.TopologyOf(c), Slurm: &slurm.Runner{BinDir: dir, Timeout: 5 * time.Second}}
	hdr := event.Header{Version: event.SchemaVersion, Type: event.TypeSlurmCommand, Cluster: c.ID}
	calls := func() []string {
		b, _ := os.ReadFile(log)
		os.Remove(log)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}

	for _, tc := range []struct {
		name string
		cmd  event.SlurmCommand
	}{
		{"a drain reason with a newline", event.SlurmCommand{Header: hdr, ID: "c1", Command: event.SlurmDrain, Nodes: []string{"flexvm-a3u-1"},
			Reason: "flexslurm: GPU lost\nNodeName=flexvm-a3u-2 State=IDLE"}},
		{"a job comment with a line separator", event.SlurmCommand{Header: hdr, ID: "c2", Command: event.SlurmJobComment, JobID: "42",
			Reason: "flexslurm: x\u2028JobId=43"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := a.Handle(context.Background(), &tc.cmd)
			if err != nil || res.OK {
				t.Errorf("Handle = %+v, %v; want a failed command", res, err)
			}
			for _, l := range calls() {
				if strings.Contains(l, "update") {
					t.Errorf("scontrol ran an update: %q", l)
				}
			}
		})
	}

	t.Run("a reason with blanks and = is one argument after --", func(t *testing.T) {
		reason := "flexslurm: GPU 3 state=resume nodename=flexvm-a3u-2"
		cmd := event.SlurmCommand{Header: hdr, ID: "c3", Command: event.SlurmDrain, Nodes: []string{"flexvm-a3u-1"}, Reason: reason}
		if res, err := a.Handle(context.Background(), &cmd); err != nil || !res.OK {
			t.Fatalf("Handle = %+v, %v", res, err)
		}
		want := "--|update|nodename=flexvm-a3u-1|state=drain|reason=" + reason
		got := calls()
		if got[len(got)-1] != want {
			t.Errorf("last scontrol call %q, want %q", got[len(got)-1], want)
		}
	})
}
