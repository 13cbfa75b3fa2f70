package teardown_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/teardown"
)

const (
	project = "proj"
	zoneA   = "us-central1-a"
	zoneB   = "europe-west4-b" // a pool since removed from the spec
	zoneC   = "us-east5-a"
	queued  = "a3-ultragpu-8g" // capacity never comes: requests stay ACCEPTED
	ready   = "a3-highgpu-8g"  // capacity at once
)

type world struct {
	t   *testing.T
	ctx context.Context
	clk *clock.Scaled
	sim *computesim.Sim
	c   *gce.Client
}

// newWorld starts a simulator on a clock running 10 simulated minutes per
// wall second, where deleted VMs stay STOPPING for 2 simulated minutes and
// resize requests stay CREATING for 1.
func newWorld(t *testing.T) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	clk := clock.NewScaled(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), 600)
	sim := computesim.New(computesim.Options{
		Project:     project,
		DeleteDelay: 2 * time.Minute,
		AcceptDelay: time.Minute,
		CapacityDelay: func(_, machineType string) time.Duration {
			if machineType == queued {
				return 1000 * time.Hour
			}
			return 0
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, clk)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	c, err := gce.New(ctx, project, option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &world{t: t, ctx: ctx, clk: clk, sim: sim, c: c}
}

func (w *world) template(name, machineType string, labels map[string]string) {
	w.t.Helper()
	no := false
	spec := instancetemplate.Template{Name: name, Properties: instancetemplate.Properties{
		MachineType: machineType,
		Disks: []instancetemplate.Disk{{Boot: true, AutoDelete: true, Type: "PERSISTENT",
			InitializeParams: instancetemplate.InitializeParams{SourceImage: "projects/debian-cloud/global/images/family/debian-12"}}},
		NetworkInterfaces: []instancetemplate.NetworkInterface{{Network: "projects/proj/global/networks/default"}},
		Scheduling: instancetemplate.Scheduling{ProvisioningModel: "FLEX_START", InstanceTerminationAction: "DELETE",
			MaxRunDuration: &instancetemplate.Duration{Seconds: 7 * 24 * 3600}, OnHostMaintenance: "TERMINATE", AutomaticRestart: &no},
		ReservationAffinity: &instancetemplate.ReservationAffinity{ConsumeReservationType: "NO_RESERVATION"},
		Labels:              labels,
	}}
	if err := w.c.EnsureInstanceTemplate(w.ctx, spec, ""); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) mig(zone, name, template string) {
	w.t.Helper()
	if err := w.c.EnsureMIG(w.ctx, gce.MIGSpec{Zone: zone, Name: name, Template: template}, ""); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) request(zone, mig, name string, vms ...string) {
	w.t.Helper()
	if err := w.c.CreateResizeRequest(w.ctx, zone, mig, gce.ResizeRequestSpec{Name: name, Instances: vms}, ""); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) vm(zone, name string, labels map[string]string) {
	w.t.Helper()
	if _, err := w.sim.AddInstance("", zone, name, labels); err != nil {
		w.t.Fatal(err)
	}
}

// waitFor ticks the simulator until cond holds.
func (w *world) waitFor(cond func() bool) {
	w.t.Helper()
	for w.sim.Tick(w.clk.Now()); !cond(); w.sim.Tick(w.clk.Now()) {
		if w.ctx.Err() != nil {
			w.t.Fatal("timed out waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// populate builds cluster c1 (static and dynamic VMs, SUCCEEDED, ACCEPTED and
// CREATING resize requests, two MIGs in two zones, templates, a stray VM),
// cluster c2, and VMs and templates that only look like c1's.
func (w *world) populate() {
	c1a3, c1h200, c1old := naming.Labels("c1", "a3"), naming.Labels("c1", "h200"), naming.Labels("c1", "old")
	w.template("fs-c1-a3-11111111", ready, c1a3)
	w.template("fs-c1-a3-22222222", ready, c1a3) // an older template of the pool, unused
	w.template("fs-c1-h200-33333333", queued, c1h200)
	w.template("fs-c1-old-44444444", ready, c1old)
	w.mig(zoneA, "fs-c1-a3", "fs-c1-a3-11111111")
	w.mig(zoneA, "fs-c1-h200", "fs-c1-h200-33333333")
	w.mig(zoneB, "fs-c1-old", "fs-c1-old-44444444")
	w.request(zoneA, "fs-c1-a3", naming.NodeResizeRequest("c1-a3-0", 1), "c1-a3-0-g1")                     // static
	w.request(zoneA, "fs-c1-a3", naming.JobResizeRequest("c1", "a3", "12", 1), "c1-a3-1-g1", "c1-a3-2-g1") // dynamic
	w.request(zoneA, "fs-c1-h200", naming.JobResizeRequest("c1", "h200", "13", 1), "c1-h200-0-g1")         // queued
	w.request(zoneB, "fs-c1-old", naming.NodeResizeRequest("c1-old-0", 3), "c1-old-0-g3")

	c2 := naming.Labels("c2", "a3")
	w.template("fs-c2-a3-55555555", ready, c2)
	w.template("fs-c2-a3-66666666", ready, c2)
	w.mig(zoneA, "fs-c2-a3", "fs-c2-a3-55555555")
	w.request(zoneA, "fs-c2-a3", naming.JobResizeRequest("c2", "a3", "7", 1), "c2-a3-0-g1")
	w.request(zoneA, "fs-c2-a3", naming.JobResizeRequest("c2", "a3", "8", 1), "c2-a3-1-g1")
	// Looks like c1's by name, but its template is not labelled as c1's.
	w.template("fs-c1-lookalike", ready, map[string]string{"team": "ml"})
	w.mig(zoneA, "fs-c1-lookalike", "fs-c1-lookalike")

	w.waitFor(func() bool { return len(w.sim.Instances()) == 6 })
	// c1's stray VM (its MIG gone), created by hand, and c1's VMs without
	// the managed-by label; an unlabelled VM; another cluster's.
	w.vm(zoneC, "c1-a3-9-g4", naming.Labels("c1", "a3"))
	w.vm(zoneA, "c1-unmanaged", map[string]string{naming.LabelCluster: "c1"})
	w.vm(zoneA, "plain", nil)
	w.vm(zoneC, "c2-a3-5-g1", naming.Labels("c2", "a3"))
	// A request still CREATING when the teardown starts.
	w.request(zoneA, "fs-c1-h200", naming.JobResizeRequest("c1", "h200", "14", 1), "c1-h200-1-g1")
}

type state struct {
	VMs, MIGs, Requests, Templates []string
}

func (w *world) state() state {
	w.t.Helper()
	var s state
	for _, in := range w.sim.Instances() {
		s.VMs = append(s.VMs, in.Zone+"/"+in.Name+" "+in.Status)
	}
	for _, m := range w.sim.MIGs() {
		s.MIGs = append(s.MIGs, m.Zone+"/"+m.Name)
	}
	for _, rr := range w.sim.ResizeRequests() {
		s.Requests = append(s.Requests, rr.MIG+"/"+rr.Name+" "+rr.State)
	}
	tpls, err := w.c.ListInstanceTemplates(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, t := range tpls {
		s.Templates = append(s.Templates, t.Name)
	}
	slices.Sort(s.VMs)
	slices.Sort(s.MIGs)
	slices.Sort(s.Requests)
	return s
}

func (w *world) run(dryRun bool) (*teardown.Report, string) {
	w.t.Helper()
	rep, err := teardown.Run(w.ctx, w.c, teardown.Options{
		Project: project, Cluster: "c1", DryRun: dryRun, Poll: 20 * time.Millisecond, Wait: 20 * time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		w.t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.Write(&b); err != nil {
		w.t.Fatal(err)
	}
	return rep, b.String()
}

func TestTeardownSimulatedCluster(t *testing.T) {
	w := newWorld(t)
	w.populate()

	// Dry run: says what it would remove, changes nothing.
	calls := len(w.sim.Calls())
	beforeDry := w.state()
	rep, out := w.run(true)
	if n := len(w.sim.Calls()); n != calls {
		t.Errorf("dry run made %d mutating calls: %v", n-calls, w.sim.Calls()[calls:])
	}
	if !rep.Clean() {
		t.Errorf("dry run: would leave %v", rep.Remaining)
	}
	for _, want := range []string{
		"(dry run: nothing was changed)",
		"resize request zones/us-central1-a/instanceGroupManagers/fs-c1-h200/rr-c1-h200-j13-g1 (ACCEPTED): cancel, then delete",
		"resize request zones/us-central1-a/instanceGroupManagers/fs-c1-a3/rr-c1-a3-0-g1 (SUCCEEDED): delete",
		"MIG zones/europe-west4-b/fs-c1-old: delete, with its VMs [c1-old-0-g3]",
		"MIG zones/us-central1-a/fs-c1-a3: delete, with its VMs [c1-a3-0-g1 c1-a3-1-g1 c1-a3-2-g1]",
		"VM zones/us-east5-a/c1-a3-9-g4 (RUNNING): delete",
		"instance template global/fs-c1-a3-22222222: delete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run report lacks %q:\n%s", want, out)
		}
	}
	for _, never := range []string{"c2-", "fs-c2", "lookalike", "plain", "c1-unmanaged"} {
		if strings.Contains(out, never) {
			t.Errorf("dry-run report names %q, which is not c1's:\n%s", never, out)
		}
	}
	afterDry := w.state()
	// Only time moved: the CREATING request may have been accepted.
	for i, r := range afterDry.Requests {
		afterDry.Requests[i] = strings.Replace(r, "rr-c1-h200-j14-g1 ACCEPTED", "rr-c1-h200-j14-g1 CREATING", 1)
	}
	if diff := cmp.Diff(beforeDry, afterDry); diff != "" {
		t.Errorf("dry run changed Compute (-before +after):\n%s", diff)
	}

	// The teardown.
	calls = len(w.sim.Calls())
	rep, out = w.run(false)
	if !rep.Clean() {
		t.Errorf("teardown left %v\n%s", rep.Remaining, out)
	}
	for _, a := range rep.Actions {
		if a.Err != nil {
			t.Errorf("action failed: %+v", a)
		}
	}
	want := state{
		VMs: []string{
			"us-central1-a/c1-unmanaged RUNNING", "us-central1-a/c2-a3-0-g1 RUNNING", "us-central1-a/c2-a3-1-g1 RUNNING",
			"us-central1-a/plain RUNNING", "us-east5-a/c2-a3-5-g1 RUNNING",
		},
		MIGs:      []string{"us-central1-a/fs-c1-lookalike", "us-central1-a/fs-c2-a3"},
		Requests:  []string{"fs-c2-a3/rr-c2-a3-j7-g1 SUCCEEDED", "fs-c2-a3/rr-c2-a3-j8-g1 SUCCEEDED"},
		Templates: []string{"fs-c1-lookalike", "fs-c2-a3-55555555", "fs-c2-a3-66666666"},
	}
	if diff := cmp.Diff(want, w.state()); diff != "" {
		t.Errorf("what remains (-want +got):\n%s", diff)
	}
	for _, in := range w.sim.Instances() {
		if in.Labels[naming.LabelManagedBy] == naming.ManagedBy && in.Labels[naming.LabelCluster] == "c1" {
			t.Errorf("c1's VM %s/%s is left (%s, %s)", in.Zone, in.Name, in.MachineType, in.Status)
		}
	}

	// Order: resize requests (each cancelled one cancelled before it is
	// deleted), then MIGs, then VMs, then templates; cancels only for
	// requests that were ACCEPTED (or CREATING, once accepted); every call
	// answered 200.
	phaseOf := map[string]int{"cancel": 0, "delete-rr": 0, "delete-mig": 1, "delete-vm": 2, "delete-template": 3}
	var kinds []string
	phase := 0
	cancelled := map[string]bool{}
	deletedRR := map[string]bool{}
	for _, c := range w.sim.Calls()[calls:] {
		kind := ""
		switch {
		case strings.HasSuffix(c.Path, "/cancel"):
			kind = "cancel"
			rr := strings.TrimSuffix(c.Path[strings.Index(c.Path, "/instanceGroupManagers/"):], "/cancel")
			if deletedRR[rr] {
				t.Errorf("%s cancelled after it was deleted", rr)
			}
			cancelled[rr] = true
		case strings.Contains(c.Path, "/resizeRequests/"):
			kind = "delete-rr"
			deletedRR[c.Path[strings.Index(c.Path, "/instanceGroupManagers/"):]] = true
		case strings.Contains(c.Path, "/instanceGroupManagers/"):
			kind = "delete-mig"
		case strings.Contains(c.Path, "/instances/"):
			kind = "delete-vm"
		case strings.Contains(c.Path, "/instanceTemplates/"):
			kind = "delete-template"
		}
		if c.Status != 200 {
			t.Errorf("call %s %s answered %d", c.Method, c.Path, c.Status)
		}
		if phaseOf[kind] < phase {
			t.Errorf("%s %s after a later step began", kind, c.Path)
		}
		phase = phaseOf[kind]
		if len(kinds) == 0 || kinds[len(kinds)-1] != kind {
			kinds = append(kinds, kind)
		}
	}
	if n := len(deletedRR); n != 5 {
		t.Errorf("%d resize requests deleted, want 5", n)
	}
	wantCancelled := map[string]bool{
		"/instanceGroupManagers/fs-c1-h200/resizeRequests/rr-c1-h200-j13-g1": true,
		"/instanceGroupManagers/fs-c1-h200/resizeRequests/rr-c1-h200-j14-g1": true,
	}
	if diff := cmp.Diff(wantCancelled, cancelled); diff != "" {
		t.Errorf("cancelled (-want +got):\n%s", diff)
	}
	if !strings.Contains(out, "MIG zones/us-central1-a/fs-c1-a3: deleted\n    VM zones/us-central1-a/c1-a3-0-g1: deleted with it\n") ||
		!strings.Contains(out, "Nothing of cluster c1 is left in Compute Engine.") {
		t.Errorf("report:\n%s", out)
	}

	// A second run finds nothing and changes nothing.
	calls = len(w.sim.Calls())
	rep, out = w.run(false)
	if !rep.Clean() || len(rep.Actions) != 0 || len(w.sim.Calls()) != calls {
		t.Errorf("second run: clean %v, actions %v, calls %v\n%s", rep.Clean(), rep.Actions, w.sim.Calls()[calls:], out)
	}
	if !strings.Contains(out, "nothing of the cluster's was found") {
		t.Errorf("second run report:\n%s", out)
	}
}

// appearing re-creates a VM of c1 as soon as a MIG is deleted, as
// flexslurm's functions would if they were still deployed.
type appearing struct {
	*gce.Client
	w *world
}

func (a appearing) DeleteMIG(ctx context.Context, zone, name, requestID string) error {
	err := a.Client.DeleteMIG(ctx, zone, name, requestID)
	a.w.vm(zone, name+"-new", naming.Labels("c1", "a3"))
	return err
}

func TestTeardownReportsWhatAppeared(t *testing.T) {
	w := newWorld(t)
	w.template("fs-c1-a3-11111111", ready, naming.Labels("c1", "a3"))
	w.mig(zoneA, "fs-c1-a3", "fs-c1-a3-11111111")
	rep, err := teardown.Run(w.ctx, appearing{w.c, w}, teardown.Options{
		Cluster: "c1", Poll: 20 * time.Millisecond, Wait: 2 * time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.Write(&b)
	if rep.Clean() || len(rep.Remaining) != 1 || !strings.Contains(rep.Remaining[0].String(),
		"VM zones/us-central1-a/fs-c1-a3-new: appeared during the teardown: are flexslurm's functions") {
		t.Errorf("remaining %v\n%s", rep.Remaining, b.String())
	}
	if !strings.Contains(b.String(), "Left (1):") {
		t.Errorf("report:\n%s", b.String())
	}
}

func TestTeardownRejectsBadCluster(t *testing.T) {
	w := newWorld(t)
	for _, c := range []string{"", "C1", "c-1", "abcdefghijk"} {
		if _, err := teardown.Run(w.ctx, w.c, teardown.Options{Cluster: c}); err == nil || !strings.Contains(err.Error(), "cluster") {
			t.Errorf("cluster %q: got %v", c, err)
		}
	}
	if n := len(w.sim.Calls()); n != 0 {
		t.Errorf("%d calls for bad input", n)
	}
}

// TestTeardownReportsFailures: a MIG Compute refuses to delete stays, with
// its VMs and its template; the rest goes, and the report says what is left.
func TestTeardownReportsFailures(t *testing.T) {
	w := newWorld(t)
	w.template("fs-c1-a3-11111111", ready, naming.Labels("c1", "a3"))
	w.template("fs-c1-b-22222222", ready, naming.Labels("c1", "b"))
	w.mig(zoneA, "fs-c1-a3", "fs-c1-a3-11111111")
	w.mig(zoneA, "fs-c1-b", "fs-c1-b-22222222")
	w.request(zoneA, "fs-c1-a3", "rr-1", "c1-a3-0-g1")
	w.request(zoneA, "fs-c1-b", "rr-2", "c1-b-0-g1")
	w.waitFor(func() bool { return len(w.sim.Instances()) == 2 })
	w.sim.InjectError(computesim.Match{Method: "DELETE", Path: `/instanceGroupManagers/fs-c1-a3$`}, 400, "invalid", "", 0)

	rep, out := w.run(false)
	if rep.Clean() {
		t.Fatalf("clean despite a MIG that could not be deleted:\n%s", out)
	}
	var left []string
	for _, it := range rep.Remaining {
		left = append(left, it.Kind+" "+it.Name+": "+it.Note)
	}
	want := []string{
		"MIG fs-c1-a3: still there",
		"VM c1-a3-0-g1: still there (RUNNING)",
		"instance template fs-c1-a3-11111111: still there",
	}
	if diff := cmp.Diff(want, left); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
	for _, want := range []string{
		"MIG zones/us-central1-a/fs-c1-a3: delete FAILED:",
		"instance template global/fs-c1-a3-11111111: delete FAILED:",
		"MIG zones/us-central1-a/fs-c1-b: deleted\n",
		"Left (3):",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if n := len(w.sim.Instances()); n != 1 {
		t.Errorf("%d VMs left, want 1 (the failed MIG's)", n)
	}
}

// TestTeardownWorkloadPolicies: the workload policies of the cluster's
// pools (named and described by shared/naming) are deleted; another
// cluster's, and one with a pool policy's name but another description,
// are left.
func TestTeardownWorkloadPolicies(t *testing.T) {
	w := newWorld(t)
	for _, p := range []gce.WorkloadPolicySpec{
		{Region: "us-central1", Name: naming.WorkloadPolicy("c1", "a3", "BLOCK"), Description: naming.WorkloadPolicyDescription("c1", "a3"), MaxTopologyDistance: "BLOCK"},
		{Region: "europe-west4", Name: naming.WorkloadPolicy("c1", "old", ""), Description: naming.WorkloadPolicyDescription("c1", "old")},
		{Region: "us-central1", Name: naming.WorkloadPolicy("c2", "a3", ""), Description: naming.WorkloadPolicyDescription("c2", "a3")},
		{Region: "us-central1", Name: naming.WorkloadPolicy("c1", "a3", ""), Description: "the team's own policy"},
	} {
		if err := w.c.EnsureWorkloadPolicy(w.ctx, p, ""); err != nil {
			t.Fatal(err)
		}
	}
	_, out := w.run(true)
	if !strings.Contains(out, "workload policy regions/us-central1/fs-c1-a3-wp-block") || strings.Contains(out, "fs-c2-") || strings.Contains(out, "fs-c1-a3-wp-any") {
		t.Errorf("dry-run report:\n%s", out)
	}
	rep, out := w.run(false)
	if !rep.Clean() {
		t.Errorf("teardown left %v\n%s", rep.Remaining, out)
	}
	left, err := w.c.ListResourcePoliciesAllRegions(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range left {
		names = append(names, p.Region+"/"+p.Name)
	}
	slices.Sort(names)
	if want := []string{"us-central1/fs-c1-a3-wp-any", "us-central1/fs-c2-a3-wp-any"}; !slices.Equal(names, want) {
		t.Errorf("policies left %v, want %v", names, want)
	}
}
