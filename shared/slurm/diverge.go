package slurm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ConfView is what a slurm.conf says of nodes and partitions: its NodeName
// and PartitionName lines (NodeName=DEFAULT and PartitionName=DEFAULT
// lines give the attributes of the lines after them, as in Slurm).
type ConfView struct {
	Nodes      map[string]ConfNode
	Partitions map[string]ConfPartition
}

// ConfNode is one node of a ConfView.
type ConfNode struct {
	// GPUs is the count of its gpu GRES (Gres=gpu:N or gpu:TYPE:N); 0 when
	// it has none.
	GPUs int
}

// ConfPartition is one partition of a ConfView.
type ConfPartition struct {
	Nodes []string
	// MaxTime is 0 for INFINITE (Slurm's default).
	MaxTime time.Duration
	// MaxNodes is 0 for UNLIMITED (Slurm's default).
	MaxNodes int
}

// ParseConfView reads the NodeName and PartitionName lines of slurm.conf
// text (Include directives are not followed). Errors name the line.
func ParseConfView(conf []byte) (ConfView, error) {
	v := ConfView{Nodes: map[string]ConfNode{}, Partitions: map[string]ConfPartition{}}
	nodeDefault, partDefault := map[string]string{}, map[string]string{}
	for i, line := range strings.Split(string(conf), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		k, name, _ := strings.Cut(fields[0], "=")
		kind := strings.ToLower(k)
		if kind != "nodename" && kind != "partitionname" {
			continue
		}
		attrs := map[string]string{}
		for _, f := range fields[1:] {
			ak, av, _ := strings.Cut(f, "=")
			attrs[strings.ToLower(ak)] = av
		}
		if strings.EqualFold(name, "DEFAULT") {
			dst := nodeDefault
			if kind == "partitionname" {
				dst = partDefault
			}
			for ak, av := range attrs {
				dst[ak] = av
			}
			continue
		}
		bad := func(err error) error { return fmt.Errorf("slurm.conf line %d (%s): %w", i+1, fields[0], err) }
		if kind == "nodename" {
			names, err := ExpandHostlist(name)
			if err != nil {
				return v, bad(err)
			}
			gres, ok := attrs["gres"]
			if !ok {
				gres = nodeDefault["gres"]
			}
			gpus, err := gresGPUs(gres)
			if err != nil {
				return v, bad(err)
			}
			for _, n := range names {
				v.Nodes[n] = ConfNode{GPUs: gpus}
			}
			continue
		}
		get := func(k string) string {
			if a, ok := attrs[k]; ok {
				return a
			}
			return partDefault[k]
		}
		p := ConfPartition{}
		if nodes := get("nodes"); nodes != "" && !strings.EqualFold(nodes, "ALL") {
			names, err := ExpandHostlist(nodes)
			if err != nil {
				return v, bad(err)
			}
			p.Nodes = names
		}
		if mt := get("maxtime"); mt != "" && !strings.EqualFold(mt, "INFINITE") && !strings.EqualFold(mt, "UNLIMITED") {
			d, err := ParseDuration(mt)
			if err != nil {
				return v, bad(fmt.Errorf("MaxTime: %w", err))
			}
			p.MaxTime = d
		}
		if mn := get("maxnodes"); mn != "" && !strings.EqualFold(mn, "UNLIMITED") && !strings.EqualFold(mn, "INFINITE") {
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

// gresGPUs returns the gpu count of a Gres= value ("gpu:8",
// "gpu:h200:8,nic:1"; a bare "gpu" is one).
func gresGPUs(gres string) (int, error) {
	total := 0
	for _, g := range strings.Split(gres, ",") {
		if i := strings.IndexByte(g, '('); i >= 0 { // gpu:h200:8(S:0-1), as scontrol shows it
			g = g[:i]
		}
		parts := strings.Split(g, ":")
		if parts[0] != "gpu" {
			continue
		}
		if len(parts) == 1 {
			total++
			continue
		}
		last := parts[len(parts)-1]
		n, err := strconv.Atoi(last)
		if err != nil {
			if len(parts) == 2 { // gpu:TYPE
				total++
				continue
			}
			return 0, fmt.Errorf("gres %q: %q is not a count", gres, last)
		}
		total += n
	}
	return total, nil
}

// Divergence is one way Slurm's configuration cannot serve a cluster spec.
type Divergence struct {
	// Problem says what differs, naming the nodes or partition.
	Problem string
	// Fix is the slurm.conf change that serves the spec.
	Fix string
}

func (d Divergence) String() string { return d.Problem + ": " + d.Fix }

// Diverge compares what Slurm's configuration says (have) with the
// configuration g generated for the cluster spec: nodes of the spec's pools
// that Slurm lacks or has with fewer GPUs, nodes of the cluster's pools
// beyond max_node_count that Slurm still has, and partitions missing,
// missing nodes, or letting a job run longer than its pools' max run
// duration or on more nodes than a pool has. It is pure; no divergence is
// an empty result.
func Diverge(g *Generated, cluster string, have ConfView) []Divergence {
	var out []Divergence
	for _, p := range g.Pools {
		line := g.nodeLine(p.ID)
		var missing, fewer []string
		for _, n := range p.Nodes {
			hn, ok := have.Nodes[n]
			switch {
			case !ok:
				missing = append(missing, n)
			case hn.GPUs < p.GPUs:
				fewer = append(fewer, n)
			}
		}
		if len(missing) > 0 {
			out = append(out, Divergence{
				Problem: fmt.Sprintf("pool %s has max_node_count %d but Slurm has no node %s", p.ID, len(p.Nodes), CompressHostlist(missing)),
				Fix:     fmt.Sprintf("set %q, then restart slurmctld (new nodes need it)", line),
			})
		}
		if len(fewer) > 0 {
			out = append(out, Divergence{
				Problem: fmt.Sprintf("pool %s has %d GPUs per node but Slurm gives %s fewer", p.ID, p.GPUs, CompressHostlist(fewer)),
				Fix:     fmt.Sprintf("set %q and gres.conf (`flexslurm slurm-conf --gres-conf`), then restart slurmctld", line),
			})
		}
		prefix := cluster + "-" + p.ID + "-"
		var extra []string
		for n := range have.Nodes {
			if idx, ok := strings.CutPrefix(n, prefix); ok && !slices.Contains(p.Nodes, n) {
				if i, err := strconv.Atoi(idx); err == nil && i >= 0 && strconv.Itoa(i) == idx {
					extra = append(extra, n)
				}
			}
		}
		if len(extra) > 0 {
			out = append(out, Divergence{
				Problem: fmt.Sprintf("pool %s has max_node_count %d but Slurm still has node %s", p.ID, len(p.Nodes), CompressHostlist(extra)),
				Fix:     fmt.Sprintf("set %q (removing %s from NodeName and PartitionName lines), then restart slurmctld", line, CompressHostlist(extra)),
			})
		}
	}
	for i, want := range g.Partitions {
		line := g.PartitionLines[i]
		hp, ok := have.Partitions[want.Name]
		if !ok {
			out = append(out, Divergence{Problem: fmt.Sprintf("Slurm has no partition %s", want.Name),
				Fix: fmt.Sprintf("add %q, then run `scontrol reconfigure`", line)})
			continue
		}
		var missing []string
		for _, n := range want.Nodes {
			if !slices.Contains(hp.Nodes, n) {
				missing = append(missing, n)
			}
		}
		var problems []string
		if len(missing) > 0 {
			problems = append(problems, "lacks node "+CompressHostlist(missing))
		}
		if want.MaxTime > 0 && (hp.MaxTime == 0 || hp.MaxTime > want.MaxTime) {
			problems = append(problems, fmt.Sprintf("lets a job run %s, longer than its pools' max run duration (MaxTime=%s)",
				slurmMinutesOrInfinite(hp.MaxTime), slurmMinutes(want.MaxTime)))
		}
		if hp.MaxNodes == 0 || hp.MaxNodes > want.MaxNodes {
			problems = append(problems, fmt.Sprintf("accepts a job on %s nodes, more than its largest pool has (MaxNodes=%d)",
				maxNodesString(hp.MaxNodes), want.MaxNodes))
		}
		if len(problems) > 0 {
			out = append(out, Divergence{Problem: fmt.Sprintf("partition %s %s", want.Name, strings.Join(problems, "; ")),
				Fix: fmt.Sprintf("set %q, then run `scontrol reconfigure`", line)})
		}
	}
	return out
}

func slurmMinutesOrInfinite(d time.Duration) string {
	if d == 0 {
		return "without limit"
	}
	return slurmMinutes(d)
}

func maxNodesString(n int) string {
	if n == 0 {
		return "any number of"
	}
	return strconv.Itoa(n)
}

// nodeLine returns pool id's NodeName line (its first, with NodeAttrs).
func (g *Generated) nodeLine(id string) string {
	for _, p := range g.Pools {
		if p.ID != id {
			continue
		}
		for _, l := range g.NodeLines {
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "NodeName="), " ")
			if names, err := ExpandHostlist(name); err == nil && len(names) > 0 && slices.Contains(p.Nodes, names[0]) {
				return l
			}
		}
	}
	return ""
}
