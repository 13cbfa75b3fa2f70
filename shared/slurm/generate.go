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
	// OwnDefault makes the first Flex-Start partition the cluster's default
	// (Default=YES) when the spec names no default partition: for a
	// cluster whose only partitions are flexslurm's (the local cluster).
	// Otherwise only the spec's default_partition_id gets Default=YES.
	OwnDefault bool
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
	// Default=YES changes where every job without -p goes, whichever
	// partition it was meant for: it is set only on the partition the spec
	// names as default (orchestrator_spec.slurm_spec.default_partition_id),
	// or on the first one when OwnDefault says the cluster has no other.
	def := c.Slurm.DefaultPartitionID
	parts := topo.Partitions()
	if !topo.OwnsPartition(def) {
		def = ""
	}
	if def == "" && o.OwnDefault {
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
	// Power saving is set on flexslurm's partitions (PartitionName
	// SuspendTime, SuspendTimeout and ResumeTimeout, Slurm 21.08 and
	// later), not cluster-wide, so that the nodes of other partitions keep
	// the cluster's own settings.
	power := fmt.Sprintf("SuspendTime=%d SuspendTimeout=%d ResumeTimeout=%d",
		int(o.SuspendTime/time.Second), int(o.SuspendTimeout/time.Second), int(o.ResumeTimeout/time.Second))
	for _, p := range g.Partitions {
		dflt := ""
		if p.Default {
			dflt = " Default=YES"
		}
		g.PartitionLines = append(g.PartitionLines, fmt.Sprintf("PartitionName=%s Nodes=%s%s MaxTime=%s DefaultTime=%s MaxNodes=%d %s State=UP",
			p.Name, CompressHostlist(p.Nodes), dflt, slurmMinutes(p.MaxTime), slurmMinutes(p.DefaultTime), p.MaxNodes, power))
	}

	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# flexslurm: slurm.conf lines for the Flex-Start node pools of cluster %s (`flexslurm slurm-conf`).", c.ID)
	w("#")
	w("# Part 1 of 2: flexslurm's own nodes and partitions. These lines name nothing else.")
	w("# Power saving (SuspendTime, SuspendTimeout, ResumeTimeout) is set on these partitions only.")
	for _, l := range append(slices.Clone(g.NodeLines), g.PartitionLines...) {
		w("%s", l)
	}
	w("#")
	w("# Part 2 of 2: cluster-wide parameters. Each applies to every node and partition of")
	w("# the cluster: the comment above it says why flexslurm needs it and what it changes")
	w("# for the other partitions. Merge a list-valued one with the line you already have.")
	for _, cw := range clusterWide(g, o) {
		for _, c := range strings.Split(strings.Join(cw.comment, "\n"), "\n") {
			w("# %s", c)
		}
		for _, l := range cw.lines {
			w("%s", l)
		}
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

// clusterWideParam is one cluster-wide slurm.conf parameter (or group of
// them) flexslurm needs: its lines, and the comment that says why and
// what it changes for the cluster's other partitions.
type clusterWideParam struct {
	comment []string
	lines   []string
}

// clusterWide lists the cluster-wide lines of g, each with its reason and
// its effect on the partitions that are not flexslurm's.
func clusterWide(g *Generated, o GenOptions) []clusterWideParam {
	ctld := "SlurmctldParameters=idle_on_node_suspend"
	if o.Configless {
		ctld += ",enable_configless"
	}
	out := []clusterWideParam{{
		comment: []string{
			"PrivateData=cloud. Why: sinfo and squeue otherwise hide powered-down CLOUD nodes, and",
			"flexslurm's nodes are powered down until a job needs them. Other partitions: only",
			"their CLOUD nodes change (shown while powered down). Merge with your PrivateData list.",
		},
		lines: []string{"PrivateData=cloud"},
	}, {
		comment: []string{
			"SlurmctldParameters. Why: idle_on_node_suspend makes a node flexslurm powers down",
			"come back idle (its next VM can serve)." + configlessWhy(o.Configless),
			"Other partitions: a node of theirs that Slurm powers down is also marked idle (its",
			"DOWN or DRAIN state is cleared)." + configlessOthers(o.Configless),
			"Merge with your SlurmctldParameters list.",
		},
		lines: []string{ctld},
	}, {
		comment: []string{
			"ResumeRate, SuspendRate. Why: all nodes of a job are powered up (and released) at",
			"once, without Slurm's default limits of 300 and 60 nodes a minute. Other partitions:",
			"their power saving, if any, is no longer rate-limited; nodes without it are unaffected.",
		},
		lines: []string{"ResumeRate=0", "SuspendRate=0"},
	}, {
		comment: []string{
			"TreeWidth. Why: slurmctld talks to each node directly instead of relaying messages",
			"through other nodes, which may be powered down. Other partitions: no relaying for",
			"theirs either (on thousands of nodes, more connections from slurmctld).",
		},
		lines: []string{"TreeWidth=65533"},
	}, {
		comment: []string{
			"EnforcePartLimits. Why: a job that no flexslurm partition can ever run (too many",
			"nodes, GPUs or minutes) is refused at submission instead of waiting for capacity",
			"that never comes. Other partitions: a job that breaks a limit of the partition it",
			"asked for is refused at submission too, instead of pending (Slurm's default, NO).",
		},
		lines: []string{"EnforcePartLimits=ALL"},
	}}
	if len(g.GPUNodes()) > 0 {
		out = append(out, clusterWideParam{
			comment: []string{
				"GresTypes. Why: flexslurm's nodes declare their GPUs as gpu GRES. Other partitions:",
				"nothing changes. Merge with your GresTypes list.",
			},
			lines: []string{"GresTypes=gpu"},
		})
	}
	var excluded []string
	for _, n := range g.Nodes {
		if n.Static || !o.SuspendStaticOnly {
			excluded = append(excluded, n.Name)
		}
	}
	if len(excluded) > 0 {
		why := "flexslurm, not SuspendTime, powers its nodes down\n(it releases idle dynamic nodes itself)."
		if o.SuspendStaticOnly {
			why = "static nodes (index < min_node_count) are never\npowered down by Slurm."
		}
		out = append(out, clusterWideParam{
			comment: []string{
				"SuspendExcNodes. Why: " + why,
				"Other partitions: nothing changes (it names only flexslurm's nodes). Merge with your",
				"SuspendExcNodes list: a second SuspendExcNodes line replaces the first.",
			},
			lines: []string{"SuspendExcNodes=" + CompressHostlist(excluded)},
		})
	}
	hooks := HookLines(o.HookDir, o.NodeHookDir, o.HealthCheckInterval >= 0)
	var ctldHooks, nodeHookLines []string
	for i, h := range HookNames {
		if i >= len(hooks) {
			break
		}
		if slices.Contains(nodeHooks, h) {
			continue
		}
		ctldHooks = append(ctldHooks, hooks[i])
	}
	for _, l := range hooks {
		if !slices.Contains(ctldHooks, l) {
			nodeHookLines = append(nodeHookLines, l)
		}
	}
	out = append(out, clusterWideParam{
		comment: []string{
			"Controller hooks: links to the flexslurm binary, which dispatches on its name. Why:",
			"flexslurm learns of the jobs and power changes of its nodes. Other partitions: Slurm",
			"runs one ResumeProgram, SuspendProgram and ResumeFailProgram for every node; these",
			"ignore nodes that are not flexslurm's, so other power-saving nodes need a dispatcher",
			"(deploy/README.md, step 5). PrologSlurmctld and EpilogSlurmctld run for every job:",
			"for a job on no flexslurm node or partition they report nothing and exit 0.",
		},
		lines: ctldHooks,
	})
	if o.HealthCheckInterval >= 0 {
		nodeHookLines = append(nodeHookLines, HealthLines(o.HealthCheckInterval)...)
	}
	out = append(out, clusterWideParam{
		comment: []string{
			"Node hooks: each flexslurm node's bootstrap links them to the flexslurm binary. Why:",
			"a node's GPUs are checked before and after each job and every HealthCheckInterval; a",
			"failed node is drained and replaced. Other partitions: slurmd runs them on every node.",
			"On a node that is not flexslurm's they exit 0 at once, checking, draining and reporting",
			"nothing, but the program must be there: a Prolog that cannot run drains the node. Link",
			"them to the flexslurm binary on the other nodes too (deploy/README.md, step 5).",
		},
		lines: nodeHookLines,
	})
	return out
}

func configlessOthers(configless bool) string {
	if configless {
		return "\nenable_configless changes nothing for nodes that keep a slurm.conf of their own."
	}
	return ""
}

func configlessWhy(configless bool) string {
	if configless {
		return "\nenable_configless lets flexslurm's nodes (slurmd --conf-server) read this slurm.conf."
	}
	return ""
}

// HealthLines are the slurm.conf lines that run HealthCheckProgram every
// interval in any node state: `flexslurm slurm-conf` and `flexslurm
// install controller` print them from here, so they agree.
func HealthLines(interval time.Duration) []string {
	return []string{fmt.Sprintf("HealthCheckInterval=%d", int(interval/time.Second)), "HealthCheckNodeState=ANY"}
}
