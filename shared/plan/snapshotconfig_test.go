package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// TestSnapshotKeepsTheConfigCheck: the agent's comparison of its spec with
// Slurm's live configuration is stored with the snapshot, for `flexslurm
// status`; a snapshot without one stores none.
func TestSnapshotKeepsTheConfigCheck(t *testing.T) {
	st, _ := applied(t)
	in := &event.SlurmSnapshot{Header: event.Header{Version: 1, Type: event.TypeSlurmSnapshot, Cluster: "flexvm"}, TakenAt: t0,
		Config: &event.ConfigCheck{SpecSHA256: "abc", Divergences: []event.ConfigDivergence{{Problem: "p", Fix: "f"}}}}
	if _, err := Snapshot(st, in, t0.Add(time.Second), Policy{}); err != nil {
		t.Fatal(err)
	}
	want := &model.SlurmConfigCheck{SpecSHA256: "abc", Divergences: []model.SlurmDivergence{{Problem: "p", Fix: "f"}}}
	if d := cmp.Diff(want, st.Slurm.Config); d != "" {
		t.Errorf("stored config check (-want +got):\n%s", d)
	}
	in = &event.SlurmSnapshot{Header: in.Header, TakenAt: t0.Add(time.Minute)}
	if _, err := Snapshot(st, in, t0.Add(time.Minute), Policy{}); err != nil {
		t.Fatal(err)
	}
	if st.Slurm.Config != nil {
		t.Errorf("a snapshot without a config check stored %+v", st.Slurm.Config)
	}
}
