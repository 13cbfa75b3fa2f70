package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// fakePub records publishes; fail makes every publish fail.
type fakePub struct {
	mu   sync.Mutex
	msgs []Message
	fail error
}

func (f *fakePub) Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return "", f.fail
	}
	f.msgs = append(f.msgs, Message{Topic: topic, Data: append([]byte(nil), data...), Attributes: attrs})
	return "id", nil
}

func (f *fakePub) sent() []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.msgs)
}

// testPolicy lets this process's user send what both roles send, to the
// default topics.
func testPolicy() SpoolPolicy {
	return SpoolPolicy{Senders: SpoolSenders{os.Geteuid(): {RoleNode, RoleController}}}
}

// jobMsg is a job.pending message for job id to the default jobs topic.
func jobMsg(id string) Message {
	data, _ := json.Marshal(event.Job{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeJobPending, Cluster: "flexvm"},
		JobID: id, Partition: "a3u", Nodes: []string{"flexvm-a3u-0"}, NodeCount: 1})
	return Message{Topic: "job-pending", Data: data, Attributes: map[string]string{"type": event.TypeJobPending}}
}

func jobIDs(t *testing.T, msgs []Message) []string {
	t.Helper()
	var ids []string
	for _, j := range decodeJobs(t, msgs) {
		ids = append(ids, j.JobID)
	}
	return ids
}

func TestSpoolLifecycle(t *testing.T) {
	s := &Spool{Dir: filepath.Join(t.TempDir(), "spool"), Policy: testPolicy()}
	t0 := time.Unix(1800000000, 0)
	var entries []Entry
	for i, id := range []string{"1", "2", "3"} {
		e, err := s.Put(jobMsg(id), t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	if st, err := os.Stat(s.Dir); err != nil || st.Mode().Perm() != 0o755 || st.Mode()&os.ModeSticky != 0 {
		t.Errorf("spool root mode = %v, %v; want 0755", st.Mode(), err)
	}
	if st, err := os.Stat(s.userDir()); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("user directory mode = %v, %v; want 0700", st.Mode(), err)
	}
	// Claimed by this process: nobody else may take them.
	if got, err := s.Claim(10); err != nil || len(got) != 0 {
		t.Fatalf("Claim while all are claimed = %d entries, %v; want none", len(got), err)
	}
	if err := s.Done(entries[1]); err != nil {
		t.Fatal(err)
	}
	for _, e := range []Entry{entries[2], entries[0]} {
		if err := s.Release(e); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Pending(); n != 2 {
		t.Errorf("Pending = %d, want 2", n)
	}
	got, err := s.Claim(10)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []Message
	for _, e := range got {
		msgs = append(msgs, e.Msg)
	}
	if diff := cmp.Diff([]string{"1", "3"}, jobIDs(t, msgs)); diff != "" {
		t.Errorf("Claim order (-want +got):\n%s", diff)
	}
	if got[0].SpooledAt.Unix() != t0.Unix() {
		t.Errorf("SpooledAt = %v, want %v", got[0].SpooledAt, t0)
	}
}

func TestSpoolRecoversStaleClaimsAndBadFiles(t *testing.T) {
	s := &Spool{Dir: t.TempDir(), Policy: testPolicy()}
	e, err := s.Put(jobMsg("7"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Pretend a process that died holds it: PID 0 never runs.
	ready, _ := readyName(e.Path)
	dead := ready + ".claimed-0"
	if err := os.Rename(e.Path, dead); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(s.userDir(), "0000000000000000001-1-ffff.msg")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(10)
	if err == nil || !strings.Contains(err.Error(), "set aside") {
		t.Errorf("Claim error = %v, want the unreadable file reported", err)
	}
	if len(got) != 1 || got[0].Msg.Topic != "job-pending" {
		t.Fatalf("Claim = %+v, want the message of the dead claim", got)
	}
	if _, err := os.Stat(bad + ".bad"); err != nil {
		t.Errorf("unreadable file not moved aside: %v", err)
	}
}

func TestOutbox(t *testing.T) {
	spool := &Spool{Dir: t.TempDir(), Policy: testPolicy()}
	pub := &fakePub{fail: errors.New("unavailable")}
	o := &Outbox{Spool: spool, Pub: pub, Timeout: time.Second}
	msgs := []Message{jobMsg("1"), jobMsg("2")}
	res, err := o.Send(context.Background(), msgs)
	if err != nil || res != (Result{Spooled: 2}) {
		t.Fatalf("Send with Pub/Sub down = %+v, %v; want 2 spooled", res, err)
	}
	pub.fail = nil
	res, err = o.Send(context.Background(), []Message{jobMsg("3")})
	if err != nil || res != (Result{Published: 1}) {
		t.Fatalf("Send = %+v, %v; want 1 published", res, err)
	}
	res, err = o.Flush(context.Background())
	if err != nil || res != (Result{Published: 2}) {
		t.Fatalf("Flush = %+v, %v; want 2 published", res, err)
	}
	if diff := cmp.Diff([]string{"1", "2", "3"}, jobIDs(t, pub.sent()), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
	if n := spool.Pending(); n != 0 {
		t.Errorf("Pending after flush = %d", n)
	}
	// An unwritable spool still publishes.
	o.Spool = &Spool{Dir: "/proc/flexslurm-no-such-dir"}
	if res, err := o.Send(context.Background(), msgs[:1]); err != nil || res.Published != 1 {
		t.Errorf("Send with an unwritable spool = %+v, %v; want published", res, err)
	}
	pub.fail = errors.New("down")
	if res, err := o.Send(context.Background(), msgs[:1]); err == nil || res.Lost != 1 {
		t.Errorf("Send with neither spool nor Pub/Sub = %+v, %v; want lost and an error", res, err)
	}
}

// TestOutboxSpoolsWithinDeadlineWhenPubSubUnreachable uses the real Pub/Sub
// client against a closed port.
func TestOutboxSpoolsWithinDeadlineWhenPubSubUnreachable(t *testing.T) {
	t.Setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:9")
	client, err := pubsub.New(context.Background(), "flexslurm-test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeWithin(client, 100*time.Millisecond)
	spool := &Spool{Dir: t.TempDir(), Policy: testPolicy()}
	o := &Outbox{Spool: spool, Pub: client, Timeout: 300 * time.Millisecond}
	start := time.Now()
	res, err := o.Send(context.Background(), []Message{{Topic: "job-pending", Data: []byte(`{}`)}})
	// Without the timeout Send retries the unreachable Pub/Sub
	// indefinitely; the bound is loose so that a loaded machine passes.
	if elapsed := time.Since(start); elapsed > 15*time.Second {
		t.Errorf("Send took %v with a 300 ms timeout", elapsed)
	}
	if err != nil || res.Spooled != 1 || spool.Pending() != 1 {
		t.Errorf("Send = %+v, %v, pending %d; want the message spooled", res, err, spool.Pending())
	}
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hooks.json")
	if err := os.WriteFile(path, []byte(`{"cluster": "flexvm", "project": "p", "publish_timeout": "250ms", "check_cmd": ["/bin/false"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if time.Duration(c.PublishTimeout) != 250*time.Millisecond || c.SpoolDir != DefaultSpoolDir || c.Topics.Jobs != "job-pending" {
		t.Errorf("config = %+v", c)
	}
	if err := os.WriteFile(path, []byte(`{"cluster": "flexvm", "projet": "p"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil {
		t.Errorf("a misspelt field: want an error")
	}
	bad := Config{Cluster: "Flex-VM", SpoolDir: "rel", CheckCmd: []string{"gpu-check"}}.withDefaults()
	err = bad.Validate()
	for _, want := range []string{"cluster", "project", "spool_dir", "check_cmd"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%+v) = %v, want it to mention %s", bad, err, want)
		}
	}

	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	link := filepath.Join(dir, slurm.HookLinkPrefix+"resume")
	if got := ConfigPath("", link, getenv); got != path {
		t.Errorf("ConfigPath beside a hook link = %q, want %q", got, path)
	}
	// slurmctld passes ResumeProgram only its base name as argv[0]: the
	// link's directory comes from slurm.conf.
	slurmConf := filepath.Join(dir, "slurm.conf")
	if err := os.WriteFile(slurmConf, []byte("ClusterName=flexvm\n# ResumeProgram=/old/x\nresumeprogram = "+link+"  # hooks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env["SLURM_CONF"] = slurmConf
	if got := ConfigPath("", slurm.HookLinkPrefix+"resume", getenv); got != path {
		t.Errorf("ConfigPath(base name only) = %q, want %q (from slurm.conf)", got, path)
	}
	if got := ConfigPath("", slurm.HookLinkPrefix+"suspend", getenv); got != DefaultConfigPath {
		t.Errorf("ConfigPath(suspend, not in slurm.conf) = %q, want %q", got, DefaultConfigPath)
	}
	if got := ConfigPath("", "/usr/bin/flexslurm", getenv); got != DefaultConfigPath {
		t.Errorf("ConfigPath of the plain binary = %q, want %q", got, DefaultConfigPath)
	}
	env[EnvConfig] = "/etc/x.json"
	if got := ConfigPath("", link, getenv); got != "/etc/x.json" {
		t.Errorf("ConfigPath with %s = %q", EnvConfig, got)
	}
	if got := ConfigPath("/flag.json", link, getenv); got != "/flag.json" {
		t.Errorf("ConfigPath with a flag = %q", got)
	}
}

func TestCommandCheck(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		argv    []string
		verdict string
		reasons []string
	}{
		{[]string{"/bin/true"}, VerdictPass, nil},
		{[]string{"/bin/false"}, VerdictFail, []string{"check command /bin/false exited with status 1"}},
		{[]string{"/bin/sh", "-c", `echo '{"verdict": "FAIL", "reasons": ["GPU 3: 2 uncorrectable ECC errors", " "]}'; exit 1`},
			VerdictFail, []string{"GPU 3: 2 uncorrectable ECC errors"}},
		{[]string{"/bin/sh", "-c", "printf 'xid 79\\n\\nfallen off the bus\\n'; exit 1"}, VerdictFail, []string{"xid 79", "fallen off the bus"}},
		{[]string{"/bin/sh", "-c", "exit 2"}, VerdictInconclusive, nil},
		{[]string{"/nonexistent/check"}, VerdictInconclusive, nil},
		{[]string{"/bin/sleep", "5"}, VerdictInconclusive, nil},
	}
	for _, tt := range tests {
		start := time.Now()
		v, reasons := CommandCheck(tt.argv, nil, 300*time.Millisecond)(ctx)
		if v != tt.verdict {
			t.Errorf("%q: verdict %s, want %s (reasons %q)", tt.argv, v, tt.verdict, reasons)
		}
		if tt.verdict == VerdictFail {
			if diff := cmp.Diff(tt.reasons, reasons); diff != "" {
				t.Errorf("%q reasons (-want +got):\n%s", tt.argv, diff)
			}
		}
		// Under the 5 s of /bin/sleep 5: the check was killed at its
		// timeout, with room for a loaded machine.
		if time.Since(start) > 4500*time.Millisecond {
			t.Errorf("%q took %v with a 300 ms timeout", tt.argv, time.Since(start))
		}
	}
	long := make([]string, 20)
	for i := range long {
		long[i] = strings.Repeat("é", 400)
	}
	b := BoundReasons(long)
	if len(b) != event.MaxHealthReasons || len(b[0]) > event.MaxHealthReasonBytes || !strings.HasSuffix(b[0], "…") {
		t.Errorf("BoundReasons: %d reasons, first %d bytes", len(b), len(b[0]))
	}
}

// testRuntime is a Runtime for the example cluster (flexvm, pool a3u, 3
// nodes) with a fake publisher and no Slurm (commands fail fast).
func testRuntime(t *testing.T, env map[string]string) (*Runtime, *fakePub) {
	t.Helper()
	c, err := spec.Load("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	pub := &fakePub{}
	cfg := Config{Cluster: "flexvm", Project: "p", SpoolDir: t.TempDir()}.withDefaults()
	return &Runtime{
		Config:   cfg,
		Topology: slurm.TopologyOf(c),
		Slurm:    &slurm.Runner{BinDir: t.TempDir(), Timeout: time.Second},
		Outbox:   &Outbox{Spool: &Spool{Dir: cfg.SpoolDir, Policy: testPolicy()}, Pub: pub, Timeout: time.Second},
		Getenv:   func(k string) string { return env[k] },
		Now:      func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) },
		Log:      slog.New(slog.DiscardHandler),
	}, pub
}

func decodeJobs(t *testing.T, msgs []Message) []event.Job {
	t.Helper()
	var out []event.Job
	for _, m := range msgs {
		j, err := event.DecodeJob(m.Data)
		if err != nil {
			t.Fatalf("published job event does not decode: %v: %s", err, m.Data)
		}
		out = append(out, *j)
	}
	return out
}

func TestResumeWithoutSlurmDetails(t *testing.T) {
	dir := t.TempDir()
	rf := filepath.Join(dir, "resume.json")
	// 22.05 and 23.02+ job entries; a job on another cluster's nodes only.
	if err := os.WriteFile(rf, []byte(`{"jobs":[{"job_id":7,"nodes":"flexvm-a3u-[1-2]"},
		{"job_id":8,"nodes_alloc":"flexvm-a3u-0,other-a3u-1","nodes_resume":"flexvm-a3u-0","partition":"a3u"},
		{"job_id":9,"nodes":"other-a3u-2"}],"all_nodes":"flexvm-a3u-[0-2],other-a3u-[1-2]"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, pub := testRuntime(t, map[string]string{"SLURM_RESUME_FILE": rf})
	if code := rt.Run(context.Background(), slurm.HookResume, []string{"flexvm-a3u-[0-2],other-a3u-[1-2]"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hdr := event.Header{Version: 1, Type: event.TypeJobPending, Cluster: "flexvm"}
	want := []event.Job{
		{Header: hdr, JobID: "7", Partition: "a3u", NodeCount: 2, Nodes: []string{"flexvm-a3u-1", "flexvm-a3u-2"}, ReportedAt: at},
		{Header: hdr, JobID: "8", Partition: "a3u", NodeCount: 1, Nodes: []string{"flexvm-a3u-0"}, ReportedAt: at},
	}
	byID := cmpopts.SortSlices(func(a, b event.Job) bool { return a.JobID < b.JobID })
	if diff := cmp.Diff(want, decodeJobs(t, pub.sent()), byID); diff != "" {
		t.Errorf("job.pending events (-want +got):\n%s", diff)
	}
	for _, m := range pub.sent() {
		if m.Topic != "job-pending" || m.Attributes["type"] != event.TypeJobPending || m.Attributes["cluster"] != "flexvm" {
			t.Errorf("message topic %s attributes %v", m.Topic, m.Attributes)
		}
	}
	if code := rt.Run(context.Background(), slurm.HookResume, []string{"flexvm-a3u-[0-"}); code != 0 {
		t.Errorf("a malformed hostlist: exit %d, want 0 (logged)", code)
	}
}

func TestPowerEvents(t *testing.T) {
	rt, pub := testRuntime(t, nil)
	rt.Run(context.Background(), slurm.HookSuspend, []string{"flexvm-a3u-[1-2],flexvm-a3u-7,other-x-1"})
	rt.Run(context.Background(), slurm.HookResumeFail, []string{"flexvm-a3u-2"})
	var got []event.Node
	for _, m := range pub.sent() {
		n, err := event.DecodeNode(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, *n)
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	want := []event.Node{
		{Header: event.Header{Version: 1, Type: event.TypeNodeSuspend, Cluster: "flexvm"}, Nodes: []string{"flexvm-a3u-1", "flexvm-a3u-2"},
			Reason: "SuspendProgram", ReportedAt: at},
		{Header: event.Header{Version: 1, Type: event.TypeResumeFailed, Cluster: "flexvm"}, Nodes: []string{"flexvm-a3u-2"},
			Reason: "ResumeFailProgram: not resumed within ResumeTimeout", ReportedAt: at},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node events (-want +got):\n%s", diff)
	}
}

func TestCtldHooks(t *testing.T) {
	env := map[string]string{"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "flexvm-a3u-[1-2]", "SLURM_JOB_PARTITION": "a3u",
		"SLURM_JOB_RESTART_COUNT": "1"}
	rt, pub := testRuntime(t, env)
	if code := rt.Run(context.Background(), slurm.HookPrologCtld, nil); code != 0 {
		t.Fatalf("prolog-ctld exit %d", code)
	}
	if code := rt.Run(context.Background(), slurm.HookEpilogCtld, nil); code != 0 {
		t.Fatalf("epilog-ctld exit %d", code)
	}
	env["SLURM_JOB_ID"] = "not-a-job"
	if code := rt.Run(context.Background(), slurm.HookPrologCtld, nil); code != 0 {
		t.Errorf("prolog-ctld with a bad SLURM_JOB_ID: exit %d, want 0 (a failing PrologSlurmctld requeues the job)", code)
	}
	got := decodeJobs(t, pub.sent())
	if len(got) != 2 || got[0].Type != event.TypeJobStarted || !got[0].Requeued || got[1].Type != event.TypeJobFinished ||
		!slices.Equal(got[1].Nodes, []string{"flexvm-a3u-1", "flexvm-a3u-2"}) || got[1].Partition != "a3u" {
		t.Errorf("ctld events = %+v", got)
	}
}

// TestNodeCheckFailure: a failed check is reported by the prolog (job
// pending, exit 1) and the epilog (exit 0), each naming itself as the
// report's hook; a node of another cluster is left alone.
func TestNodeCheckFailure(t *testing.T) {
	env := map[string]string{"SLURMD_NODENAME": "flexvm-a3u-1", "SLURM_JOB_ID": "42"}
	rt, pub := testRuntime(t, env)
	rt.Config.VMNameDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(rt.Config.VMNameDir, "flexvm-a3u-1"), []byte("flexvm-a3u-1-g3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rt.Check = func(context.Context) (string, []string) { return VerdictFail, []string{"GPU 3: Xid 79"} }
	if code := rt.Run(context.Background(), slurm.HookProlog, nil); code != 1 {
		t.Errorf("prolog on FAIL: exit %d, want 1 (Slurm requeues the job held)", code)
	}
	if code := rt.Run(context.Background(), slurm.HookEpilog, nil); code != 0 {
		t.Errorf("epilog on FAIL: exit %d, want 0", code)
	}
	rt.Check = PassCheck
	if code := rt.Run(context.Background(), slurm.HookHealth, nil); code != 0 {
		t.Errorf("healthcheck on PASS: exit %d", code)
	}
	env["SLURMD_NODENAME"] = "other-a3u-1"
	rt.Check = func(context.Context) (string, []string) { return VerdictFail, []string{"x"} }
	if code := rt.Run(context.Background(), slurm.HookProlog, nil); code != 0 {
		t.Errorf("prolog on another cluster's node: exit %d, want 0", code)
	}
	var got []event.Health
	for _, m := range pub.sent() {
		h, err := event.DecodeHealth(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if m.Topic != "health-failure" {
			t.Errorf("topic %s", m.Topic)
		}
		got = append(got, *h)
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hdr := event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: "flexvm"}
	want := []event.Health{
		{Header: hdr, Hook: "prolog", Node: "flexvm-a3u-1", Generation: 3, VMName: "flexvm-a3u-1-g3", JobID: "42", JobState: "pending",
			Verdict: "FAIL", Reasons: []string{"GPU 3: Xid 79"}, CheckedAt: at},
		{Header: hdr, Hook: "epilog", Node: "flexvm-a3u-1", Generation: 3, VMName: "flexvm-a3u-1-g3", JobID: "42",
			Verdict: "FAIL", Reasons: []string{"GPU 3: Xid 79"}, CheckedAt: at},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("health events (-want +got):\n%s", diff)
	}
}

func TestCommandUsageErrors(t *testing.T) {
	var stdout, stderr strings.Builder
	getenv := func(string) string { return "" }
	if code := Command(context.Background(), []string{"nope"}, "flexslurm", getenv, &stdout, &stderr); code != 2 || stdout.Len() != 0 {
		t.Errorf("unknown hook: exit %d, stdout %q", code, stdout.String())
	}
	stderr.Reset()
	if code := Command(context.Background(), []string{"resume", "-h"}, "flexslurm", getenv, &stdout, &stderr); code != 0 ||
		!strings.HasPrefix(stdout.String(), "usage: flexslurm hook") || !strings.Contains(stdout.String(), "-check-cmd") || stderr.Len() != 0 {
		t.Errorf("resume -h: exit %d, stdout %q, stderr %q; want the usage on stdout", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	cfg := filepath.Join(t.TempDir(), "hooks.json")
	if err := WriteConfig(cfg, Config{Cluster: "flexvm"}); err != nil {
		t.Fatal(err)
	}
	if code := Command(context.Background(), []string{"suspend", "--config", cfg, "flexvm-a3u-1"}, "flexslurm", getenv, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "project is required") {
		t.Errorf("config without project: exit %d, stderr %q", code, stderr.String())
	}
	data, _ := json.Marshal(Config{Cluster: "flexvm"})
	if !strings.Contains(string(data), `"cluster":"flexvm"`) || strings.Contains(string(data), "topics") {
		t.Errorf("config JSON %s: want empty fields omitted", data)
	}
}

// TestEpilogCtldSaysWhetherTheNodesCameUp: EpilogSlurmctld reports a job
// that ended while one of its nodes was still powering up (or powered down)
// as cancelled, a job all of whose nodes Slurm showed up as finished with
// nodes_up (its capacity came), and a job whose nodes Slurm did not show,
// all or some, as finished without it.
func TestEpilogCtldSaysWhetherTheNodesCameUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lines   []string // what scontrol show node prints; nil: scontrol fails
		typ     string
		nodesUp bool
	}{
		{"both up", []string{"IDLE+CLOUD", "IDLE+CLOUD+COMPLETING"}, event.TypeJobFinished, true},
		{"one powering up", []string{"IDLE+CLOUD", "IDLE+CLOUD+POWERING_UP"}, event.TypeJobCancelled, false},
		{"one powered down", []string{"IDLE+CLOUD+POWERED_DOWN", "IDLE+CLOUD"}, event.TypeJobCancelled, false},
		{"only one shown", []string{"IDLE+CLOUD"}, event.TypeJobFinished, false},
		{"Slurm does not answer", nil, event.TypeJobFinished, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, pub := testRuntime(t, map[string]string{"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "flexvm-a3u-[1-2]", "SLURM_JOB_PARTITION": "a3u"})
			if tc.lines != nil {
				script := "#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do shift; done # the options and \"--\" (slurm.ScontrolArgv)\n[ \"$2\" = node ] || exit 1\n"
				for i, state := range tc.lines {
					script += fmt.Sprintf("echo 'NodeName=flexvm-a3u-%d Arch=x86_64 CoresPerSocket=1 State=%s Reason=(null)'\n", i+1, state)
				}
				if err := os.WriteFile(filepath.Join(rt.Slurm.BinDir, "scontrol"), []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if code := rt.Run(context.Background(), slurm.HookEpilogCtld, nil); code != 0 {
				t.Fatalf("epilog-ctld exit %d", code)
			}
			got := decodeJobs(t, pub.sent())
			if len(got) != 1 || got[0].Type != tc.typ || got[0].NodesUp != tc.nodesUp || !slices.Equal(got[0].Nodes, []string{"flexvm-a3u-1", "flexvm-a3u-2"}) {
				t.Errorf("events %+v, want one %s with nodes_up %v", got, tc.typ, tc.nodesUp)
			}
		})
	}
}

// TestNodeHooksWithoutConfigOnANodeFlexslurmDoesNotOwn: slurmd runs the
// node hooks on every node; where no bootstrap wrote hooks.json (a node
// flexslurm does not own), each exits 0 at once, while a controller hook
// without its configuration still fails loudly.
func TestNodeHooksWithoutConfigOnANodeFlexslurmDoesNotOwn(t *testing.T) {
	dir := t.TempDir()
	getenv := func(k string) string {
		if k == "SLURMD_NODENAME" {
			return "cpu-7"
		}
		return ""
	}
	for _, h := range slurm.NodeHooks() {
		var stdout, stderr strings.Builder
		argv0 := filepath.Join(dir, slurm.HookLinkPrefix+h)
		if code := Command(context.Background(), []string{h}, argv0, getenv, &stdout, &stderr); code != 0 ||
			!strings.Contains(stderr.String(), "not a flexslurm node, nothing checked") {
			t.Errorf("%s without hooks.json: exit %d, stderr %q; want 0", h, code, stderr.String())
		}
	}
	var stdout, stderr strings.Builder
	if code := Command(context.Background(), []string{slurm.HookPrologCtld}, filepath.Join(dir, slurm.HookLinkPrefix+slurm.HookPrologCtld), getenv, &stdout, &stderr); code != 2 {
		t.Errorf("prolog-ctld without hooks.json: exit %d, want 2", code)
	}
}
