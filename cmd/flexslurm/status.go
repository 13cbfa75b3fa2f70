package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/local"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/status"
	"github.com/flexslurm/flexslurm/shared/store"
)

func init() {
	commands["status"] = command{
		"show each pool's nodes, resize requests in flight and dead letters (--watch to follow)",
		cmdStatus,
	}
}

// statusFlags are the parsed flags of flexslurm status.
type statusFlags struct {
	project, database, universe, cluster, clock string
	watch, deadLetter                           bool
	every                                       time.Duration
	limit                                       int
}

// statusBackends are what status reads: the state store and, with
// --dead-letter, the Pub/Sub subscription API.
type statusBackends struct {
	Source     status.Source
	Subscriber status.Subscriber // nil unless --dead-letter
	Close      func()
}

// statusOpener builds the backends from the flags.
type statusOpener func(ctx context.Context, f statusFlags) (*statusBackends, error)

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runStatus(ctx, args, stdout, stderr, openStatus)
}

// openStatus opens Firestore (FIRESTORE_EMULATOR_HOST honoured) and, with
// --dead-letter, Pub/Sub (PUBSUB_EMULATOR_HOST honoured), in the flags'
// universe.
func openStatus(ctx context.Context, f statusFlags) (*statusBackends, error) {
	var opts []option.ClientOption
	if f.universe != "" {
		opts = append(opts, option.WithUniverseDomain(f.universe))
	}
	fs, err := store.NewFirestore(ctx, f.project, f.database, opts...)
	if err != nil {
		return nil, err
	}
	b := &statusBackends{Source: fs, Close: func() { fs.Close() }}
	if f.deadLetter {
		ps, err := pubsub.NewClient(ctx, f.project, opts...)
		if err != nil {
			fs.Close()
			return nil, fmt.Errorf("creating Pub/Sub client: %w", err)
		}
		b.Subscriber = ps.SubscriptionAdminClient
		b.Close = func() { ps.Close(); fs.Close() }
	}
	return b, nil
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer, open statusOpener) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var f statusFlags
	fs.StringVar(&f.project, "project", os.Getenv(config.EnvProject), "Google Cloud project of the Firestore database (default $"+config.EnvProject+")")
	fs.StringVar(&f.database, "database", os.Getenv(config.EnvFirestoreDatabase), "Firestore database id (default $"+config.EnvFirestoreDatabase+", else (default))")
	fs.StringVar(&f.universe, "universe-domain", os.Getenv(config.EnvUniverseDomain), "universe domain, e.g. s3nsapis.fr (default $"+config.EnvUniverseDomain+")")
	fs.StringVar(&f.cluster, "cluster", "", "show only this cluster (default: every cluster)")
	fs.StringVar(&f.clock, "clock", os.Getenv(config.EnvClock), "the local system's scaled clock, as in $"+config.EnvClock+" (default: the wall clock)")
	fs.BoolVar(&f.watch, "watch", false, "redraw every --every until interrupted")
	fs.DurationVar(&f.every, "every", 5*time.Second, "refresh period with --watch")
	fs.BoolVar(&f.deadLetter, "dead-letter", false, "peek each dead-letter subscription to count its messages (pull without ack; needs roles/pubsub.subscriber on them)")
	fs.IntVar(&f.limit, "dead-letter-limit", 1000, "most messages counted per dead-letter subscription")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm status [--watch] [--project P] [--cluster C] [--dead-letter]\n\n"+
			"Reads flexslurm's state in Firestore and prints, per node pool: the static minimum\n"+
			"and the maximum, nodes by phase, each node's VM, generation and time left before\n"+
			"Compute Engine terminates it, resize requests in flight and their age, backoff and\n"+
			"breaker state; with --dead-letter, the messages waiting in each dead-letter\n"+
			"subscription. Honours FIRESTORE_EMULATOR_HOST and PUBSUB_EMULATOR_HOST, so it works\n"+
			"against `flexslurm local` (pass that system's --project and --clock).")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	switch {
	case noArgs(fs, stderr):
		return 2
	case f.project == "":
		fmt.Fprintf(stderr, "flexslurm status: no project: pass --project or set %s\n", config.EnvProject)
		return 2
	case f.watch && f.every <= 0:
		fmt.Fprintln(stderr, "flexslurm status: --every must be positive")
		return 2
	case f.limit < 1:
		fmt.Fprintln(stderr, "flexslurm status: --dead-letter-limit must be at least 1")
		return 2
	}
	var clk clock.Clock = clock.Real{}
	if f.clock != "" {
		s, err := clock.ParseScaled(f.clock)
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm status: --clock: %v\n", err)
			return 2
		}
		clk = s
	}
	b, err := open(ctx, f)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm status: %v\n", err)
		return 1
	}
	defer b.Close()

	frame := func() error {
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		snap, err := status.Collect(callCtx, b.Source, clk.Now(), status.Options{Cluster: f.cluster, Local: os.Getenv(local.EnvLocal) != ""})
		if err != nil {
			return err
		}
		if f.deadLetter && b.Subscriber != nil {
			snap.DeadLetters = status.PeekDeadLetters(callCtx, b.Subscriber, f.project, status.ConsumedTopics, status.PeekOptions{Limit: f.limit})
		}
		var buf bytes.Buffer
		if err := status.Render(&buf, snap); err != nil {
			return err
		}
		_, err = stdout.Write(buf.Bytes())
		return err
	}
	if !f.watch {
		if err := frame(); err != nil {
			fmt.Fprintf(stderr, "flexslurm status: %v\n", err)
			return 1
		}
		return 0
	}
	clear := isTerminal(stdout)
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		if clear {
			io.WriteString(stdout, "\x1b[H\x1b[2J")
		}
		if err := frame(); err != nil && !errors.Is(err, context.Canceled) {
			// A failed refresh is shown, not fatal: the next one may work.
			fmt.Fprintf(stderr, "flexslurm status: %v\n", err)
		}
		if !clear {
			io.WriteString(stdout, "\n")
		}
		select {
		case <-ctx.Done():
			return 0
		case <-t.C:
		}
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
