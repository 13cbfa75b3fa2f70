package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/spec"
)

// Hook program names. Slurm runs a hook program by path with no arguments
// of flexslurm's choosing (ResumeProgram="/path prog arg" is rejected as
// "not executable"), so each hook is a link named HookLinkPrefix+NAME to the
// flexslurm binary, which dispatches on its argv[0].
const (
	HookLinkPrefix = "flexslurm-hook-"

	HookResume     = "resume"      // ResumeProgram
	HookSuspend    = "suspend"     // SuspendProgram
	HookResumeFail = "resume-fail" // ResumeFailProgram
	HookPrologCtld = "prolog-ctld" // PrologSlurmctld
	HookEpilogCtld = "epilog-ctld" // EpilogSlurmctld
	HookProlog     = "prolog"      // Prolog (on each node, as root)
	HookEpilog     = "epilog"      // Epilog (on each node, as root)
	HookHealth     = "healthcheck" // HealthCheckProgram (on each node, as root)
)

// HookNames lists every hook, in slurm.conf order.
var HookNames = []string{HookResume, HookSuspend, HookResumeFail, HookPrologCtld, HookEpilogCtld, HookProlog, HookEpilog, HookHealth}

// nodeHooks run on the nodes (as root, by slurmd); the others beside
// slurmctld.
var nodeHooks = []string{HookProlog, HookEpilog, HookHealth}

// NodeHooks are the hooks slurmd runs on the nodes (as root): Prolog,
// Epilog and HealthCheckProgram.
func NodeHooks() []string { return slices.Clone(nodeHooks) }

// hookParams maps each hook to its slurm.conf parameter.
var hookParams = map[string]string{
	HookResume:     "ResumeProgram",
	HookSuspend:    "SuspendProgram",
	HookResumeFail: "ResumeFailProgram",
	HookPrologCtld: "PrologSlurmctld",
	HookEpilogCtld: "EpilogSlurmctld",
	HookProlog:     "Prolog",
	HookEpilog:     "Epilog",
	HookHealth:     "HealthCheckProgram",
}

// HookParam returns the slurm.conf parameter that names hook name's
// program ("ResumeProgram" for "resume"), or "" for an unknown hook.
func HookParam(name string) string { return hookParams[name] }

// ConfValue returns the last value of parameter key (case-insensitive) in
// the slurm.conf text conf, unquoted; "" when absent. Include directives
// are not followed.
func ConfValue(conf []byte, key string) string {
	v := ""
	for _, line := range strings.Split(string(conf), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		k, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), key) {
			v = strings.Trim(strings.TrimSpace(val), `"`)
		}
	}
	return v
}

// DefaultConfPath is where slurm.conf must be for the hooks: Slurm passes
// no SLURM_CONF to PrologSlurmctld, EpilogSlurmctld and HealthCheckProgram,
// so the client commands they run read the compiled-in default.
const DefaultConfPath = "/etc/slurm/slurm.conf"

// Defaults of ConfigOptions.
const (
	// DefaultResumeTimeout is how long Slurm waits for a resumed node to
	// register before marking it DOWN and requeueing its job: 65535 s,
	// slurm-gcp's value for Flex-Start nodesets, because Flex-Start
	// capacity may queue for hours.
	DefaultResumeTimeout = 65535 * time.Second
	// DefaultSuspendTime is how long a node stays idle before Slurm powers
	// it down (SuspendProgram).
	DefaultSuspendTime = 300 * time.Second
	// DefaultSuspendTimeout is how long a node stays POWERING_DOWN.
	DefaultSuspendTimeout = 30 * time.Second
	// DefaultHealthCheckInterval is HealthCheckInterval.
	DefaultHealthCheckInterval = 60 * time.Second
	DefaultSlurmctldPort       = 6817
	DefaultNodePortBase        = 6820
	DefaultCPUs                = 1
	DefaultRealMemoryMB        = 1000
)

// ConfigOptions tunes the slurm.conf that WriteConfig writes.
type ConfigOptions struct {
	// Exe is the absolute path of the flexslurm binary. Required. The
	// SlurmUser must be able to run it: the file and every directory above
	// it must be world-executable.
	Exe string
	// HookDir receives the hook links; "<Root>/hooks" when empty.
	HookDir string
	// NodeHookDir, when set, is where the node-side hooks (Prolog, Epilog,
	// HealthCheckProgram) are named in slurm.conf: the directory that each
	// node's bootstrap (`flexslurm node boot --hook-dir`) fills with links
	// and their hooks.json. Empty: HookDir.
	NodeHookDir string
	// Configless adds enable_configless to SlurmctldParameters: slurmds
	// started with --conf-server fetch slurm.conf from slurmctld.
	Configless bool
	// ResumeTimeout, SuspendTime and SuspendTimeout: DefaultResumeTimeout,
	// DefaultSuspendTime and DefaultSuspendTimeout when zero. Whole
	// seconds; ResumeTimeout at most 65535 s.
	ResumeTimeout, SuspendTime, SuspendTimeout time.Duration
	// HealthCheckInterval is HealthCheckInterval: DefaultHealthCheckInterval
	// when zero; negative leaves HealthCheckProgram out.
	HealthCheckInterval time.Duration
	// CPUs and RealMemoryMB describe each node; at most what the host has,
	// or slurmd registration drains the node ("Low RealMemory").
	// DefaultCPUs and DefaultRealMemoryMB when zero.
	CPUs, RealMemoryMB int
	// SlurmctldPort and NodePortBase: DefaultSlurmctldPort and
	// DefaultNodePortBase when zero. Node k (counting every pool's nodes in
	// spec order) listens on NodePortBase+k, so that one slurmd per node
	// runs on this host.
	SlurmctldPort, NodePortBase int
	// MinJobAge is how long ended jobs stay visible; 300 s when zero.
	MinJobAge time.Duration
	// SuspendStaticOnly lists only the static nodes (index <
	// min_node_count) in SuspendExcNodes, so Slurm itself powers idle
	// dynamic nodes down after SuspendTime. By default every node of a
	// flex-start pool is listed: flexslurm alone decides when a flex node
	// is released (idle dynamic nodes, from its Slurm snapshots), so a
	// static node's make-before-break successor — a dynamic slot — is
	// never suspended behind its back.
	SuspendStaticOnly bool
	// DefaultTime is each partition's DefaultTime, the time limit of a job
	// submitted without --time (whole minutes): DefaultDefaultTime when
	// zero, never above the partition's MaxTime (GenOptions.DefaultTime).
	DefaultTime time.Duration
	// SchedInterval is SchedulerParameters' sched_interval, how often the
	// main scheduling loop tests every pending job (whole seconds): a
	// requeued job whose begin time has passed waits for it. 0 keeps
	// Slurm's default (60 s).
	SchedInterval time.Duration
	// OtherNodes adds that many nodes flexslurm does not own, as an
	// existing cluster has: OtherNodeName(i), ordinary (not CLOUD) nodes of
	// the partition OtherPartition, after every flexslurm node. The hooks
	// must leave them and their jobs alone.
	OtherNodes int
	// Extra lines are appended verbatim.
	Extra []string
}

// OtherPartition is the partition of ConfigOptions.OtherNodes.
const OtherPartition = "other"

// OtherNodeName is the name of the local cluster's i-th node that
// flexslurm does not own (ConfigOptions.OtherNodes).
func OtherNodeName(i int) string { return fmt.Sprintf("other-%d", i) }

// LocalNode is one node of the local cluster's slurm.conf.
type LocalNode struct {
	Name      string
	Pool      string
	Static    bool
	Addr      string // a loopback address: 127.1.X.Y
	Port      int
	Partition string
}

// BuildConfig renders slurm.conf for cluster c on this host, with its nodes
// (in spec order), without writing anything. root is the scratch directory
// (state, logs, pid files, slurmd spools), hookDir the directory of the
// hook links. Errors report an unusable spec or options.
func BuildConfig(c *spec.Cluster, o ConfigOptions, root, hookDir string) ([]byte, []LocalNode, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	g, err := Generate(c, o.genOptions(root, hookDir, func(n GenNode) string {
		return fmt.Sprintf("NodeAddr=%s NodeHostName=%s Port=%d", localAddr(n.Seq), n.Name, o.NodePortBase+n.Seq)
	}))
	if err != nil {
		return nil, nil, err
	}
	var nodes []LocalNode
	for _, n := range g.Nodes {
		port := o.NodePortBase + n.Seq
		if port > 65535 {
			return nil, nil, fmt.Errorf("node %s would listen on port %d: too many nodes for NodePortBase %d", n.Name, port, o.NodePortBase)
		}
		tp, _ := TopologyOf(c).Pool(n.Pool)
		nodes = append(nodes, LocalNode{Name: n.Name, Pool: n.Pool, Static: n.Static, Port: port,
			Addr: localAddr(n.Seq), Partition: tp.Partitions[0]})
	}

	var others []string
	for i := range o.OtherNodes {
		k := len(g.Nodes) + i
		n := LocalNode{Name: OtherNodeName(i), Port: o.NodePortBase + k, Addr: localAddr(k), Partition: OtherPartition}
		if n.Port > 65535 {
			return nil, nil, fmt.Errorf("node %s would listen on port %d: too many nodes for NodePortBase %d", n.Name, n.Port, o.NodePortBase)
		}
		nodes = append(nodes, n)
		others = append(others, n.Name)
	}

	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# slurm.conf for flexslurm cluster %s on one host, written by flexslurm.", c.ID)
	w("# One CLOUD partition per Slurm partition of the spec's Flex-Start pools;")
	w("# one slurmd per node on this host (slurmd -D -b -N NODE), each on its own port.")
	w("ClusterName=%s", c.ID)
	w("SlurmctldHost=localhost")
	w("SlurmUser=slurm")
	w("AuthType=auth/munge")
	w("CredType=cred/munge")
	w("MailProg=/bin/true")
	w("SlurmctldPort=%d", o.SlurmctldPort)
	w("SlurmdPort=%d", o.NodePortBase)
	w("StateSaveLocation=%s", filepath.Join(root, "state"))
	w("SlurmdSpoolDir=%s", filepath.Join(root, "spool", "%n"))
	w("SlurmctldPidFile=%s", filepath.Join(root, "run", "slurmctld.pid"))
	w("SlurmdPidFile=%s", filepath.Join(root, "run", "slurmd-%n.pid"))
	w("SlurmctldLogFile=%s", LocalCtldLog(root))
	w("SlurmdLogFile=%s", filepath.Join(root, "log", "slurmd-%n.log"))
	w("SlurmctldDebug=info")
	w("SlurmdDebug=info")
	w("ProctrackType=proctrack/linuxproc")
	w("TaskPlugin=task/none")
	w("JobAcctGatherType=jobacct_gather/none")
	w("AccountingStorageType=accounting_storage/none")
	w("JobCompType=jobcomp/none")
	w("SchedulerType=sched/backfill")
	if o.SchedInterval > 0 {
		w("SchedulerParameters=batch_sched_delay=0,sched_interval=%d", int(o.SchedInterval/time.Second))
	} else {
		w("SchedulerParameters=batch_sched_delay=0")
	}
	w("SelectType=select/cons_tres")
	w("SelectTypeParameters=CR_Core")
	w("MpiDefault=none")
	w("ReturnToService=2")
	w("MessageTimeout=10")
	w("SlurmdTimeout=60")
	w("InactiveLimit=0")
	w("MinJobAge=%d", int(o.MinJobAge/time.Second))
	w("KillWait=5")
	b.Write(g.SlurmConf)
	if len(others) > 0 {
		w("# Nodes and a partition that are not flexslurm's.")
		for _, n := range nodes[len(g.Nodes):] {
			w("NodeName=%s NodeAddr=%s NodeHostName=%s Port=%d CPUs=%d RealMemory=%d State=UNKNOWN", n.Name, n.Addr, n.Name, n.Port, o.CPUs, o.RealMemoryMB)
		}
		w("PartitionName=%s Nodes=%s State=UP", OtherPartition, CompressHostlist(others))
	}
	for _, l := range o.Extra {
		w("%s", l)
	}
	return b.Bytes(), nodes, nil
}

// localAddr is the loopback address of the local cluster's node k.
func localAddr(k int) string { return fmt.Sprintf("127.1.%d.%d", k/250, k%250+1) }

// LocalCtldLog is the local cluster's slurmctld log (SlurmctldLogFile):
// under its root.
func LocalCtldLog(root string) string { return filepath.Join(root, "log", "slurmctld.log") }

// LocalGPUDir is where the local cluster's stand-in GPU device files are
// (nvidia0 …, character devices that gres.conf names with File=): under
// its root.
func LocalGPUDir(root string) string { return filepath.Join(root, "gpu") }

// genOptions are the generator options of the local cluster's slurm.conf.
func (o ConfigOptions) genOptions(root, hookDir string, attrs func(GenNode) string) GenOptions {
	return GenOptions{HookDir: hookDir, NodeHookDir: o.NodeHookDir, ResumeTimeout: o.ResumeTimeout,
		SuspendTime: o.SuspendTime, SuspendTimeout: o.SuspendTimeout, Configless: o.Configless,
		DefaultTime: o.DefaultTime, HealthCheckInterval: o.HealthCheckInterval, SuspendStaticOnly: o.SuspendStaticOnly,
		GPUDir: LocalGPUDir(root), CPUs: o.CPUs, RealMemoryMB: o.RealMemoryMB, NodeAttrs: attrs, OwnDefault: true}
}

// BuildLocalGres returns the local cluster's gres.conf (slurmctld serves it
// beside slurm.conf to configless slurmds) and how many stand-in GPU device
// files it names under LocalGPUDir(root) (nvidia0 …); with no GPU pool,
// gres.conf holds only a comment and names none.
func BuildLocalGres(c *spec.Cluster, o ConfigOptions, root, hookDir string) ([]byte, int, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, 0, err
	}
	g, err := Generate(c, o.genOptions(root, hookDir, nil))
	if err != nil {
		return nil, 0, err
	}
	gpus := 0
	for _, p := range g.Pools {
		gpus = max(gpus, p.GPUs)
	}
	gres := g.GresConf
	if len(gres) == 0 {
		gres = []byte("# flexslurm: no GPU node pool.\n")
	}
	return gres, gpus, nil
}

func (o ConfigOptions) withDefaults() (ConfigOptions, error) {
	var errs []error
	if o.Exe == "" || !filepath.IsAbs(o.Exe) {
		errs = append(errs, fmt.Errorf("the flexslurm binary must be given by absolute path, got %q", o.Exe))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ResumeTimeout, DefaultResumeTimeout)
	def(&o.SuspendTime, DefaultSuspendTime)
	def(&o.SuspendTimeout, DefaultSuspendTimeout)
	def(&o.HealthCheckInterval, DefaultHealthCheckInterval)
	def(&o.MinJobAge, 300*time.Second)
	for name, d := range map[string]time.Duration{"ResumeTimeout": o.ResumeTimeout, "SuspendTime": o.SuspendTime,
		"SuspendTimeout": o.SuspendTimeout, "MinJobAge": o.MinJobAge} {
		if d < time.Second || d%time.Second != 0 {
			errs = append(errs, fmt.Errorf("%s %v is not a whole number of seconds ≥ 1", name, d))
		}
	}
	if o.ResumeTimeout > 65535*time.Second {
		errs = append(errs, fmt.Errorf("ResumeTimeout %v is above Slurm's 65535 s", o.ResumeTimeout))
	}
	if o.SchedInterval < 0 || o.SchedInterval%time.Second != 0 {
		errs = append(errs, fmt.Errorf("SchedInterval %v is not a whole number of seconds", o.SchedInterval))
	}
	if o.DefaultTime < 0 || o.DefaultTime%time.Minute != 0 {
		errs = append(errs, fmt.Errorf("DefaultTime %v is not a whole number of minutes", o.DefaultTime))
	}
	if o.HealthCheckInterval > 0 && o.HealthCheckInterval%time.Second != 0 {
		errs = append(errs, fmt.Errorf("HealthCheckInterval %v is not a whole number of seconds", o.HealthCheckInterval))
	}
	if o.CPUs == 0 {
		o.CPUs = DefaultCPUs
	}
	if o.RealMemoryMB == 0 {
		o.RealMemoryMB = DefaultRealMemoryMB
	}
	if o.SlurmctldPort == 0 {
		o.SlurmctldPort = DefaultSlurmctldPort
	}
	if o.NodePortBase == 0 {
		o.NodePortBase = DefaultNodePortBase
	}
	if o.OtherNodes < 0 {
		errs = append(errs, fmt.Errorf("OtherNodes %d is negative", o.OtherNodes))
	}
	for _, l := range o.Extra {
		if strings.ContainsAny(l, "\n\r") {
			errs = append(errs, fmt.Errorf("extra slurm.conf line %q holds a line break", l))
		}
	}
	return o, errors.Join(errs...)
}
