package emulator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/flexslurm/flexslurm/shared/cli"
)

const usage = `usage:
  flexslurm emulators run [--project P] [--log-dir DIR] [--optional] -- CMD [ARGS...]
      Start the Firestore and Pub/Sub emulators, run CMD with
      FIRESTORE_EMULATOR_HOST, PUBSUB_EMULATOR_HOST, GOOGLE_CLOUD_PROJECT and
      FLEXSLURM_REQUIRE_EMULATORS=1 set (tests then fail rather than skip
      without them), stop the emulators, and exit with CMD's status. With
      --optional, missing emulators are reported loudly and CMD runs without
      them (tests that need them skip).
  flexslurm emulators start [--project P] [--host H] [--firestore-port N]
                            [--pubsub-port N] [--log-dir DIR]
      Start both emulators, print the export lines for a shell, and run
      until SIGINT or SIGTERM, then stop them.
`

// Main is the body of the `flexslurm emulators` command. args are the
// words after "emulators": the subcommand ("run" or "start") and its flags,
// parsed with the standard flag package. It returns the process exit status:
// for run, the command's (see RunWith); for start, 0 after a requested
// stop and 1 when an emulator fails or exits on its own; 2 for usage errors.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return mainRun(args[1:], stdout, stderr)
	case "start":
		return mainStart(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "flexslurm emulators: unknown subcommand %q\n%s", args[0], usage)
		return exitUsage
	}
}

// commonFlags are the flags run and start share.
type commonFlags struct {
	project string
	logDir  string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.project, "project", DefaultProject, "project id exported as GOOGLE_CLOUD_PROJECT")
	fs.StringVar(&c.logDir, "log-dir", "", "directory that keeps firestore.log and pubsub.log (default: logs are discarded)")
}

func (c *commonFlags) validate() error {
	if c.project == "" || strings.ContainsAny(c.project, "/ \t\n'\"") {
		return fmt.Errorf("invalid --project %q: want a project id such as %s", c.project, DefaultProject)
	}
	if c.logDir != "" {
		if err := os.MkdirAll(c.logDir, 0o755); err != nil {
			return fmt.Errorf("creating --log-dir: %w", err)
		}
	}
	return nil
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("flexslurm emulators "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage, "\nflags of ", name, ":\n")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and returns the exit status to use when parsing
// ends the command (-h: 0, usage on stdout; a bad flag: 2), else -1.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	if code, done := cli.Parse(fs, args, stdout, stderr); done {
		return code
	}
	return -1
}

func mainRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run")
	var c commonFlags
	c.register(fs)
	optional := fs.Bool("optional", false, "when the emulators are not installed, say so loudly and run the command without them")
	if code := parseFlags(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "flexslurm emulators run: no command given; use: run [flags] -- CMD [ARGS...]")
		return exitUsage
	}
	if err := c.validate(); err != nil {
		fmt.Fprintln(stderr, "flexslurm emulators run:", err)
		return exitUsage
	}
	if _, err := Locate(); err != nil && *optional {
		fmt.Fprintf(stderr, "\n%s\nSKIPPING every test that needs the Firestore or Pub/Sub emulator:\n  %v\n%s\n\n",
			strings.Repeat("!", 78), err, strings.Repeat("!", 78))
		return runPlain(fs.Args(), stdout, stderr)
	}
	os.Setenv(EnvRequire, "1")
	code, err := runWith(context.Background(), EnvOptions{Project: c.project, LogDir: c.logDir},
		fs.Args(), os.Stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "flexslurm emulators run:", err)
		if code == 0 {
			code = exitSetupFailed
		}
	}
	return code
}

// EnvRequire, set to 1, makes tests that need an emulator fail instead of
// skipping when it is not configured (dev/testenv).
const EnvRequire = "FLEXSLURM_REQUIRE_EMULATORS"

// runPlain runs argv without emulators and returns its exit status.
func runPlain(argv []string, stdout, stderr io.Writer) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return exitCode(ee.ProcessState)
		}
		fmt.Fprintf(stderr, "flexslurm emulators run: %v\n", err)
		return exitNotFound
	}
	return 0
}

func mainStart(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("start")
	var c commonFlags
	c.register(fs)
	host := fs.String("host", "127.0.0.1", "address both emulators listen on")
	fsPort := fs.Int("firestore-port", 0, "Firestore emulator port (0 picks a free one)")
	psPort := fs.Int("pubsub-port", 0, "Pub/Sub emulator port (0 picks a free one)")
	if code := parseFlags(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flexslurm emulators start: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	if err := c.validate(); err != nil {
		fmt.Fprintln(stderr, "flexslurm emulators start:", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := Start(ctx, EnvOptions{
		Project: c.project, Host: *host, FirestorePort: *fsPort, PubSubPort: *psPort, LogDir: c.logDir,
	})
	if err != nil {
		fmt.Fprintln(stderr, "flexslurm emulators start:", err)
		if ctx.Err() != nil {
			return 128 + int(syscall.SIGINT)
		}
		return exitSetupFailed
	}
	for _, p := range env.processes() {
		log.Info("emulator started", "emulator", p.Name(), "pid", p.PID(), "addr", p.Addr(),
			"startup", p.StartupTime().Round(time.Millisecond))
	}
	for _, v := range env.Vars() {
		name, value, _ := strings.Cut(v, "=")
		fmt.Fprintf(stdout, "export %s=%s\n", name, shellQuote(value))
	}
	log.Info("emulators running; send SIGINT (Ctrl-C) or SIGTERM to stop them")

	code := 0
	select {
	case <-ctx.Done():
	case <-env.Firestore.Done():
		log.Error("emulator exited on its own", "emulator", env.Firestore.Name(), "pid", env.Firestore.PID(),
			"log", env.Firestore.LogPath())
		code = exitSetupFailed
	case <-env.PubSub.Done():
		log.Error("emulator exited on its own", "emulator", env.PubSub.Name(), "pid", env.PubSub.PID(),
			"log", env.PubSub.LogPath())
		code = exitSetupFailed
	}
	if err := stopLogged(env, log); err != nil {
		fmt.Fprintln(stderr, "flexslurm emulators start:", err)
		code = exitSetupFailed
	}
	return code
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe
// characters.
func shellQuote(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/,@%+=", r))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
