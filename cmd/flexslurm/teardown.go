package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
	"github.com/flexslurm/flexslurm/shared/teardown"
)

func init() {
	commands["teardown"] = command{
		"remove a cluster's VMs, resize requests, MIGs and templates (--dry-run: only say what)",
		cmdTeardown,
	}
}

// Exit statuses of flexslurm teardown.
const (
	teardownClean   = 0 // nothing of the cluster's is left (dry run: would be left)
	teardownLeft    = 1 // something of the cluster's is left; the report says what and why
	teardownUsage   = 2 // bad flags
	teardownFailed  = 3 // Compute could not be listed
	teardownUnknown = 4 // nothing of the cluster's in Compute and no record of it: a mistyped --cluster?
)

const teardownHelp = `usage: flexslurm teardown --project P --cluster C [--dry-run] [--database DB] [--universe-domain D] [--wait 20m]

Removes everything flexslurm created in Compute Engine, outside Terraform,
for cluster C: its MIGs' resize requests (queued ones cancelled first), its
MIGs and with them their VMs, its VMs in no MIG, and its instance templates,
in that order, waiting for every operation. Only what is provably C's is
touched: VMs labelled managed-by=flexslurm and flexslurm-cluster=C, templates
whose properties.labels carry those labels, and MIGs whose templates are all
C's (a MIG of one resize request only when its name is the one its
description's request, pool and cluster give). Every zone and region of the
project is listed, not only the zones of the current spec.

When Compute holds nothing of C's, the cluster records in flexslurm's
Firestore database (--database) are read: if C has none either, C is
unknown (a mistyped --cluster?) and the exit status says so.

At the end Compute is listed again: anything of C's still there, or that
appeared meanwhile (flexslurm's functions still deployed), is reported.
Remove the functions and the scheduler job first (deploy/README.md).

With --dry-run it lists what it would remove and what it would leave, and
changes nothing.

FLEXSLURM_COMPUTE_ENDPOINT, when set, points it at another Compute endpoint
(the local simulator) without authentication.

Exit status: 0 nothing of C's is left (or would be), 1 something is left,
2 bad usage, 3 Compute could not be listed, 4 C is unknown: nothing of it in
Compute and no record of it (or its record could not be read).

Flags:`

func cmdTeardown(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runTeardown(ctx, args, stdout, stderr)
}

// runTeardown is cmdTeardown with extra Compute client options (tests point
// it at a simulator).
func runTeardown(ctx context.Context, args []string, stdout, stderr io.Writer, extra ...option.ClientOption) int {
	fs := flag.NewFlagSet("teardown", flag.ContinueOnError)
	var o teardown.Options
	fs.StringVar(&o.Project, "project", os.Getenv(config.EnvProject), "project id (default $"+config.EnvProject+")")
	fs.StringVar(&o.Cluster, "cluster", "", "cluster id, as in the spec (required)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "list what would be removed and left; change nothing")
	universe := fs.String("universe-domain", os.Getenv(config.EnvUniverseDomain), "universe domain, e.g. s3nsapis.fr (default $"+config.EnvUniverseDomain+", else googleapis.com)")
	database := fs.String("database", os.Getenv(config.EnvFirestoreDatabase), "flexslurm's Firestore database id, read only when Compute holds nothing of the cluster's (default $"+config.EnvFirestoreDatabase+", else (default))")
	fs.DurationVar(&o.Wait, "wait", teardown.DefaultWait, "how long to wait for a resize request still being created to become cancellable, and for deletions in progress at the end")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), teardownHelp)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	if o.Project == "" {
		problems = append(problems, "no project: pass --project or set "+config.EnvProject)
	}
	if o.Cluster == "" {
		problems = append(problems, "no cluster: pass --cluster")
	} else if err := plan.CheckTeardownCluster(o.Cluster); err != nil {
		problems = append(problems, "--cluster: "+err.Error())
	}
	if o.Wait <= 0 {
		problems = append(problems, fmt.Sprintf("--wait %v: want a positive duration", o.Wait))
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "flexslurm teardown: %s\n(flexslurm teardown -h for usage)\n", strings.Join(problems, "; "))
		return teardownUsage
	}
	o.Log = slog.New(slog.NewTextHandler(stderr, nil))

	var opts []option.ClientOption
	if *universe != "" {
		opts = append(opts, option.WithUniverseDomain(*universe))
	}
	if ep := strings.TrimSpace(os.Getenv(config.EnvComputeEndpoint)); ep != "" {
		opts = append(opts, option.WithEndpoint(ep), option.WithoutAuthentication())
	}
	opts = append(opts, extra...)
	c, err := gce.New(ctx, o.Project, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm teardown: %v\n", err)
		return teardownFailed
	}
	defer c.Close()
	var recOpts []option.ClientOption
	if *universe != "" {
		recOpts = append(recOpts, option.WithUniverseDomain(*universe))
	}
	recs := &lazyRecords{open: func(ctx context.Context) (teardown.Records, func(), error) {
		return openTeardownRecords(ctx, o.Project, *database, recOpts...)
	}}
	defer recs.Close()
	o.Records = recs
	start := time.Now()
	rep, err := teardown.Run(ctx, c, o)
	if rep != nil {
		if werr := rep.Write(stdout); werr != nil {
			fmt.Fprintf(stderr, "flexslurm teardown: %v\n", werr)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm teardown: %v\n", err)
		return teardownFailed
	}
	o.Log.Info("teardown finished", "cluster", o.Cluster, "dry_run", o.DryRun, "clean", rep.Clean(), "unknown", rep.Unknown(), "took", time.Since(start).Round(time.Millisecond))
	switch {
	case rep.Unknown():
		return teardownUnknown
	case !rep.Clean():
		return teardownLeft
	}
	return teardownClean
}

// openTeardownRecords opens flexslurm's Firestore database
// (FIRESTORE_EMULATOR_HOST honoured) for its cluster records; tests
// replace it.
var openTeardownRecords = func(ctx context.Context, project, database string, opts ...option.ClientOption) (teardown.Records, func(), error) {
	f, err := store.NewFirestore(ctx, project, database, opts...)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

// recordsTimeout bounds the look-up of the cluster records.
const recordsTimeout = 30 * time.Second

// lazyRecords opens the records only when the teardown asks for them
// (Compute held nothing of the cluster's), so a teardown that finds the
// cluster's resources never needs Firestore.
type lazyRecords struct {
	open  func(context.Context) (teardown.Records, func(), error)
	close func()
}

func (l *lazyRecords) Clusters(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, recordsTimeout)
	defer cancel()
	r, closeFn, err := l.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening flexslurm's Firestore database: %w", err)
	}
	l.close = closeFn
	ids, err := r.Clusters(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the cluster records in flexslurm's Firestore database: %w", err)
	}
	return ids, nil
}

// Close closes what Clusters opened.
func (l *lazyRecords) Close() {
	if l.close != nil {
		l.close()
	}
}
