package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/inputs"
	"github.com/flexslurm/flexslurm/shared/text"
)

// Default locations and limits of the Slurm client commands.
const (
	// DefaultBinDir holds scontrol, squeue, sinfo, sbatch and scancel in
	// the Debian/Ubuntu packages and in slurm-gcp images.
	DefaultBinDir = "/usr/bin"
	// DefaultTimeout bounds one client command. slurmctld answers in
	// milliseconds; MessageTimeout (10 s by default) is the client's own
	// bound on an unreachable controller.
	DefaultTimeout = 15 * time.Second
	// maxOutput bounds what is kept of a command's stdout (squeue --json
	// of a busy cluster runs to megabytes).
	maxOutput = 256 << 20
)

// Runner runs the Slurm client commands by absolute path with explicit
// argument lists — never through a shell, never looked up in PATH (Slurm
// hooks run without PATH). It is safe for concurrent use.
type Runner struct {
	// BinDir is the directory of the client commands; DefaultBinDir when
	// empty.
	BinDir string
	// Timeout bounds each command (on top of the caller's context);
	// DefaultTimeout when zero.
	Timeout time.Duration
	// Env is the commands' entire environment; nil gives them an empty
	// one, so that they read /etc/slurm/slurm.conf (or find slurmctld
	// through DNS SRV records in a configless cluster) whatever the
	// caller's environment holds. Set "SLURM_CONF=…" here to use another
	// file.
	Env []string
	// Log receives one debug line per command; nil discards.
	Log *slog.Logger
}

// CommandError is a Slurm client command that failed: it could not start,
// exited non-zero, or ran out of time.
type CommandError struct {
	// Argv is the command line, program first.
	Argv []string
	// ExitCode is the exit status; -1 when the command did not exit
	// normally (not started, killed at the deadline).
	ExitCode int
	// Stderr is what the command printed on stderr, then stdout, trimmed
	// and bounded to 2 KiB.
	Stderr string
	// Err is the underlying error (exec, context).
	Err error
}

// Error renders "scontrol update …: exit status 1: <stderr>".
func (e *CommandError) Error() string {
	var b strings.Builder
	b.WriteString(strings.Join(e.Argv, " "))
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		fmt.Fprintf(&b, "exit status %d", e.ExitCode)
	}
	if e.Stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *CommandError) Unwrap() error { return e.Err }

// transientMarkers are what the Slurm clients print when slurmctld cannot be
// reached or is too busy; the command may succeed later.
var transientMarkers = []string{
	"Unable to contact slurm controller",
	"Socket timed out",
	"Connection refused",
	"Connection timed out",
	"Transport endpoint is not connected",
	"Zero Bytes were transmitted or received",
	"Slurm backup controller in standby mode",
	"Resource temporarily unavailable",
	"Communication connection failure",
}

// IsTransient reports whether err is a Slurm command failure worth retrying:
// slurmctld unreachable or busy, or the command ran out of time. A command
// slurmctld answered with an error (unknown node, invalid state) is not.
func IsTransient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ce *CommandError
	if !errors.As(err, &ce) {
		return false
	}
	for _, m := range transientMarkers {
		if strings.Contains(ce.Stderr, m) {
			return true
		}
	}
	return false
}

func (r *Runner) bin(prog string) string {
	dir := r.BinDir
	if dir == "" {
		dir = DefaultBinDir
	}
	return filepath.Join(dir, prog)
}

// Run runs prog (a command name such as "scontrol", resolved in BinDir) with
// args and returns its stdout. A failure is a *CommandError.
func (r *Runner) Run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	if strings.ContainsRune(prog, '/') {
		return nil, fmt.Errorf("running %s: the program must be a bare command name resolved in BinDir", prog)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	path := r.bin(prog)
	argv := append([]string{path}, args...)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = r.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &limitedBuffer{b: &stdout, max: maxOutput}
	cmd.Stderr = &limitedBuffer{b: &stderr, max: 64 << 10}
	start := time.Now()
	err := cmd.Run()
	if r.Log != nil {
		r.Log.Debug("slurm command", "argv", argv, "elapsed_ms", time.Since(start).Milliseconds(), "error", err)
	}
	if err == nil {
		return stdout.Bytes(), nil
	}
	ce := &CommandError{Argv: argv, ExitCode: -1, Stderr: text.Truncate(strings.TrimSpace(stderr.String()+"\n"+stdout.String()), 2048)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		ce.Err = fmt.Errorf("%w (after %v)", ctx.Err(), time.Since(start).Round(time.Millisecond))
	case errors.As(err, &ee) && ee.Exited():
		ce.ExitCode = ee.ExitCode()
	default:
		ce.Err = err
	}
	return stdout.Bytes(), ce
}

// Scontrol runs scontrol with args: its options first (those of
// scontrolOptions: "-o", "-d"), then the command's words ("update",
// "nodename=…", "reason=…", a job id). The argument list it runs is
// ScontrolArgv's, with "--" between the two, so that no word — a job id, a
// node list, a reason that came from a payload or from Slurm — is ever
// read as an option. A word holding a control character is refused.
func (r *Runner) Scontrol(ctx context.Context, args ...string) ([]byte, error) {
	argv, err := ScontrolArgv(args...)
	if err != nil {
		return nil, err
	}
	return r.Run(ctx, "scontrol", argv...)
}

// scontrolOptions are the scontrol options flexslurm passes.
var scontrolOptions = map[string]bool{"-o": true, "--oneliner": true, "-d": true, "--details": true}

// ScontrolArgv builds scontrol's argument list from args (options, then
// words): the options, "--", the words. scontrol parses its options with
// getopt_long, which permutes: without "--", a word starting with "-"
// anywhere on the line ("requeue -V", "show node -x") is taken as an
// option, and with it none is — checked with the real scontrol 22.05
// (`scontrol -- requeue -V`: "Invalid job id specified for job -V";
// `scontrol show node -x`: "invalid option -- 'x'"). It refuses a word
// with a control character, which would end a line of Slurm's state and of
// `scontrol show -o` output, and an option placed after the words.
func ScontrolArgv(args ...string) ([]string, error) {
	var opts, words []string
	for _, a := range args {
		switch {
		case scontrolOptions[a] && len(words) == 0:
			opts = append(opts, a)
		case scontrolOptions[a]:
			return nil, fmt.Errorf("scontrol %s: the option %s comes after the command's words; pass options first", strings.Join(args, " "), a)
		case inputs.HasControl(a):
			return nil, fmt.Errorf("scontrol: refusing the argument %q: it holds a control character", a)
		default:
			words = append(words, a)
		}
	}
	if len(words) == 0 {
		return nil, errors.New("scontrol: no command given")
	}
	return append(append(opts, "--"), words...), nil
}

type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
