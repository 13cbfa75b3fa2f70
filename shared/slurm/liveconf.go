package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// LiveConf returns the configuration slurmctld runs with, as a ConfView:
// every node with its GPUs (`scontrol show node -o`, Gres=) and every
// partition with its nodes, MaxTime and MaxNodes (`scontrol show
// partition -o`). Unlike a copy of slurm.conf, it is what Slurm serves
// now: a slurm.conf edited without a restart or `scontrol reconfigure`
// does not count.
func (r *Runner) LiveConf(ctx context.Context) (ConfView, error) {
	nodes, err := r.Scontrol(ctx, "-o", "show", "node")
	if err != nil {
		return ConfView{}, fmt.Errorf("reading Slurm's nodes: %w", err)
	}
	parts, err := r.Scontrol(ctx, "-o", "show", "partition")
	if err != nil {
		return ConfView{}, fmt.Errorf("reading Slurm's partitions: %w", err)
	}
	return ParseLiveConf(nodes, parts)
}

// ParseLiveConf builds a ConfView from `scontrol show node -o` and
// `scontrol show partition -o` output (one record per line; Gres=(null)
// for a node without GRES, Nodes=(null) for a partition without nodes,
// UNLIMITED for MaxTime and MaxNodes without limit). Errors name the
// record.
func ParseLiveConf(nodes, partitions []byte) (ConfView, error) {
	v := ConfView{Nodes: map[string]ConfNode{}, Partitions: map[string]ConfPartition{}}
	nrecs, err := showRecords(nodes, "node", "NodeName")
	if err != nil {
		return v, err
	}
	for _, kv := range nrecs {
		name := kv["NodeName"]
		gpus, err := gresGPUs(nullable(kv["Gres"]))
		if err != nil {
			return v, fmt.Errorf("%w: node %s: %w", ErrParse, name, err)
		}
		v.Nodes[name] = ConfNode{GPUs: gpus}
	}
	precs, err := showRecords(partitions, "partition", "PartitionName")
	if err != nil {
		return v, err
	}
	for _, kv := range precs {
		name := kv["PartitionName"]
		bad := func(err error) error { return fmt.Errorf("%w: partition %s: %w", ErrParse, name, err) }
		p := ConfPartition{}
		if nl := nullable(kv["Nodes"]); nl != "" {
			names, err := ExpandHostlist(nl)
			if err != nil {
				return v, bad(err)
			}
			p.Nodes = names
		}
		d, err := ParseDuration(kv["MaxTime"])
		if err != nil {
			return v, bad(fmt.Errorf("MaxTime: %w", err))
		}
		p.MaxTime = d
		if mn := kv["MaxNodes"]; mn != "" && !strings.EqualFold(mn, "UNLIMITED") && !strings.EqualFold(mn, "INFINITE") {
			n, err := strconv.Atoi(mn)
			if err != nil || n < 0 {
				return v, bad(fmt.Errorf("MaxNodes %q is not a count", mn))
			}
			p.MaxNodes = n
		}
		v.Partitions[name] = p
	}
	return v, nil
}
