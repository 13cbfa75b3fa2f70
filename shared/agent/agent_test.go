package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func TestLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "ledger.json")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLedger(path); !errors.Is(err, ErrLedgerLocked) {
		t.Errorf("second OpenLedger = %v, want ErrLedgerLocked", err)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if err := l.Record("old", LedgerEntry{At: now.Add(-LedgerMaxAge - time.Hour), Command: "drain", OK: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.Record("a", LedgerEntry{At: now, Command: "drain", OK: true, Detail: "done"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Get("old"); ok {
		t.Errorf("an entry older than LedgerMaxAge survived a Record")
	}
	l.Close()
	l2, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	e, ok := l2.Get("a")
	if !ok || !e.At.Equal(now) || e.Detail != "done" {
		t.Errorf("reopened ledger: %+v, %v", e, ok)
	}
	if err := os.WriteFile(path+".x", []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenLedger(path + ".x"); err == nil {
		t.Errorf("a corrupt ledger: want an error")
	}
}

func loadSpec(t *testing.T) *spec.Cluster {
	t.Helper()
	c, err := spec.Load("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeSlurm writes a scontrol that prints msg on stderr and exits 1.
func fakeSlurm(t *testing.T, msg string) *slurm.Runner {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\necho '" + msg + "' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "scontrol"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &slurm.Runner{BinDir: dir, Timeout: 5 * time.Second}
}

func TestHandleRefusesAndDefers(t *testing.T) {
	c := loadSpec(t)
	ledger, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	a := &Agent{Cluster: c.ID, Topology: slurm.TopologyOf(c), Ledger: ledger,
		Slurm: fakeSlurm(t, "slurm_load_node error: Unable to contact slurm controller (connect failure)")}
	hdr := event.Header{Version: 1, Type: event.TypeSlurmCommand, Cluster: "flexvm"}
	ctx := context.Background()

	// slurmctld unreachable: deferred, not recorded.
	_, err = a.Handle(ctx, &event.SlurmCommand{Header: hdr, ID: "c1", Command: event.SlurmDrain, Nodes: []string{"flexvm-a3u-1"}})
	if !errors.Is(err, ErrRetry) {
		t.Errorf("Handle with slurmctld down = %v, want ErrRetry", err)
	}
	if _, ok := ledger.Get("c1"); ok {
		t.Errorf("a deferred command was recorded")
	}

	refusals := []*event.SlurmCommand{
		{Header: hdr, ID: "c2", Command: event.SlurmDrain, Nodes: []string{"flexvm-a3u-9"}},    // beyond max_node_count
		{Header: hdr, ID: "c3", Command: event.SlurmDown, Nodes: []string{"flexvm-login-0"}},   // not a Flex-Start pool
		{Header: hdr, ID: "c4", Command: event.SlurmPowerDown, Nodes: []string{"other-a3u-0"}}, // another cluster's node
		{Header: event.Header{Version: 1, Type: event.TypeSlurmCommand, Cluster: "other"}, ID: "c5", Command: event.SlurmDrain,
			Nodes: []string{"flexvm-a3u-1"}},
		{Header: hdr, ID: "c6", Command: event.SlurmReservationDelete, Reservation: "maint"},
	}
	for _, cmd := range refusals {
		res, err := a.Handle(ctx, cmd)
		if err != nil || res.OK || res.Skipped || res.Detail == "" {
			t.Errorf("Handle(%s %v %s) = %+v, %v; want a refusal", cmd.Command, cmd.Nodes, cmd.Reservation, res, err)
		}
		if e, ok := ledger.Get(cmd.ID); !ok || e.OK {
			t.Errorf("refused command %s: ledger %+v, %v; want recorded as failed", cmd.ID, e, ok)
		}
		again, _ := a.Handle(ctx, cmd)
		if !again.Skipped || again.OK {
			t.Errorf("redelivered refused command %s = %+v; want skipped, not ok", cmd.ID, again)
		}
	}
}

func TestNeeds(t *testing.T) {
	node := func(state string, flags ...string) slurm.NodeInfo {
		return slurm.NodeInfo{Name: "n", Node: slurmstate.ParseNode("n", append([]string{state}, flags...), "")}
	}
	tests := []struct {
		cmd  event.SlurmOp
		n    slurm.NodeInfo
		want bool
	}{
		{event.SlurmPowerDown, node("idle", "CLOUD"), true},
		{event.SlurmPowerDown, node("idle", "CLOUD", "POWERED_DOWN"), false},
		{event.SlurmPowerDown, node("allocated", "CLOUD", "POWER_DOWN"), false},
		{event.SlurmPowerDownForce, node("allocated", "CLOUD", "POWER_DOWN"), true},
		{event.SlurmPowerDownForce, node("idle", "CLOUD", "POWERING_DOWN"), false},
		{event.SlurmPowerDownForce, node("idle", "CLOUD", "POWER_DOWN"), false},
		{event.SlurmPowerDownForce, node("allocated", "CLOUD", "COMPLETING", "POWER_DOWN"), false},
		{event.SlurmPowerUp, node("idle", "CLOUD", "POWER_UP", "POWERED_DOWN"), false},
		{event.SlurmPowerUp, node("idle", "CLOUD", "POWERED_DOWN"), true},
		{event.SlurmPowerUp, node("idle", "CLOUD", "NOT_RESPONDING", "POWERING_UP"), false},
		{event.SlurmPowerUp, node("idle", "CLOUD"), false},
		{event.SlurmResume, node("idle", "CLOUD", "DRAIN"), true},
		{event.SlurmResume, node("down", "CLOUD", "POWERED_DOWN"), true},
		{event.SlurmResume, node("idle", "CLOUD"), false},
		{event.SlurmDrain, node("mixed", "DRAIN"), false},
		{event.SlurmDrain, node("idle", "CLOUD", "POWERED_DOWN"), true},
		{event.SlurmDown, node("down"), false},
		{event.SlurmDown, node("idle"), true},
	}
	for _, tt := range tests {
		got, err := needs(tt.cmd, tt.n)
		if err != nil || got != tt.want {
			t.Errorf("needs(%s, %s) = %v, %v; want %v", tt.cmd, tt.n.StateString(), got, err, tt.want)
		}
	}
	if _, err := needs(event.SlurmPowerUp, node("idle", "CLOUD", "POWERING_DOWN")); !errors.Is(err, ErrRetry) {
		t.Errorf("power_up of a node powering down = %v, want ErrRetry", err)
	}
}

func TestBuildSnapshot(t *testing.T) {
	c := loadSpec(t)
	nodes := []slurm.NodeInfo{
		{Name: "flexvm-a3u-0", Node: slurmstate.ParseNode("flexvm-a3u-0", []string{"idle", "CLOUD"}, "")},
		{Name: "flexvm-a3u-1", Node: slurmstate.ParseNode("flexvm-a3u-1", []string{"idle", "CLOUD", "POWERED_DOWN"}, "")},
		{Name: "flexvm-a3u-1", Node: slurmstate.ParseNode("flexvm-a3u-1", []string{"idle", "CLOUD", "POWERED_DOWN"}, "")}, // listed in two partitions
		{Name: "flexvm-login-0", Node: slurmstate.ParseNode("flexvm-login-0", []string{"idle"}, "")},
		{Name: "other-a3u-0", Node: slurmstate.ParseNode("other-a3u-0", []string{"idle"}, "")},
	}
	jobs := []slurm.JobInfo{
		{ID: "5", JobID: 5, State: "PENDING", Reason: "Resources", Partition: "a3u", NodeCount: 2},
		{ID: "6", JobID: 6, State: "CONFIGURING", Partition: "a3u", Nodes: []string{"flexvm-a3u-1", "flexvm-a3u-2"}, NodeCount: 2, Restarts: 1},
		{ID: "7", JobID: 7, State: "COMPLETED", Partition: "a3u"},
		{ID: "8", JobID: 8, State: "RUNNING", Partition: "other", Nodes: []string{"x-y-1"}},
		{ID: "9_1", JobID: 10, State: "RUNNING", Partition: "login,a3u", Nodes: []string{"flexvm-login-0"}},
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	s := BuildSnapshot("flexvm", slurm.TopologyOf(c), nodes, jobs, at)
	want := &event.SlurmSnapshot{
		Header:  event.Header{Version: 1, Type: event.TypeSlurmSnapshot, Cluster: "flexvm"},
		TakenAt: at.UTC(),
		Nodes: []event.SnapshotNode{
			{Name: "flexvm-a3u-0", Node: slurmstate.Node{State: slurmstate.NodeIdle, Flags: slurmstate.NodeFlags{slurmstate.FlagCloud}}},
			{Name: "flexvm-a3u-1", Node: slurmstate.Node{State: slurmstate.NodeIdle,
				Flags: slurmstate.NodeFlags{slurmstate.FlagCloud, slurmstate.FlagPoweredDown}}},
		},
		Jobs: []event.SnapshotJob{
			{ID: "5", State: "PENDING", Reason: "Resources", Partition: "a3u", NodeCount: 2},
			{ID: "6", State: "CONFIGURING", Partition: "a3u", Nodes: []string{"flexvm-a3u-1", "flexvm-a3u-2"}, NodeCount: 2, Restarts: 1},
			{ID: "10", State: "RUNNING", Partition: "login,a3u"},
		},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
	// The facts travel as Slurm's words, as before they were typed.
	data, err := json.Marshal(s.Nodes)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), `[{"name":"flexvm-a3u-0","state":"idle","flags":["CLOUD"]},`+
		`{"name":"flexvm-a3u-1","state":"idle","flags":["CLOUD","POWERED_DOWN"]}]`; got != want {
		t.Errorf("snapshot nodes on the wire = %s, want %s", got, want)
	}
}
