package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/store"
)

func init() {
	commands["events"] = command{
		"list a cluster's events (VMs, health, repairs, stockouts, breakers, refused jobs; --follow)",
		cmdEvents,
	}
}

// eventRow is one event as printed.
type eventRow struct {
	id, typ, pool, node, vm, job, message string
	time                                  time.Time
}

// eventSource reads one page of a cluster's events after a position (""
// from the first) and returns the position after its last.
type eventSource func(ctx context.Context, after string) ([]eventRow, string, error)

type eventsFlags struct {
	api, project, location, database, universe, cluster, node, job, typ string
	follow                                                              bool
	every                                                               time.Duration
}

func cmdEvents(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runEvents(ctx, args, stdout, stderr)
}

func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	var f eventsFlags
	fs.StringVar(&f.api, "api", os.Getenv(EnvAPIURL), "the API function's URL (default $"+EnvAPIURL+"); empty: read Firestore directly")
	fs.StringVar(&f.project, "project", os.Getenv(config.EnvProject), "Google Cloud project (default $"+config.EnvProject+")")
	fs.StringVar(&f.location, "location", "", "the cluster's region, for --api (e.g. us-central1)")
	fs.StringVar(&f.database, "database", os.Getenv(config.EnvFirestoreDatabase), "Firestore database id without --api (default $"+config.EnvFirestoreDatabase+", else (default))")
	fs.StringVar(&f.universe, "universe-domain", os.Getenv(config.EnvUniverseDomain), "universe domain without --api (default $"+config.EnvUniverseDomain+")")
	fs.StringVar(&f.cluster, "cluster", "", "the cluster id (required)")
	fs.StringVar(&f.node, "node", "", "only the events of this node (CLUSTER-POOL-INDEX)")
	fs.StringVar(&f.job, "job", "", "only the events of this Slurm job id")
	fs.StringVar(&f.typ, "type", "", "only events of this type (VM_EXPIRED, STOCKOUT, …: docs/events.md)")
	fs.BoolVar(&f.follow, "follow", false, "keep polling for new events until interrupted")
	fs.DurationVar(&f.every, "every", 5*time.Second, "poll period with --follow")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: flexslurm events --cluster C [--node N] [--job J] [--type T] [--follow] [--api URL --location L]\n\n"+
			"Lists a cluster's events, oldest first, one line each: time, type, node, VM, job and\n"+
			"what happened. Through the API (--api, or $"+EnvAPIURL+": the local system's banner\n"+
			"exports it) or, without it, from Firestore (FIRESTORE_EMULATOR_HOST honoured).\n"+
			"Events are kept 30 days.")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	switch {
	case noArgs(fs, stderr):
		return 2
	case f.cluster == "":
		fmt.Fprintln(stderr, "flexslurm events: --cluster is required")
		return 2
	case f.project == "":
		fmt.Fprintf(stderr, "flexslurm events: no project: pass --project or set %s\n", config.EnvProject)
		return 2
	case f.api != "" && f.location == "":
		fmt.Fprintln(stderr, "flexslurm events: --location (the cluster's region) is required with --api")
		return 2
	case f.follow && f.every <= 0:
		fmt.Fprintln(stderr, "flexslurm events: --every must be positive")
		return 2
	}
	src, closeFn, err := openEvents(ctx, f)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm events: %v\n", err)
		return 1
	}
	defer closeFn()
	after := ""
	for {
		for {
			rows, next, err := src(ctx, after)
			if err != nil {
				if ctx.Err() != nil {
					return 0
				}
				fmt.Fprintf(stderr, "flexslurm events: %v\n", err)
				return 1
			}
			for _, r := range rows {
				fmt.Fprintf(stdout, "%s  %-20s %-18s %-21s %-6s %s\n", r.time.UTC().Format(time.RFC3339), r.typ, dash(r.node), dash(r.vm), dash(r.job), r.message)
			}
			if next != "" {
				after = next
			}
			if len(rows) == 0 {
				break
			}
		}
		if !f.follow {
			return 0
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(f.every):
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// openEvents returns the API's or Firestore's event source.
func openEvents(ctx context.Context, f eventsFlags) (eventSource, func(), error) {
	if f.api != "" {
		c, err := newAPIClient(ctx, f.api)
		if err != nil {
			return nil, nil, err
		}
		return apiEvents(c, f), func() {}, nil
	}
	var opts []option.ClientOption
	if f.universe != "" {
		opts = append(opts, option.WithUniverseDomain(f.universe))
	}
	fs, err := store.NewFirestore(ctx, f.project, f.database, opts...)
	if err != nil {
		return nil, nil, err
	}
	filter := store.EventFilter{Node: f.node, Job: f.job, Type: f.typ, Limit: 500}
	return func(ctx context.Context, after string) ([]eventRow, string, error) {
		fl := filter
		fl.After = after
		evs, err := fs.Events(ctx, f.cluster, fl)
		if err != nil {
			return nil, "", err
		}
		var rows []eventRow
		for _, e := range evs {
			rows = append(rows, eventRow{id: e.ID, typ: e.Type, pool: e.Pool, node: e.Node, vm: e.VM, job: e.Job, message: e.Message, time: e.Time})
		}
		next := ""
		if len(evs) > 0 {
			next = evs[len(evs)-1].ID
		}
		return rows, next, nil
	}, func() { fs.Close() }, nil
}

// apiEvents pages through GET …/modelDevelopmentClusters/C/events. The
// position after an event is the page token of its name (docs/api.md,
// "Cluster events"), so --follow resumes after the last event printed.
func apiEvents(c *apiClient, f eventsFlags) eventSource {
	q := url.Values{"pageSize": {"500"}}
	for k, v := range map[string]string{"nodeId": f.node, "jobId": f.job, "type": f.typ} {
		if v != "" {
			q.Set(k, v)
		}
	}
	path := "/v1beta1/projects/" + url.PathEscape(f.project) + "/locations/" + url.PathEscape(f.location) +
		"/modelDevelopmentClusters/" + url.PathEscape(f.cluster) + "/events"
	return func(ctx context.Context, after string) ([]eventRow, string, error) {
		qq := url.Values{}
		for k, v := range q {
			qq[k] = v
		}
		if after != "" {
			qq.Set("pageToken", after)
		}
		r, err := c.call(ctx, "GET", path+"?"+qq.Encode(), nil)
		if err != nil {
			return nil, "", err
		}
		if r.status != 200 {
			e, _ := r.body["error"].(map[string]any)
			return nil, "", fmt.Errorf("HTTP %d: %s", r.status, describeStatus(e))
		}
		var rows []eventRow
		last := ""
		for _, v := range asList(r.body["events"]) {
			m, _ := v.(map[string]any)
			s := func(k string) string { x, _ := m[k].(string); return x }
			t, _ := time.Parse(time.RFC3339Nano, s("eventTime"))
			rows = append(rows, eventRow{id: s("name"), typ: s("type"), pool: s("nodePoolId"), node: s("nodeId"),
				vm: s("instanceName"), job: s("jobId"), message: s("message"), time: t})
			last = s("name")
		}
		next := ""
		if last != "" {
			next = base64.RawURLEncoding.EncodeToString([]byte(last))
		}
		return rows, next, nil
	}
}

func asList(v any) []any { s, _ := v.([]any); return s }
