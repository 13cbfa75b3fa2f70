package event

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// TestDecodeSnapshotParsesFacts: a snapshot as every agent version
// publishes it (Slurm's words: state, flags, reason) decodes into typed
// facts — flags as a set, whose reason it is, the generation flexslurm's
// reason names, job states normalised — and encodes back to the same words.
func TestDecodeSnapshotParsesFacts(t *testing.T) {
	data := []byte(`{"version":1,"type":"slurm.snapshot","cluster":"flexvm","taken_at":"2026-11-30T12:00:00Z",
	 "nodes":[
	  {"name":"flexvm-a3u-0","state":"idle","flags":["DRAIN","CLOUD"],"reason":"flexslurm: GPU lost (flexvm-a3u-0-g2)"},
	  {"name":"flexvm-a3u-1","state":"mixed","flags":["CLOUD","DRAIN"],"reason":"bad dimm"},
	  {"name":"flexvm-a3u-2","state":"idle","flags":["CLOUD","POWERED_DOWN"]}],
	 "jobs":[{"id":"7","state":"pending","reason":"Resources","partition":"a3u","node_count":1}]}`)
	s, err := DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []SnapshotNode{
		{Name: "flexvm-a3u-0", Node: slurmstate.Node{State: slurmstate.NodeIdle, Flags: slurmstate.NodeFlags{slurmstate.FlagCloud, slurmstate.FlagDrain},
			Reason: "flexslurm: GPU lost (flexvm-a3u-0-g2)", Owner: slurmstate.OwnerFlexslurm, ReasonGeneration: 2}},
		{Name: "flexvm-a3u-1", Node: slurmstate.Node{State: slurmstate.NodeMixed, Flags: slurmstate.NodeFlags{slurmstate.FlagCloud, slurmstate.FlagDrain},
			Reason: "bad dimm", Owner: slurmstate.OwnerOther}},
		{Name: "flexvm-a3u-2", Node: slurmstate.Node{State: slurmstate.NodeIdle, Flags: slurmstate.NodeFlags{slurmstate.FlagCloud, slurmstate.FlagPoweredDown}}},
	}
	if diff := cmp.Diff(want, s.Nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if s.Jobs[0].State != slurmstate.JobPending {
		t.Errorf("job state %q, want %q", s.Jobs[0].State, slurmstate.JobPending)
	}
	if !s.Nodes[0].Drained() || s.Nodes[0].ForeignDrain() || !s.Nodes[1].Draining() || !s.Nodes[1].ForeignDrain() {
		t.Errorf("facts read wrong: %+v", s.Nodes)
	}
}
