// Package probe settles, on a real project, the points of Compute Engine
// behaviour that Google's public documents leave open
// (docs/compute-contract.md, "Open points"; docs/probe.md): it makes a
// throwaway, labelled instance template, two MIGs and a few resize requests
// of the cheapest machine type Flex-Start accepts, watches what Compute
// does, removes everything it made and proves it by listing again, and
// returns one Verdict per point with the settings flexslurm should use.
//
// Decisions (verdict.go) are pure functions of what was observed. The run
// (Run) reads time only from a Clock, so that against the Compute
// simulator it runs on the simulator's clock.
package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
)

// RunDuration is the run duration of every VM the probe makes: the
// minimum Compute accepts (600 s to 604800 s,
// https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig),
// so that a VM nobody deletes ends by itself within ten minutes.
const RunDuration = 600 * time.Second

// MaxVMs is the most VMs a run can make: one for the named request, and
// two in the MIG of the target-size point (the second only if capacity
// arrives before it is cancelled). Each MIG is deleted as soon as its
// point is observed, so that a MIG that keeps its target size when a VM
// ends does not make another.
const MaxVMs = 3

// Labels the probe puts on everything it makes (through the template, on
// its VMs).
const (
	LabelManagedBy = "managed-by"
	LabelProbe     = "flexslurm-probe"
)

// Config is one probe run.
type Config struct {
	Project, Zone string
	// MachineType is the VMs' machine type (DefaultMachineType).
	MachineType string
	// Network is the network name or path ("default"); Subnetwork, if
	// set, the subnetwork name or path in the zone's region.
	Network, Subnetwork string
	// BootDiskType is the boot disk type ("pd-balanced").
	BootDiskType string
	// Image is the boot image (a debian-12 family).
	Image string
	// RunID names this run: lowercase letters and digits, 1–8. Empty: random.
	RunID string
	// Timeout bounds the observing part of the run (cleanup comes after).
	Timeout time.Duration
	// CapacityWait bounds the wait for the first request of the
	// target-size point (default 5 minutes).
	CapacityWait time.Duration
	// AuditWait bounds the wait for the audit entry once the VM is gone
	// (default 3 minutes).
	AuditWait time.Duration
	// Poll is the interval between reads (default 10 s).
	Poll time.Duration
	// CleanupTimeout bounds the cleanup (default 10 minutes).
	CleanupTimeout time.Duration
	// Out receives progress lines (nil: none).
	Out io.Writer
}

// Defaults of Config.
const (
	// DefaultMachineType is the cheapest machine type Flex-Start accepts:
	// "Flex-start VMs support all accelerator-optimized machine types
	// (except A4X and G4) and H4D machine types"
	// (https://cloud.google.com/compute/docs/instances/about-flex-start-vms),
	// and g2-standard-4 (4 vCPUs, 16 GB, one NVIDIA L4) is the smallest
	// accelerator-optimized machine type
	// (https://cloud.google.com/compute/docs/accelerator-optimized-machines).
	DefaultMachineType  = "g2-standard-4"
	DefaultBootDiskType = "pd-balanced"
	DefaultImage        = "projects/debian-cloud/global/images/family/debian-12"
	DefaultTimeout      = 15 * time.Minute
)

func (c Config) withDefaults() Config {
	if c.MachineType == "" {
		c.MachineType = DefaultMachineType
	}
	if c.Network == "" {
		c.Network = "default"
	}
	if c.BootDiskType == "" {
		c.BootDiskType = DefaultBootDiskType
	}
	if c.Image == "" {
		c.Image = DefaultImage
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.CapacityWait == 0 {
		c.CapacityWait = 5 * time.Minute
	}
	if c.AuditWait == 0 {
		c.AuditWait = 3 * time.Minute
	}
	if c.Poll == 0 {
		c.Poll = 10 * time.Second
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = 10 * time.Minute
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return c
}

// NewRunID returns a random run id: 8 lowercase hex digits.
func NewRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

func checkRunID(id string) error {
	if len(id) == 0 || len(id) > 8 {
		return fmt.Errorf("run id %q: want 1–8 characters [a-z0-9]", id)
	}
	for _, r := range id {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return fmt.Errorf("run id %q: want 1–8 characters [a-z0-9]", id)
		}
	}
	return nil
}

// Prefix is the name prefix of everything run id makes.
func Prefix(runID string) string { return "fs-probe-" + runID }

// Clock is the probe's time: Now, and Sleep that returns early with ctx's
// error.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx is done.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Env is what a run talks to.
type Env struct {
	Compute *Compute
	Audit   AuditReader
	Clock   Clock
}

// Report is the outcome of a run.
type Report struct {
	RunID    string
	Verdicts []Verdict
	// Removed names what the cleanup removed; Left what is still there
	// after it (empty when the cleanup proved nothing is left).
	Removed, Left []string
	// Err is the error that ended the observing part early, if any (the
	// verdicts then hold what was settled before it).
	Err error
}

// Verdict returns the verdict on p (NotSettled if the run did not reach it).
func (r Report) Verdict(p Point) Verdict {
	for _, v := range r.Verdicts {
		if v.Point == p {
			return v
		}
	}
	return notSettled(p, "not reached", "run the probe again")
}

// run is the state of one run.
type run struct {
	cfg      Config
	env      Env
	c        *Compute
	clk      Clock
	id       string
	prefix   string
	start    time.Time
	deadline time.Time
	verdicts map[Point]Verdict
	// labelChecked is set once the label point was looked at.
	labelChecked bool
	// removed names what the run removed before its cleanup.
	removed []string
}

func (r *run) logf(format string, a ...any) {
	fmt.Fprintf(r.cfg.Out, "probe %s: "+format+"\n", append([]any{r.clk.Now().Format(time.TimeOnly)}, a...)...)
}

// rid is the request id of one step: a UUID derived from the run and the
// step, so that a retried step is one operation for Compute.
func (r *run) rid(step string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("flexslurm-probe/"+r.id+"/"+step)).String()
}

func (r *run) set(v Verdict) {
	if _, done := r.verdicts[v.Point]; !done {
		r.verdicts[v.Point] = v
	}
}

// Names of what a run makes.
func (r *run) template() string  { return r.prefix }
func (r *run) migNamed() string  { return r.prefix + "-n" }
func (r *run) migTarget() string { return r.prefix + "-a" }
func (r *run) namedVM() string   { return r.prefix + "-n-0" }

// Run makes, observes and removes; it returns the report whatever
// happened. The cleanup runs on every path, also when ctx is cancelled
// (it then has a context of its own, bounded by CleanupTimeout).
func Run(ctx context.Context, cfg Config, env Env) Report {
	cfg = cfg.withDefaults()
	if cfg.RunID == "" {
		cfg.RunID = NewRunID()
	}
	rep := Report{RunID: cfg.RunID}
	if err := checkRunID(cfg.RunID); err != nil {
		rep.Err = err
		return rep
	}
	r := &run{cfg: cfg, env: env, c: env.Compute, clk: env.Clock, id: cfg.RunID, prefix: Prefix(cfg.RunID), verdicts: map[Point]Verdict{}}
	r.start = r.clk.Now()
	r.deadline = r.start.Add(cfg.Timeout)

	rep.Err = r.observeSafely(ctx)
	if rep.Err != nil {
		r.logf("stopped: %v", rep.Err)
	}
	for _, p := range Points {
		if v, ok := r.verdicts[p]; ok {
			rep.Verdicts = append(rep.Verdicts, v)
		} else {
			hint := "run the probe again"
			if rep.Err != nil {
				hint = "fix what stopped the run, then run the probe again"
			}
			rep.Verdicts = append(rep.Verdicts, notSettled(p, "not reached", hint))
		}
	}
	if ctx.Err() != nil {
		r.logf("interrupted: cleaning up (up to %s)", cfg.CleanupTimeout)
	} else {
		r.logf("cleaning up")
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.CleanupTimeout)
	defer cancel()
	removed, left := r.cleanup(cctx)
	rep.Removed, rep.Left = append(r.removed, removed...), left
	return rep
}

// description is the description of the run's template and MIGs: the
// cleanup deletes only a MIG or template that has it.
func (r *run) description() string {
	return "flexslurm probe " + r.id + ": throwaway, removed by the probe"
}

// ours reports whether a listed MIG or template is this run's: its name
// has the run's prefix and its description is the run's.
func (r *run) ours(n Named) bool {
	return strings.HasPrefix(n.Name, r.prefix) && n.Description == r.description()
}

func (r *run) labels() map[string]string {
	return map[string]string{LabelManagedBy: "flexslurm", LabelProbe: r.id}
}

func (r *run) region() string {
	if i := strings.LastIndexByte(r.cfg.Zone, '-'); i > 0 {
		return r.cfg.Zone[:i]
	}
	return r.cfg.Zone
}

// templateResource is the instance template a run makes: a Flex-Start
// template as flexslurm makes them (FLEX_START, DELETE at the end of a
// 600 s maxRunDuration, onHostMaintenance TERMINATE, no automatic
// restart, no reservation: https://cloud.google.com/compute/docs/instance-groups/create-mig-with-gpu-vms),
// with no service account and no external address.
func (r *run) templateResource() *computepb.InstanceTemplate {
	network := r.cfg.Network
	if !strings.Contains(network, "/") {
		network = "projects/" + r.cfg.Project + "/global/networks/" + network
	}
	nic := &computepb.NetworkInterface{Network: proto.String(network)}
	if s := r.cfg.Subnetwork; s != "" {
		if !strings.Contains(s, "/") {
			s = "projects/" + r.cfg.Project + "/regions/" + r.region() + "/subnetworks/" + s
		}
		nic.Subnetwork = proto.String(s)
	}
	return &computepb.InstanceTemplate{
		Name:        proto.String(r.template()),
		Description: proto.String(r.description()),
		Properties: &computepb.InstanceProperties{
			MachineType: proto.String(r.cfg.MachineType),
			Labels:      r.labels(),
			Disks: []*computepb.AttachedDisk{{
				Boot: proto.Bool(true), AutoDelete: proto.Bool(true), Type: proto.String("PERSISTENT"),
				InitializeParams: &computepb.AttachedDiskInitializeParams{
					SourceImage: proto.String(r.cfg.Image),
					DiskType:    proto.String(r.cfg.BootDiskType),
				},
			}},
			NetworkInterfaces: []*computepb.NetworkInterface{nic},
			Scheduling: &computepb.Scheduling{
				ProvisioningModel:         proto.String(computepb.Scheduling_FLEX_START.String()),
				InstanceTerminationAction: proto.String(computepb.Scheduling_DELETE.String()),
				MaxRunDuration:            &computepb.Duration{Seconds: proto.Int64(int64(RunDuration / time.Second))},
				OnHostMaintenance:         proto.String(computepb.Scheduling_TERMINATE.String()),
				AutomaticRestart:          proto.Bool(false),
			},
			ReservationAffinity: &computepb.ReservationAffinity{
				ConsumeReservationType: proto.String(computepb.ReservationAffinity_NO_RESERVATION.String()),
			},
		},
	}
}

// migResource is a MIG as the one-MIG-per-request layout makes them:
// target size 0, an explicit OPPORTUNISTIC update policy (running VMs are
// never replaced), DO_NOTHING on failure, no autoscaler.
func (r *run) migResource(name string) *computepb.InstanceGroupManager {
	return &computepb.InstanceGroupManager{
		Name:             proto.String(name),
		Description:      proto.String(r.description()),
		BaseInstanceName: proto.String(name),
		InstanceTemplate: proto.String("projects/" + r.cfg.Project + "/global/instanceTemplates/" + r.template()),
		TargetSize:       proto.Int32(0),
		UpdatePolicy: &computepb.InstanceGroupManagerUpdatePolicy{
			Type: proto.String(computepb.InstanceGroupManagerUpdatePolicy_OPPORTUNISTIC.String()),
		},
		InstanceLifecyclePolicy: &computepb.InstanceGroupManagerInstanceLifecyclePolicy{
			DefaultActionOnFailure: proto.String(computepb.InstanceGroupManagerInstanceLifecyclePolicy_DO_NOTHING.String()),
		},
	}
}

// sleep waits one poll, on the probe's clock.
func (r *run) sleep(ctx context.Context) error { return r.clk.Sleep(ctx, r.cfg.Poll) }

// waitState polls a resize request until it leaves the states in from,
// or until the clock reaches until; it returns the last state read.
func (r *run) waitState(ctx context.Context, mig, name string, until time.Time, from ...string) (string, error) {
	for {
		st, _, err := r.c.ResizeRequestState(ctx, r.cfg.Zone, mig, name)
		if err != nil {
			return "", err
		}
		if !slices.Contains(from, st) || !r.clk.Now().Before(until) {
			return st, nil
		}
		if err := r.sleep(ctx); err != nil {
			return st, err
		}
	}
}

// observeSafely is observe, with a panic turned into an error so that the
// cleanup still runs.
func (r *run) observeSafely(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("probe failed: %v\n%s", p, debug.Stack())
		}
	}()
	return r.observe(ctx)
}

func (r *run) observe(ctx context.Context) error {
	r.logf("run %s: template, MIGs and VMs are named %s…, labelled %s=%s", r.id, r.prefix, LabelProbe, r.id)
	if err := r.c.InsertTemplate(ctx, r.templateResource(), r.rid("template")); err != nil {
		return fmt.Errorf("creating instance template %s: %w", r.template(), err)
	}
	for _, m := range []string{r.migNamed(), r.migTarget()} {
		if err := r.c.InsertMIG(ctx, r.cfg.Zone, r.migResource(m), r.rid("mig "+m)); err != nil {
			return fmt.Errorf("creating managed instance group %s: %w", m, err)
		}
	}
	r.logf("created instance template %s and MIGs %s, %s", r.template(), r.migNamed(), r.migTarget())

	rrName, err := r.namedRequest(ctx)
	if err != nil {
		return err
	}
	if err := r.targetSize(ctx); err != nil {
		return err
	}
	return r.runEnd(ctx, rrName)
}

// namedRequest settles PointNamedRequests and leaves one request for one
// VM of RunDuration in the named MIG (by name if an endpoint accepts
// names, else by count). It returns that request's name.
func (r *run) namedRequest(ctx context.Context) (string, error) {
	const name = "probe-named"
	rr := ResizeRequest{Name: name, Instances: []string{r.namedVM()}, RunDuration: RunDuration, Description: "flexslurm probe " + r.id}
	v1Err := r.c.InsertResizeRequest(ctx, r.cfg.Zone, r.migNamed(), rr, false, r.rid("named v1"))
	var betaErr error
	betaTried := false
	if IsRefusal(v1Err) {
		r.logf("v1 refused a resize request naming its VM: %v; trying beta", v1Err)
		betaTried = true
		betaErr = r.c.InsertResizeRequest(ctx, r.cfg.Zone, r.migNamed(), rr, true, r.rid("named beta"))
	}
	v := DecideNamedRequests(v1Err, betaErr, betaTried)
	r.set(v)
	r.logf("%s: %s", v.Point, v.Outcome)
	switch {
	case v1Err == nil || betaTried && betaErr == nil:
		return name, nil
	case !IsRefusal(v1Err):
		return "", fmt.Errorf("creating resize request %s: %w", name, v1Err)
	case betaTried && betaErr != nil && !IsRefusal(betaErr):
		return "", fmt.Errorf("creating resize request %s through beta: %w", name, betaErr)
	}
	// Names refused everywhere: one VM by count, through v1 (GA). If that
	// is refused too, the names were not the cause: not settled.
	rr = ResizeRequest{Name: "probe-count", Count: 1, RunDuration: RunDuration, Description: "flexslurm probe " + r.id}
	if err := r.c.InsertResizeRequest(ctx, r.cfg.Zone, r.migNamed(), rr, false, r.rid("count v1")); err != nil {
		r.verdicts[PointNamedRequests] = notSettled(PointNamedRequests,
			"v1 and beta refused a request naming its VM, and v1 a request by count as well: "+err.Error(),
			"fix what the last refusal names (machine type, zone, template), then run the probe again")
		return "", fmt.Errorf("creating resize request %s: %w", rr.Name, err)
	}
	return rr.Name, nil
}

// targetSize settles PointTargetSizeWhileAccepted in its own MIG: a first
// request for one VM; once it SUCCEEDED, a second request, and while that
// one is ACCEPTED, deleteInstances of the first one's VM. The MIG is
// deleted at the end (its VMs with it). It also settles PointLabelFilter
// with the first VM.
func (r *run) targetSize(ctx context.Context) error {
	mig := r.migTarget()
	first := ResizeRequest{Name: "probe-first", Count: 1, RunDuration: RunDuration, Description: "flexslurm probe " + r.id}
	if err := r.c.InsertResizeRequest(ctx, r.cfg.Zone, mig, first, false, r.rid("first")); err != nil {
		return fmt.Errorf("creating resize request %s: %w", first.Name, err)
	}
	r.logf("waiting up to %s for capacity for %s", r.cfg.CapacityWait, first.Name)
	st, err := r.waitState(ctx, mig, first.Name, r.clk.Now().Add(r.cfg.CapacityWait), "CREATING", "ACCEPTED")
	if err != nil {
		return err
	}
	var obs TargetSizeObservation
	var vms []string
	if st == "SUCCEEDED" {
		if vms, err = r.c.ManagedInstances(ctx, r.cfg.Zone, mig); err != nil {
			return err
		}
	}
	if len(vms) == 0 {
		obs.NoVM = fmt.Sprintf("request %s was %s after %s, with no VM to release", first.Name, st, r.cfg.CapacityWait)
		r.set(DecideTargetSize(obs))
		r.releaseMIG(ctx, mig, first.Name)
		return nil
	}
	vm := vms[0]
	if err := r.labelFilter(ctx, vm); err != nil {
		return err
	}

	second := ResizeRequest{Name: "probe-second", Count: 1, RunDuration: RunDuration, Description: "flexslurm probe " + r.id}
	if err := r.c.InsertResizeRequest(ctx, r.cfg.Zone, mig, second, false, r.rid("second")); err != nil {
		return fmt.Errorf("creating resize request %s: %w", second.Name, err)
	}
	// A request is CREATING for a moment, then ACCEPTED until capacity
	// arrives: read it every second (not every poll) for up to 30 s.
	for i := 0; ; i++ {
		if obs.Before, _, err = r.c.ResizeRequestState(ctx, r.cfg.Zone, mig, second.Name); err != nil {
			return err
		}
		if obs.Before != "CREATING" || i == 30 {
			break
		}
		if err := r.clk.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	if obs.Before == "ACCEPTED" {
		obs.CallErr = r.c.DeleteInstances(ctx, r.cfg.Zone, mig, []string{vm}, r.rid("delete first"))
		if obs.After, _, err = r.c.ResizeRequestState(ctx, r.cfg.Zone, mig, second.Name); err != nil {
			return err
		}
		if IsRefusal(obs.CallErr) && obs.After == "ACCEPTED" {
			if err := r.c.CancelResizeRequest(ctx, r.cfg.Zone, mig, second.Name, r.rid("cancel second")); err == nil {
				obs.Retried = true
				obs.RetryErr = r.c.DeleteInstances(ctx, r.cfg.Zone, mig, []string{vm}, r.rid("delete first again"))
			}
		}
	}
	v := DecideTargetSize(obs)
	r.set(v)
	r.logf("%s: %s (%s)", v.Point, v.Outcome, v.Evidence)
	r.releaseMIG(ctx, mig, first.Name, second.Name)
	return nil
}

// releaseMIG cancels the MIG's queued requests and deletes it, to stop its
// VMs early; failures are left to the cleanup.
func (r *run) releaseMIG(ctx context.Context, mig string, requests ...string) {
	for _, rr := range requests {
		if st, _, err := r.c.ResizeRequestState(ctx, r.cfg.Zone, mig, rr); err == nil && st == "ACCEPTED" {
			if r.c.CancelResizeRequest(ctx, r.cfg.Zone, mig, rr, r.rid("release cancel "+rr)) == nil {
				r.removed = append(r.removed, "resize request "+mig+"/"+rr+" (cancelled)")
			}
		}
	}
	if err := r.c.DeleteMIG(ctx, r.cfg.Zone, mig, r.rid("release "+mig)); err != nil {
		r.logf("deleting %s early failed (the cleanup tries again): %v", mig, err)
		return
	}
	r.removed = append(r.removed, "managed instance group "+mig+" (with its VMs and resize requests)")
	r.logf("deleted MIG %s and its VMs", mig)
}

// labelFilter settles PointLabelFilter while vm, which carries the probe's
// label, exists.
func (r *run) labelFilter(ctx context.Context, vm string) error {
	if r.labelChecked {
		return nil
	}
	r.labelChecked = true
	values := func(filter string) ([]string, error) {
		ins, err := r.c.ListInstances(ctx, r.cfg.Zone, filter)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(ins))
		for i, in := range ins {
			out[i] = in.Labels[LabelProbe]
		}
		return out, nil
	}
	matching, err := values(fmt.Sprintf("(labels.%s = %q)", LabelProbe, r.id))
	if err != nil {
		return err
	}
	absent, err := values(fmt.Sprintf("(labels.%s = %q)", LabelProbe, r.id+"-none"))
	if err != nil {
		return err
	}
	v := DecideLabelFilter(vm, matching, absent, r.id)
	r.set(v)
	r.logf("%s: %s", v.Point, v.Outcome)
	return nil
}

// runEnd settles PointTargetSizeAtRunEnd and PointRunEndAudit with the VM
// of the named MIG's request rrName, which ends at its run duration.
func (r *run) runEnd(ctx context.Context, rrName string) error {
	mig := r.migNamed()
	// The VM must start early enough to end within the timeout.
	latest := r.deadline.Add(-RunDuration)
	r.logf("waiting for capacity for %s (until %s)", rrName, latest.Format(time.TimeOnly))
	st, err := r.waitState(ctx, mig, rrName, latest, "CREATING", "ACCEPTED")
	if err != nil {
		return err
	}
	var vm string
	if st == "SUCCEEDED" {
		vms, err := r.c.ManagedInstances(ctx, r.cfg.Zone, mig)
		if err != nil {
			return err
		}
		if len(vms) > 0 {
			vm = vms[0]
		}
	}
	if vm == "" {
		ev := fmt.Sprintf("request %s was %s, with no VM, when its VM had to start to end within --timeout", rrName, st)
		r.set(notSettled(PointTargetSizeAtRunEnd, ev, "run the probe again, or with a longer --timeout"))
		r.set(notSettled(PointRunEndAudit, ev, "run the probe again, or with a longer --timeout"))
		if !r.labelChecked {
			r.set(notSettled(PointLabelFilter, "no VM was made", "run the probe again"))
		}
		return nil
	}
	if err := r.labelFilter(ctx, vm); err != nil {
		return err
	}
	before, err := r.c.MIGTargetSize(ctx, r.cfg.Zone, mig)
	if err != nil {
		return err
	}
	in, found, err := r.c.GetInstance(ctx, r.cfg.Zone, vm)
	if err != nil {
		return err
	}
	if found && !in.Termination.IsZero() {
		r.logf("%s runs until %s (its run duration); waiting for Compute to end it", vm, in.Termination.Format(time.TimeOnly))
		if d := in.Termination.Sub(r.clk.Now()); d > 0 {
			if err := r.clk.Sleep(ctx, d); err != nil {
				return err
			}
		}
	}
	gone := !found
	for !gone && r.clk.Now().Before(r.deadline) {
		if _, found, err = r.c.GetInstance(ctx, r.cfg.Zone, vm); err != nil {
			return err
		}
		if gone = !found; !gone {
			if err := r.sleep(ctx); err != nil {
				return err
			}
		}
	}
	after, err := r.c.MIGTargetSize(ctx, r.cfg.Zone, mig)
	if err != nil {
		return err
	}
	v := DecideTargetSizeAtRunEnd(before, after, gone)
	r.set(v)
	r.logf("%s: %s", v.Point, v.Outcome)
	// Delete the MIG now: a MIG that kept its target size might make the
	// VM again. Entries written from here on (that deletion's) are not
	// the run end's, and are left out below.
	released := r.clk.Now()
	r.releaseMIG(ctx, mig, rrName)
	if !gone {
		r.set(notSettled(PointRunEndAudit, vm+" was not gone in time", "run the probe with a longer --timeout"))
		return nil
	}

	// Audit entries may lag the deletion: wait for the first, then one more
	// poll for the other form.
	r.logf("looking for the audit entry of %s's end (up to %s), with the Cloud Logging filter\n  %s", vm, r.cfg.AuditWait,
		AuditFilter(r.cfg.Project, r.cfg.Zone, vm, r.start.Truncate(time.Second)))
	until := r.clk.Now().Add(r.cfg.AuditWait)
	var entries []AuditEntry
	read := func() error {
		all, err := r.env.Audit.InstanceEntries(ctx, r.cfg.Zone, vm, r.start.Truncate(time.Second))
		entries = entries[:0]
		for _, e := range all {
			if !e.Time.After(released) {
				entries = append(entries, e)
			}
		}
		return err
	}
	for {
		if err := read(); err != nil {
			return err
		}
		if v := DecideRunEndAudit(entries, vm); v.Settled() || !r.clk.Now().Before(until) {
			if v.Settled() && v.Outcome != AuditBoth && r.clk.Now().Before(until) {
				if err := r.sleep(ctx); err != nil {
					return err
				}
				if err := read(); err != nil {
					return err
				}
			}
			break
		}
		if err := r.sleep(ctx); err != nil {
			return err
		}
	}
	v = DecideRunEndAudit(entries, vm)
	r.set(v)
	r.logf("%s: %s", v.Point, v.Outcome)
	return nil
}

// cleanup removes everything of the run (its MIGs with their requests and
// VMs, VMs with its label outside a MIG, its template), waits for the VMs
// to be gone, and lists again: Left names what is still there.
func (r *run) cleanup(ctx context.Context) (removed, left []string) {
	z := r.cfg.Zone
	var errs []string
	migs, err := r.c.ListMIGs(ctx, z, r.prefix+"-")
	if err != nil {
		errs = append(errs, err.Error())
	}
	for _, n := range migs {
		if !r.ours(n) {
			r.logf("leaving MIG %s alone: its description is not this run's", n.Name)
			continue
		}
		m := n.Name
		if rrs, err := r.c.ListResizeRequests(ctx, z, m); err == nil {
			for name, st := range rrs {
				if st == "CREATING" {
					st, _ = r.waitState(ctx, m, name, r.clk.Now().Add(time.Minute), "CREATING")
				}
				if st == "ACCEPTED" {
					if err := r.c.CancelResizeRequest(ctx, z, m, name, r.rid("cleanup cancel "+m+"/"+name)); err == nil {
						removed = append(removed, "resize request "+m+"/"+name+" (cancelled)")
					}
				}
			}
		}
		if err := r.c.DeleteMIG(ctx, z, m, r.rid("cleanup "+m)); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		removed = append(removed, "managed instance group "+m+" (with its VMs and resize requests)")
	}
	// VMs of the run outside a MIG: none is made, but a VM carrying the
	// run's label is the run's wherever it is. Labels are checked here:
	// the server may ignore the filter.
	vms, err := r.runVMs(ctx)
	if err != nil {
		errs = append(errs, err.Error())
	}
	for _, in := range vms {
		if in.Status == "STOPPING" {
			continue
		}
		if err := r.c.DeleteInstance(ctx, z, in.Name, r.rid("cleanup vm "+in.Name)); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		removed = append(removed, "VM "+in.Name)
	}
	// The template can only go once no MIG uses it; VMs being deleted by
	// their MIG's deletion may take a while to be gone.
	until := r.clk.Now().Add(r.cfg.CleanupTimeout / 2)
	for {
		vms, err = r.runVMs(ctx)
		if err != nil || len(vms) == 0 || !r.clk.Now().Before(until) {
			break
		}
		if r.clk.Sleep(ctx, r.cfg.Poll) != nil {
			break
		}
	}
	tpls, err := r.c.ListTemplates(ctx, r.prefix)
	if err != nil {
		errs = append(errs, err.Error())
	}
	for _, t := range tpls {
		if t.Name != r.template() || !r.ours(t) {
			continue
		}
		if err := r.c.DeleteTemplate(ctx, t.Name, r.rid("cleanup template")); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		removed = append(removed, "instance template "+t.Name)
	}

	// Prove it: list again.
	if migs, err := r.c.ListMIGs(ctx, z, r.prefix+"-"); err != nil {
		left = append(left, "unknown: "+err.Error())
	} else {
		for _, m := range migs {
			if r.ours(m) {
				left = append(left, "managed instance group "+m.Name+" in "+z)
			}
		}
	}
	if vms, err := r.runVMs(ctx); err != nil {
		left = append(left, "unknown: "+err.Error())
	} else {
		for _, in := range vms {
			left = append(left, fmt.Sprintf("VM %s in %s (%s)", in.Name, z, in.Status))
		}
	}
	if tpls, err := r.c.ListTemplates(ctx, r.prefix); err != nil {
		left = append(left, "unknown: "+err.Error())
	} else {
		for _, t := range tpls {
			if t.Name == r.template() && r.ours(t) {
				left = append(left, "instance template "+t.Name)
			}
		}
	}
	if len(left) > 0 {
		for _, e := range errs {
			left = append(left, "error: "+e)
		}
	}
	return removed, left
}

// runVMs lists the zone's VMs that carry the run's label, checking the
// label on each (the server may ignore the filter).
func (r *run) runVMs(ctx context.Context) ([]Instance, error) {
	ins, err := r.c.ListInstances(ctx, r.cfg.Zone, fmt.Sprintf("(labels.%s = %q)", LabelProbe, r.id))
	if err != nil {
		return nil, err
	}
	var out []Instance
	for _, in := range ins {
		if in.Labels[LabelProbe] == r.id && strings.HasPrefix(in.Name, r.prefix+"-") {
			out = append(out, in)
		}
	}
	return out, nil
}
