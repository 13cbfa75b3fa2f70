package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
)

// Snapshot reads every node (sinfo --json) and job (squeue --json) and
// keeps the cluster's: its Flex-Start nodes, and the jobs that have not
// ended and either run in one of its partitions or hold one of its nodes
// (each job's nodes reduced to the cluster's). Job ids are Slurm's unique
// numeric ids, as the hooks report them.
func (a *Agent) Snapshot(ctx context.Context) (*event.SlurmSnapshot, error) {
	nodes, err := a.Slurm.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	jobs, err := a.Slurm.Jobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return BuildSnapshot(a.Cluster, a.Topology, nodes, jobs, a.now()), nil
}

// BuildSnapshot filters Slurm's nodes and jobs down to the cluster's (see
// Agent.Snapshot) and builds the slurm.snapshot payload taken at takenAt.
func BuildSnapshot(cluster string, topo *slurm.Topology, nodes []slurm.NodeInfo, jobs []slurm.JobInfo, takenAt time.Time) *event.SlurmSnapshot {
	s := &event.SlurmSnapshot{
		Header:  event.Header{Version: event.SchemaVersion, Type: event.TypeSlurmSnapshot, Cluster: cluster},
		TakenAt: takenAt.UTC(),
		Nodes:   []event.SnapshotNode{},
		Jobs:    []event.SnapshotJob{},
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if _, _, err := topo.Check(n.Name); err != nil || seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		s.Nodes = append(s.Nodes, event.SnapshotNode{Name: n.Name, Node: n.Node})
	}
	for _, j := range jobs {
		if j.Finished() || j.State == "" {
			continue
		}
		ours, _ := topo.Split(j.Nodes)
		inPartition := false
		for _, p := range strings.Split(j.Partition, ",") {
			inPartition = inPartition || topo.OwnsPartition(p)
		}
		if len(ours) == 0 && !inPartition {
			continue
		}
		s.Jobs = append(s.Jobs, event.SnapshotJob{
			ID: strconv.FormatInt(j.JobID, 10), State: j.State, Reason: j.Reason, Partition: j.Partition,
			Nodes: ours, NodeCount: j.NodeCount, Restarts: j.Restarts,
			TimeLimitSeconds: int64(j.TimeLimit / time.Second),
		})
	}
	return s
}
