package status_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/status"
	"github.com/flexslurm/flexslurm/shared/store"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// now is the instant the fixture is viewed at.
var now = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// fixture writes a fixed state: cluster c1 with a ready GPU pool (a static
// node running, a dynamic node waiting for capacity, a node being deleted
// past its termination time, a released node), a pool not ready yet, a
// node left in a pool removed from the spec, and active jobs; cluster c2
// with a spec and nothing else.
func fixture(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	err := s.Update(ctx, store.Scope{Cluster: "c1", AllPools: true}, func(st *model.State) error {
		st.Cluster = &model.Cluster{ID: "c1", Spec: []byte(`{}`), SpecVersion: 3, SpecSHA256: "x", Project: "p", UpdatedAt: now.Add(-time.Hour)}
		st.Pools["gpu"] = &model.Pool{ID: "gpu", Zone: "us-central1-a", MIG: "c1-gpu", Template: "c1-gpu-t3",
			MinNodes: 1, MaxNodes: 4, MaxRunDuration: 7 * 24 * time.Hour, RunDuration: 7 * 24 * time.Hour, Ready: true, UpdatedAt: now.Add(-time.Hour)}
		st.Pools["cpu"] = &model.Pool{ID: "cpu", Zone: "us-central1-b", MinNodes: 0, MaxNodes: 2,
			RunDuration: 10 * time.Minute, UpdatedAt: now.Add(-time.Hour),
			BackoffUntil: now.Add(30 * time.Minute), BackoffAttempts: 4, BackoffReason: "quota",
			Condition:      "WaitingForQuota: QUOTA_EXCEEDED: Quota 'PREEMPTIBLE_CPUS' exceeded.  Limit: 24.0 in region us-central1. (resize request c1-cpu-j43-g1 stays queued)",
			ConditionSince: now.Add(-90 * time.Minute),
			Shortage: &model.Shortage{Class: "quota", Code: "QUOTA_EXCEEDED", Message: "Quota 'PREEMPTIBLE_CPUS' exceeded.  Limit: 24.0 in region us-central1.",
				Request: "c1-cpu-j43-g1", Since: now.Add(-90 * time.Minute)}}
		add := func(n *model.Node) { n.UpdatedAt = now.Add(-2 * time.Minute); st.Nodes[n.Name] = n }
		add(&model.Node{Name: "c1-gpu-0", Pool: "gpu", Index: 0, Kind: model.NodeStatic, Generation: 2, Phase: model.PhaseRunning,
			VMName: "c1-gpu-0-g2", VMID: "123", RequestedAt: now.Add(-26 * time.Hour), RunningAt: now.Add(-25 * time.Hour),
			TerminationTime:   now.Add(6*24*time.Hour + 23*time.Hour + 30*time.Second),
			VersionMismatch:   "VM c1-gpu-0-g2 runs flexslurm v1.1.0; the functions that built its instance template run v1.2.0",
			VersionMismatchVM: "c1-gpu-0-g2",
			// Repaired three times within the day: left for an operator.
			Repair: model.RepairLimit, RepairSince: now.Add(-10 * time.Minute), RepairReason: "health check failed: GPU 3: 2 uncorrectable ECC errors",
			RepairCount: 3, RepairCountSince: now.Add(-20 * time.Hour)})
		add(&model.Node{Name: "c1-gpu-1", Pool: "gpu", Index: 1, Kind: model.NodeDynamic, Generation: 1, Phase: model.PhaseRequested,
			VMName: "c1-gpu-1-g1", ResizeRequest: "c1-gpu-j42-g1", MIG: naming.RequestMIG("c1", "gpu", "c1-gpu-j42-g1"), JobID: "42", RequestedAt: now.Add(-12*time.Minute - 30*time.Second)})
		add(&model.Node{Name: "c1-gpu-2", Pool: "gpu", Index: 2, Kind: model.NodeDynamic, Generation: 3, Phase: model.PhaseDeleting,
			VMName: "c1-gpu-2-g3", TerminationTime: now.Add(-5 * time.Minute)})
		add(&model.Node{Name: "c1-gpu-3", Pool: "gpu", Index: 3, Kind: model.NodeDynamic, Generation: 1, Phase: model.PhaseReleased,
			VMName: "c1-gpu-3-g1", LastEnd: model.EndExpired,
			VersionMismatch: "VM c1-gpu-3-g1 runs flexslurm v1.0.0; the functions that built its instance template run v1.2.0", VersionMismatchVM: "c1-gpu-3-g1"})
		add(&model.Node{Name: "c1-cpu-0", Pool: "cpu", Index: 0, Kind: model.NodeDynamic, Generation: 1, Phase: model.PhaseRequested,
			VMName: "c1-cpu-0-g1", JobID: "43", RequestedAt: now.Add(-2 * time.Hour)})
		add(&model.Node{Name: "c1-old-0", Pool: "old", Index: 0, Kind: model.NodeStatic, Generation: 4, Phase: model.PhaseRunning,
			VMName: "c1-old-0-g4", TerminationTime: now.Add(90 * time.Minute)})
		st.Jobs["42"] = &model.Job{ID: "42", Partition: "gpu", Pool: "gpu", State: model.JobPending, NodesWanted: 1, Nodes: []string{"c1-gpu-1"}, Generation: 1}
		st.Jobs["7"] = &model.Job{ID: "7", Partition: "gpu", Pool: "gpu", State: model.JobRunning, NodesWanted: 1, Nodes: []string{"c1-gpu-0"}}
		st.Jobs["43"] = &model.Job{ID: "43", Partition: "cpu", Pool: "cpu", State: model.JobPending, NodesWanted: 1}
		st.Jobs["5"] = &model.Job{ID: "5", Partition: "gpu", Pool: "gpu", State: model.JobFinished}
		// The agent compared another spec than the one applied, and Slurm
		// cannot serve it.
		st.Slurm = &model.SlurmView{TakenAt: now.Add(-time.Minute), ReceivedAt: now.Add(-time.Minute), Nodes: map[string]model.SlurmNode{},
			Config: &model.SlurmConfigCheck{SpecSHA256: "y", Divergences: []model.SlurmDivergence{{
				Problem: "pool gpu has max_node_count 5 but Slurm has no node c1-gpu-4",
				Fix:     `set "NodeName=c1-gpu-[0-4] CPUs=224 RealMemory=2900000 Gres=gpu:8 State=CLOUD Feature=gpu,cloud", then restart slurmctld (new nodes need it)`}}}}
		return nil
	})
	if err != nil {
		t.Fatalf("writing cluster c1: %v", err)
	}
	err = s.Update(ctx, store.Scope{Cluster: "c2", AllPools: true}, func(st *model.State) error {
		st.Cluster = &model.Cluster{ID: "c2", Spec: []byte(`{}`), SpecVersion: 1, SpecSHA256: "z", UpdatedAt: now.Add(-48 * time.Hour)}
		st.Slurm = &model.SlurmView{TakenAt: now.Add(-time.Minute), ReceivedAt: now.Add(-time.Minute), Nodes: map[string]model.SlurmNode{},
			Config: &model.SlurmConfigCheck{SpecSHA256: "z"}}
		return nil
	})
	if err != nil {
		t.Fatalf("writing cluster c2: %v", err)
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func render(t *testing.T, s store.Store, o status.Options) string {
	t.Helper()
	snap, err := status.Collect(context.Background(), s, now, o)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	var b strings.Builder
	if err := status.Render(&b, snap); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestGoldenMemory renders the fixture from the in-memory store; it runs
// everywhere.
func TestGoldenMemory(t *testing.T) {
	s := store.NewMemory(func() time.Time { return now })
	fixture(t, s)
	golden(t, "status.golden", render(t, s, status.Options{}))
}

// TestGoldenFirestore renders the same fixture written to and read back from
// the Firestore emulator, through the production adapter.
func TestGoldenFirestore(t *testing.T) {
	testenv.Firestore(t)
	c, err := firestore.NewClient(context.Background(), testenv.Project())
	if err != nil {
		t.Fatalf("connecting to the Firestore emulator: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	s := store.NewFirestoreFromClient(c, store.WithRoot(testenv.UniqueID(t)+"_"))
	fixture(t, s)
	golden(t, "status.golden", render(t, s, status.Options{}))
	one := render(t, s, status.Options{Cluster: "c2"})
	if strings.Contains(one, "cluster c1") || !strings.Contains(one, "cluster c2 · spec v1") {
		t.Errorf("--cluster c2 view:\n%s", one)
	}
}

func TestCollect(t *testing.T) {
	s := store.NewMemory(nil)
	fixture(t, s)
	snap, err := status.Collect(context.Background(), s, now, status.Options{Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Clusters) != 1 {
		t.Fatalf("%d clusters, want 1", len(snap.Clusters))
	}
	var ids []string
	for _, p := range snap.Clusters[0].Pools {
		ids = append(ids, p.ID)
	}
	if diff := cmp.Diff([]string{"cpu", "gpu", "old"}, ids); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	gpu := snap.Clusters[0].Pools[1]
	want := map[model.Phase]int{model.PhaseRequested: 1, model.PhaseRunning: 1, model.PhaseDeleting: 1, model.PhaseReleased: 1}
	if diff := cmp.Diff(want, gpu.Phases); diff != "" {
		t.Errorf("gpu phases (-want +got):\n%s", diff)
	}
	wantRR := []status.ResizeRequest{{Name: "c1-gpu-j42-g1", MIG: naming.RequestMIG("c1", "gpu", "c1-gpu-j42-g1"), Node: "c1-gpu-1", Job: "42", Age: 12*time.Minute + 30*time.Second}}
	if diff := cmp.Diff(wantRR, gpu.InFlight); diff != "" {
		t.Errorf("gpu in flight (-want +got):\n%s", diff)
	}
	if gpu.Nodes[0].TimeLeft != 6*24*time.Hour+23*time.Hour+30*time.Second || gpu.Nodes[2].TimeLeft != -5*time.Minute {
		t.Errorf("time left = %v, %v", gpu.Nodes[0].TimeLeft, gpu.Nodes[2].TimeLeft)
	}
	if gpu.Nodes[3].VM != "" || !gpu.Nodes[3].Termination.IsZero() {
		t.Errorf("released node shows VM %q until %v", gpu.Nodes[3].VM, gpu.Nodes[3].Termination)
	}
	if diff := cmp.Diff(status.Controls{Backoff: "none", Breaker: "none"}, gpu.Controls); diff != "" {
		t.Errorf("controls (-want +got):\n%s", diff)
	}
	wantLeft := []string{"c1-gpu-0: repair limit reached (3 repairs since 2026-11-19T16:00:00Z), left drained: health check failed: GPU 3: 2 uncorrectable ECC errors"}
	if diff := cmp.Diff(wantLeft, gpu.LeftForOperator); diff != "" {
		t.Errorf("left for an operator (-want +got):\n%s", diff)
	}
	if !snap.FutureRecords.IsZero() {
		t.Errorf("FutureRecords = %v for records written before now", snap.FutureRecords)
	}
}

// TestFutureRecords: a state stamped by a clock ahead of the viewer's (the
// local system's scaled clock) is flagged.
func TestFutureRecords(t *testing.T) {
	s := store.NewMemory(nil)
	fixture(t, s)
	early := now.Add(-3 * time.Hour)
	snap, err := status.Collect(context.Background(), s, early, status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(-2 * time.Minute); !snap.FutureRecords.Equal(want) {
		t.Errorf("FutureRecords = %v, want %v", snap.FutureRecords, want)
	}
	var b strings.Builder
	status.Render(&b, snap)
	if !strings.Contains(b.String(), "warning: records were updated as late as 2026-11-20T11:58:00Z") {
		t.Errorf("no warning:\n%s", b.String())
	}
}

func TestEmpty(t *testing.T) {
	got := render(t, store.NewMemory(nil), status.Options{})
	want := "flexslurm status at 2026-11-20T12:00:00Z\n\nno clusters\n\n" +
		"dead letters: not measured (--dead-letter peeks each dead-letter subscription)\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                               "0s",
		45 * time.Second:                "45s",
		12*time.Minute + 30*time.Second: "12m30s",
		2*time.Hour + 5*time.Minute + 59*time.Second: "2h5m",
		3 * time.Hour:      "3h",
		7 * 24 * time.Hour: "7d",
		6*24*time.Hour + 23*time.Hour + 59*time.Minute: "6d23h",
		-90 * time.Second:       "1m30s",
		1500 * time.Millisecond: "1s",
	} {
		if got := status.Human(d); got != want {
			t.Errorf("Human(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestOtherSpecRemedy: an agent comparing Slurm with another spec than the
// one applied is told how to fix it where status runs: a real controller's
// installer, or the local system started again.
func TestOtherSpecRemedy(t *testing.T) {
	for _, local := range []bool{false, true} {
		s := &status.Snapshot{At: now, Local: local, Clusters: []status.Cluster{{ID: "c1", Applied: true,
			SlurmConfig: &status.SlurmConfig{TakenAt: now, OtherSpec: true}}}}
		var b strings.Builder
		if err := status.Render(&b, s); err != nil {
			t.Fatal(err)
		}
		controller := strings.Contains(b.String(), "flexslurm install controller --spec SPEC")
		restart := strings.Contains(b.String(), "flexslurm local --spec SPEC")
		if controller == local || restart != local {
			t.Errorf("local %v: the remedy names install controller %v, flexslurm local %v:\n%s", local, controller, restart, b.String())
		}
	}
}
