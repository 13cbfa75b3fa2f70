package plan

import (
	"fmt"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// Compact placement (docs/design/placement.md). A pool whose spec asks for it
// (spec.PoolExtension.CompactPlacement) records its workload policy's name
// and distance; every resize request of more than one VM — a multi-node
// job's nodes — is made in a MIG that references that policy, so Compute
// Engine places the request's VMs close together. A request for one VM (a
// single-node job, a static node's next VM, a replacement, a
// make-before-break successor) has no other VM of its own to be close to:
// its MIG references no policy, and a strict distance can never keep it
// waiting. Static nodes are requested one per request (docs/design/rules.md,
// "Static nodes never share a request"), so they are never placed by the
// policy.

// placementOf is the workload policy name and distance a pool of spec sp
// of cluster records: both "" without compact placement.
func placementOf(cluster string, sp spec.NodePool) (policy, distance string) {
	cp := sp.Ext.CompactPlacement
	if cp == nil {
		return "", ""
	}
	return naming.WorkloadPolicy(cluster, sp.ID, cp.MaxTopologyDistance), cp.MaxTopologyDistance
}

// requestPolicy is the workload policy a request of pool for vms
// references: the pool's for more than one VM, none otherwise.
// A policy Compute refused for the pool (policyRefused) is not
// referenced again until the pool's compact_placement changes.
func requestPolicy(pool *model.Pool, vms []string) string {
	if len(vms) < 2 || pool.WorkloadPolicyRefused == pool.WorkloadPolicy {
		return ""
	}
	return pool.WorkloadPolicy
}

// policyRefused records that Compute refused the insert of request rr's
// MIG while it referenced the pool's workload policy (a 400, code its
// error code): one of Google's pages says a Flex-Start MIG takes no
// workload policy, where others say A4 and A3 Ultra do
// (docs/design/placement.md, "When Compute refuses the policy"). The pool
// records the refusal, so that its later requests, rr's nodes' next one
// among them, are made without the policy: placement becomes best effort,
// the jobs still get their capacity. The pool does not back off. The
// operator is told once per refused policy (Alert), and each refusal is
// counted (MetricWorkloadPolicyRefused).
func (b *builder) policyRefused(pool *model.Pool, rr, code string) {
	if pool.WorkloadPolicy == "" {
		return // the spec dropped compact placement meanwhile
	}
	b.add(Metric{Name: MetricWorkloadPolicyRefused, Labels: map[string]string{"pool": pool.ID, "policy": pool.WorkloadPolicy, "code": code},
		Reason: fmt.Sprintf("pool %s: Compute refused resize request %s's MIG with workload policy %s: %s", pool.ID, rr, pool.WorkloadPolicy, code)})
	if pool.WorkloadPolicyRefused == pool.WorkloadPolicy {
		return
	}
	p := *pool
	p.WorkloadPolicyRefused, p.WorkloadPolicyError = pool.WorkloadPolicy, code
	why := fmt.Sprintf("pool %s: Compute refused workload policy %s on resize request %s's MIG (error %s); the pool's requests are made without it, so placement is best effort, until its compact_placement changes (docs/design/placement.md)", pool.ID, pool.WorkloadPolicy, rr, code)
	b.putPool(p, why)
	b.add(Alert{Pool: pool.ID, Reason: why})
}
