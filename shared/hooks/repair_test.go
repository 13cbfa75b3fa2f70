package hooks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
)

// fakeScontrol installs an scontrol in the runtime's Slurm bin directory
// that records its arguments (one call per line) and answers `show node`
// with the node in state.
func fakeScontrol(t *testing.T, rt *Runtime, state string) (calls func() []string) {
	t.Helper()
	dir := rt.Slurm.BinDir
	log := filepath.Join(dir, "calls.log")
	script := `#!/bin/sh
while [ "${1#-}" != "$1" ]; do shift; done # the options and "--" (slurm.ScontrolArgv)
echo "$*" >> ` + log + `
case "$1" in
update) exit 0 ;;
show) echo "NodeName=$3 Arch=x86_64 CoresPerSocket=1 State=` + state + ` Reason=x [root@2026-11-30T12:00:00]" ; exit 0 ;;
esac
exit 1
`
	if err := os.WriteFile(filepath.Join(dir, "scontrol"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		b, _ := os.ReadFile(log)
		return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", "_"))
	}
}

func healthEvents(t *testing.T, pub *fakePub) []event.Health {
	t.Helper()
	var out []event.Health
	for _, m := range pub.sent() {
		h, err := event.DecodeHealth(m.Data)
		if err != nil {
			t.Fatalf("published health event does not decode: %v: %s", err, m.Data)
		}
		out = append(out, *h)
	}
	return out
}

// TestNodeCheckReportsWhetherSlurmDrainedTheNode: after its drain on FAIL
// the hook asks Slurm once: DRAIN with no job left is drained; DRAIN with a
// job (or completing) is still draining.
func TestNodeCheckReportsWhetherSlurmDrainedTheNode(t *testing.T) {
	for state, want := range map[string]bool{
		"IDLE+DRAIN":                true,
		"IDLE+CLOUD+DRAIN":          true,
		"DOWN+DRAIN+NOT_RESPONDING": true,
		"MIXED+DRAIN":               false,
		"ALLOCATED+CLOUD+DRAIN":     false,
		"IDLE+DRAIN+COMPLETING":     false,
		"IDLE+CLOUD":                false,
	} {
		t.Run(state, func(t *testing.T) {
			rt, pub := testRuntime(t, map[string]string{"SLURMD_NODENAME": "flexvm-a3u-1", "SLURM_JOB_ID": "42"})
			calls := fakeScontrol(t, rt, state)
			rt.Check = func(context.Context) (string, []string) { return VerdictFail, []string{"GPU 3: Xid 79"} }
			if code := rt.Run(context.Background(), slurm.HookEpilog, nil); code != 0 {
				t.Fatalf("epilog exit %d", code)
			}
			got := healthEvents(t, pub)
			if len(got) != 1 || got[0].Verdict != event.VerdictFail || got[0].Drained != want {
				t.Fatalf("events %+v, want one FAIL with drained %v", got, want)
			}
			c := calls()
			if len(c) != 2 || !strings.HasPrefix(c[0], "update_nodename=flexvm-a3u-1_state=drain_reason=flexslurm:_health_check_failed:_GPU_3:_Xid_79") ||
				c[1] != "show_node_flexvm-a3u-1" {
				t.Errorf("scontrol calls %q, want the drain then one show node", c)
			}
		})
	}
}

// TestNodeCheckPublishesInconclusive: an INCONCLUSIVE verdict is published
// as such, without draining the node, and the hook exits 0 (the prolog
// lets the job run).
func TestNodeCheckPublishesInconclusive(t *testing.T) {
	rt, pub := testRuntime(t, map[string]string{"SLURMD_NODENAME": "flexvm-a3u-1", "SLURM_JOB_ID": "42"})
	rt.VMName = "flexvm-a3u-1-g3"
	calls := fakeScontrol(t, rt, "IDLE")
	rt.Check = func(context.Context) (string, []string) {
		return VerdictInconclusive, []string{"check command /usr/bin/dcgmi did not finish within 1m0s"}
	}
	for _, hook := range []string{slurm.HookProlog, slurm.HookEpilog, slurm.HookHealth} {
		if code := rt.Run(context.Background(), hook, nil); code != 0 {
			t.Errorf("%s on INCONCLUSIVE: exit %d, want 0", hook, code)
		}
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hdr := event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: "flexvm"}
	r := []string{"check command /usr/bin/dcgmi did not finish within 1m0s"}
	want := []event.Health{
		{Header: hdr, Hook: "prolog", Node: "flexvm-a3u-1", Generation: 3, VMName: "flexvm-a3u-1-g3", JobID: "42", Verdict: "INCONCLUSIVE", Reasons: r, CheckedAt: at},
		{Header: hdr, Hook: "epilog", Node: "flexvm-a3u-1", Generation: 3, VMName: "flexvm-a3u-1-g3", JobID: "42", Verdict: "INCONCLUSIVE", Reasons: r, CheckedAt: at},
		{Header: hdr, Hook: "health_check", Node: "flexvm-a3u-1", Generation: 3, VMName: "flexvm-a3u-1-g3", Verdict: "INCONCLUSIVE", Reasons: r, CheckedAt: at},
	}
	if d := cmp.Diff(want, healthEvents(t, pub)); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if c := calls(); len(c) != 0 {
		t.Errorf("scontrol was called on INCONCLUSIVE: %q", c)
	}
}
