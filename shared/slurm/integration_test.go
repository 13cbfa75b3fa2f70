package slurm_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/slurmtest"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// cl is the real single-host Slurm cluster that TestWithSlurm runs its
// subtests on.
var cl *slurmtest.Cluster

// TestWithSlurm runs the tests that drive a real slurmctld once per Slurm
// release (slurmtest.Run), as subtests named by release and test:
// TestWithSlurm/slurm-24.11/HostlistAgreesWithScontrol.
func TestWithSlurm(t *testing.T) {
	slurmtest.Run(t, slurmtest.Options{}, func(t *testing.T, c *slurmtest.Cluster) {
		cl = c
		defer func() { cl = nil }()
		for _, tc := range []struct {
			name string
			f    func(*testing.T)
		}{
			{"HostlistAgreesWithScontrol", testHostlistAgreesWithScontrol},
			{"RealOutputParsers", testRealOutputParsers},
			{"StopNodeEndsItsJobs", testStopNodeEndsItsJobs},
			{"GPUJobs", testGPUJobs},
		} {
			t.Run(tc.name, tc.f)
		}
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// testHostlistAgreesWithScontrol expands and compresses hostlists the way
// Slurm itself does (`scontrol show hostnames`).
func testHostlistAgreesWithScontrol(t *testing.T) {
	cl.Require(t)
	for _, expr := range []string{
		"flexci-gpu-[0-3]", "flexci-gpu-1", "flexci-big-[0-9,11,20-22],flexci-gpu-0", "n[008-011]",
		"a[1-2]b[3-4]", "x-[0-1],y", "a[9-11]", "a,,b", "a[0-2]-[1-2]",
	} {
		out := cl.Scontrol(t, "show", "hostnames", expr)
		want := strings.Fields(out)
		got, err := slurm.ExpandHostlist(expr)
		if err != nil {
			t.Errorf("ExpandHostlist(%q): %v", expr, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ExpandHostlist(%q) differs from scontrol (-scontrol +ours):\n%s", expr, diff)
		}
		back := strings.Fields(cl.Scontrol(t, "show", "hostnames", slurm.CompressHostlist(got)))
		slices.Sort(back)
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if diff := cmp.Diff(sorted, back); diff != "" {
			t.Errorf("scontrol expansion of CompressHostlist(%q) = %q differs (-want +got):\n%s", expr, slurm.CompressHostlist(got), diff)
		}
	}
	for _, bad := range []string{"a[3-1]", "a[1-2", "a]", "a[x]"} {
		if _, err := slurm.ExpandHostlist(bad); err == nil {
			t.Errorf("ExpandHostlist(%q) = nil error; Slurm rejects it", bad)
		}
	}
}

// testRealOutputParsers reads the same cluster through sinfo --json,
// squeue --json, scontrol show node|job -o and squeue --Format, and checks
// that every view agrees, on powered-down, up, drained and down nodes and
// on held, pending and running jobs.
func testRealOutputParsers(t *testing.T) {
	cl.Require(t)
	c := ctx(t)
	nodes, err := cl.R.Nodes(c)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	want := cl.Topology.NodeNames()
	slices.Sort(want)
	slices.Sort(names)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("sinfo --json nodes differ from the spec's (-spec +sinfo):\n%s", diff)
	}
	for _, n := range nodes {
		if n.State != slurmstate.NodeIdle || !n.Has(slurmstate.FlagCloud) || !n.Has(slurmstate.FlagPoweredDown) {
			t.Errorf("fresh node %s is %s, want IDLE+CLOUD+POWERED_DOWN", n.Name, n.StateString())
		}
	}

	// An up node, a drained node, a down node.
	up, drained, down := "flexci-gpu-0", "flexci-big-5", "flexci-big-6"
	if err := cl.StartNode(c, up); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(up) })
	cl.WaitNode(t, up, 15*time.Second, "up", slurm.NodeInfo.Ready)
	cl.Scontrol(t, "update", "nodename="+drained, "state=drain", "reason=flexslurm: test drain with spaces")
	cl.Scontrol(t, "update", "nodename="+down, "state=down", "reason=test down")
	t.Cleanup(func() {
		cl.Scontrol(t, "update", "nodename="+drained+","+down, "state=resume")
	})

	// A held job, a job pending on a powered-down node, a running job.
	// Time limits within the gpu partition's MaxTime (its pool's max run
	// duration, 60 min).
	held := cl.Sbatch(t, "sleep 60", "-H", "-p", "gpu", "-t", "45")
	running := cl.Sbatch(t, "sleep 60", "-p", "gpu", "-w", up, "-t", "0-00:58")
	t.Cleanup(func() { cl.Cancel(held, running) })
	cl.WaitJob(t, running, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })

	views := map[string][]slurm.NodeInfo{}
	if views["sinfo"], err = cl.R.Nodes(c); err != nil {
		t.Fatal(err)
	}
	if views["scontrol"], err = cl.R.ShowNodes(c, nil); err != nil {
		t.Fatal(err)
	}
	for view, ns := range views {
		got := map[string]string{}
		for _, n := range ns {
			got[n.Name] = n.StateString() + " " + n.Reason
		}
		want := map[string]string{
			up:      "ALLOCATED+CLOUD ",
			drained: "IDLE+CLOUD+DRAIN+POWERED_DOWN flexslurm: test drain with spaces",
			down:    "DOWN+CLOUD+POWERED_DOWN test down",
		}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s view of %s: %q, want %q", view, name, got[name], w)
			}
		}
	}

	jobs, err := cl.R.Jobs(c)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]slurm.JobInfo{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	listed, err := cl.R.JobsByID(c, []string{held, running, "999999"})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 {
		t.Errorf("JobsByID(%s, %s, 999999) = %d jobs, want 2", held, running, len(listed))
	}
	for _, id := range []string{held, running} {
		shown, err := cl.R.ShowJob(c, id)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON := byID[id]
		var fromFormat slurm.JobInfo
		for _, j := range listed {
			if j.ID == id {
				fromFormat = j
			}
		}
		// Fields each source reports; squeue --json alone has the
		// description and scontrol alone the priority of held jobs.
		type common struct {
			ID, State, Partition, NodeList string
			Nodes                          []string
			NodeCount, Restarts            int
			TimeLimit                      time.Duration
			Held                           bool
		}
		pick := func(j slurm.JobInfo) common {
			return common{j.ID, string(j.State), j.Partition, j.NodeList, j.Nodes, j.NodeCount, j.Restarts, j.TimeLimit, j.Held()}
		}
		if diff := cmp.Diff(pick(shown), pick(fromJSON)); diff != "" {
			t.Errorf("job %s: squeue --json differs from scontrol (-scontrol +json):\n%s", id, diff)
		}
		if diff := cmp.Diff(pick(shown), pick(fromFormat)); diff != "" {
			t.Errorf("job %s: squeue --Format differs from scontrol (-scontrol +format):\n%s", id, diff)
		}
	}
	if j := byID[held]; !j.Held() || j.State != slurmstate.JobPending || j.TimeLimit != 45*time.Minute {
		t.Errorf("held job %s = %+v, want held PENDING with a 45 min limit", held, j)
	}
	if j := byID[running]; j.State != slurmstate.JobRunning || !slices.Equal(j.Nodes, []string{up}) ||
		j.TimeLimit != 58*time.Minute {
		t.Errorf("running job %s = %+v, want RUNNING on %s with a 0-00:58 limit", running, j, up)
	}
	if _, err := cl.R.ShowJob(c, "999999"); !errorsIsNotFound(err) {
		t.Errorf("ShowJob(999999) error = %v, want ErrNotFound", err)
	}
	if _, err := cl.R.ShowNode(c, "flexci-gpu-99"); !errorsIsNotFound(err) {
		t.Errorf("ShowNode(flexci-gpu-99) error = %v, want ErrNotFound", err)
	}
}

// testStopNodeEndsItsJobs stops a node under a running job as the end of its
// VM would: the job's processes, which outlive slurmd, are gone too.
func testStopNodeEndsItsJobs(t *testing.T) {
	cl.Require(t)
	c := ctx(t)
	node := "flexci-gpu-0"
	if err := cl.StartNode(c, node); err != nil {
		t.Fatal(err)
	}
	cl.WaitNode(t, node, 15*time.Second, "up", func(n slurm.NodeInfo) bool { return n.Ready() && n.State == slurmstate.NodeIdle })
	job := cl.Sbatch(t, "sleep 300", "-p", "gpu", "-w", node)
	t.Cleanup(func() { cl.Cancel(job) })
	cl.WaitJob(t, job, 20*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })
	var sleeps []int
	for deadline := time.Now().Add(5 * time.Second); len(sleeps) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		sleeps = processesOf(node, "sleep")
	}
	if len(sleeps) == 0 {
		t.Fatalf("no sleep process of job %s on %s found", job, node)
	}
	if err := cl.StopNode(node); err != nil {
		t.Fatal(err)
	}
	if cl.NodeRunning(node) {
		t.Errorf("NodeRunning(%s) after StopNode", node)
	}
	for _, pid := range sleeps {
		if alive(pid) {
			t.Errorf("job %s process %d survived StopNode(%s)", job, pid, node)
		}
	}
}

// testGPUJobs runs GPU jobs on a node of the Flex-Start GPU pool (8 GPUs:
// stand-in device files under the cluster's root, named by gres.conf), as
// --gpus-per-node and as --gres, and checks that Slurm refuses at
// submission a job that the pool cannot serve: more GPUs per node, more
// nodes, or a longer time limit than the pool's VMs live.
func testGPUJobs(t *testing.T) {
	cl.Require(t)
	c := ctx(t)
	node := "flexci-gpu-3"
	if err := cl.StartNode(c, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.StopNode(node) })
	cl.WaitNode(t, node, 20*time.Second, "up", slurm.NodeInfo.Ready)
	if out := cl.Scontrol(t, "show", "node", node); !strings.Contains(out, "Gres=gpu:8") {
		t.Errorf("scontrol show node %s lacks Gres=gpu:8:\n%s", node, out)
	}
	for _, gpus := range [][]string{{"--gpus-per-node=8"}, {"--gres=gpu:8"}} {
		id := cl.Sbatch(t, `env | grep -E '^(CUDA_VISIBLE_DEVICES|SLURM_JOB_GPUS|GPU_DEVICE_ORDINAL)=' | sort; sleep 3`,
			append([]string{"-p", "gpu", "-w", node, "-t", "5"}, gpus...)...)
		cl.WaitJob(t, id, 30*time.Second, "running", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning })
		// Slurm allocated the node's 8 GPUs: device indexes 0-7 of gres.conf.
		if out := cl.Scontrol(t, "-d", "show", "job", id); !strings.Contains(out, "GRES=gpu:8(IDX:0-7)") {
			t.Errorf("job %s (%v): scontrol show job -d lacks GRES=gpu:8(IDX:0-7):\n%s", id, gpus, out)
		}
		cl.WaitJob(t, id, 30*time.Second, "completed", func(j slurm.JobInfo) bool { return j.State == slurmstate.JobCompleted })
		out, err := os.ReadFile(cl.Root + "/log/job-" + id + ".out")
		t.Logf("job %s (%v) GPU environment: %q (%v)", id, gpus, out, err)
	}
	for name, args := range map[string][]string{
		"9 GPUs per node": {"-p", "gpu", "--gpus-per-node=9", "-t", "5"},
		"gres gpu:9":      {"-p", "gpu", "--gres=gpu:9", "-t", "5"},
		"5 nodes":         {"-p", "gpu", "-N", "5", "-t", "5"},
		"61 minutes":      {"-p", "gpu", "-N", "1", "-t", "61"},
	} {
		r := *cl.R
		r.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		out, err := r.Run(c, "sbatch", append([]string{"--parsable", "-o", "/dev/null"}, append(args, "--wrap", "true")...)...)
		if err == nil {
			t.Errorf("%s: sbatch %q accepted (job %s), want it refused at submission", name, args, strings.TrimSpace(string(out)))
			cl.Cancel(strings.TrimSpace(string(out)))
		}
	}
}
