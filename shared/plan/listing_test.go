package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
)

// A listing that succeeds but omits a VM, or a field of one, never has a
// VM deleted or a node's generation ended on that listing alone.
func TestIncompleteListing(t *testing.T) {
	now := t0.Add(time.Hour)
	full := VM{Name: "flexvm-a3u-0-g1", ID: "1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
	tests := []struct {
		name string
		vms  []VM
	}{
		{name: "the running node's VM omitted", vms: nil},
		{name: "its status omitted", vms: []VM{{Name: full.Name, ID: "1", Created: t0, TerminationTime: full.TerminationTime}}},
		{name: "its creation time omitted", vms: []VM{{Name: full.Name, ID: "1", Status: "RUNNING", TerminationTime: full.TerminationTime}}},
		{name: "an unrecorded VM without its creation time", vms: []VM{full, {Name: "flexvm-a3u-2-g7", ID: "7", Status: "RUNNING"}}},
		{name: "an unrecorded VM without its status", vms: []VM{full, {Name: "flexvm-a3u-2-g7", ID: "7", Created: t0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			running(st, "flexvm-a3u-0", t0.Add(week))
			st.Nodes["flexvm-a3u-0"].Registered = true
			got := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: tc.vms}}}, now, Policy{})
			for _, k := range kinds(got) {
				if strings.HasPrefix(k, "DeleteVMs:") || strings.HasPrefix(k, "CreateResizeRequest:") ||
					k == "PutNode:flexvm-a3u-0/released" || k == "PutNode:flexvm-a3u-0/deleting" {
					t.Errorf("acted on one incomplete listing: %v", kinds(got))
				}
			}
			Apply(st, got)
			if n := st.Nodes["flexvm-a3u-0"]; n.Phase != model.PhaseRunning || n.Generation != 1 {
				t.Errorf("node after one incomplete listing: phase %s generation %d", n.Phase, n.Generation)
			}
		})
	}
}
