package model

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// TestSlurmViewUpgrade: a view stored before the facts were typed (no
// version: state, flags and reason only, flags in Slurm's order) is parsed
// again when read, so its reason owner and generation are known; a
// current one is left as stored.
func TestSlurmViewUpgrade(t *testing.T) {
	old := &SlurmView{
		Nodes: map[string]SlurmNode{
			"c-a-0": {State: "idle", Flags: slurmstate.NodeFlags{"DRAIN", "CLOUD"}, Reason: "flexslurm: GPU lost (c-a-0-g3)"},
			"c-a-1": {State: "allocated", Flags: slurmstate.NodeFlags{"CLOUD", "DRAIN"}, Reason: "bad dimm"},
		},
		Jobs: []SlurmJob{{ID: "7", State: "pending"}},
	}
	old.Upgrade()
	want := &SlurmView{
		Version: SlurmViewVersion,
		Nodes: map[string]SlurmNode{
			"c-a-0": {State: slurmstate.NodeIdle, Flags: slurmstate.NodeFlags{slurmstate.FlagCloud, slurmstate.FlagDrain},
				Reason: "flexslurm: GPU lost (c-a-0-g3)", Owner: slurmstate.OwnerFlexslurm, ReasonGeneration: 3},
			"c-a-1": {State: slurmstate.NodeAllocated, Flags: slurmstate.NodeFlags{slurmstate.FlagCloud, slurmstate.FlagDrain},
				Reason: "bad dimm", Owner: slurmstate.OwnerOther},
		},
		Jobs: []SlurmJob{{ID: "7", State: slurmstate.JobPending}},
	}
	if diff := cmp.Diff(want, old); diff != "" {
		t.Errorf("upgraded (-want +got):\n%s", diff)
	}
	cur := &SlurmView{Version: SlurmViewVersion, Nodes: map[string]SlurmNode{"c-a-0": {State: slurmstate.NodeIdle, Reason: "x"}}}
	cur.Upgrade()
	if n := cur.Nodes["c-a-0"]; n.Owner != slurmstate.OwnerNone {
		t.Errorf("a current view was parsed again: %+v", n)
	}
	var none *SlurmView
	none.Upgrade()
}
