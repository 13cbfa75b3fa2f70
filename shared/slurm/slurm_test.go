package slurm

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func TestExpandHostlist(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"", nil},
		{"n-1", []string{"n-1"}},
		{"flexvm-a3u-[0-2]", []string{"flexvm-a3u-0", "flexvm-a3u-1", "flexvm-a3u-2"}},
		{"a[1,3-4],b", []string{"a1", "a3", "a4", "b"}},
		{"n[08-11]", []string{"n08", "n09", "n10", "n11"}},
		{"n[9-11]", []string{"n9", "n10", "n11"}},
		{"a[1-2]b[3-4]", []string{"a1b3", "a1b4", "a2b3", "a2b4"}},
		{" a , ,b ", []string{"a", "b"}},
		{"a[1,1],a1", []string{"a1"}},
	}
	for _, tt := range tests {
		got, err := ExpandHostlist(tt.expr)
		if err != nil {
			t.Errorf("ExpandHostlist(%q): %v", tt.expr, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ExpandHostlist(%q) (-want +got):\n%s", tt.expr, diff)
		}
	}
	for _, bad := range []string{"a[3-1]", "a[1-2", "a]", "a[x]", "a[]", "a[1-]", "a[[1]]", "a[0-20000]", "a[0-99]b[0-999]", "a b"} {
		if got, err := ExpandHostlist(bad); !errors.Is(err, ErrHostlist) {
			t.Errorf("ExpandHostlist(%q) = %v, %v; want ErrHostlist", bad, got, err)
		}
	}
}

func TestCompressHostlist(t *testing.T) {
	tests := []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"c-p-3", "c-p-0", "c-p-1", "c-p-1", "c-q-7"}, "c-p-[0-1,3],c-q-7"},
		{[]string{"n08", "n09", "n10", "n7"}, "n[7,10],n[08-09]"},
		{[]string{"login", "c-p-2"}, "c-p-2,login"},
	}
	for _, tt := range tests {
		if got := CompressHostlist(tt.names); got != tt.want {
			t.Errorf("CompressHostlist(%q) = %q, want %q", tt.names, got, tt.want)
		}
	}
	// Round trip on a large pool.
	var names []string
	for i := 0; i < 64; i++ {
		if i%5 != 3 {
			names = append(names, "flexvm-big-"+strconv.Itoa(i))
		}
	}
	back, err := ExpandHostlist(CompressHostlist(names))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(names, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestValidNodeNameAndTopology(t *testing.T) {
	c, err := spec.Load("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	topo := TopologyOf(c)
	if diff := cmp.Diff([]string{"flexvm-a3u-0", "flexvm-a3u-1", "flexvm-a3u-2"}, topo.NodeNames()); diff != "" {
		t.Errorf("NodeNames (-want +got):\n%s", diff)
	}
	tests := []struct {
		name string
		want error
	}{
		{"flexvm-a3u-0", nil},
		{"flexvm-a3u-2", nil},
		{"flexvm-a3u-3", ErrForeignNode},   // beyond max_node_count
		{"flexvm-login-0", ErrForeignNode}, // not a Flex-Start pool
		{"other-a3u-0", ErrForeignNode},
		{"flexvm-a3u-01", ErrNodeName},
		{"flexvm-a3u", ErrNodeName},
		{"Flexvm-a3u-0", ErrNodeName},
		{"flexvm-a3u-[0-1]", ErrNodeName},
		{"flexvm-a3u-0 ", ErrNodeName},
		{"flexvm-a3u-0,x", ErrNodeName},
		{"", ErrNodeName},
	}
	for _, tt := range tests {
		_, _, err := topo.Check(tt.name)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("Check(%q) = %v, want %v", tt.name, err, tt.want)
		}
		if got := ValidNodeName(tt.name); got != !errors.Is(tt.want, ErrNodeName) {
			t.Errorf("ValidNodeName(%q) = %v", tt.name, got)
		}
	}
	if !topo.IsStatic("flexvm-a3u-0") || topo.IsStatic("flexvm-a3u-1") {
		t.Errorf("IsStatic: want only index 0 (min_node_count 1) static")
	}
	if got := topo.PartitionOf("flexvm-a3u-1"); got != "a3u" {
		t.Errorf("PartitionOf = %q, want a3u", got)
	}
	loose := ClusterTopology("flexvm")
	if _, _, err := loose.Check("flexvm-anything-99"); err != nil {
		t.Errorf("cluster-only topology rejects flexvm-anything-99: %v", err)
	}
	ours, others := loose.Split([]string{"flexvm-a-1", "x-a-1", "bad name"})
	if diff := cmp.Diff([][]string{{"flexvm-a-1"}, {"x-a-1", "bad name"}}, [][]string{ours, others}); diff != "" {
		t.Errorf("Split (-want +got):\n%s", diff)
	}
}

func TestParseKV(t *testing.T) {
	got := ParseKV("NodeName=a-b-0 Arch=x86_64 OS=Linux 6.1 #1 SMP  RealMemory=1000 AllocNode:Sid=localhost:42 Reason=gpu 3: ECC [root@2026-11-30T04:08:19]")
	want := map[string]string{"NodeName": "a-b-0", "Arch": "x86_64", "OS": "Linux 6.1 #1 SMP", "RealMemory": "1000",
		"AllocNode:Sid": "localhost:42", "Reason": "gpu 3: ECC [root@2026-11-30T04:08:19]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseKV (-want +got):\n%s", diff)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nodeSummary is what the parsers must agree on: the node's typed facts.
type nodeSummary struct {
	Name string
	slurmstate.Node
}

func summarizeNodes(ns []NodeInfo) []nodeSummary {
	var out []nodeSummary
	for _, n := range ns {
		out = append(out, nodeSummary{n.Name, n.Node})
	}
	return out
}

// fact is a node's facts as the parsers must give them.
func fact(base slurmstate.NodeBase, reason string, owner slurmstate.Owner, flags ...slurmstate.NodeFlag) slurmstate.Node {
	return slurmstate.Node{State: base, Flags: slurmstate.NewNodeFlags(flags...), Reason: reason, Owner: owner}
}

// The 22.05 samples are real output of Slurm 22.05.8 (Debian 12), captured
// from one cluster at one moment: a drained node, a powered-down one, one
// powering down and one powering up.
var want2205Nodes = []nodeSummary{
	{"exp-a-0", fact(slurmstate.NodeIdle, "flexslurm: health FAIL: gpu 3", slurmstate.OwnerFlexslurm, slurmstate.FlagCloud, slurmstate.FlagDrain)},
	{"exp-a-1", fact(slurmstate.NodeIdle, "", slurmstate.OwnerNone, slurmstate.FlagCloud, slurmstate.FlagPoweredDown)},
	{"exp-a-2", fact(slurmstate.NodeIdle, "", slurmstate.OwnerNone, slurmstate.FlagCloud, slurmstate.FlagPoweringDown)},
	{"exp-a-3", fact(slurmstate.NodeIdle, "", slurmstate.OwnerNone, slurmstate.FlagCloud, slurmstate.FlagNotResponding, slurmstate.FlagPoweringUp)},
}

func TestParseSinfoJSON2205(t *testing.T) {
	ns, err := ParseSinfoJSON(readFile(t, "testdata/22.05/sinfo.json"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want2205Nodes, summarizeNodes(ns)); diff != "" {
		t.Errorf("sinfo --json (-want +got):\n%s", diff)
	}
	if ns[2].Addr != "127.0.1.22" || ns[2].Port != 6822 || !cmp.Equal(ns[2].Partitions, []string{"a"}) {
		t.Errorf("exp-a-2 address/port/partitions = %s %d %v", ns[2].Addr, ns[2].Port, ns[2].Partitions)
	}
	shown, err := ParseShowNodes(readFile(t, "testdata/22.05/show-node.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want2205Nodes, summarizeNodes(shown)); diff != "" {
		t.Errorf("scontrol show node -o (-want +got):\n%s", diff)
	}
	if !shown[0].Drained() || shown[0].Draining() || shown[0].Ready() != true || !shown[1].PoweredOff() || shown[3].Ready() {
		t.Errorf("state predicates wrong: %+v", shown)
	}
}

type jobSummary struct {
	ID       string
	State    slurmstate.JobState
	Reason   string
	NodeList string
	Restarts int
	Held     bool
}

func summarizeJobs(js []JobInfo) []jobSummary {
	var out []jobSummary
	for _, j := range js {
		out = append(out, jobSummary{j.ID, j.State, j.Reason, j.NodeList, j.Restarts, j.Held()})
	}
	return out
}

func TestParseJobs2205(t *testing.T) {
	js, err := ParseSqueueJSON(readFile(t, "testdata/22.05/squeue.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []jobSummary{
		{"1", "COMPLETED", "None", "exp-a-1", 0, false},
		{"2", "CANCELLED", "JobHeldUser", "", 0, false},
		{"3", "CANCELLED", "None", "exp-a-3", 0, false},
		{"4", "PENDING", "JobHeldUser", "", 2, true},
	}
	if diff := cmp.Diff(want, summarizeJobs(js)); diff != "" {
		t.Errorf("squeue --json (-want +got):\n%s", diff)
	}
	if js[3].Description != "launch failed requeued held" || js[3].TimeLimit != 0 || js[0].NodeCount != 1 {
		t.Errorf("job 4 = %+v", js[3])
	}
	shown, err := ParseShowJobs(readFile(t, "testdata/22.05/show-job.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want[3].Reason = "launch_failed_requeued_held"
	if diff := cmp.Diff(want, summarizeJobs(shown)); diff != "" {
		t.Errorf("scontrol show job -o (-want +got):\n%s", diff)
	}
	if st, end := shown[0].StartTime, shown[0].EndTime; st.Format(time.DateTime) != "2026-11-30 04:07:33" || end.Sub(st) != time.Second {
		t.Errorf("job 1 StartTime %v EndTime %v, want 04:07:33 and one second later", st, end)
	}
}

// The 23.02+ documents follow the data_parser shapes (v0.0.39 and later):
// states as lists, numbers as {set, infinite, number}, and from 23.11 on
// the grouped "sinfo" list.
func TestParseJSON2302Plus(t *testing.T) {
	squeue := `{"jobs": [
	  {"job_id": 12, "array_job_id": {"set": true, "infinite": false, "number": 0},
	   "array_task_id": {"set": false, "infinite": false, "number": 0},
	   "job_state": ["PENDING", "REQUEUED"], "state_reason": "BeginTime", "state_description": "",
	   "partition": "gpu", "nodes": "", "node_count": {"set": true, "infinite": false, "number": 2},
	   "restart_cnt": 1, "time_limit": {"set": true, "infinite": false, "number": 90},
	   "priority": {"set": true, "infinite": false, "number": 100}},
	  {"job_id": 14, "array_job_id": {"set": true, "infinite": false, "number": 13},
	   "array_task_id": {"set": true, "infinite": false, "number": 1},
	   "job_state": ["RUNNING"], "state_reason": "None", "partition": "gpu", "nodes": "c-gpu-[0-1]",
	   "node_count": {"set": true, "infinite": false, "number": 2}, "restart_cnt": 0,
	   "time_limit": {"set": false, "infinite": true, "number": 0}}],
	 "errors": [], "warnings": []}`
	js, err := ParseSqueueJSON([]byte(squeue))
	if err != nil {
		t.Fatal(err)
	}
	want := []JobInfo{
		{ID: "12", JobID: 12, State: "PENDING", StateFlags: []string{"REQUEUED"}, Reason: "BeginTime", Partition: "gpu",
			NodeCount: 2, Restarts: 1, TimeLimit: 90 * time.Minute, Priority: 100},
		{ID: "13_1", JobID: 14, State: "RUNNING", Reason: "None", Partition: "gpu", NodeList: "c-gpu-[0-1]",
			Nodes: []string{"c-gpu-0", "c-gpu-1"}, NodeCount: 2},
	}
	if diff := cmp.Diff(want, js, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("squeue 23.02+ (-want +got):\n%s", diff)
	}

	sinfo2302 := `{"nodes": [
	  {"name": "c-gpu-0", "state": ["IDLE", "CLOUD", "POWERED_DOWN"], "reason": "", "address": "c-gpu-0", "port": 6818, "partitions": ["gpu"]},
	  {"name": "c-gpu-1", "state": ["MIXED", "DRAIN"], "reason": "flexslurm: gpu", "partitions": ["gpu"]}], "errors": []}`
	sinfo2311 := `{"sinfo": [
	  {"node": {"state": ["IDLE", "CLOUD", "POWERED_DOWN"]}, "nodes": {"nodes": ["c-gpu-0"], "addresses": ["c-gpu-0"], "hostnames": ["c-gpu-0"]},
	   "partition": {"name": "gpu"}, "reason": {"description": ""}},
	  {"node": {"state": ["MIXED", "DRAIN"]}, "nodes": {"nodes": ["c-gpu-1"]}, "partition": {"name": "gpu"}, "reason": "flexslurm: gpu"},
	  {"node": {"state": ["MIXED", "DRAIN"]}, "nodes": {"nodes": ["c-gpu-1"]}, "partition": {"name": "all"}, "reason": "flexslurm: gpu"}],
	 "errors": []}`
	wantNodes := []nodeSummary{
		{"c-gpu-0", fact(slurmstate.NodeIdle, "", slurmstate.OwnerNone, slurmstate.FlagCloud, slurmstate.FlagPoweredDown)},
		{"c-gpu-1", fact(slurmstate.NodeMixed, "flexslurm: gpu", slurmstate.OwnerFlexslurm, slurmstate.FlagDrain)},
	}
	for name, doc := range map[string]string{"23.02": sinfo2302, "23.11": sinfo2311} {
		ns, err := ParseSinfoJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(wantNodes, summarizeNodes(ns)); diff != "" {
			t.Errorf("sinfo %s (-want +got):\n%s", name, diff)
		}
		if name == "23.11" && !cmp.Equal(ns[1].Partitions, []string{"gpu", "all"}) {
			t.Errorf("sinfo 23.11: partitions of c-gpu-1 = %v, want [gpu all]", ns[1].Partitions)
		}
	}
	if _, err := ParseSqueueJSON([]byte(`{"jobs": [], "errors": [{"error": "Unable to contact slurm controller"}]}`)); err == nil {
		t.Errorf("squeue output with errors and no jobs: want an error")
	}
	if _, err := ParseSinfoJSON([]byte(`not json`)); !errors.Is(err, ErrParse) {
		t.Errorf("ParseSinfoJSON(not json) = %v, want ErrParse", err)
	}
}

func TestParseDuration(t *testing.T) {
	tests := map[string]time.Duration{
		"UNLIMITED": 0, "": 0, "NOT_SET": 0,
		"5": 5 * time.Minute, "5:30": 5*time.Minute + 30*time.Second, "1:30:00": 90 * time.Minute,
		"2-00:00:00": 48 * time.Hour, "1-02": 26 * time.Hour, "1-02:03": 26*time.Hour + 3*time.Minute,
	}
	for in, want := range tests {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"x", "1:2:3:4", "-5", "1-2-3"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q): want an error", bad)
		}
	}
}

func TestBuildConfig(t *testing.T) {
	c, err := spec.Load("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	conf, nodes, err := BuildConfig(c, ConfigOptions{Exe: "/usr/local/bin/flexslurm"}, "/var/lib/fs", "/usr/local/lib/flexslurm")
	if err != nil {
		t.Fatal(err)
	}
	text := string(conf)
	for _, line := range []string{
		"ClusterName=flexvm",
		"PrivateData=cloud",
		"SuspendExcNodes=flexvm-a3u-[0-2]",
		"ResumeProgram=/usr/local/lib/flexslurm/flexslurm-hook-resume",
		"PrologSlurmctld=/usr/local/lib/flexslurm/flexslurm-hook-prolog-ctld",
		"HealthCheckProgram=/usr/local/lib/flexslurm/flexslurm-hook-healthcheck",
		"NodeName=flexvm-a3u-1 NodeAddr=127.1.0.2 NodeHostName=flexvm-a3u-1 Port=6821 CPUs=1 RealMemory=1000 Gres=gpu:8 State=CLOUD Feature=a3u,cloud",
		"PartitionName=a3u Nodes=flexvm-a3u-[0-2] Default=YES MaxTime=7-00:00:00 DefaultTime=01:00:00 MaxNodes=3 SuspendTime=300 SuspendTimeout=30 ResumeTimeout=65535 State=UP",
		"StateSaveLocation=/var/lib/fs/state",
	} {
		if !strings.Contains(text, "\n"+line+"\n") {
			t.Errorf("slurm.conf lacks line %q:\n%s", line, text)
		}
	}
	static, _, err := BuildConfig(c, ConfigOptions{Exe: "/usr/local/bin/flexslurm", SuspendStaticOnly: true}, "/var/lib/fs", "/usr/local/lib/flexslurm")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(static), "\nSuspendExcNodes=flexvm-a3u-0\n") {
		t.Errorf("with SuspendStaticOnly, SuspendExcNodes should list the static node only:\n%s", static)
	}
	if strings.Contains(text, "login") {
		t.Errorf("slurm.conf mentions the login pool, which Slurm does not manage here")
	}
	if len(nodes) != 3 || !nodes[0].Static || nodes[1].Static || nodes[2].Port != 6822 {
		t.Errorf("nodes = %+v", nodes)
	}
	if !strings.Contains(text, "\nSchedulerParameters=batch_sched_delay=0\n") {
		t.Errorf("default SchedulerParameters missing:\n%s", text)
	}
	fast, _, err := BuildConfig(c, ConfigOptions{Exe: "/f", SchedInterval: 2 * time.Second}, "/x", "/y")
	if err != nil || !strings.Contains(string(fast), "\nSchedulerParameters=batch_sched_delay=0,sched_interval=2\n") {
		t.Errorf("SchedInterval 2s: want sched_interval=2 (%v):\n%s", err, fast)
	}
	timed, _, err := BuildConfig(c, ConfigOptions{Exe: "/f", DefaultTime: 150 * time.Minute}, "/x", "/y")
	if err != nil || !strings.Contains(string(timed), "\nPartitionName=a3u Nodes=flexvm-a3u-[0-2] Default=YES MaxTime=7-00:00:00 DefaultTime=02:30:00 MaxNodes=3 SuspendTime=300 SuspendTimeout=30 ResumeTimeout=65535 State=UP\n") {
		t.Errorf("DefaultTime 150m: want DefaultTime=02:30:00 on the partition line (%v):\n%s", err, timed)
	}
	if _, _, err := BuildConfig(c, ConfigOptions{Exe: "/f", DefaultTime: 90 * time.Second}, "/x", "/y"); err == nil || !strings.Contains(err.Error(), "DefaultTime") {
		t.Errorf("DefaultTime 90s: %v, want an error naming DefaultTime", err)
	}
	if _, _, err := BuildConfig(c, ConfigOptions{Exe: "flexslurm"}, "/x", "/y"); err == nil {
		t.Errorf("relative Exe: want an error")
	}
	if strings.Contains(text, "enable_configless") {
		t.Errorf("configless without Configless:\n%s", text)
	}
	cl, _, err := BuildConfig(c, ConfigOptions{Exe: "/f", Configless: true, NodeHookDir: "/etc/flexslurm/hooks"}, "/x", "/y")
	for _, line := range []string{
		"SlurmctldParameters=idle_on_node_suspend,enable_configless",
		"Prolog=/etc/flexslurm/hooks/flexslurm-hook-prolog",
		"Epilog=/etc/flexslurm/hooks/flexslurm-hook-epilog",
		"HealthCheckProgram=/etc/flexslurm/hooks/flexslurm-hook-healthcheck",
		"PrologSlurmctld=/y/flexslurm-hook-prolog-ctld",
		"ResumeProgram=/y/flexslurm-hook-resume",
	} {
		if err != nil || !strings.Contains(string(cl), "\n"+line+"\n") {
			t.Errorf("configless slurm.conf lacks %q (%v):\n%s", line, err, cl)
		}
	}
	if _, _, err := BuildConfig(c, ConfigOptions{Exe: "/f", ResumeTimeout: 70000 * time.Second}, "/x", "/y"); err == nil {
		t.Errorf("ResumeTimeout above 65535 s: want an error")
	}
}

func TestRunnerNeverUsesAShellAndReportsErrors(t *testing.T) {
	r := &Runner{BinDir: "/bin", Timeout: 2 * time.Second}
	// "false" exits 1 without output: a CommandError with the exit code.
	_, err := r.Run(context.Background(), "false")
	var ce *CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 1 || IsTransient(err) {
		t.Errorf("Run(false) = %v, want a non-transient CommandError with exit 1", err)
	}
	if _, err := r.Run(context.Background(), "/bin/true"); err == nil {
		t.Errorf("Run with a path: want an error (programs are resolved in BinDir)")
	}
	r.Timeout = 100 * time.Millisecond
	_, err = r.Run(context.Background(), "sleep", "5")
	if !IsTransient(err) {
		t.Errorf("Run(sleep 5) with a 100 ms timeout = %v, want a transient error", err)
	}
	// The environment is empty unless given: no PATH leaks in.
	out, err := (&Runner{BinDir: "/usr/bin"}).Run(context.Background(), "env")
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("env under Runner printed %q, %v; want an empty environment", out, err)
	}
	unreachable := &CommandError{Argv: []string{"scontrol"}, ExitCode: 1, Stderr: "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"}
	if !IsTransient(unreachable) {
		t.Errorf("IsTransient(%v) = false", unreachable)
	}
}
