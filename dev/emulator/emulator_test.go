//go:build linux

package emulator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// requireInstalled skips the test, loudly, when the emulators or java are
// missing, and fails it instead when FLEXSLURM_REQUIRE_EMULATORS=1.
func requireInstalled(t *testing.T) {
	t.Helper()
	if err := platformSupported(); err != nil {
		t.Skipf("SKIP (loud): %v", err)
	}
	if _, err := Locate(); err != nil {
		msg := "the emulator tests need the Google Cloud CLI emulator packages and java, and these are missing:\n" + err.Error()
		if os.Getenv("FLEXSLURM_REQUIRE_EMULATORS") == "1" {
			t.Fatal("FAIL (FLEXSLURM_REQUIRE_EMULATORS=1): " + msg)
		}
		t.Skip("SKIP (loud): " + msg)
	}
}

// requireGone fails the test if pid is still a live process.
func requireGone(t *testing.T, name string, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("%s: no pid recorded", name)
	}
	if alive(pid) {
		status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		t.Fatalf("%s (pid %d) is still alive:\n%s", name, pid, status)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func TestStartFirestore(t *testing.T) {
	requireInstalled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	p, err := StartFirestore(ctx, Options{})
	if err != nil {
		t.Fatalf("StartFirestore: %v", err)
	}
	t.Logf("Firestore emulator pid %d at %s ready in %v", p.PID(), p.Addr(), p.StartupTime())
	if !regexp.MustCompile(`^127\.0\.0\.1:\d+$`).MatchString(p.Addr()) {
		t.Errorf("Addr() = %q, want 127.0.0.1:PORT", p.Addr())
	}
	if code, body := get(t, "http://"+p.Addr()+"/"); code != 200 || body != "Ok" {
		t.Errorf("GET / = %d %q, want 200 Ok", code, body)
	}
	if err := ResetFirestore(ctx, p.Addr(), "reset-test"); err != nil {
		t.Errorf("ResetFirestore: %v", err)
	}
	if !alive(p.PID()) {
		t.Fatalf("pid %d not alive while running", p.PID())
	}

	began := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Firestore emulator stopped in %v", time.Since(began))
	requireGone(t, "firestore", p.PID())
	if _, err := os.Stat(p.LogPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scratch log %s survived Stop: %v", p.LogPath(), err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Error("Done() not closed after Stop")
	}
}

func TestStartPubSub(t *testing.T) {
	requireInstalled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "pubsub.log")

	p, err := StartPubSub(ctx, Options{LogPath: logPath, Project: "ps-test"})
	if err != nil {
		t.Fatalf("StartPubSub: %v", err)
	}
	defer p.Stop()
	t.Logf("Pub/Sub emulator pid %d at %s ready in %v", p.PID(), p.Addr(), p.StartupTime())
	comm, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID()) + "/comm")
	if got := strings.TrimSpace(string(comm)); got != "java" {
		t.Errorf("PID() names %q, want the java process the script execs", got)
	}
	req, _ := http.NewRequest(http.MethodPut, "http://"+p.Addr()+"/v1/projects/ps-test/topics/topic-a", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("creating a topic over REST: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("creating a topic over REST: %s", resp.Status)
	}

	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	requireGone(t, "pubsub", p.PID())
	log, err := os.ReadFile(logPath)
	if err != nil || !bytes.Contains(log, []byte("Server started, listening on")) {
		t.Errorf("log %s kept after Stop should hold the start line; err=%v", logPath, err)
	}
}

func TestStartRejectsTakenPort(t *testing.T) {
	requireInstalled(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = StartPubSub(context.Background(), Options{Port: port})
	if err == nil || !strings.Contains(err.Error(), "port "+strconv.Itoa(port)+" on 127.0.0.1 is not available") {
		t.Errorf("StartPubSub on a taken port: err = %v, want 'not available'", err)
	}
}

var pidInError = regexp.MustCompile(`\(pid (\d+), port \d+\)`)

func TestStartTimeoutLeavesNothing(t *testing.T) {
	requireInstalled(t)
	_, err := StartFirestore(context.Background(), Options{StartTimeout: 150 * time.Millisecond})
	if err == nil {
		t.Fatal("StartFirestore with a 150 ms bound succeeded; want a timeout")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not ready after 150ms") ||
		!strings.Contains(err.Error(), "--- last lines of ") {
		t.Errorf("error = %v; want a timeout naming the bound, with the log tail", err)
	}
	m := pidInError.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error names no pid: %v", err)
	}
	pid, _ := strconv.Atoi(m[1])
	requireGone(t, "firestore after timeout", pid)
}

func TestStartCancelled(t *testing.T) {
	requireInstalled(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := StartPubSub(ctx, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("StartPubSub with a cancelled context: err = %v, want context.Canceled", err)
	}
	if m := pidInError.FindStringSubmatch(err.Error()); m != nil {
		pid, _ := strconv.Atoi(m[1])
		requireGone(t, "pubsub after cancel", pid)
	}
}

func TestEnv(t *testing.T) {
	requireInstalled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	env, err := Start(ctx, EnvOptions{Project: "env-test", LogDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer env.Stop()
	t.Logf("both emulators ready in %v (firestore %v, pubsub %v)", time.Since(began), env.Firestore.StartupTime(), env.PubSub.StartupTime())
	want := []string{
		"FIRESTORE_EMULATOR_HOST=" + env.Firestore.Addr(),
		"PUBSUB_EMULATOR_HOST=" + env.PubSub.Addr(),
		"GOOGLE_CLOUD_PROJECT=env-test",
	}
	if diff := cmp.Diff(want, env.Vars()); diff != "" {
		t.Errorf("Vars() (-want +got):\n%s", diff)
	}
	if err := env.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	requireGone(t, "firestore", env.Firestore.PID())
	requireGone(t, "pubsub", env.PubSub.PID())
	if err := env.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var logLine = regexp.MustCompile(`msg="emulator (started|stopped)" emulator=(\w+) pid=(\d+)`)

// pidsLogged returns the pids of the "emulator started" and "emulator
// stopped" lines, by emulator name.
func pidsLogged(t *testing.T, stderr string) (started, stopped map[string]int) {
	t.Helper()
	started, stopped = map[string]int{}, map[string]int{}
	for _, m := range logLine.FindAllStringSubmatch(stderr, -1) {
		pid, _ := strconv.Atoi(m[3])
		if m[1] == "started" {
			started[m[2]] = pid
		} else {
			stopped[m[2]] = pid
		}
	}
	return started, stopped
}

// requireAllStopped checks that stderr logged both emulators started and
// stopped with the same pids, and that those processes are gone.
func requireAllStopped(t *testing.T, stderr string) {
	t.Helper()
	started, stopped := pidsLogged(t, stderr)
	if len(started) != 2 {
		t.Fatalf("want 2 'emulator started' lines, got %v in:\n%s", started, stderr)
	}
	if diff := cmp.Diff(started, stopped); diff != "" {
		t.Errorf("started vs stopped pids (-started +stopped):\n%s\nstderr:\n%s", diff, stderr)
	}
	for name, pid := range started {
		requireGone(t, name, pid)
	}
}

func TestRunWithExitCodeAndEnv(t *testing.T) {
	requireInstalled(t)
	var stdout, stderr syncBuffer
	code, err := RunWith(context.Background(), "run-test", []string{"sh", "-c",
		`echo "$FIRESTORE_EMULATOR_HOST|$PUBSUB_EMULATOR_HOST|$GOOGLE_CLOUD_PROJECT"; exit 7`}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("RunWith error = %v\nstderr:\n%s", err, stderr.String())
	}
	if code != 7 {
		t.Errorf("RunWith exit code = %d, want 7", code)
	}
	got := strings.Split(strings.TrimSpace(stdout.String()), "|")
	if len(got) != 3 || !strings.HasPrefix(got[0], "127.0.0.1:") || !strings.HasPrefix(got[1], "127.0.0.1:") || got[2] != "run-test" {
		t.Errorf("command saw env %q, want FIRESTORE/PUBSUB hosts on 127.0.0.1 and project run-test", got)
	}
	requireAllStopped(t, stderr.String())
}

func TestRunWithCommandNotFound(t *testing.T) {
	requireInstalled(t)
	var stdout, stderr syncBuffer
	code, err := RunWith(context.Background(), "run-test", []string{"/no/such/command"}, &stdout, &stderr)
	if code != 127 || err == nil {
		t.Errorf("RunWith(missing command) = %d, %v; want 127 and an error", code, err)
	}
	requireAllStopped(t, stderr.String())
}

// signalWriter closes ready when the text written so far contains word.
type signalWriter struct {
	syncBuffer
	word  string
	once  sync.Once
	ready chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(w.String(), w.word) {
		w.once.Do(func() { close(w.ready) })
	}
	return n, err
}

func TestRunWithForwardsSignalAndStopsEmulators(t *testing.T) {
	requireInstalled(t)
	stdout := &signalWriter{word: "ready", ready: make(chan struct{})}
	var stderr syncBuffer
	type result struct {
		code int
		err  error
	}
	res := make(chan result, 1)
	go func() {
		code, err := RunWith(context.Background(), "sig-test", []string{"sh", "-c", "echo ready; exec sleep 60"}, stdout, &stderr)
		res <- result{code, err}
	}()
	select {
	case <-stdout.ready:
	case r := <-res:
		t.Fatalf("RunWith returned early: %d, %v\nstderr:\n%s", r.code, r.err, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("command never started\nstderr:\n%s", stderr.String())
	}
	// RunWith has SIGTERM registered, so this reaches it, not the default
	// action.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-res:
	case <-time.After(time.Minute):
		t.Fatalf("RunWith did not return after SIGTERM\nstderr:\n%s", stderr.String())
	}
	if r.err != nil || r.code != 128+int(syscall.SIGTERM) {
		t.Errorf("RunWith after SIGTERM = %d, %v; want %d, nil", r.code, r.err, 128+int(syscall.SIGTERM))
	}
	if !strings.Contains(stderr.String(), `msg="forwarding signal to command" signal=terminated`) {
		t.Errorf("no forwarding line in stderr:\n%s", stderr.String())
	}
	requireAllStopped(t, stderr.String())
}

func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"frobnicate"}, 2},
		{[]string{"run"}, 2},
		{[]string{"run", "--project", "p"}, 2},
		{[]string{"run", "--bogus", "--", "true"}, 2},
		{[]string{"run", "-h"}, 0},
		{[]string{"start", "extra"}, 2},
		{[]string{"start", "--project", "a/b"}, 2},
		{[]string{"--help"}, 0},
	} {
		var stdout, stderr bytes.Buffer
		if got := Main(tc.args, &stdout, &stderr); got != tc.want {
			t.Errorf("Main(%q) = %d, want %d\nstderr:\n%s", tc.args, got, tc.want, stderr.String())
		}
		// The usage asked for goes to stdout, alone; a usage error to stderr.
		if tc.want == 0 && (!strings.HasPrefix(stdout.String(), "usage:") || stderr.Len() != 0) {
			t.Errorf("Main(%q): stdout %q, stderr %q; want the usage on stdout only", tc.args, stdout.String(), stderr.String())
		}
		if tc.want != 0 && (stdout.Len() != 0 || stderr.Len() == 0) {
			t.Errorf("Main(%q): stdout %q, stderr %q; want the error on stderr only", tc.args, stdout.String(), stderr.String())
		}
	}
}

func TestMainRun(t *testing.T) {
	requireInstalled(t)
	var stdout, stderr syncBuffer
	code := Main([]string{"run", "--project", "main-test", "--", "sh", "-c", `test "$GOOGLE_CLOUD_PROJECT" = main-test && exit 3`}, &stdout, &stderr)
	if code != 3 {
		t.Errorf("Main(run) = %d, want 3\nstderr:\n%s", code, stderr.String())
	}
	requireAllStopped(t, stderr.String())
}

func TestMainStart(t *testing.T) {
	requireInstalled(t)
	stdout := &signalWriter{word: "GOOGLE_CLOUD_PROJECT", ready: make(chan struct{})}
	var stderr syncBuffer
	res := make(chan int, 1)
	go func() { res <- Main([]string{"start", "--project", "start-test"}, stdout, &stderr) }()
	select {
	case <-stdout.ready:
	case code := <-res:
		t.Fatalf("Main(start) returned early: %d\nstderr:\n%s", code, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("emulators never reported ready\nstderr:\n%s", stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	exports := regexp.MustCompile(`^export (FIRESTORE_EMULATOR_HOST|PUBSUB_EMULATOR_HOST)=127\.0\.0\.1:\d+$`)
	if len(lines) != 3 || !exports.MatchString(lines[0]) || !exports.MatchString(lines[1]) || lines[2] != "export GOOGLE_CLOUD_PROJECT=start-test" {
		t.Errorf("stdout = %q, want three export lines", lines)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-res:
		if code != 0 {
			t.Errorf("Main(start) after SIGINT = %d, want 0", code)
		}
	case <-time.After(time.Minute):
		t.Fatalf("Main(start) did not return after SIGINT\nstderr:\n%s", stderr.String())
	}
	requireAllStopped(t, stderr.String())
}

// groupMembers lists the live processes whose process group is pgid.
func groupMembers(pgid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid pgrp …
		rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestStopEscalatesToKill runs a stand-in that ignores SIGTERM and has a
// child of its own, and checks that Stop kills the whole group.
func TestStopEscalatesToKill(t *testing.T) {
	if err := platformSupported(); err != nil {
		t.Skipf("SKIP (loud): %v", err)
	}
	k := kind{
		name:  "stubborn",
		title: "stubborn stand-in",
		argv: func(string, int) []string {
			return []string{"sh", "-c", `trap "" TERM; sleep 300 & echo ready; wait`}
		},
		probe: func(_ context.Context, p *Process, _ Options, _ int) (bool, error) {
			return logContains(p.logPath, "ready"), nil
		},
	}
	p, err := launch(context.Background(), k, Options{}.withDefaults(), 1)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	p.grace = 300 * time.Millisecond
	if n := len(groupMembers(p.PID())); n != 2 {
		t.Fatalf("process group %d has %d live members, want sh and sleep", p.PID(), n)
	}
	began := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(began); d < p.grace {
		t.Errorf("Stop returned after %v, before the %v grace period: SIGTERM was not ignored?", d, p.grace)
	}
	requireGone(t, "stand-in", p.PID())
	if left := groupMembers(p.PID()); len(left) > 0 {
		t.Errorf("processes %v of the group survived Stop", left)
	}
}
