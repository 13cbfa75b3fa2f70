package harness

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// TestWorkloadPolicyRefusedOnFlexStart runs a two-node job of a pool with
// compact placement under both readings of whether a Flex-Start MIG takes
// a workload policy (computesim.Readings.RefuseWorkloadPolicyOnFlexStart).
// Either way the job gets its two VMs, each exactly once, and no VM or
// MIG is left over. Where Compute accepts the policy, the job's request
// references it and the pool records no refusal; where Compute refuses
// it, the pool records the refusal and the request that made the VMs
// references no policy.
func TestWorkloadPolicyRefusedOnFlexStart(t *testing.T) {
	policy := naming.WorkloadPolicy("flexvm", "a3u", "BLOCK")
	for _, refuse := range []bool{false, true} {
		h, ctx := newHarness(t, Options{Sim: computesim.Options{Readings: computesim.Readings{RefuseWorkloadPolicyOnFlexStart: refuse}}})
		c := exampleSpec(t)
		for i := range c.NodePools {
			if c.NodePools[i].ID == "a3u" {
				c.NodePools[i].Ext.CompactPlacement = &spec.CompactPlacement{MaxTopologyDistance: spec.TopologyBlock}
			}
		}
		must(t, h.Apply(ctx, c))
		settle(t, h, ctx)
		_, err := h.Publish(ctx, config.TopicJobs, jobPending("101", 2))
		must(t, err)
		settle(t, h, ctx)
		settle(t, h, ctx)

		st, err := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true})
		must(t, err)
		p := st.Pools["a3u"]
		wantRefused := ""
		if refuse {
			wantRefused = policy
		}
		if p.WorkloadPolicyRefused != wantRefused {
			t.Errorf("refuse=%t: pool records refused policy %q (%q), want %q", refuse, p.WorkloadPolicyRefused, p.WorkloadPolicyError, wantRefused)
		}
		var dyn []string
		for _, n := range []string{"flexvm-a3u-1", "flexvm-a3u-2"} {
			nd := node(t, h, n)
			if nd.JobID != "101" || nd.Phase != model.PhaseRunning {
				t.Errorf("refuse=%t: node %s: job %q phase %s, want job 101 running", refuse, n, nd.JobID, nd.Phase)
			}
			dyn = append(dyn, model.VMName(nd.Name, nd.Generation))
		}
		var multi []computesim.ResizeRequest
		for _, rr := range h.Sim.ResizeRequestHistory() {
			if rr.ResizeBy > 1 {
				multi = append(multi, rr)
			}
		}
		wantPolicy := policy
		if refuse {
			wantPolicy = ""
		}
		if len(multi) != 1 || multi[0].WorkloadPolicy != wantPolicy {
			t.Errorf("refuse=%t: multi-VM requests %+v, want one with policy %q", refuse, multi, wantPolicy)
		}
		if d := cmp.Diff(append([]string{"flexvm-a3u-0-g1"}, dyn...), h.VMs()); d != "" {
			t.Errorf("refuse=%t: VMs (-want +got):\n%s", refuse, d)
		}
	}
}
