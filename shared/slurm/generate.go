package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/inputs"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// Defaults of GenOptions.
const (
	// DefaultDefaultTime is each partition's DefaultTime, the time limit of
	// a job submitted without --time, when GenOptions leaves it zero
	// (capped at the partition's MaxTime).
	DefaultDefaultTime = time.Hour
	// DefaultGPUDir holds the NVIDIA device files a node's GPUs appear as
	// (/dev/nvidia0 …), which gres.conf names with File=.
	DefaultGPUDir = "/dev"
	// memoryReservePercent of a machine type's memory is left out of a
	// node's RealMemory: a guest reports less memory than its machine
	// type's nominal size (the kernel and firmware keep some), and slurmd
	// drains a node whose memory is below RealMemory ("Low RealMemory").
	memoryReservePercent = 5
)

// GenOptions tunes Generate.
type GenOptions struct {
	// HookDir is the directory of the controller-side hook links
	// (ResumeProgram, SuspendProgram, ResumeFailProgram, PrologSlurmctld,
	// EpilogSlurmctld). Required, absolute.
	HookDir string
	// NodeHookDir is the directory of the node-side hook links (Prolog,
	// Epilog, HealthCheckProgram) that each node's bootstrap fills. Empty:
	// HookDir.
	NodeHookDir string
	// ResumeTimeout, SuspendTime and SuspendTimeout: DefaultResumeTimeout,
	// DefaultSuspendTime and DefaultSuspendTimeout when zero. Whole
	// seconds; ResumeTimeout at most 65535 s. A SuspendTime turns Slurm's
	// power saving on (its default, -1, leaves it off).
	ResumeTimeout, SuspendTime, SuspendTimeout time.Duration
	// Configless adds enable_configless to SlurmctldParameters: the nodes'
	// slurmd --conf-server fetch slurm.conf and gres.conf from slurmctld.
	Configless bool
	// DefaultTime is each partition's DefaultTime (whole minutes):
	// DefaultDefaultTime when zero, and never above the partition's
	// MaxTime.
	DefaultTime time.Duration
	// HealthCheckInterval: DefaultHealthCheckInterval when zero; negative
	// leaves HealthCheckProgram out.
	HealthCheckInterval time.Duration
	// SuspendStaticOnly lists only the static nodes in SuspendExcNodes
	// (ConfigOptions.SuspendStaticOnly).
	SuspendStaticOnly bool
	// GPUDir is the directory of each node's GPU device files nvidia0 …
	// nvidiaN-1, named by gres.conf: DefaultGPUDir when empty.
	GPUDir string
	// CPUs and RealMemoryMB, when set, replace every node's CPUs and
	// RealMemory, which are otherwise the machine type's vCPUs and memory
	// (spec.LookupMachine).
	CPUs, RealMemoryMB int
	// NodeAttrs, when set, writes one NodeName line per node and appends
	// what it returns to it (the local cluster's addresses and ports);
	// otherwise each pool's nodes share one NodeName line.
	NodeAttrs func(n GenNode) string
}

// GenNode is one node of a generated configuration.
type GenNode struct {
	Name   string
	Pool   string
	Index  int  // within the pool
	Static bool // index < min_node_count
	Seq    int  // across every pool, in spec order
}

// GenPool is what the generated configuration says of one Flex-Start pool.
type GenPool struct {
	ID           string
	Nodes        []string // index order
	Static       int      // min_node_count
	CPUs         int
	RealMemoryMB int
	GPUs         int
	// MaxRun is the pool's max run duration (flex_start_max_duration).
	MaxRun time.Duration
}

// GenPartition is one generated partition.
type GenPartition struct {
	Name    string
	Nodes   []string
	Default bool
	// MaxTime is the shortest max run duration of the partition's pools,
	// down to whole minutes: no job outlives the VMs it runs on.
	MaxTime time.Duration
	// DefaultTime is GenOptions.DefaultTime capped at MaxTime.
	DefaultTime time.Duration
	// MaxNodes is the largest max_node_count of the partition's pools:
	// flexslurm provisions a job's nodes in one pool.
	MaxNodes int
}

// Generated is the Slurm configuration of a cluster spec's Flex-Start
// pools: a slurm.conf fragment and gres.conf, and what they say.
type Generated struct {
	// SlurmConf is the slurm.conf fragment: power saving, hooks, NodeName
	// and PartitionName lines.
	SlurmConf []byte
	// GresConf is gres.conf: each GPU node's device files. Empty when no
	// pool has GPUs.
	GresConf []byte
	// NodeLines and PartitionLines are the NodeName and PartitionName lines
	// of SlurmConf.
	NodeLines, PartitionLines []string
	Nodes                     []GenNode
	Pools                     []GenPool
	Partitions                []GenPartition
}

// HookLines are the slurm.conf lines that run flexslurm's hooks, in
// HookNames order: the controller-side hooks in ctldDir, the node-side
// ones (Prolog, Epilog, HealthCheckProgram) in nodeDir, HealthCheckProgram
// left out when withHealth is false. `flexslurm install controller` and
// Generate print them from here.
func HookLines(ctldDir, nodeDir string, withHealth bool) []string {
	var out []string
	for _, h := range HookNames {
		if h == HookHealth && !withHealth {
			continue
		}
		dir := ctldDir
		if slices.Contains(nodeHooks, h) {
			dir = nodeDir
		}
		out = append(out, hookParams[h]+"="+filepath.Join(dir, HookLinkPrefix+h))
	}
	return out
}

// Generate renders the Slurm configuration of cluster c's Flex-Start pools
// (login pool excluded). It is pure: the same spec and options give the
// same bytes. Errors name the spec field or option that cannot be served.
func Generate(c *spec.Cluster, o GenOptions) (*Generated, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkConfNames(c); err != nil {
		return nil, err
	}
	topo := TopologyOf(c)
	if len(topo.Pools) == 0 {
		return nil, fmt.Errorf("cluster %s has no Flex-Start node pool for Slurm to manage", c.ID)
	}
	g := &Generated{}
	var errs []error
	for _, tp := range topo.Pools {
		p, _ := c.Pool(tp.ID)
		gp := GenPool{ID: p.ID, Nodes: topo.PoolNodes(p.ID), Static: p.MinNodeCount, MaxRun: p.FlexStartMaxDuration}
		m, ok := spec.LookupMachine(p.MachineSpec.MachineType)
		switch {
		case ok:
			gp.CPUs = m.VCPUs
			gp.RealMemoryMB = m.MemoryMB * (100 - memoryReservePercent) / 100
			gp.GPUs = m.GPUs
		case o.CPUs == 0 || o.RealMemoryMB == 0:
			errs = append(errs, fmt.Errorf("node_pools[%s].machine_spec.machine_type %q: its vCPUs and memory are unknown (not in flexslurm's machine catalog)",
				p.ID, p.MachineSpec.MachineType))
		}
		if p.MachineSpec.AcceleratorCount > 0 {
			gp.GPUs = p.MachineSpec.AcceleratorCount
		}
		if o.CPUs > 0 {
			gp.CPUs = o.CPUs
		}
		if o.RealMemoryMB > 0 {
			gp.RealMemoryMB = o.RealMemoryMB
		}
		if gp.MaxRun > 0 && gp.MaxRun < time.Minute {
			errs = append(errs, fmt.Errorf("node_pools[%s].flex_start_max_duration %v is below one minute, Slurm's shortest partition MaxTime", p.ID, gp.MaxRun))
		}
		g.Pools = append(g.Pools, gp)
		for i, name := range gp.Nodes {
			g.Nodes = append(g.Nodes, GenNode{Name: name, Pool: p.ID, Index: i, Static: i < p.MinNodeCount, Seq: len(g.Nodes)})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	def := c.Slurm.DefaultPartitionID
	parts := topo.Partitions()
	if def == "" || !topo.OwnsPartition(def) {
		def = parts[0]
	}
	for _, name := range parts {
		gp := GenPartition{Name: name, Default: name == def}
		for _, tp := range topo.Pools {
			if !slices.Contains(tp.Partitions, name) {
				continue
			}
			pool := g.pool(tp.ID)
			gp.Nodes = append(gp.Nodes, pool.Nodes...)
			if mt := pool.MaxRun.Truncate(time.Minute); mt > 0 && (gp.MaxTime == 0 || mt < gp.MaxTime) {
				gp.MaxTime = mt
			}
			gp.MaxNodes = max(gp.MaxNodes, len(pool.Nodes))
		}
		gp.DefaultTime = o.DefaultTime
		if gp.MaxTime > 0 && gp.DefaultTime > gp.MaxTime {
			gp.DefaultTime = gp.MaxTime
		}
		g.Partitions = append(g.Partitions, gp)
	}

	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# flexslurm: Flex-Start node pools of cluster %s (`flexslurm slurm-conf`).", c.ID)
	w("# Power saving: Flex-Start nodes are CLOUD nodes, powered up by ResumeProgram.")
	w("PrivateData=cloud")
	if o.Configless {
		w("SlurmctldParameters=idle_on_node_suspend,enable_configless")
	} else {
		w("SlurmctldParameters=idle_on_node_suspend")
	}
	w("ResumeTimeout=%d", int(o.ResumeTimeout/time.Second))
	w("SuspendTime=%d", int(o.SuspendTime/time.Second))
	w("SuspendTimeout=%d", int(o.SuspendTimeout/time.Second))
	w("ResumeRate=0")
	w("SuspendRate=0")
	w("TreeWidth=65533")
	w("# A job that no partition can ever run (too many nodes, GPUs or minutes) is refused at submission.")
	w("EnforcePartLimits=ALL")
	if len(g.GPUNodes()) > 0 {
		w("GresTypes=gpu")
	}
	var excluded []string
	for _, n := range g.Nodes {
		if n.Static || !o.SuspendStaticOnly {
			excluded = append(excluded, n.Name)
		}
	}
	if len(excluded) > 0 {
		if o.SuspendStaticOnly {
			w("# Static nodes (index < min_node_count) are never powered down by Slurm.")
		} else {
			w("# flexslurm, not SuspendTime, powers flex-start nodes down (it releases")
			w("# idle dynamic nodes itself), so Slurm never suspends them on its own.")
		}
		w("SuspendExcNodes=%s", CompressHostlist(excluded))
	}
	w("# Hooks: links to the flexslurm binary, which dispatches on its name.")
	for _, l := range HookLines(o.HookDir, o.NodeHookDir, o.HealthCheckInterval >= 0) {
		w("%s", l)
	}
	if o.HealthCheckInterval >= 0 {
		w("HealthCheckInterval=%d", int(o.HealthCheckInterval/time.Second))
		w("HealthCheckNodeState=ANY")
	}
	for _, pool := range g.Pools {
		attrs := fmt.Sprintf("CPUs=%d RealMemory=%d", pool.CPUs, pool.RealMemoryMB)
		if pool.GPUs > 0 {
			attrs += fmt.Sprintf(" Gres=gpu:%d", pool.GPUs)
		}
		attrs += " State=CLOUD Feature=" + pool.ID + ",cloud"
		if o.NodeAttrs == nil {
			g.NodeLines = append(g.NodeLines, fmt.Sprintf("NodeName=%s %s", CompressHostlist(pool.Nodes), attrs))
			continue
		}
		for _, n := range g.Nodes {
			if n.Pool == pool.ID {
				extra := o.NodeAttrs(n)
				if inputs.HasControl(extra) {
					return nil, fmt.Errorf("the attributes of node %s, %q, hold a control character, which would end the NodeName line", n.Name, extra)
				}
				if extra != "" {
					extra = " " + extra
				}
				g.NodeLines = append(g.NodeLines, fmt.Sprintf("NodeName=%s%s %s", n.Name, extra, attrs))
			}
		}
	}
	for _, p := range g.Partitions {
		dflt := "NO"
		if p.Default {
			dflt = "YES"
		}
		g.PartitionLines = append(g.PartitionLines, fmt.Sprintf("PartitionName=%s Nodes=%s Default=%s MaxTime=%s DefaultTime=%s MaxNodes=%d State=UP",
			p.Name, CompressHostlist(p.Nodes), dflt, slurmMinutes(p.MaxTime), slurmMinutes(p.DefaultTime), p.MaxNodes))
	}
	for _, l := range append(slices.Clone(g.NodeLines), g.PartitionLines...) {
		w("%s", l)
	}
	g.SlurmConf = b.Bytes()

	if gpus := g.GPUNodes(); len(gpus) > 0 {
		var gb bytes.Buffer
		fmt.Fprintf(&gb, "# flexslurm: GPUs of the Flex-Start node pools of cluster %s (`flexslurm slurm-conf`).\n", c.ID)
		fmt.Fprintf(&gb, "# Each GPU is a device file nvidiaN of %s; Slurm gives a job the ones it allocates.\n", o.GPUDir)
		for _, pool := range g.Pools {
			if pool.GPUs == 0 {
				continue
			}
			files := filepath.Join(o.GPUDir, "nvidia0")
			if pool.GPUs > 1 {
				files = filepath.Join(o.GPUDir, fmt.Sprintf("nvidia[0-%d]", pool.GPUs-1))
			}
			fmt.Fprintf(&gb, "NodeName=%s Name=gpu File=%s\n", CompressHostlist(pool.Nodes), files)
		}
		g.GresConf = gb.Bytes()
	}
	return g, nil
}

// checkConfNames refuses a spec whose cluster id, Flex-Start pool ids or
// partition names are not the strict names shared/spec validates: each is
// written into slurm.conf and gres.conf as is (NodeName=, Feature=,
// PartitionName=), where a newline would start a line of its own and a
// blank, "=", "," or "#" a parameter, a feature or a comment. Parse
// refuses such a spec already; this holds for a Cluster built any other
// way.
func checkConfNames(c *spec.Cluster) error {
	var errs []error
	if !inputs.ClusterID.Match(c.ID) {
		errs = append(errs, fmt.Errorf("cluster id %q: want %s", c.ID, inputs.ClusterID.Allowed))
	}
	for _, p := range c.FlexPools() {
		if !inputs.PoolID.Match(p.ID) {
			errs = append(errs, fmt.Errorf("node_pools[].id %q: want %s", p.ID, inputs.PoolID.Allowed))
		}
		for _, part := range c.PartitionsForPool(p.ID) {
			if !inputs.PartitionID.Match(part) {
				errs = append(errs, fmt.Errorf("orchestrator_spec.slurm_spec.partitions[].id %q: want %s", part, inputs.PartitionID.Allowed))
			}
		}
	}
	if d := c.Slurm.DefaultPartitionID; d != "" && !inputs.PartitionID.Match(d) {
		errs = append(errs, fmt.Errorf("orchestrator_spec.slurm_spec.default_partition_id %q: want %s", d, inputs.PartitionID.Allowed))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("refusing to write slurm.conf: %w", err)
	}
	return nil
}

// confWord reports whether s can be a slurm.conf value as written: no
// blank (which ends it), control character (which ends the line) or '#'
// (which starts a comment).
func confWord(s string) bool {
	return !inputs.HasControl(s) && !strings.ContainsAny(s, " #")
}

func (g *Generated) pool(id string) GenPool {
	for _, p := range g.Pools {
		if p.ID == id {
			return p
		}
	}
	return GenPool{}
}

// GPUNodes returns the nodes whose pool has GPUs, in spec order.
func (g *Generated) GPUNodes() []string {
	var out []string
	for _, p := range g.Pools {
		if p.GPUs > 0 {
			out = append(out, p.Nodes...)
		}
	}
	return out
}

// slurmMinutes renders a time limit as Slurm reads it: whole minutes as
// "days-hours:minutes:00", or INFINITE for zero.
func slurmMinutes(d time.Duration) string {
	if d <= 0 {
		return "INFINITE"
	}
	m := int(d / time.Minute)
	if m >= 24*60 {
		return fmt.Sprintf("%d-%02d:%02d:00", m/(24*60), m/60%24, m%60)
	}
	return fmt.Sprintf("%02d:%02d:00", m/60, m%60)
}

func (o GenOptions) withDefaults() (GenOptions, error) {
	var errs []error
	// The hook directories are written into slurm.conf (Prolog=DIR/…):
	// no blank, control character or comment may end the value.
	if o.HookDir == "" || !filepath.IsAbs(o.HookDir) || !confWord(o.HookDir) {
		errs = append(errs, fmt.Errorf("the hook directory must be an absolute path without blanks, control characters or '#', got %q", o.HookDir))
	}
	if o.NodeHookDir == "" {
		o.NodeHookDir = o.HookDir
	} else if !filepath.IsAbs(o.NodeHookDir) || !confWord(o.NodeHookDir) {
		errs = append(errs, fmt.Errorf("the node hook directory must be an absolute path without blanks, control characters or '#', got %q", o.NodeHookDir))
	}
	if o.GPUDir == "" {
		o.GPUDir = DefaultGPUDir
	} else if !filepath.IsAbs(o.GPUDir) || strings.ContainsAny(o.GPUDir, " \t\n,[]") || inputs.HasControl(o.GPUDir) {
		errs = append(errs, fmt.Errorf("the GPU device directory must be an absolute path without blanks, commas or brackets, got %q", o.GPUDir))
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"ResumeTimeout", &o.ResumeTimeout, DefaultResumeTimeout}, {"SuspendTime", &o.SuspendTime, DefaultSuspendTime},
		{"SuspendTimeout", &o.SuspendTimeout, DefaultSuspendTimeout}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < time.Second || *d.v%time.Second != 0 || *d.v > 65535*time.Second {
			errs = append(errs, fmt.Errorf("%s %v is not a whole number of seconds between 1 s and Slurm's 65535 s", d.name, *d.v))
		}
	}
	if o.DefaultTime == 0 {
		o.DefaultTime = DefaultDefaultTime
	}
	if o.DefaultTime < time.Minute || o.DefaultTime%time.Minute != 0 {
		errs = append(errs, fmt.Errorf("DefaultTime %v is not a whole number of minutes ≥ 1", o.DefaultTime))
	}
	if o.HealthCheckInterval == 0 {
		o.HealthCheckInterval = DefaultHealthCheckInterval
	}
	if o.HealthCheckInterval > 0 && o.HealthCheckInterval%time.Second != 0 {
		errs = append(errs, fmt.Errorf("HealthCheckInterval %v is not a whole number of seconds", o.HealthCheckInterval))
	}
	if o.CPUs < 0 || o.RealMemoryMB < 0 {
		errs = append(errs, fmt.Errorf("CPUs %d and RealMemory %d must not be negative", o.CPUs, o.RealMemoryMB))
	}
	return o, errors.Join(errs...)
}
