package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/probe"
)

func init() {
	commands["probe"] = command{
		"settle Compute's open points on your project (about 15 minutes, a few VM-minutes of one small GPU VM; --dry-run: print every call)",
		cmdProbe,
	}
}

// Exit statuses of flexslurm probe.
const (
	probeSettled    = 0 // every point settled, nothing left (or declined at the prompt)
	probeLeft       = 1 // the cleanup left something; the output names it
	probeUsage      = 2 // bad flags
	probeUnsettled  = 3 // nothing left, but a point is not settled or the run stopped early
	probeSetupError = 4 // the clients could not be made
)

const probeHelp = `usage: flexslurm probe --project P --zone Z [--machine-type T] [--network N] [--subnetwork S]
                       [--dry-run [--compute-readings R]] [--yes] [--settings FILE] [--timeout 15m]

Settles, on project P and zone Z, the points of Compute Engine behaviour that
Google's documents leave open (docs/compute-contract.md, "Open points"):

  - may a MIG's target size change (deleteInstances) while one of its resize
    requests is ACCEPTED;
  - does v1, or only beta, accept a resize request that names its VMs;
  - is a VM's end at its run duration logged as compute.instances.deferredDelete
    or as a MIG's ….compute.instances.delete;
  - does a list filter on labels apply on the server;
  - what is a MIG's targetSize after its VM ended at its run duration.

It makes an instance template, two MIGs (target size 0, OPPORTUNISTIC
updates, DO_NOTHING on failure) and up to four resize requests of one VM of
the cheapest machine type Flex-Start accepts, every VM with a 10-minute run
duration; all of it is named fs-probe-RUN… and labelled managed-by=flexslurm
and flexslurm-probe=RUN. It prints the cost basis and asks before it starts
(--yes: don't ask). It removes everything it made on every exit path
(Ctrl-C included), lists again to prove nothing is left, prints a table of
verdicts, and writes the settings flexslurm should use to FILE
(default deploy/compute-probe.auto.tfvars.json, read by Terraform):
resize_request_api, and the observations as compute_probe.

It needs roles/compute.instanceAdmin.v1 and roles/logging.viewer on P, and
GPU (preemptible) quota for one VM of T in Z's region.

--dry-run makes no call to Google: it runs the same probe against the
Compute simulator on this machine, on a simulated clock (seconds, not
minutes), and prints every call it makes as it would be sent, with the
simulator's answers. --compute-readings chooses the simulator's readings
(lenient, strict, or a comma list: docs/compute-contract.md).

Exit status: 0 every point settled and nothing left, 1 something is left
(named), 2 bad usage, 3 nothing left but a point is not settled or the run
stopped early, 4 the clients could not be made.

Flags:`

func cmdProbe(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runProbe(ctx, args, os.Stdin, stdout, stderr)
}

// zonePattern is the Compute zone name pattern (discovery document,
// zones.get: [a-z](?:[-a-z0-9]{0,61}[a-z0-9])?).
var zonePattern = regexp.MustCompile(`^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$`)

func runProbe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	var cfg probe.Config
	fs.StringVar(&cfg.Project, "project", os.Getenv(config.EnvProject), "project id (default $"+config.EnvProject+")")
	fs.StringVar(&cfg.Zone, "zone", "", "zone of the probe's VMs, one of your node pools' zones (required)")
	fs.StringVar(&cfg.MachineType, "machine-type", probe.DefaultMachineType, "machine type of the probe's VMs (one Flex-Start accepts)")
	fs.StringVar(&cfg.Network, "network", "default", "network name or path of the probe's VMs (they get no external address)")
	fs.StringVar(&cfg.Subnetwork, "subnetwork", "", "subnetwork name or path in the zone's region (default: the network's)")
	fs.StringVar(&cfg.BootDiskType, "boot-disk-type", probe.DefaultBootDiskType, "boot disk type (one the machine type supports)")
	fs.DurationVar(&cfg.Timeout, "timeout", probe.DefaultTimeout, "how long to observe before cleaning up (at least 12m: one VM must reach its 10-minute run duration)")
	dryRun := fs.Bool("dry-run", false, "call no Google API: run against the Compute simulator on this machine and print every call")
	readings := fs.String("compute-readings", "lenient", "with --dry-run: the simulator's readings (lenient, strict, or a comma list)")
	yes := fs.Bool("yes", false, "do not ask before making VMs")
	settings := fs.String("settings", probe.DefaultSettingsFile, "file to write the settings to (Terraform variable values)")
	universe := fs.String("universe-domain", os.Getenv(config.EnvUniverseDomain), "universe domain (default $"+config.EnvUniverseDomain+", else googleapis.com)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), probeHelp)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	if cfg.Project == "" {
		problems = append(problems, "no project: pass --project or set "+config.EnvProject)
	}
	if cfg.Zone == "" {
		problems = append(problems, "no zone: pass --zone")
	} else if !zonePattern.MatchString(cfg.Zone) || strings.Count(cfg.Zone, "-") < 2 {
		problems = append(problems, fmt.Sprintf("--zone %q: want a zone name such as us-central1-a", cfg.Zone))
	}
	if cfg.Timeout < probe.RunDuration+2*time.Minute {
		problems = append(problems, fmt.Sprintf("--timeout %v: want at least %v (one VM must reach its %v run duration)", cfg.Timeout, probe.RunDuration+2*time.Minute, probe.RunDuration))
	}
	// Found out now, not after fifteen minutes of VMs; the dry run says it
	// where it would write.
	settingsDirMissing := ""
	if dir := filepath.Dir(*settings); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			settingsDirMissing = fmt.Sprintf("--settings %s: no directory %s (run from the repository root, or name another file)", *settings, dir)
			if !*dryRun {
				problems = append(problems, settingsDirMissing)
			}
		}
	}
	if !*dryRun && flagSet(fs, "compute-readings") {
		problems = append(problems, "--compute-readings chooses the simulator's behaviour, so it needs --dry-run (a real run observes Compute itself)")
	}
	simReadings, err := computesim.ParseReadings(*readings)
	if err != nil {
		problems = append(problems, "--compute-readings: "+err.Error())
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "flexslurm probe: %s\n(flexslurm probe -h for usage)\n", strings.Join(problems, "; "))
		return probeUsage
	}

	cost := probe.Cost{MachineType: cfg.MachineType, HourlyUSD: probe.KnownHourlyUSD[cfg.MachineType]}
	fmt.Fprint(stdout, cost.Describe())
	cfg.Out = stdout

	var env probe.Env
	if *dryRun {
		fmt.Fprintf(stdout, "\nDry run: nothing is sent to Google. The probe runs against the Compute simulator on this machine\n"+
			"(readings %s, simulated clock); every call below is one the real run would make if Compute answered the same.\n\n", simReadings)
		var closeEnv func()
		env, closeEnv, err = dryRunEnv(ctx, cfg.Project, simReadings, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm probe: %v\n", err)
			return probeSetupError
		}
		defer closeEnv()
	} else {
		// The clients first: missing credentials are said before the
		// question, not after it.
		var opts []option.ClientOption
		if *universe != "" {
			opts = append(opts, option.WithUniverseDomain(*universe))
		}
		c, err := probe.NewCompute(ctx, cfg.Project, opts...)
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm probe: %v\n", err)
			return probeSetupError
		}
		defer c.Close()
		logs, err := probe.NewLoggingReader(ctx, cfg.Project, opts...)
		if err != nil {
			fmt.Fprintf(stderr, "flexslurm probe: %v\n", err)
			return probeSetupError
		}
		env = probe.Env{Compute: c, Audit: logs, Clock: probe.RealClock{}}
		if !*yes && !confirm(stdin, stdout, fmt.Sprintf("Make these VMs in project %s, zone %s? [y/N] ", cfg.Project, cfg.Zone)) {
			fmt.Fprintln(stdout, "Nothing was made.")
			return probeSettled
		}
	}

	at := env.Clock.Now()
	rep := probe.Run(ctx, cfg, env)
	fmt.Fprintln(stdout)
	probe.PrintTable(stdout, rep)
	fmt.Fprintln(stdout)
	for _, r := range rep.Removed {
		fmt.Fprintf(stdout, "removed: %s\n", r)
	}
	if len(rep.Left) > 0 {
		fmt.Fprintf(stderr, "flexslurm probe: the cleanup left these behind; delete them by hand (names start with %s):\n", probe.Prefix(rep.RunID))
		for _, l := range rep.Left {
			fmt.Fprintf(stderr, "  %s\n", l)
		}
		return probeLeft
	}
	fmt.Fprintf(stdout, "Listed again: nothing of run %s is left.\n", rep.RunID)

	st := probe.SettingsFor(rep, cfg.Project, cfg.Zone, at)
	switch {
	case !rep.Verdict(probe.PointNamedRequests).Settled():
		fmt.Fprintf(stdout, "Settings not written: the resize-request endpoint was not settled (flexslurm's default, auto, is safe).\n")
	case *dryRun && settingsDirMissing != "":
		fmt.Fprintf(stdout, "Dry run: would write %s with resize_request_api = %q, but a real run from here would refuse: %s.\n", *settings, st.ResizeRequestAPI, settingsDirMissing)
	case *dryRun:
		fmt.Fprintf(stdout, "Dry run: would write %s with resize_request_api = %q.\n", *settings, st.ResizeRequestAPI)
	default:
		if err := probe.WriteSettings(*settings, st); err != nil {
			fmt.Fprintf(stderr, "flexslurm probe: %v\n", err)
			return probeUnsettled
		}
		fmt.Fprintf(stdout, "Wrote %s: resize_request_api = %q (Terraform passes it to every function as %s); the observations are kept as compute_probe.\n",
			*settings, st.ResizeRequestAPI, config.EnvResizeRequestAPI)
	}
	if rep.Err != nil {
		fmt.Fprintf(stderr, "flexslurm probe: %v\n", rep.Err)
		return probeUnsettled
	}
	for _, v := range rep.Verdicts {
		if !v.Settled() {
			return probeUnsettled
		}
	}
	return probeSettled
}

// confirm asks question and reads one answer: only y or yes goes on.
func confirm(stdin io.Reader, stdout io.Writer, question string) bool {
	fmt.Fprint(stdout, question)
	line, _ := bufio.NewReader(stdin).ReadString('\n')
	// An answer typed at a terminal ends its own line; one read from a
	// pipe does not, so the next output starts on a line of its own.
	if !strings.HasSuffix(line, "\n") || !isTerminalFile(stdin) {
		fmt.Fprintln(stdout)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// isTerminalFile reports whether r is a character device (a terminal).
func isTerminalFile(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isTerminal(f)
}

// dryRunSimHook, if set, is called with the dry run's simulator before the
// probe starts (tests inject failures with it).
var dryRunSimHook func(*computesim.Sim)

// dryRunEnv is a probe environment on an in-process Compute simulator:
// every HTTP call and every Cloud Logging read is printed on w as it would
// be sent to Google.
func dryRunEnv(ctx context.Context, project string, readings computesim.Readings, w io.Writer) (probe.Env, func(), error) {
	clk := clock.NewManual(time.Now().UTC().Truncate(time.Second))
	sim := computesim.New(computesim.Options{
		Project:  project,
		Readings: readings,
		// Capacity arrives a little after a request is accepted, as it
		// does for a machine type in some demand.
		CapacityDelay: func(string, string) time.Duration { return 30 * time.Second },
	}, clk)
	if dryRunSimHook != nil {
		dryRunSimHook(sim)
	}
	hc := &http.Client{Transport: printingTransport{w: w, next: computesim.InProcess{Handler: sim}}}
	c, err := probe.NewCompute(ctx, project, option.WithHTTPClient(hc), option.WithEndpoint(computesim.InProcessEndpoint), option.WithoutAuthentication())
	if err != nil {
		return probe.Env{}, nil, err
	}
	audit := printingAudit{w: w, project: project, next: probe.EntriesReader{Project: project, Entries: func() [][]byte {
		var out [][]byte
		for _, e := range sim.AuditEntries() {
			out = append(out, e.Data)
		}
		return out
	}}}
	return probe.Env{Compute: c, Audit: audit, Clock: simProbeClock{clk: clk, sim: sim}}, func() { c.Close() }, nil
}

// simProbeClock runs the probe on the simulator's manual clock.
type simProbeClock struct {
	clk *clock.Manual
	sim *computesim.Sim
}

func (c simProbeClock) Now() time.Time { return c.clk.Now() }

func (c simProbeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.sim.Tick(c.clk.Advance(d))
	return nil
}

// printingTransport prints each request as it would go to Compute
// (https://compute.googleapis.com), with its body and the answer's status.
type printingTransport struct {
	w    io.Writer
	next http.RoundTripper
}

func (t printingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	u := *req.URL
	u.Scheme, u.Host = "https", "compute.googleapis.com"
	line := req.Method + " " + u.String()
	if len(body) > 0 {
		var compact bytes.Buffer
		if json.Compact(&compact, body) == nil {
			body = compact.Bytes()
		}
		line += " " + string(body)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		fmt.Fprintf(t.w, "  call: %s\n        -> %v\n", line, err)
		return resp, err
	}
	fmt.Fprintf(t.w, "  call: %s\n        -> %s\n", line, resp.Status)
	return resp, nil
}

// printingAudit prints the Cloud Logging entries.list call each read
// would make.
type printingAudit struct {
	w       io.Writer
	project string
	next    probe.AuditReader
}

func (a printingAudit) InstanceEntries(ctx context.Context, zone, name string, since time.Time) ([]probe.AuditEntry, error) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{
		"resourceNames": []string{"projects/" + a.project},
		"filter":        probe.AuditFilter(a.project, zone, name, since),
		"orderBy":       "timestamp asc",
		"pageSize":      100,
	})
	out, err := a.next.InstanceEntries(ctx, zone, name, since)
	fmt.Fprintf(a.w, "  call: POST https://logging.googleapis.com/v2/entries:list %s\n        -> %d entries\n", bytes.TrimSpace(body.Bytes()), len(out))
	return out, err
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
