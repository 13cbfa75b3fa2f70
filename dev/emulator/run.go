package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// commandGrace is how long RunWith lets the command react to a forwarded
// signal, or to the end of its context, before it SIGKILLs the command's
// process group.
const commandGrace = 30 * time.Second

// Exit codes RunWith returns when the command did not run to completion, as
// shells report them.
const (
	exitSetupFailed   = 1
	exitUsage         = 2
	exitNotExecutable = 126
	exitNotFound      = 127
)

// RunWith starts the Firestore and Pub/Sub emulators for project (see
// Start), runs argv with FIRESTORE_EMULATOR_HOST, PUBSUB_EMULATOR_HOST and
// GOOGLE_CLOUD_PROJECT added to its environment, and stops the emulators
// when it ends. It logs one line per emulator started and stopped, with its
// PID, to stderr; the command's own output goes to stdout and stderr and its
// input is os.Stdin.
//
// The command runs in its own process group. While RunWith runs, SIGINT and
// SIGTERM sent to this process are forwarded to that group; the third
// signal, or 30 s without exit after the first, sends SIGKILL. The emulators
// are stopped in every case: after the command exits, fails to start, or is
// interrupted, and when a signal arrives during their own startup. When ctx
// ends, the command gets SIGTERM, then SIGKILL after 30 s.
//
// exitCode is the command's exit status, or 128+N when signal N ended it.
// err is non-nil when the emulators could not be started (exitCode 1, or
// 128+N when a signal interrupted their startup), when the command could not
// be started (127 when it was not found, 126 when it could not be run,
// else 1), or when an emulator could not be stopped (exitCode is then the
// command's).
func RunWith(ctx context.Context, project string, argv []string, stdout, stderr io.Writer) (exitCode int, err error) {
	return runWith(ctx, EnvOptions{Project: project}, argv, os.Stdin, stdout, stderr)
}

func runWith(ctx context.Context, opts EnvOptions, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 0 {
		return exitUsage, errors.New("running a command with emulators: no command given")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	// Listen before anything starts, so no signal finds us unprepared.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	// 1. Start the emulators; a signal meanwhile cancels the start.
	env, err := startInterruptible(ctx, opts, sigs, log)
	if err != nil {
		var sig interruptedError
		if errors.As(err, &sig) {
			return 128 + signalNumber(sig.sig), err
		}
		return exitSetupFailed, err
	}
	for _, p := range env.processes() {
		log.Info("emulator started", "emulator", p.Name(), "pid", p.PID(), "addr", p.Addr(),
			"startup", p.StartupTime().Round(time.Millisecond))
	}

	// 2. Run the command.
	code, runErr := runCommand(ctx, env, argv, stdin, stdout, stderr, sigs, log)

	// 3. Stop the emulators whatever happened.
	stopErr := stopLogged(env, log)
	if runErr != nil {
		return code, errors.Join(runErr, stopErr)
	}
	return code, stopErr
}

// interruptedError reports a signal that arrived while the emulators were
// starting.
type interruptedError struct{ sig os.Signal }

func (e interruptedError) Error() string {
	return fmt.Sprintf("starting emulators: cancelled by signal: %v", e.sig)
}

// startInterruptible runs Start, cancelling it if a signal arrives on sigs.
func startInterruptible(ctx context.Context, opts EnvOptions, sigs <-chan os.Signal, log *slog.Logger) (*Env, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		env *Env
		err error
	}
	res := make(chan result, 1)
	go func() {
		env, err := Start(ctx, opts)
		res <- result{env, err}
	}()
	select {
	case r := <-res:
		return r.env, r.err
	case sig := <-sigs:
		log.Warn("signal received while starting emulators; stopping them", "signal", sig.String())
		cancel()
		r := <-res // Start stops whatever it had started
		if r.env != nil {
			_ = stopLogged(r.env, log)
		}
		return nil, interruptedError{sig}
	}
}

// runCommand runs argv to completion, forwarding signals, and returns its
// exit code.
func runCommand(ctx context.Context, env *Env, argv []string, stdin io.Reader, stdout, stderr io.Writer,
	sigs <-chan os.Signal, log *slog.Logger) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = childEnv(os.Environ(), env.Vars())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = commandSysProcAttr()
	// Bounds the wait for output copying when a grandchild keeps the
	// command's stdout or stderr open after the command exits.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		code := exitSetupFailed
		switch {
		case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
			code = exitNotFound
		case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
			code = exitNotExecutable
		}
		return code, fmt.Errorf("starting %q: %w", argv[0], err)
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var (
		received int
		grace    <-chan time.Time // fires commandGrace after the first signal or ctx end
		ctxDone  = ctx.Done()
	)
	startGrace := func() {
		if grace == nil {
			grace = time.After(commandGrace)
		}
	}
	for {
		select {
		case <-done:
			return exitCode(cmd.ProcessState), nil
		case sig := <-sigs:
			received++
			if received >= 3 {
				log.Warn("third signal: killing command", "signal", sig.String(), "pid", pgid)
				_ = kill(-pgid, syscall.SIGKILL)
				continue
			}
			log.Info("forwarding signal to command", "signal", sig.String(), "pid", pgid)
			_ = kill(-pgid, sig.(syscall.Signal))
			startGrace()
		case <-ctxDone:
			ctxDone = nil
			log.Info("context ended: terminating command", "pid", pgid, "cause", ctx.Err())
			_ = kill(-pgid, syscall.SIGTERM)
			startGrace()
		case <-grace:
			grace = nil
			log.Warn("command still running after grace period: killing it", "pid", pgid, "grace", commandGrace)
			_ = kill(-pgid, syscall.SIGKILL)
		}
	}
}

// exitCode is a shell-style exit status: the code, or 128+N for signal N.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 1
}

// stopLogged stops every emulator of env concurrently, logging one line per
// emulator, and returns the errors joined.
func stopLogged(env *Env, log *slog.Logger) error {
	ps := env.processes()
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			began := time.Now()
			errs[i] = p.Stop()
			if errs[i] != nil {
				log.Error("emulator not stopped", "emulator", p.Name(), "pid", p.PID(), "err", errs[i])
				return
			}
			log.Info("emulator stopped", "emulator", p.Name(), "pid", p.PID(),
				"took", time.Since(began).Round(time.Millisecond))
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
