package tracebench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/expirybench"
)

// The sample trace (testdata/sample.csv, made up for these tests, in the
// Alibaba pod list's columns): at t=0 an 8-GPU job, two 2-GPU jobs and a
// job asking for half a GPU, each running 1 h; a CPU-only task; a task
// never scheduled; a 4-GPU task of 8 days (its 192 h limit exceeds the
// pool's 7 days); and on day 1 (25 h) a 1-GPU job of 50 min.
func sample(t *testing.T) []Task {
	t.Helper()
	f, err := os.Open("testdata/sample.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tasks, err := ParseTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// fixed is a capacity wait of exactly d.
func fixed(d time.Duration) expirybench.WaitDist { return expirybench.WaitDist{Median: d} }

// TestWindow: what the replay submits from the trace, and what it derives.
func TestWindow(t *testing.T) {
	tasks := sample(t)
	if len(tasks) != 8 || tasks[0].Line != 2 || tasks[7].Line != 9 {
		t.Fatalf("parsed %d tasks, lines %d…%d; want 8, lines 2…9", len(tasks), tasks[0].Line, tasks[len(tasks)-1].Line)
	}
	jobs, sk := Window(tasks, 0, 24*time.Hour)
	want := []Job{
		{ID: "1", Task: "sample-01", GPUs: 8, Runtime: time.Hour, Limit: time.Hour},
		// Scheduled 5 min after creation: runtime from scheduled_time.
		{ID: "2", Task: "sample-02", GPUs: 2, Runtime: time.Hour, Limit: time.Hour},
		{ID: "3", Task: "sample-03", GPUs: 2, Runtime: time.Hour, Limit: time.Hour},
		// Half a GPU asks for one whole GPU.
		{ID: "4", Task: "sample-04", GPUs: 1, Runtime: time.Hour, Limit: time.Hour},
		// 8 days: the limit is 192 h.
		{ID: "7", Task: "sample-07", GPUs: 4, Runtime: 192 * time.Hour, Limit: 192 * time.Hour},
	}
	if d := cmp.Diff(want, jobs); d != "" {
		t.Errorf("jobs of day 0 (-want +got):\n%s", d)
	}
	if sk != (Skipped{CPUOnly: 1, NeverRan: 1}) {
		t.Errorf("skipped %+v, want one CPU-only and one never scheduled", sk)
	}
	jobs, _ = Window(tasks, 24*time.Hour, 24*time.Hour)
	if d := cmp.Diff([]Job{{ID: "8", Task: "sample-08", Submit: time.Hour, GPUs: 1, Runtime: 50 * time.Minute, Limit: time.Hour}}, jobs); d != "" {
		t.Errorf("jobs of day 1, submitted relative to its start (-want +got):\n%s", d)
	}
	for run, limit := range map[time.Duration]time.Duration{time.Second: time.Hour, time.Hour: time.Hour, time.Hour + time.Second: 2 * time.Hour, 167*time.Hour + 1: 168 * time.Hour} {
		if got := LimitFor(run); got != limit {
			t.Errorf("LimitFor(%s) = %s, want %s", run, got, limit)
		}
	}
}

// TestParseErrors: a row that does not parse names its line and column.
func TestParseErrors(t *testing.T) {
	head := strings.Join(Columns, ",") + "\n"
	ok := "a,1000,1024,1,1000,,LS,Succeeded,0,3600,0\n"
	for _, tc := range []struct{ name, text, want string }{
		{"num_gpu not a number", head + ok + "b,1000,1024,x,1000,,LS,Succeeded,0,3600,0\n", `line 3, column 4 (num_gpu) "x": not an integer`},
		{"negative creation", head + "b,1000,1024,1,1000,,LS,Succeeded,-5,3600,0\n", `line 2, column 9 (creation_time) "-5": outside 0–31622400`},
		{"gpu_milli beyond one GPU", head + ok + ok + "c,1000,1024,1,1500,,LS,Succeeded,0,3600,0\n", `line 4, column 5 (gpu_milli) "1500": outside 0–1000`},
		{"deleted before created", head + "b,1000,1024,1,1000,,LS,Succeeded,100,50,100\n", `line 2, column 10 (deletion_time) "50": before creation_time 100`},
		{"scheduled after deleted", head + "b,1000,1024,1,1000,,LS,Succeeded,0,50,100\n", `line 2, column 11 (scheduled_time) "100": outside creation_time 0 – deletion_time 50`},
		{"scheduled with no end", head + "b,1000,1024,1,1000,,LS,Running,0,,10\n", `line 2, column 10 (deletion_time) "": empty for a task that was scheduled`},
		{"missing column", "name,num_gpu\n", `line 1, column 3: the header lacks column "cpu_milli"`},
		{"short row", head + ok + "b,1000\n", "line 3, column 1"},
		{"empty file", "", "line 1, column 1: empty file"},
		{"bare quote", head + ok + "b,1000,1024,1,1000,,L\"S,Running,0,10,0\n", `line 3, column 22: bare " in non-quoted-field`},
		{"columns in another order", "scheduled_time,name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time\n0,a,1,1,zz,0,,LS,Running,0,5\n",
			`line 2, column 5 (num_gpu) "zz": not an integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTrace(strings.NewReader(tc.text))
			var pe *ParseError
			if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want a ParseError containing %q", err, tc.want)
			}
		})
	}
	if _, err := ParseTrace(strings.NewReader(head + ok)); err != nil {
		t.Errorf("a good row: %v", err)
	}
}

// TestOneWholeNodeJob: one 8-GPU job of 1 h on an empty pool, capacity
// after exactly 10 min, boot 5 min. The VM runs from 10 min; the node
// registers and the job runs 15–75 min. flexslurm's first snapshot showing
// the node idle is the 80 min tick (the 75 min one was taken as the job
// ended), and it releases the node 10 min (IdleTimeout) after: VM time
// 80 min, 20 min of it idle (boot, then 75–90). Slurm with SuspendTime
// 300 s powers it down at 80 min: 70 min, 10 idle. With capacity as long
// as the job, the VM is asked for the 1 h limit plus the 15 min boot
// allowance and ends at 85 min, before flexslurm would release it: 75 min,
// 15 idle. The oracle is the 8 GPU-hours plus one boot of 8 GPUs.
func TestOneWholeNodeJob(t *testing.T) {
	jobs := []Job{{ID: "1", GPUs: 8, Runtime: time.Hour, Limit: time.Hour}}
	res, err := Compare(context.Background(), Config{Wait: fixed(10 * time.Minute)}, jobs, []Strategy{Default, CapacityAsLongAsJob, ToolkitBaseline})
	if err != nil {
		t.Fatal(err)
	}
	def, hook, base := res[0], res[1], res[2]
	for _, c := range []struct {
		r          *Result
		vm, idle   time.Duration
		paidGPUHrs float64
	}{{def, 80 * time.Minute, 20 * time.Minute, 80.0 / 60 * 8}, {hook, 75 * time.Minute, 15 * time.Minute, 75.0 / 60 * 8}, {base, 70 * time.Minute, 10 * time.Minute, 70.0 / 60 * 8}} {
		name := c.r.Strategy.Name
		if c.r.VMTime != c.vm || c.r.IdleVMTime != c.idle || c.r.GPUTimePaid().Hours() != c.paidGPUHrs {
			t.Errorf("%s: VM time %s (idle %s), paid %.3f GPU-h; want %s (idle %s), %.3f", name, c.r.VMTime, c.r.IdleVMTime, c.r.GPUTimePaid().Hours(), c.vm, c.idle, c.paidGPUHrs)
		}
		if c.r.GPUTimeUsed != 8*time.Hour || c.r.GPUTimeHeld != 8*time.Hour || c.r.NodeStarts != 1 || c.r.Completed != 1 || c.r.Refused != 0 {
			t.Errorf("%s: used %s, held %s, %d node starts, %d completed, %d refused; want 8h, 8h, 1, 1, 0", name, c.r.GPUTimeUsed, c.r.GPUTimeHeld, c.r.NodeStarts, c.r.Completed, c.r.Refused)
		}
		if c.r.GPUTimePaid() < c.r.GPUTimeUsed {
			t.Errorf("%s: paid %s below used %s", name, c.r.GPUTimePaid(), c.r.GPUTimeUsed)
		}
		if d := cmp.Diff([]time.Duration{0}, c.r.AddedDelays); d != "" {
			t.Errorf("%s: added delays (-want +got):\n%s", name, d)
		}
		if d := cmp.Diff([]time.Duration{10 * time.Minute}, c.r.CapacityWaits); d != "" {
			t.Errorf("%s: capacity waits (-want +got):\n%s", name, d)
		}
		if n := c.r.ComputeCalls["CreateResizeRequest"]; n != 1 {
			t.Errorf("%s: %d CreateResizeRequest calls, want 1", name, n)
		}
	}
	if o := Oracle(def); o != 8*time.Hour+40*time.Minute {
		t.Errorf("oracle %s, want 8h40m", o)
	}
	if hook.KilledByExpiry+hook.KilledByDeletion != 0 {
		t.Errorf("capacity as long as the job: %d jobs killed, want none", hook.KilledByExpiry+hook.KilledByDeletion)
	}
	var b bytes.Buffer
	WriteReport(&b, Source{File: "one job"}, res)
	if want := "flexslurm, capacity as long as the job: the pool sets use_job_duration; each job's resize request asks for its time limit plus a 15m boot allowance"; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
}

// TestSampleReplay: the sample's day 0 packs by GPUs. Job 1 (8 GPUs) has
// node 0 to itself; job 2 (2 GPUs) powers up node 1, which jobs 3 (2 GPUs)
// and 4 (half a GPU: 1) share while it boots; job 7 (8 days) is refused.
// Both VMs come at 10 min and run 80 min (as in TestOneWholeNodeJob):
// 160 VM-minutes, 21h20m GPU-hours paid for 13 used.
func TestSampleReplay(t *testing.T) {
	tasks := sample(t)
	jobs, sk := Window(tasks, 0, 24*time.Hour)
	res, err := Compare(context.Background(), Config{Wait: fixed(10 * time.Minute), Length: 24 * time.Hour}, jobs, []Strategy{Default})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	// 13 GPUs held for 1 h (15–75 min) pack onto 2 nodes: 2 VM-hours.
	got := []any{r.Jobs, r.Refused, r.Completed, r.PendingAtEnd, r.NodeStarts, r.VMTime, r.GPUTimePaid(), r.GPUTimeUsed, r.GPUTimeHeld, r.PackedVMTime, Oracle(r), r.KilledByExpiry + r.KilledByDeletion}
	want := []any{5, 1, 4, 0, 2, 160 * time.Minute, 1280 * time.Minute, 13 * time.Hour, 13 * time.Hour, 2 * time.Hour, 13*time.Hour + 80*time.Minute, 0}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("jobs, refused, completed, left, node starts, VM time, paid, used, held, packed VM time, oracle, killed (-want +got):\n%s", d)
	}
	// Two jobs powered nodes up (ResumeProgram); 3 and 4 joined node 1
	// while it was powering up, without a report of their own.
	if len(r.AddedDelays) != 2 {
		t.Errorf("added delays %v, want two (jobs 1 and 2)", r.AddedDelays)
	}
	var b bytes.Buffer
	WriteReport(&b, Source{File: "testdata/sample.csv", Tasks: len(tasks), Skipped: sk}, res)
	for _, s := range []string{"| GPU-hours paid (VM-hours × 8) | 21.3 | 14.3 |", "| jobs refused as fitting no node (their GPU-hours in the trace) | 1 (768.0) |", "Weng et al.", "github.com/alibaba/clusterdata",
		"time limit is its runtime rounded up to the hour", "a node registers 5m after its VM runs", "uniform 10m–10m (seed 0)",
		"| GPU-hours paid ≤ 1.10 × the oracle's | 21.3 ÷ 14.3 = 1.49 | **MISSED** |", "| no job killed by a VM's end | 0 | met |",
		"| delay added, p99 ≤ one reconcile period (5m) | 0s | met |"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}
}

// TestEndOfLifeReservationSavesTheJob: VMs of a 2 h pool. Job 1 (1 GPU,
// 1h40m) powers up node 0, whose VM runs 10 min → 2h10m. Job 2 (1 GPU,
// 50 min, limit 1 h) comes at 1h30m: node 0 has GPUs free but ends within
// the job's limit. flexslurm's end-of-life reservation keeps the job off
// it (a second node starts, nothing is killed); Slurm without the
// reservation packs it there and the VM's end kills it (requeued, it runs
// again on a new node).
func TestEndOfLifeReservationSavesTheJob(t *testing.T) {
	jobs := []Job{
		{ID: "1", GPUs: 1, Runtime: 100 * time.Minute, Limit: 2 * time.Hour},
		{ID: "2", Submit: 90 * time.Minute, GPUs: 1, Runtime: 50 * time.Minute, Limit: time.Hour},
	}
	cfg := Config{Wait: fixed(10 * time.Minute), MaxRunDuration: 2 * time.Hour}
	res, err := Compare(context.Background(), cfg, jobs, []Strategy{Default, ToolkitBaseline})
	if err != nil {
		t.Fatal(err)
	}
	def, base := res[0], res[1]
	if def.KilledByExpiry != 0 || def.KilledByDeletion != 0 || def.NodeStarts != 2 || def.Completed != 2 || def.GPUTimeLost != 0 {
		t.Errorf("flexslurm default: killed %d by expiry, %d by deletion, %d node starts, %d completed, %s lost; want 0, 0, 2, 2, 0",
			def.KilledByExpiry, def.KilledByDeletion, def.NodeStarts, def.Completed, def.GPUTimeLost)
	}
	// Job 2 ran from 1h30m to node 0's end at 2h10m: 40 GPU-minutes lost.
	if base.KilledByExpiry != 1 || base.Completed != 2 || base.GPUTimeLost != 40*time.Minute || base.NodeStarts != 2 {
		t.Errorf("Cluster Toolkit defaults: killed %d by expiry, %d completed, %s lost, %d node starts; want 1, 2, 40m, 2",
			base.KilledByExpiry, base.Completed, base.GPUTimeLost, base.NodeStarts)
	}
}

// TestConfigValidate: what the replay refuses to run.
func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{MaxRunDuration: time.Minute}, {Tick: 30 * time.Second}, {From: -time.Hour}, {MaxNodes: 5000}, {Wait: expirybench.WaitDist{Median: time.Minute, Sigma: 9}}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: valid, want an error", c)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestJobSizedNodeTakesNoLongerJobWhileItBoots: with capacity as long as
// the job, job 1 (1 GPU, limit 1 h) powers up node 0, whose VM is asked
// for 1h15m. Job 2 (1 GPU, limit 3 h) comes a minute later, while node 0
// waits for capacity: Slurm would pack it there, and node 0's VM would
// end under it. The node's end-of-life reservation, placed with the
// request, keeps it off: a second node starts, nothing is killed.
func TestJobSizedNodeTakesNoLongerJobWhileItBoots(t *testing.T) {
	jobs := []Job{
		{ID: "1", GPUs: 1, Runtime: 50 * time.Minute, Limit: time.Hour},
		{ID: "2", Submit: time.Minute, GPUs: 1, Runtime: 3 * time.Hour, Limit: 3 * time.Hour},
	}
	res, err := Compare(context.Background(), Config{Wait: fixed(10 * time.Minute)}, jobs, []Strategy{CapacityAsLongAsJob})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.KilledByExpiry != 0 || r.KilledByDeletion != 0 || r.Completed != 2 || r.NodeStarts != 2 || r.GPUTimeLost != 0 {
		t.Errorf("killed %d by expiry, %d by deletion, %d completed, %d node starts, %s lost; want 0, 0, 2, 2, 0",
			r.KilledByExpiry, r.KilledByDeletion, r.Completed, r.NodeStarts, r.GPUTimeLost)
	}
}
