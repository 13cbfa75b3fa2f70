package reactbench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/emulator"
)

func TestPercentileNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 50; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{
		{50, 25 * time.Millisecond}, // ceil(0.5·50) = 25th
		{99, 50 * time.Millisecond}, // ceil(0.99·50) = 50th: the largest
		{98, 49 * time.Millisecond}, // ceil(0.98·50) = 49th
		{100, 50 * time.Millisecond},
		{1, 1 * time.Millisecond},
	} {
		if got := Percentile(ds, c.p); got != c.want {
			t.Errorf("Percentile(1..50 ms, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if ds[0] != 50*time.Millisecond {
		t.Errorf("Percentile sorted its argument in place")
	}
	if got := Percentile(nil, 99); got != 0 {
		t.Errorf("Percentile(nil) = %v, want 0", got)
	}
	// Nearest rank rounds up: of 10 values, p21 is the 3rd (2.1 → 3).
	if got := Percentile(ds[40:], 21); got != 3*time.Millisecond {
		t.Errorf("Percentile(1..10 ms, 21) = %v, want 3ms", got)
	}
	// 200 values: p99 is the 198th.
	ds = ds[:0]
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	if got := Percentile(ds, 99); got != 198*time.Second {
		t.Errorf("Percentile(1..200 s, 99) = %v, want 198s", got)
	}
	s := Summarize(ds)
	if s.N != 200 || s.P50 != 100*time.Second || s.Max != 200*time.Second {
		t.Errorf("Summarize = %+v", s)
	}
}

func TestRatio(t *testing.T) {
	if got := Ratio(1200*time.Millisecond, SlurmsyncPeriod); got != "1/25" {
		t.Errorf("Ratio(1.2s, 30s) = %q, want 1/25", got)
	}
	if got := Ratio(3*time.Second, ClustermgtdPeriod); got != "1/20" {
		t.Errorf("Ratio(3s, 60s) = %q, want 1/20", got)
	}
}

const ctldSample = `[2026-12-07T11:34:22.952] powering up node flexvm-a3u-0
[2026-12-07T11:34:24.570] Node flexvm-a3u-0 now responding
[2026-12-07T11:34:25.806] sched: Allocate JobId=1 NodeList=flexvm-a3u-2 #CPUs=1 Partition=a3u
[2026-12-07T11:34:30.856] Node flexvm-a3u-2 now responding
[2026-12-07T11:34:33.876] update_node: node flexvm-a3u-2 reason set to: flexslurm: health check failed on flexvm-a3u-2-g1: kernel_log: Xid 79
[2026-12-07T11:34:33.876] update_node: node flexvm-a3u-2 state set to DRAINING
[2026-12-07T11:35:10.000] update_node: node flexvm-a3u-1 reason set to: flexslurm: VM flexvm-a3u-1-g1 reached its max run duration (compute.instances.deferredDelete)
not a log line
`

const hookSample = `{"time":"2026-12-07T11:34:23.888962828Z","severity":"INFO","message":"nodes resumed without a job: no job.pending for them","hook":"resume","cluster":"flexvm","pid":5823,"nodes":"flexvm-a3u-[0-1]"}
{"time":"2026-12-07T11:34:23.889011168Z","severity":"INFO","message":"hook done","hook":"resume","cluster":"flexvm","pid":5823,"args":["flexvm-a3u-[0-1]"],"exit":0,"elapsed_ms":0.166,"error":null}
{"time":"2026-12-07T11:34:26.141011127Z","severity":"INFO","message":"events sent","hook":"prolog-ctld","cluster":"flexvm","pid":6002,"slurm_job_id":"1","published":1}
{"time":"2026-12-07T11:34:26.983121297Z","severity":"INFO","message":"hook done","hook":"resume","cluster":"flexvm","pid":6102,"args":["flexvm-a3u-2"],"exit":0,"elapsed_ms":135.0,"error":null}
{"time":"2026-12-07T11:34:40.000Z","severity":"INFO","message":"nodes resumed without a job: no job.pending for them","hook":"resume","cluster":"flexvm","pid":7000,"nodes":"flexvm-a3u-0"}
{"time":"2026-12-07T11:34:40.500Z","severity":"INFO","message":"hook done","hook":"resume","cluster":"flexvm","pid":7000,"args":["flexvm-a3u-[0,5]"],"exit":0,"elapsed_ms":500,"error":null}
`

func at(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
	if err != nil {
		panic(err)
	}
	return t
}

// TestPairEveryKind pairs one event of each kind from sample records of
// slurmctld's log, the hooks' log, the simulator and the topics, and
// checks each reaction's length and which records are left out.
func TestPairEveryKind(t *testing.T) {
	ctld, err := ParseCtldLog(strings.NewReader(ctldSample), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if len(ctld) != 5 { // power-up, 2 responding, 2 drain lines; the expiry's reason is not a drain
		t.Fatalf("ParseCtldLog: %d events, want 5: %+v", len(ctld), ctld)
	}
	resume, err := ParseHookLog(strings.NewReader(hookSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(resume) != 3 || !resume[0].NoJob["flexvm-a3u-1"] || len(resume[1].NoJob) != 0 || len(resume[0].Nodes) != 2 ||
		!resume[2].NoJob["flexvm-a3u-0"] || resume[2].NoJob["flexvm-a3u-5"] {
		t.Fatalf("ParseHookLog = %+v", resume)
	}
	if want := at("2026-12-07T11:34:26.848121297"); !resume[1].Called.Equal(want) {
		t.Errorf("ResumeProgram called at %v, want %v (done − elapsed_ms)", resume[1].Called, want)
	}
	r := Records{
		Ctld:   ctld,
		Resume: resume,
		Requests: []Request{
			{Name: "rr-2-g1", Node: "flexvm-a3u-2", Created: at("2026-12-07T11:34:27.048121297")},
			{Name: "rr-2-g2", Node: "flexvm-a3u-2", Created: at("2026-12-07T11:34:35.000")},
			{Name: "rr-1-g2", Node: "flexvm-a3u-1", Created: at("2026-12-07T11:35:10.500")},
			// Node 5's request came from PrologSlurmctld's report, 5 s
			// before ResumeProgram ran: a reaction of 0.
			{Name: "rr-5-g1", Node: "flexvm-a3u-5", Created: at("2026-12-07T11:34:35.000")},
		},
		VMs: []VM{{Name: "flexvm-a3u-2-g1", Node: "flexvm-a3u-2", Running: at("2026-12-07T11:34:27.856")},
			// Deleted before its slurmd registered: neither a sample nor a miss.
			{Name: "flexvm-a3u-9-g1", Node: "flexvm-a3u-9", Running: at("2026-12-07T11:34:50"), Gone: at("2026-12-07T11:34:55")}},
		Health: []Message{{Node: "flexvm-a3u-2", VM: "flexvm-a3u-2-g1", Published: at("2026-12-07T11:34:34.000")}, {Node: "flexvm-a3u-2", VM: "flexvm-a3u-2-g1", Published: at("2026-12-07T11:34:34.100")}},
		Expiry: []Message{{Node: "flexvm-a3u-1", VM: "flexvm-a3u-1-g1", Published: at("2026-12-07T11:35:10.100")}, {Node: "flexvm-a3u-3", VM: "flexvm-a3u-3-g1", Published: at("2026-12-07T11:35:11.000")}},
	}
	p := r.Pair("test", at("2026-12-07T11:34:00"), at("2026-12-07T11:36:00"), 2*time.Second)
	want := map[Kind]time.Duration{
		KindResume:   200 * time.Millisecond,  // 26.848 → 27.048; the static nodes' jobless resume is not counted
		KindRegister: 1000 * time.Millisecond, // 27.856 → 30.856, less the 2 s boot
		KindHealth:   1000 * time.Millisecond, // 34.000 → max(drain 33.876, request 35.000); the repeated report is not a new event
		KindExpiry:   400 * time.Millisecond,  // 10.100 → 10.500
	}
	for _, k := range Kinds {
		ds := p.Durations(k)
		if k == KindResume {
			if len(ds) != 2 || ds[0] != want[k] || ds[1] != 0 {
				t.Errorf("%s: %v, want [%v 0s] (node 5's request existed before the call)", k, ds, want[k])
			}
			continue
		}
		if len(ds) != 1 || ds[0] != want[k] {
			t.Errorf("%s: %v, want [%v]", k, ds, want[k])
		}
	}
	notes := strings.Join(p.Notes, "\n")
	for _, w := range []string{"1 expiry event(s) without an end", "1 resume event(s) whose resize request already existed", "1 VM(s) deleted before their slurmd registered"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes %q, want %q", p.Notes, w)
		}
	}
	if len(p.Notes) != 3 {
		t.Errorf("notes %q, want 3", p.Notes)
	}
	var b bytes.Buffer
	WriteTable(&b, []Phase{p})
	if !strings.Contains(b.String(), "| 0.200 s |") || strings.Contains(b.String(), "MISSED") {
		t.Errorf("table:\n%s", b.String())
	}
	// Outside the window, nothing is counted.
	if q := r.Pair("later", at("2026-12-07T12:00:00"), at("2026-12-07T12:01:00"), 2*time.Second); len(q.Samples) != 0 {
		t.Errorf("events outside the window counted: %+v", q.Samples)
	}
}

// TestRunCollectsEveryKind runs the benchmark for real, small: a couple of
// events of each kind one at a time and a burst of a few jobs, on the
// local system with real Slurm. It skips loudly without what it needs.
func TestRunCollectsEveryKind(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: starts the local system with real Slurm (not with -short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the local Slurm runs as root (make demo's prerequisites)")
	}
	if _, err := exec.LookPath("slurmctld"); err != nil {
		t.Skip("SKIP: no slurmctld on PATH (make demo installs Slurm 22.05)")
	}
	if _, err := emulator.Locate(); err != nil {
		t.Skipf("SKIP: no Firestore and Pub/Sub emulators: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "flexslurm")
	build := exec.Command("go", "build", "-o", exe, "./cmd/flexslurm")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building flexslurm: %v\n%s", err, out)
	}
	var log bytes.Buffer
	res, err := Run(context.Background(), Options{Events: 2, Burst: 6, BurstNodes: 3, StaticNodes: 1,
		SpecPath: filepath.Join(root, "examples", "cluster_config.json"), RunDir: t.TempDir(), Exe: exe, Log: &log})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	for _, k := range Kinds {
		if n := len(res.Phases[0].Samples[k]); n < 2 {
			t.Errorf("one at a time: %d %s events, want at least 2", n, k)
		}
	}
	if n := len(res.Phases[1].Samples[KindResume]); n == 0 {
		t.Errorf("burst: no resume event")
	}
	if t.Failed() {
		var b bytes.Buffer
		WriteTable(&b, res.Phases)
		t.Logf("%s\n%s", b.String(), log.String())
	}
}
