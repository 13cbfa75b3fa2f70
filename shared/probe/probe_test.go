package probe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/probe"
)

const (
	project = "proj"
	zone    = "us-central1-a"
)

var t0 = time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)

// simClock is the probe's clock on a simulator's manual clock: Sleep
// advances it and applies what falls due.
type simClock struct {
	clk *clock.Manual
	sim *computesim.Sim
}

func (c simClock) Now() time.Time { return c.clk.Now() }

func (c simClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.sim.Tick(c.clk.Advance(d))
	return nil
}

type world struct {
	sim *computesim.Sim
	clk *clock.Manual
	env probe.Env
	out bytes.Buffer
}

func newWorld(t *testing.T, readings computesim.Readings, capacity time.Duration) *world {
	t.Helper()
	return newWorldOpts(t, computesim.Options{
		Readings:      readings,
		CapacityDelay: func(string, string) time.Duration { return capacity },
	})
}

func newWorldOpts(t *testing.T, opts computesim.Options) *world {
	t.Helper()
	w := &world{clk: clock.NewManual(t0)}
	opts.Project = project
	w.sim = computesim.New(opts, w.clk)
	ctx := context.Background()
	c, err := probe.NewCompute(ctx, project,
		option.WithHTTPClient(computesim.InProcessClient(w.sim)),
		option.WithEndpoint(computesim.InProcessEndpoint),
		option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w.env = probe.Env{
		Compute: c,
		Clock:   simClock{w.clk, w.sim},
		Audit: probe.EntriesReader{Project: project, Entries: func() [][]byte {
			var out [][]byte
			for _, e := range w.sim.AuditEntries() {
				out = append(out, e.Data)
			}
			return out
		}},
	}
	return w
}

func (w *world) run(t *testing.T) probe.Report {
	t.Helper()
	rep := probe.Run(context.Background(), probe.Config{Project: project, Zone: zone, RunID: "t1", Out: &w.out}, w.env)
	t.Logf("probe output:\n%s", w.out.String())
	var table bytes.Buffer
	probe.PrintTable(&table, rep)
	t.Logf("verdicts:\n%s", table.String())
	if rep.Err != nil {
		t.Errorf("run error: %v", rep.Err)
	}
	w.assertNothingLeft(t, rep)
	return rep
}

// assertNothingLeft checks the report and the simulator itself: no MIG,
// VM or template of the probe is left.
func (w *world) assertNothingLeft(t *testing.T, rep probe.Report) {
	t.Helper()
	if len(rep.Left) > 0 {
		t.Errorf("cleanup reports left: %v", rep.Left)
	}
	for _, m := range w.sim.MIGs() {
		t.Errorf("MIG %s left in the simulator", m.Name)
	}
	for _, in := range w.sim.Instances() {
		t.Errorf("VM %s (%s) left in the simulator", in.Name, in.Status)
	}
	if len(rep.Removed) == 0 {
		t.Errorf("cleanup removed nothing")
	}
}

func TestVerdictsFollowEachReading(t *testing.T) {
	type want map[probe.Point]string
	lenient := want{
		probe.PointTargetSizeWhileAccepted: probe.Allowed,
		probe.PointNamedRequests:           probe.NamedOnV1,
		probe.PointRunEndAudit:             probe.AuditDeferredDelete,
		probe.PointLabelFilter:             probe.FilterHonoured,
		probe.PointTargetSizeAtRunEnd:      probe.TargetSizeDecremented,
	}
	with := func(p probe.Point, o string) want {
		w := want{}
		for k, v := range lenient {
			w[k] = v
		}
		w[p] = o
		return w
	}
	strict := want{
		probe.PointTargetSizeWhileAccepted: probe.Refused,
		probe.PointNamedRequests:           probe.NamedOnBetaOnly,
		probe.PointRunEndAudit:             probe.AuditMIGDelete,
		probe.PointLabelFilter:             probe.FilterIgnored,
		probe.PointTargetSizeAtRunEnd:      probe.TargetSizeKept,
	}
	for _, tc := range []struct {
		readings string
		want     want
	}{
		{"lenient", lenient},
		{"lenient,RefuseTargetSizeWhileAccepted", with(probe.PointTargetSizeWhileAccepted, probe.Refused)},
		{"lenient,RefuseNamedRequestsOnV1", with(probe.PointNamedRequests, probe.NamedOnBetaOnly)},
		{"lenient,RunEndAudit=migDelete", with(probe.PointRunEndAudit, probe.AuditMIGDelete)},
		{"lenient,IgnoreLabelFilter", with(probe.PointLabelFilter, probe.FilterIgnored)},
		{"lenient,KeepTargetSizeAtRunEnd", with(probe.PointTargetSizeAtRunEnd, probe.TargetSizeKept)},
		{"strict", strict},
	} {
		t.Run(tc.readings, func(t *testing.T) {
			r, err := computesim.ParseReadings(tc.readings)
			if err != nil {
				t.Fatal(err)
			}
			w := newWorld(t, r, 30*time.Second)
			rep := w.run(t)
			for _, p := range probe.Points {
				if got := rep.Verdict(p).Outcome; got != tc.want[p] {
					t.Errorf("%s: verdict %q, want %q (%s)", p, got, tc.want[p], rep.Verdict(p).Evidence)
				}
			}
			if d := w.clk.Now().Sub(t0); d > probe.DefaultTimeout+5*time.Minute {
				t.Errorf("the run took %s on the simulator's clock", d)
			}
		})
	}
}

// Capacity that arrives at once leaves no moment with a request ACCEPTED
// to try a target-size change in: the point is not settled, never guessed.
func TestTargetSizeNotSettledWhenCapacityIsImmediate(t *testing.T) {
	w := newWorld(t, computesim.StrictReadings(), 0)
	rep := w.run(t)
	v := rep.Verdict(probe.PointTargetSizeWhileAccepted)
	if v.Settled() || v.Hint == "" {
		t.Errorf("verdict %+v, want not settled with a hint", v)
	}
	if !strings.Contains(v.Evidence, "SUCCEEDED") {
		t.Errorf("evidence %q does not say the request had SUCCEEDED", v.Evidence)
	}
}

// A step that fails midway (Compute refuses the second request of the
// target-size point) ends the run with that error, and the cleanup still
// removes the MIGs with their VMs and requests, and the template.
func TestCleanupAfterAFailedStep(t *testing.T) {
	w := newWorld(t, computesim.LenientReadings(), 30*time.Second)
	w.sim.Inject(computesim.Injection{
		Match:   computesim.Match{Method: "POST", Path: `/instanceGroupManagers/fs-probe-t1-a/resizeRequests$`},
		Status:  403,
		Reason:  "forbidden",
		Message: "injected: permission denied",
		Times:   0,
	})
	rep := probe.Run(context.Background(), probe.Config{Project: project, Zone: zone, RunID: "t1", Out: &w.out}, w.env)
	t.Logf("probe output:\n%s", w.out.String())
	if rep.Err == nil || !strings.Contains(rep.Err.Error(), "probe-first") {
		t.Errorf("run error %v, want the refused insert of probe-first", rep.Err)
	}
	if v := rep.Verdict(probe.PointNamedRequests); v.Outcome != probe.NamedOnV1 {
		t.Errorf("named requests: %+v, want settled before the failure", v)
	}
	if v := rep.Verdict(probe.PointRunEndAudit); v.Settled() || !strings.Contains(v.Hint, "fix what stopped the run") {
		t.Errorf("run-end audit: %+v, want not settled with the hint to fix the run", v)
	}
	if len(w.sim.Instances()) != 1 {
		// The named request's VM was running when the run stopped: the
		// cleanup had something to remove.
		t.Logf("VMs at the end: %v", w.sim.Instances())
	}
	w.assertNothingLeft(t, rep)
	if !slices.ContainsFunc(rep.Removed, func(s string) bool { return strings.Contains(s, "fs-probe-t1-n") }) {
		t.Errorf("removed %v, want the named MIG among them", rep.Removed)
	}
}

// cancellingClock cancels the run's context (Ctrl-C) at its n-th Sleep.
type cancellingClock struct {
	simClock
	n      *int
	cancel context.CancelFunc
}

func (c cancellingClock) Sleep(ctx context.Context, d time.Duration) error {
	*c.n--
	if *c.n == 0 {
		c.cancel()
	}
	return c.simClock.Sleep(ctx, d)
}

// Ctrl-C while a VM runs: the cleanup runs all the same, on a context of
// its own, and removes everything.
func TestCleanupAfterInterrupt(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := newWorld(t, computesim.StrictReadings(), 30*time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w.env.Clock = cancellingClock{simClock: simClock{w.clk, w.sim}, n: &n, cancel: cancel}
			rep := probe.Run(ctx, probe.Config{Project: project, Zone: zone, RunID: "t1", Out: &w.out}, w.env)
			t.Logf("probe output:\n%s", w.out.String())
			if !errors.Is(rep.Err, context.Canceled) {
				t.Errorf("run error %v, want context.Canceled", rep.Err)
			}
			if !strings.Contains(w.out.String(), "interrupted: cleaning up") {
				t.Errorf("output does not say it cleans up after the interrupt")
			}
			w.assertNothingLeft(t, rep)
		})
	}
}

// The cleanup never touches what is not the run's: a VM and a MIG of
// another run (or of anyone) stay.
func TestCleanupTouchesOnlyItsRun(t *testing.T) {
	w := newWorld(t, computesim.StrictReadings(), 30*time.Second)
	other, err := w.sim.AddInstance(project, zone, "fs-probe-t2-n-0", map[string]string{probe.LabelProbe: "t2", probe.LabelManagedBy: "flexslurm"})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := w.sim.AddInstance(project, zone, "fs-probe-t1-x-0", map[string]string{probe.LabelProbe: "t1", probe.LabelManagedBy: "flexslurm"})
	if err != nil {
		t.Fatal(err)
	}
	// A cluster named "probe" with a pool named "t1" has MIGs named like
	// the run's, with a template of its own: neither is the run's.
	ctx := context.Background()
	tpl := &computepb.InstanceTemplate{
		Name: proto.String("fs-probe-t1-cluster"),
		Properties: &computepb.InstanceProperties{
			MachineType: proto.String("n2-standard-2"),
			Disks: []*computepb.AttachedDisk{{Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
				InitializeParams: &computepb.AttachedDiskInitializeParams{SourceImage: proto.String(probe.DefaultImage)}}},
			NetworkInterfaces: []*computepb.NetworkInterface{{Network: proto.String("projects/proj/global/networks/default")}},
		},
	}
	if err := w.env.Compute.InsertTemplate(ctx, tpl, "00000000-0000-4000-8000-000000000001"); err != nil {
		t.Fatal(err)
	}
	clusterMIG := &computepb.InstanceGroupManager{
		Name:             proto.String("fs-probe-t1-r0123456789"),
		Description:      proto.String("a cluster's request MIG"),
		BaseInstanceName: proto.String("fs-probe-t1-r0123456789"),
		InstanceTemplate: proto.String("projects/proj/global/instanceTemplates/fs-probe-t1-cluster"),
		TargetSize:       proto.Int32(0),
		InstanceLifecyclePolicy: &computepb.InstanceGroupManagerInstanceLifecyclePolicy{
			DefaultActionOnFailure: proto.String("DO_NOTHING"),
		},
	}
	if err := w.env.Compute.InsertMIG(ctx, zone, clusterMIG, "00000000-0000-4000-8000-000000000002"); err != nil {
		t.Fatal(err)
	}
	rep := probe.Run(ctx, probe.Config{Project: project, Zone: zone, RunID: "t1", Out: &w.out}, w.env)
	t.Logf("probe output:\n%s", w.out.String())
	if migs := w.sim.MIGs(); len(migs) != 1 || migs[0].Name != clusterMIG.GetName() {
		t.Errorf("MIGs left: %v, want only %s", migs, clusterMIG.GetName())
	}
	if tpls, err := w.env.Compute.ListTemplates(ctx, "fs-probe-"); err != nil || len(tpls) != 1 || tpls[0].Name != tpl.GetName() {
		t.Errorf("templates left: %v (%v), want only %s", tpls, err, tpl.GetName())
	}
	var names []string
	for _, in := range w.sim.Instances() {
		names = append(names, in.Name)
	}
	if !slices.Equal(names, []string{other.Name}) {
		t.Errorf("VMs left: %v, want only %s (another run's); %s carried this run's label and name", names, other.Name, mine.Name)
	}
	if len(rep.Left) > 0 {
		t.Errorf("left: %v", rep.Left)
	}
}

// Names refused by v1 and by beta, and a request by count accepted: no
// endpoint takes names. The same refusal for the request by count too
// means the names were not the cause: not settled.
func TestNamedRequestsRefusedEverywhere(t *testing.T) {
	for _, tc := range []struct {
		times int
		want  string
	}{
		{2, probe.NamedNowhere},
		{0, probe.NotSettled},
	} {
		t.Run(tc.want, func(t *testing.T) {
			w := newWorld(t, computesim.LenientReadings(), 30*time.Second)
			w.sim.Inject(computesim.Injection{
				Match:   computesim.Match{Method: "POST", Path: `/instanceGroupManagers/fs-probe-t1-n/resizeRequests$`},
				Status:  400,
				Reason:  "invalid",
				Message: "injected: refused",
				Times:   tc.times,
			})
			rep := probe.Run(context.Background(), probe.Config{Project: project, Zone: zone, RunID: "t1", Out: &w.out}, w.env)
			t.Logf("probe output:\n%s", w.out.String())
			v := rep.Verdict(probe.PointNamedRequests)
			if v.Outcome != tc.want {
				t.Errorf("verdict %+v, want %q", v, tc.want)
			}
			if tc.want == probe.NamedNowhere {
				if rep.Err != nil {
					t.Errorf("run error %v", rep.Err)
				}
				// The request by count still lets the run-end points be
				// observed.
				if got := rep.Verdict(probe.PointTargetSizeAtRunEnd).Outcome; got != probe.TargetSizeDecremented {
					t.Errorf("target size at run end: %q", got)
				}
				if s := probe.SettingsFor(rep, project, zone, t0); s.ResizeRequestAPI != "count" {
					t.Errorf("resize_request_api %q, want count", s.ResizeRequestAPI)
				}
			} else if rep.Err == nil {
				t.Errorf("no run error")
			}
			w.assertNothingLeft(t, rep)
		})
	}
}

// Requests that stay CREATING a few seconds, and VMs that take a while to
// be deleted, change nothing: the strict readings still yield the strict
// verdicts, and nothing is left.
func TestVerdictsWithSlowTransitions(t *testing.T) {
	w := newWorldOpts(t, computesim.Options{
		Readings:      computesim.StrictReadings(),
		AcceptDelay:   5 * time.Second,
		DeleteDelay:   40 * time.Second,
		CapacityDelay: func(string, string) time.Duration { return 90 * time.Second },
	})
	rep := w.run(t)
	for p, want := range map[probe.Point]string{
		probe.PointTargetSizeWhileAccepted: probe.Refused,
		probe.PointNamedRequests:           probe.NamedOnBetaOnly,
		probe.PointRunEndAudit:             probe.AuditMIGDelete,
		probe.PointLabelFilter:             probe.FilterIgnored,
		probe.PointTargetSizeAtRunEnd:      probe.TargetSizeKept,
	} {
		if got := rep.Verdict(p); got.Outcome != want {
			t.Errorf("%s: %q (%s), want %q", p, got.Outcome, got.Evidence, want)
		}
	}
}

type panickingAudit struct{}

func (panickingAudit) InstanceEntries(context.Context, string, string, time.Time) ([]probe.AuditEntry, error) {
	panic("audit reader broke")
}

// A panic while observing (here in the audit reader, while the named MIG's
// VM has ended) is an error of the run, and the cleanup still runs.
func TestCleanupAfterPanic(t *testing.T) {
	w := newWorld(t, computesim.LenientReadings(), 30*time.Second)
	w.env.Audit = panickingAudit{}
	rep := probe.Run(context.Background(), probe.Config{Project: project, Zone: zone, RunID: "t1", Out: &w.out}, w.env)
	if rep.Err == nil || !strings.Contains(rep.Err.Error(), "audit reader broke") {
		t.Errorf("run error %v, want the panic", rep.Err)
	}
	w.assertNothingLeft(t, rep)
}

// A cleanup that cannot delete something names it in Left, with the error.
func TestCleanupFailureNamesWhatIsLeft(t *testing.T) {
	w := newWorld(t, computesim.LenientReadings(), 30*time.Second)
	w.sim.Inject(computesim.Injection{
		Match:   computesim.Match{Method: "DELETE", Path: `/instanceGroupManagers/fs-probe-t1-n$`},
		Status:  403,
		Reason:  "forbidden",
		Message: "injected: may not delete",
	})
	rep := probe.Run(context.Background(), probe.Config{Project: project, Zone: zone, RunID: "t1", Out: &w.out}, w.env)
	left := strings.Join(rep.Left, "\n")
	for _, want := range []string{"managed instance group fs-probe-t1-n in " + zone, "instance template fs-probe-t1", "injected: may not delete"} {
		if !strings.Contains(left, want) {
			t.Errorf("left %q lacks %q", left, want)
		}
	}
	if len(w.sim.MIGs()) != 1 {
		t.Errorf("MIGs in the simulator: %v", w.sim.MIGs())
	}
}
