package slurm

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// Errors of node-name validation. Test with errors.Is.
var (
	// ErrNodeName marks a string that is not a valid flexslurm Slurm node
	// name at all.
	ErrNodeName = errors.New("invalid node name")
	// ErrForeignNode marks a valid node name that does not belong to the
	// cluster (another cluster, an unknown or non-Flex-Start pool, or an
	// index at or above the pool's max_node_count).
	ErrForeignNode = errors.New("not a node of this cluster")
)

// nodeNameRE is the intersection of what Slurm accepts as a NodeName and a
// hostlist element (no white space, ',', '[', ']', '=', ':' or '#') and what
// Compute Engine accepts as a VM name prefix (RFC 1035 label, at most 63
// characters): lowercase letters, digits and inner hyphens.
var nodeNameRE = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidNodeName reports whether name is a node name flexslurm can manage:
// an RFC 1035 label (lowercase letters, digits, inner hyphens, 1–63
// characters) of the form "<cluster>-<pool>-<index>" with a canonical
// decimal index (shared/naming).
func ValidNodeName(name string) bool {
	if !nodeNameRE.MatchString(name) {
		return false
	}
	_, _, _, ok := naming.ParseNodeName(name)
	return ok
}

// Topology is the set of Slurm nodes and partitions of one cluster that
// flexslurm manages: the nodes "<cluster>-<pool>-<index>" of every
// Flex-Start pool (login pool excluded), index 0 … max_node_count-1, the
// first min_node_count of them static. It is derived from the cluster spec
// (TopologyOf), or from the cluster id alone (ClusterTopology) where no spec
// is at hand, in which case only the cluster prefix is checked.
type Topology struct {
	// Cluster is the cluster id, the first segment of every node name.
	Cluster string
	// Pools lists the Flex-Start pools in spec order; nil for a topology
	// without a spec.
	Pools []TopologyPool
	// FromSpec is true when Pools comes from a spec and names are checked
	// against it.
	FromSpec bool
}

// TopologyPool is one Flex-Start pool as Slurm sees it.
type TopologyPool struct {
	// ID is the pool id, the middle segment of its node names.
	ID string
	// Nodes is max_node_count: indexes 0 … Nodes-1 exist in Slurm.
	Nodes int
	// Static is min_node_count: indexes 0 … Static-1 are static nodes,
	// never powered down by Slurm (SuspendExcNodes).
	Static int
	// Partitions names the Slurm partitions that hold the pool's nodes, in
	// spec order: the spec partitions listing the pool, or the pool id when
	// none does.
	Partitions []string
}

// TopologyOf derives the topology of a cluster spec.
func TopologyOf(c *spec.Cluster) *Topology {
	t := &Topology{Cluster: c.ID, FromSpec: true}
	for _, p := range c.FlexPools() {
		parts := c.PartitionsForPool(p.ID)
		if len(parts) == 0 {
			parts = []string{p.ID}
		}
		t.Pools = append(t.Pools, TopologyPool{ID: p.ID, Nodes: p.MaxNodeCount, Static: p.MinNodeCount, Partitions: parts})
	}
	return t
}

// ClusterTopology is the topology of a cluster known only by its id: every
// valid node name of that cluster is accepted.
func ClusterTopology(cluster string) *Topology { return &Topology{Cluster: cluster} }

// Pool returns the pool with the given id.
func (t *Topology) Pool(id string) (TopologyPool, bool) {
	for _, p := range t.Pools {
		if p.ID == id {
			return p, true
		}
	}
	return TopologyPool{}, false
}

// Check validates name as a node of the cluster and returns its pool and
// index. Errors wrap ErrNodeName or ErrForeignNode.
func (t *Topology) Check(name string) (pool string, index int, err error) {
	if !nodeNameRE.MatchString(name) {
		return "", 0, fmt.Errorf("%w: %q (want lowercase letters, digits and inner hyphens, at most 63 characters)", ErrNodeName, name)
	}
	cluster, pool, index, ok := naming.ParseNodeName(name)
	if !ok {
		return "", 0, fmt.Errorf("%w: %q is not <cluster>-<pool>-<index>", ErrNodeName, name)
	}
	if cluster != t.Cluster {
		return "", 0, fmt.Errorf("%w: %s belongs to cluster %q, not %q", ErrForeignNode, name, cluster, t.Cluster)
	}
	if !t.FromSpec {
		return pool, index, nil
	}
	p, ok := t.Pool(pool)
	if !ok {
		return "", 0, fmt.Errorf("%w: %s names pool %q, which is not a Flex-Start pool of cluster %s", ErrForeignNode, name, pool, t.Cluster)
	}
	if index >= p.Nodes {
		return "", 0, fmt.Errorf("%w: %s is beyond pool %s's max_node_count %d", ErrForeignNode, name, pool, p.Nodes)
	}
	return pool, index, nil
}

// Split partitions names into the cluster's own nodes and the others, each
// in input order.
func (t *Topology) Split(names []string) (ours, others []string) {
	for _, n := range names {
		if _, _, err := t.Check(n); err == nil {
			ours = append(ours, n)
		} else {
			others = append(others, n)
		}
	}
	return ours, others
}

// IsStatic reports whether name is a static node (index below the pool's
// min_node_count). It is false for names Check rejects and for a topology
// without a spec.
func (t *Topology) IsStatic(name string) bool {
	pool, index, err := t.Check(name)
	if err != nil {
		return false
	}
	p, ok := t.Pool(pool)
	return ok && index < p.Static
}

// PartitionOf returns the first partition holding node name, or "" when
// unknown.
func (t *Topology) PartitionOf(name string) string {
	pool, _, err := t.Check(name)
	if err != nil {
		return ""
	}
	if p, ok := t.Pool(pool); ok && len(p.Partitions) > 0 {
		return p.Partitions[0]
	}
	return ""
}

// Partitions returns every partition holding the cluster's nodes, in spec
// order, without duplicates.
func (t *Topology) Partitions() []string {
	var out []string
	for _, p := range t.Pools {
		for _, part := range p.Partitions {
			if !slices.Contains(out, part) {
				out = append(out, part)
			}
		}
	}
	return out
}

// OwnsPartition reports whether partition holds nodes of the cluster. A
// topology without a spec owns no partition.
func (t *Topology) OwnsPartition(partition string) bool {
	return slices.Contains(t.Partitions(), partition)
}

// PoolNodes returns the node names of pool id in index order.
func (t *Topology) PoolNodes(id string) []string {
	p, ok := t.Pool(id)
	if !ok {
		return nil
	}
	out := make([]string, p.Nodes)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%s-%d", t.Cluster, p.ID, i)
	}
	return out
}

// NodeNames returns every node of the cluster, pool by pool in spec order.
func (t *Topology) NodeNames() []string {
	var out []string
	for _, p := range t.Pools {
		out = append(out, t.PoolNodes(p.ID)...)
	}
	return out
}
