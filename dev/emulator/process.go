package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultProject is the project id used when none is given. The emulators
// accept any project id.
const DefaultProject = "flexslurm-local"

// DefaultStartTimeout bounds how long a Start function waits for an emulator
// to answer. The JVMs are usually ready in 1–4 s; the bound is generous
// because CI machines are small and tests start emulators in parallel: on
// a 2-core machine at a load average of 40, the Firestore emulator took
// over a minute.
const DefaultStartTimeout = 4 * time.Minute

// stopGrace is how long Stop waits after SIGTERM before sending SIGKILL. The
// emulators normally exit within 0.5–3 s of SIGTERM.
const stopGrace = 10 * time.Second

// killWait is how long Stop waits for the process to vanish after SIGKILL.
const killWait = 5 * time.Second

// autoPortAttempts is how many times a Start function retries with a fresh
// port when it picked the port itself and the emulator could not bind it.
const autoPortAttempts = 3

// Log lines the emulators print.
const (
	pubsubReadyLine = "Server started, listening on "
	bindFailure     = "java.net.BindException"
)

// ErrUnsupportedPlatform is returned by the Start functions on operating
// systems other than Linux.
var ErrUnsupportedPlatform = errors.New("emulators are supported on Linux only")

// errAddrInUse marks a start that failed because the port was taken.
var errAddrInUse = errors.New("address already in use")

// Options configures one emulator process.
type Options struct {
	// Host is the address to listen on. Default "127.0.0.1".
	Host string
	// Port is the TCP port to listen on; 0 picks a free one. A given port
	// that is already taken is an error.
	Port int
	// LogPath receives the emulator's standard output and error, truncated
	// first. When empty, the log goes to a scratch directory that Stop
	// removes.
	LogPath string
	// Project is the project whose topics the Pub/Sub readiness check
	// lists; the Firestore emulator ignores it. Default DefaultProject.
	Project string
	// StartTimeout bounds the wait for readiness. Default
	// DefaultStartTimeout.
	StartTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Project == "" {
		o.Project = DefaultProject
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	return o
}

// Process is a running emulator. Its methods are safe for concurrent use.
type Process struct {
	name    string
	pid     int
	addr    string
	logPath string
	scratch string
	startup time.Duration
	grace   time.Duration // SIGTERM to SIGKILL in Stop

	exited chan struct{} // closed once the child has been reaped

	stopOnce sync.Once
	stopErr  error
}

// Name is "firestore" or "pubsub".
func (p *Process) Name() string { return p.name }

// PID is the emulator's process id: the java process itself.
func (p *Process) PID() int { return p.pid }

// Addr is the host:port clients connect to, e.g. "127.0.0.1:8686"; it is the
// value for FIRESTORE_EMULATOR_HOST or PUBSUB_EMULATOR_HOST.
func (p *Process) Addr() string { return p.addr }

// LogPath is the file holding the emulator's output.
func (p *Process) LogPath() string { return p.logPath }

// StartupTime is the time from launching the process until it answered.
func (p *Process) StartupTime() time.Duration { return p.startup }

// Done is closed when the emulator process has exited, whether through Stop
// or on its own.
func (p *Process) Done() <-chan struct{} { return p.exited }

// Stop sends SIGTERM to the emulator, waits up to 10 s for it to exit, then
// sends SIGKILL to its process group. It removes the scratch
// directory (and the log, when Options.LogPath was empty). Stop is
// idempotent: later calls return the first call's result. It returns an
// error only if the process is still alive after SIGKILL.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop() })
	return p.stopErr
}

func (p *Process) stop() error {
	defer func() {
		if p.scratch != "" {
			_ = os.RemoveAll(p.scratch)
		}
	}()
	if !p.gone() {
		_ = kill(p.pid, syscall.SIGTERM)
		if !p.waitGone(p.grace) {
			// The group holds the emulator and anything it started.
			_ = kill(-p.pid, syscall.SIGKILL)
			_ = kill(p.pid, syscall.SIGKILL)
			if !p.waitGone(killWait) {
				return fmt.Errorf("stopping %s emulator (pid %d): still running after SIGKILL", p.name, p.pid)
			}
			// SIGKILL to the group is delivered at once, but each member
			// dies in its own time: wait (bounded) until none is left.
			for deadline := time.Now().Add(killWait); groupAlive(p.pid) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	// The process is a zombie or gone; let the waiting goroutine reap it so
	// that Done is closed when Stop returns. It is our child, so this is
	// immediate; the bound only guards against surprises.
	select {
	case <-p.exited:
	case <-time.After(killWait):
	}
	return nil
}

// gone reports whether the process has exited: reaped, absent from /proc, or
// a zombie.
func (p *Process) gone() bool {
	select {
	case <-p.exited:
		return true
	default:
		return !alive(p.pid)
	}
}

// waitGone polls gone until it is true or d has passed.
func (p *Process) waitGone(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !p.gone() {
		select {
		case <-p.exited:
			return true
		case <-tick.C:
		case <-deadline.C:
			return p.gone()
		}
	}
	return true
}

// kind describes how to run and probe one emulator.
type kind struct {
	name  string // "firestore" or "pubsub"
	title string // for messages
	argv  func(host string, port int) []string
	env   []string // added to the child's environment
	// probe reports whether the emulator is ready. An error is fatal.
	probe func(ctx context.Context, p *Process, opts Options, port int) (bool, error)
}

// StartFirestore starts the Firestore emulator with java directly and waits
// until `GET /` answers "Ok". It returns ErrFirestoreNotFound or
// ErrJavaNotFound (wrapped) when they are not installed, and a timeout error
// carrying the end of the emulator's log when it does not answer within
// opts.StartTimeout. When ctx ends first the process is stopped and ctx's
// error is returned wrapped.
func StartFirestore(ctx context.Context, opts Options) (*Process, error) {
	l := systemLocator()
	jar, err := l.firestoreJar()
	if err != nil {
		return nil, err
	}
	java, err := l.java()
	if err != nil {
		return nil, err
	}
	k := kind{
		name:  "firestore",
		title: "Firestore emulator",
		argv: func(host string, port int) []string {
			return []string{java, "-Duser.language=en", "-cp", jar,
				"com.google.cloud.datastore.emulator.firestore.CloudFirestore",
				"start", "--host=" + host, "--port=" + strconv.Itoa(port)}
		},
		probe: probeFirestore,
	}
	return start(ctx, k, opts)
}

// StartPubSub starts the Pub/Sub emulator through its start script, which
// execs java (so PID is java's), and waits until the log says
// "Server started, listening on PORT" and an admin call (list topics over
// REST) succeeds. Errors are as for StartFirestore, with ErrPubSubNotFound.
func StartPubSub(ctx context.Context, opts Options) (*Process, error) {
	l := systemLocator()
	bin, err := l.pubsubBin()
	if err != nil {
		return nil, err
	}
	java, err := l.java()
	if err != nil {
		return nil, err
	}
	k := kind{
		name:  "pubsub",
		title: "Pub/Sub emulator",
		argv: func(host string, port int) []string {
			return []string{bin, "--host=" + host, "--port=" + strconv.Itoa(port)}
		},
		// The script runs $JAVA_HOME/bin/java, else java from PATH.
		env:   []string{"JAVA_HOME=" + javaHome(java)},
		probe: probePubSub,
	}
	return start(ctx, k, opts)
}

func start(ctx context.Context, k kind, opts Options) (*Process, error) {
	if err := platformSupported(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	attempts := 1
	if opts.Port == 0 {
		attempts = autoPortAttempts
	}
	var lastErr error
	for range attempts {
		port := opts.Port
		if port == 0 {
			var err error
			if port, err = freePort(opts.Host); err != nil {
				return nil, fmt.Errorf("starting %s: %w", k.title, err)
			}
		} else if err := checkPortFree(opts.Host, port); err != nil {
			return nil, fmt.Errorf("starting %s: %w", k.title, err)
		}
		p, err := launch(ctx, k, opts, port)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, errAddrInUse) || ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// launch runs one attempt: start the process on port and wait until ready.
func launch(ctx context.Context, k kind, opts Options, port int) (*Process, error) {
	scratch, err := os.MkdirTemp("", "flexslurm-"+k.name+"-")
	if err != nil {
		return nil, fmt.Errorf("starting %s: creating scratch directory: %w", k.title, err)
	}
	cloudsdk := filepath.Join(scratch, "gcloud")
	if err := os.Mkdir(cloudsdk, 0o700); err != nil {
		_ = os.RemoveAll(scratch)
		return nil, fmt.Errorf("starting %s: %w", k.title, err)
	}
	logPath := opts.LogPath
	if logPath == "" {
		logPath = filepath.Join(scratch, k.name+".log")
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		_ = os.RemoveAll(scratch)
		return nil, fmt.Errorf("starting %s: opening log: %w", k.title, err)
	}
	defer logFile.Close() // the child holds its own descriptor

	argv := k.argv(opts.Host, port)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = scratch
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = childEnv(os.Environ(), append([]string{"CLOUDSDK_CONFIG=" + cloudsdk}, k.env...))
	cmd.SysProcAttr = sysProcAttr()
	began := time.Now()
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(scratch)
		return nil, fmt.Errorf("starting %s: %w", k.title, err)
	}
	p := &Process{
		name:    k.name,
		pid:     cmd.Process.Pid,
		addr:    net.JoinHostPort(opts.Host, strconv.Itoa(port)),
		logPath: logPath,
		scratch: scratch,
		grace:   stopGrace,
		exited:  make(chan struct{}),
	}
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(p.exited)
	}()

	fail := func(cause error, format string, args ...any) (*Process, error) {
		tail := logTail(logPath, 25, 4096) // read before Stop removes scratch
		_ = p.Stop()
		msg := fmt.Sprintf(format, args...)
		return nil, fmt.Errorf("starting %s (pid %d, port %d): %s: %w\n--- last lines of %s ---\n%s",
			k.title, p.pid, port, msg, cause, logPath, tail)
	}

	deadline := time.NewTimer(opts.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.exited:
			if logContains(logPath, bindFailure) {
				return fail(errAddrInUse, "port %d is taken", port)
			}
			return fail(errors.New("emulator exited"), "exited during startup (%v)", waitErr)
		default:
		}
		if logContains(logPath, bindFailure) {
			// The Pub/Sub emulator stays up after failing to bind.
			return fail(errAddrInUse, "port %d is taken", port)
		}
		ready, err := k.probe(ctx, p, opts, port)
		if err != nil {
			return fail(err, "readiness check failed")
		}
		if ready {
			p.startup = time.Since(began)
			return p, nil
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err(), "interrupted while waiting for readiness")
		case <-deadline.C:
			return fail(context.DeadlineExceeded, "not ready after %s", opts.StartTimeout)
		case <-p.exited:
		case <-tick.C:
		}
	}
}

var probeClient = &http.Client{Timeout: 2 * time.Second}

// probeFirestore is ready when GET / answers "Ok".
func probeFirestore(ctx context.Context, p *Process, _ Options, _ int) (bool, error) {
	code, body := httpGet(ctx, "http://"+p.addr+"/")
	return code == http.StatusOK && strings.TrimSpace(body) == "Ok", nil
}

// probePubSub is ready when the log announces the port and listing topics
// over REST succeeds.
func probePubSub(ctx context.Context, p *Process, opts Options, port int) (bool, error) {
	if !logContains(p.logPath, pubsubReadyLine+strconv.Itoa(port)) {
		return false, nil
	}
	code, _ := httpGet(ctx, "http://"+p.addr+"/v1/projects/"+opts.Project+"/topics")
	return code == http.StatusOK, nil
}

// httpGet returns the status code and body of a GET, or 0 on any failure.
func httpGet(ctx context.Context, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, ""
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// freePort asks the kernel for a free TCP port on host.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// checkPortFree fails when host:port cannot be bound, so that a squatter is
// never mistaken for the emulator.
func checkPortFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on %s is not available: %w", port, host, err)
	}
	return l.Close()
}

// childEnv returns base with every variable in extra replacing any earlier
// setting of the same name.
func childEnv(base, extra []string) []string {
	drop := make(map[string]bool, len(extra))
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		drop[name] = true
	}
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func logContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// logTail returns at most maxLines lines and maxBytes bytes from the end of
// the file at path.
func logTail(path string, maxLines, maxBytes int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	off := max(fi.Size()-int64(maxBytes), 0)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(log is empty)"
	}
	return strings.Join(lines, "\n")
}

// ResetFirestore deletes every document of project in the Firestore
// emulator at addr (host:port), through the emulator's
// DELETE /emulator/v1/projects/P/databases/(default)/documents endpoint. It
// returns an error for any answer other than 200.
func ResetFirestore(ctx context.Context, addr, project string) error {
	url := "http://" + addr + "/emulator/v1/projects/" + project + "/databases/(default)/documents"
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	if err != nil {
		return fmt.Errorf("resetting Firestore emulator: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("resetting Firestore emulator at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("resetting Firestore emulator at %s: %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
