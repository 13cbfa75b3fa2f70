package hooks

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/flexslurm/flexslurm/shared/slurm"
)

// TestEpilogAfterAFailedProlog: Slurm 24.11 runs the Epilog after a Prolog
// that failed. When the node is already drained for this VM's failed
// health check (by that prolog, which reported the job pending), the
// epilog neither drains again nor reports; a drain for another VM (or
// another reason) does not stop its report.
func TestEpilogAfterAFailedProlog(t *testing.T) {
	for _, tc := range []struct {
		name, state, reason string
		wantEvents          int
	}{
		{"drained by the prolog for this VM", "IDLE+CLOUD+DRAIN", "flexslurm: health check failed on flexvm-a3u-1-g3: GPU 3: Xid 79", 0},
		{"drained for the previous VM", "IDLE+CLOUD+DRAIN", "flexslurm: health check failed on flexvm-a3u-1-g2: GPU 3: Xid 79", 1},
		{"drained by an operator", "IDLE+CLOUD+DRAIN", "maintenance", 1},
		{"not drained", "IDLE+CLOUD", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, pub := testRuntime(t, map[string]string{"SLURMD_NODENAME": "flexvm-a3u-1", "SLURM_JOB_ID": "42"})
			rt.VMName = "flexvm-a3u-1-g3"
			script := "#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done # the options and \"--\" (slurm.ScontrolArgv)\ncase \"$1\" in\nupdate) exit 0 ;;\nshow) echo \"NodeName=$3 Arch=x86_64 State=" + tc.state +
				" Reason=" + tc.reason + " [root@2026-11-30T12:00:00]\" ; exit 0 ;;\nesac\nexit 1\n"
			if err := os.WriteFile(filepath.Join(rt.Slurm.BinDir, "scontrol"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			rt.Check = func(context.Context) (string, []string) { return VerdictFail, []string{"GPU 3: Xid 79"} }
			if code := rt.Run(context.Background(), slurm.HookEpilog, nil); code != 0 {
				t.Fatalf("epilog exit %d", code)
			}
			if got := healthEvents(t, pub); len(got) != tc.wantEvents {
				t.Errorf("%d health events %+v, want %d", len(got), got, tc.wantEvents)
			}
		})
	}
}
