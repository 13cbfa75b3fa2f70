package slurm

import (
	"slices"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/google/go-cmp/cmp"
)

// The 24.11 samples are real output of Slurm 24.11.5 (Debian 13), captured
// from the test cluster (slurmtest's spec) at one moment: flexci-gpu-0
// powered down, flexci-gpu-1 drained after running job 1, flexci-gpu-2
// powering up (scontrol update state=power_up) and flexci-gpu-3 powering
// down (state=power_down) after jobs 3 (cancelled while running) and 4
// (requeued held: scontrol requeuehold). Job 2 was submitted held and
// cancelled. sinfo.json is `sinfo --json -n flexci-gpu-[0-3]`: 24.11
// groups nodes ("sinfo" records) and keeps an empty record for the
// partition of no listed node.
var want2411Nodes = []nodeSummary{
	{"flexci-gpu-0", fact(slurmstate.NodeIdle, "", slurmstate.OwnerNone, slurmstate.FlagCloud, slurmstate.FlagPoweredDown)},
	{"flexci-gpu-1", fact(slurmstate.NodeIdle, "flexslurm: health FAIL: gpu 3", slurmstate.OwnerFlexslurm, slurmstate.FlagCloud, slurmstate.FlagDrain)},
	{"flexci-gpu-2", fact(slurmstate.NodeIdle, "", slurmstate.OwnerNone, slurmstate.FlagCloud, slurmstate.FlagNotResponding, slurmstate.FlagPoweringUp)},
	{"flexci-gpu-3", fact(slurmstate.NodeIdle, "", slurmstate.OwnerNone, slurmstate.FlagCloud, slurmstate.FlagPoweringDown)},
}

func sortedByName(ns []NodeInfo) []NodeInfo {
	ns = slices.Clone(ns)
	slices.SortFunc(ns, func(a, b NodeInfo) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return ns
}

func TestParseSinfoJSON2411(t *testing.T) {
	ns, err := ParseSinfoJSON(readFile(t, "testdata/24.11/sinfo.json"))
	if err != nil {
		t.Fatal(err)
	}
	ns = sortedByName(ns)
	if diff := cmp.Diff(want2411Nodes, summarizeNodes(ns)); diff != "" {
		t.Errorf("sinfo --json (-want +got):\n%s", diff)
	}
	for _, n := range ns {
		if !cmp.Equal(n.Partitions, []string{"gpu"}) {
			t.Errorf("%s partitions = %v, want [gpu]", n.Name, n.Partitions)
		}
	}
	shown, err := ParseShowNodes(readFile(t, "testdata/24.11/show-node.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want2411Nodes, summarizeNodes(shown)); diff != "" {
		t.Errorf("scontrol show node -o (-want +got):\n%s", diff)
	}
	if !shown[0].PoweredOff() || !shown[1].Drained() || !shown[1].Ready() || shown[2].Ready() || !shown[2].Has(slurmstate.FlagPoweringUp) ||
		!shown[3].Has(slurmstate.FlagPoweringDown) {
		t.Errorf("state predicates wrong: %+v", shown)
	}
	// A registered cloud node's NodeAddr is where its slurmd registered
	// from (127.0.0.1 here), not slurm.conf's; a node that never
	// registered keeps slurm.conf's.
	if shown[0].Addr != "127.1.0.1" || shown[1].Addr != "127.0.0.1" || shown[1].Port != 6821 {
		t.Errorf("addresses: flexci-gpu-0 %s, flexci-gpu-1 %s:%d", shown[0].Addr, shown[1].Addr, shown[1].Port)
	}
}

func TestParseJobs2411(t *testing.T) {
	js, err := ParseSqueueJSON(readFile(t, "testdata/24.11/squeue.json"))
	if err != nil {
		t.Fatal(err)
	}
	// 24.11's squeue --json lists what squeue lists (pending and running
	// jobs): the finished ones are left out, unlike 22.05's.
	want := []jobSummary{{"4", "PENDING", "JobHeldUser", "", 1, true}}
	if diff := cmp.Diff(want, summarizeJobs(js)); diff != "" {
		t.Errorf("squeue --json (-want +got):\n%s", diff)
	}
	if js[0].Description != "job requeued in held state" || js[0].Partition != "gpu" || js[0].NodeCount != 1 {
		t.Errorf("job 4 = %+v", js[0])
	}
	shown, err := ParseShowJobs(readFile(t, "testdata/24.11/show-job.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wantShown := []jobSummary{
		{"1", "COMPLETED", "None", "flexci-gpu-1", 0, false},
		{"2", "CANCELLED", "JobHeldUser", "", 0, false},
		{"3", "CANCELLED", "None", "flexci-gpu-3", 0, false},
		{"4", "PENDING", "job_requeued_in_held_state", "", 1, true},
	}
	if diff := cmp.Diff(wantShown, summarizeJobs(shown)); diff != "" {
		t.Errorf("scontrol show job -o (-want +got):\n%s", diff)
	}
	if st, end := shown[0].StartTime, shown[0].EndTime; st.IsZero() || end.Sub(st) < 0 || end.Sub(st) > 10*time.Second {
		t.Errorf("job 1 StartTime %v EndTime %v", st, end)
	}
}
