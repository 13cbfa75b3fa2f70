package plan

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// ClusterApplied decides what a newly applied cluster spec (created or
// resized) requires: the cluster and pool records, the pools' template and
// MIG, a VM for every static node up to min_node_count (static nodes are
// requested at once when the cluster is created or resized),
// and the release of nodes that became surplus (min or max lowered) and
// serve no job. A pool dropped from the spec is marked removed: its idle
// nodes are released now, busy ones once their jobs end (reconciler), and
// its MIG is deleted when empty.
//
// node are the deployment's node settings, images resolved (stored in the
// cluster record). templates are every pool's instance template, built
// once from the spec and node, by pool id (instancetemplate.BuildPools, by
// the caller, whose validation of the event that build is): a template's
// name is a hash of its body, so a change to either input is a new
// template. The pool record keeps the name and the body, and EnsurePool
// carries them to the executor, which sends the body as it is, now or when
// the reconciler asks again.
func ClusterApplied(st *model.State, c *spec.Cluster, node nodeconfig.Settings, templates map[string]instancetemplate.Template, effective []byte, now time.Time, pol Policy) []Action {
	b := newBuilder(st, now, pol)
	b.cluster = c.ID
	sha := spec.EffectiveSHA256(effective)
	rec := model.Cluster{ID: c.ID, Spec: effective, SpecSHA256: sha, Project: c.Project, Node: node, SpecVersion: 1, CreatedAt: now, UpdatedAt: now}
	if st.Cluster != nil {
		rec.CreatedAt = st.Cluster.CreatedAt // an incarnation keeps its first time (zero for an older record)
		rec.SpecVersion = st.Cluster.SpecVersion
		if st.Cluster.SpecSHA256 != sha {
			rec.SpecVersion++
		}
	}
	if st.Cluster == nil || st.Cluster.SpecSHA256 != sha || !reflect.DeepEqual(st.Cluster.Node, node) {
		b.st.Cluster = &rec
		b.add(PutCluster{Cluster: rec, Reason: fmt.Sprintf("cluster spec applied (version %d)", rec.SpecVersion)})
	}
	inSpec := map[string]bool{}
	for _, sp := range c.FlexPools() {
		inSpec[sp.ID] = true
		t, ok := templates[sp.ID]
		if !ok || t.Name == "" {
			// The caller built every pool's template, or refused the
			// event; a pool without one is left as it is, loudly.
			b.add(Alert{Pool: sp.ID, Reason: fmt.Sprintf("pool %s keeps its previous template: no instance template was built for it", sp.ID)})
			continue
		}
		tmpl := t.Name
		// Start from the stored record: backoff, breaker, capacity waits
		// and conditions survive a spec change.
		var pool model.Pool
		old, existed := st.Pools[sp.ID]
		if existed {
			pool = *old
			pool.CapacityWaits = append([]int64(nil), old.CapacityWaits...)
		}
		pool.ID, pool.Zone, pool.MIG, pool.Template, pool.TemplateBody = sp.ID, sp.Zone, naming.MIG(c.ID, sp.ID), tmpl, t.Body()
		pool.MinNodes, pool.MaxNodes = sp.MinNodeCount, sp.MaxNodeCount
		pool.MaxRunDuration, pool.RunDuration = sp.FlexStartMaxDuration, sp.ComputeRunDuration()
		pool.UseJobDuration = sp.Ext.UseJobDuration
		pool.ProvisioningModel, pool.MachineType = string(sp.ProvisioningModel), sp.MachineSpec.MachineType
		pool.Zones = slices.Clone(sp.Ext.Zones)
		if sp.MultiZone() {
			// Kept once set (model.Pool.Region): regional MIGs made
			// while the pool was multi-zone stay visible after.
			pool.Region = model.RegionOfZone(sp.Zone)
		}
		pool.WorkloadPolicy, pool.PlacementDistance = placementOf(c.ID, sp)
		if pool.WorkloadPolicyRefused != pool.WorkloadPolicy {
			// compact_placement changed: the new policy is tried.
			pool.WorkloadPolicyRefused, pool.WorkloadPolicyError = "", ""
		}
		pool.Removed = false
		if existed {
			pool.Ready = old.Ready && old.Template == tmpl && old.MIG == pool.MIG && old.Zone == pool.Zone
		}
		if !existed || !reflect.DeepEqual(*old, pool) {
			pool.UpdatedAt = now
			p := pool
			b.st.Pools[sp.ID] = &p
			b.add(PutPool{Pool: pool, Reason: fmt.Sprintf("pool %s: min_node_count %d, max_node_count %d, max run duration %s", sp.ID, sp.MinNodeCount, sp.MaxNodeCount, sp.FlexStartMaxDuration)})
		}
		p := b.st.Pools[sp.ID]
		if !p.Ready {
			b.ensurePool(p, "cluster applied: template and MIG must exist before capacity is requested")
		}
		b.ensureStatic(p, "cluster created or resized")
		b.releaseSurplus(p)
	}
	for _, p := range b.st.SortedPools() {
		if inSpec[p.ID] || p.Removed {
			continue
		}
		pool := *p
		pool.Removed, pool.MinNodes, pool.MaxNodes, pool.UpdatedAt = true, 0, 0, now
		b.st.Pools[pool.ID] = &pool
		b.add(PutPool{Pool: pool, Reason: fmt.Sprintf("pool %s left the cluster spec: its idle nodes are released, busy ones when their jobs end, then its MIG is deleted", p.ID)})
		b.add(Alert{Pool: p.ID, Reason: fmt.Sprintf("pool %s was removed from the cluster spec", p.ID)})
		b.releaseSurplus(b.st.Pools[pool.ID])
	}
	b.syncBeyondMax()
	return b.out
}

// releaseSurplus releases nodes that are no longer needed, when no active
// job uses them: static nodes beyond min_node_count (the highest indexes
// become dynamic) and any node at or beyond max_node_count.
func (b *builder) releaseSurplus(pool *model.Pool) {
	if cur, ok := b.st.Pools[pool.ID]; ok {
		pool = cur
	}
	kept := 0
	for _, n := range b.poolNodes(pool.ID) {
		node := *b.st.Nodes[n.Name] // as an earlier release in this loop left it
		if node.Kind == model.NodeStatic && node.Successor == "" {
			if kept < pool.MinNodes && node.Index < pool.MaxNodes {
				kept++
				continue
			}
			node.Kind = model.NodeDynamic
			if !node.Phase.HasVM() {
				b.putNode(node, "node is now dynamic (min_node_count lowered)")
				continue
			}
		} else if node.Index < pool.MaxNodes || !node.Phase.HasVM() {
			continue
		}
		if node.Phase == model.PhaseDeleting {
			continue
		}
		beyond := node.Index >= pool.MaxNodes
		if beyond {
			// Beyond max_node_count only a job running there keeps the
			// node (beyondMax).
			if j, busy := b.runningJobOn(node); busy {
				b.putNodeIfChanged(node, fmt.Sprintf("node beyond max_node_count %d kept while job %s runs on it", pool.MaxNodes, j))
				continue
			}
			b.releaseBeyondMax(pool, node)
			continue
		}
		if j, busy := b.activeJobOn(node); busy {
			b.putNodeIfChanged(node, fmt.Sprintf("surplus node kept while job %s uses it", j))
			continue
		}
		b.releaseNode(pool, node, fmt.Sprintf("surplus node released: pool %s is now min_node_count %d, max_node_count %d", pool.ID, pool.MinNodes, pool.MaxNodes))
	}
}

func (b *builder) activeJobOn(n model.Node) (string, bool) {
	for _, j := range b.st.SortedJobs() {
		if j.State.Active() && (j.ID == n.JobID || slices.Contains(j.Nodes, n.Name)) {
			return j.ID, true
		}
	}
	return "", false
}
