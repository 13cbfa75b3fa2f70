package computesim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/shared/clock"
)

const (
	testProject = "proj"
	testZone    = "us-central1-a"
)

var t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

type sunk struct {
	entry map[string]any
	raw   []byte
	attrs map[string]string
}

// env is a simulator behind httptest with REST clients pointed at it.
type env struct {
	t    *testing.T
	ctx  context.Context
	clk  *clock.Manual
	sim  *Sim
	srv  *httptest.Server
	tmpl *compute.InstanceTemplatesClient
	igm  *compute.InstanceGroupManagersClient
	rrs  *compute.InstanceGroupManagerResizeRequestsClient
	inst *compute.InstancesClient
	zops *compute.ZoneOperationsClient

	mu       sync.Mutex
	sunk     []sunk
	running  []string
	deleted  []string
	repairin []string
	stopping []string
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, clk: clock.NewManual(t0)}
	if opts.Project == "" {
		opts.Project = testProject
	}
	opts.AuditSink = func(_ context.Context, entry []byte, attrs map[string]string) error {
		var m map[string]any
		if err := json.Unmarshal(entry, &m); err != nil {
			return err
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.sunk = append(e.sunk, sunk{entry: m, raw: entry, attrs: attrs})
		return nil
	}
	opts.OnInstanceRunning = func(in Instance) { e.mu.Lock(); e.running = append(e.running, in.Name); e.mu.Unlock() }
	opts.OnInstanceDeleted = func(in Instance) { e.mu.Lock(); e.deleted = append(e.deleted, in.Name); e.mu.Unlock() }
	opts.OnInstanceRepairing = func(in Instance) { e.mu.Lock(); e.repairin = append(e.repairin, in.Name); e.mu.Unlock() }
	opts.OnInstanceStopping = func(in Instance) {
		if in.Status != "STOPPING" {
			t.Errorf("OnInstanceStopping: %s has status %s", in.Name, in.Status)
		}
		e.mu.Lock()
		e.stopping = append(e.stopping, in.Name)
		e.mu.Unlock()
	}
	e.sim = New(opts, e.clk)
	e.srv = httptest.NewServer(checkResponses(t, e.sim))
	t.Cleanup(e.srv.Close)
	co := []option.ClientOption{option.WithEndpoint(e.srv.URL), option.WithoutAuthentication()}
	var err error
	if e.tmpl, err = compute.NewInstanceTemplatesRESTClient(ctx, co...); err != nil {
		t.Fatal(err)
	}
	if e.igm, err = compute.NewInstanceGroupManagersRESTClient(ctx, co...); err != nil {
		t.Fatal(err)
	}
	if e.rrs, err = compute.NewInstanceGroupManagerResizeRequestsRESTClient(ctx, co...); err != nil {
		t.Fatal(err)
	}
	if e.inst, err = compute.NewInstancesRESTClient(ctx, co...); err != nil {
		t.Fatal(err)
	}
	if e.zops, err = compute.NewZoneOperationsRESTClient(ctx, co...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.tmpl.Close()
		e.igm.Close()
		e.rrs.Close()
		e.inst.Close()
		e.zops.Close()
	})
	return e
}

// do waits for a mutation's operation and turns an operation that ended DONE
// with errors into an error.
func do(op *compute.Operation, err error) error {
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := op.Wait(ctx); err != nil {
		return err
	}
	if errs := op.Proto().GetError().GetErrors(); len(errs) > 0 {
		return fmt.Errorf("operation %s: %s: %s", op.Name(), errs[0].GetCode(), errs[0].GetMessage())
	}
	return nil
}

// httpErr returns the HTTP status and first errors[].reason of an API error.
func httpErr(t *testing.T, err error) (int, string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an API error, got nil")
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		var ae *apierror.APIError
		if errors.As(err, &ae) {
			return ae.HTTPCode(), ae.Reason()
		}
		t.Fatalf("not an API error: %v", err)
	}
	reason := ""
	if len(ge.Errors) > 0 {
		reason = ge.Errors[0].Reason
	}
	return ge.Code, reason
}

func wantHTTP(t *testing.T, err error, code int, reason string) {
	t.Helper()
	gotCode, gotReason := httpErr(t, err)
	if gotCode != code || (reason != "" && gotReason != reason) {
		t.Fatalf("got HTTP %d reason %q (%v), want %d %q", gotCode, gotReason, err, code, reason)
	}
}

func flexTemplate(name string, maxRun int64) *computepb.InstanceTemplate {
	return &computepb.InstanceTemplate{
		Name: proto.String(name),
		Properties: &computepb.InstanceProperties{
			MachineType: proto.String("a3-ultragpu-8g"),
			Labels:      map[string]string{"flexslurm-pool": "h200", "cluster": "c1"},
			Metadata: &computepb.Metadata{Items: []*computepb.Items{
				{Key: proto.String("startup-script"), Value: proto.String("echo hi")},
			}},
			Disks: []*computepb.AttachedDisk{{
				Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
				InitializeParams: &computepb.AttachedDiskInitializeParams{DiskSizeGb: proto.Int64(200), DiskType: proto.String("hyperdisk-balanced"), SourceImage: proto.String(DebianFamily)},
			}},
			NetworkInterfaces: []*computepb.NetworkInterface{{
				Network: proto.String("projects/proj/global/networks/default"),
			}},
			GuestAccelerators: []*computepb.AcceleratorConfig{{
				AcceleratorType: proto.String("nvidia-h200-141gb"), AcceleratorCount: proto.Int32(8),
			}},
			ReservationAffinity: &computepb.ReservationAffinity{ConsumeReservationType: proto.String("NO_RESERVATION")},
			Scheduling: &computepb.Scheduling{
				ProvisioningModel:         proto.String("FLEX_START"),
				InstanceTerminationAction: proto.String("DELETE"),
				OnHostMaintenance:         proto.String("TERMINATE"),
				AutomaticRestart:          proto.Bool(false),
				MaxRunDuration:            &computepb.Duration{Seconds: proto.Int64(maxRun)},
			},
		},
	}
}

func (e *env) insertTemplate(tpl *computepb.InstanceTemplate) error {
	return do(e.tmpl.Insert(e.ctx, &computepb.InsertInstanceTemplateRequest{Project: testProject, InstanceTemplateResource: tpl}))
}

func (e *env) insertMIG(name, template, action string) error {
	m := &computepb.InstanceGroupManager{
		Name:             proto.String(name),
		BaseInstanceName: proto.String(name),
		InstanceTemplate: proto.String("projects/" + testProject + "/global/instanceTemplates/" + template),
		TargetSize:       proto.Int32(0),
	}
	if action != "" {
		m.InstanceLifecyclePolicy = &computepb.InstanceGroupManagerInstanceLifecyclePolicy{DefaultActionOnFailure: proto.String(action)}
	}
	return do(e.igm.Insert(e.ctx, &computepb.InsertInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManagerResource: m}))
}

// setup creates template "tpl" (maxRunDuration 2 h) and MIG "pool" with
// repairs off.
func (e *env) setup() {
	e.t.Helper()
	if err := e.insertTemplate(flexTemplate("tpl", 7200)); err != nil {
		e.t.Fatal(err)
	}
	if err := e.insertMIG("pool", "tpl", "DO_NOTHING"); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) insertRR(mig string, rr *computepb.InstanceGroupManagerResizeRequest, requestID string) error {
	req := &computepb.InsertInstanceGroupManagerResizeRequestRequest{
		Project: testProject, Zone: testZone, InstanceGroupManager: mig, InstanceGroupManagerResizeRequestResource: rr,
	}
	if requestID != "" {
		req.RequestId = proto.String(requestID)
	}
	return do(e.rrs.Insert(e.ctx, req))
}

func namedRR(name string, run int64, vms ...string) *computepb.InstanceGroupManagerResizeRequest {
	rr := &computepb.InstanceGroupManagerResizeRequest{Name: proto.String(name)}
	for _, v := range vms {
		rr.Instances = append(rr.Instances, &computepb.PerInstanceConfig{Name: proto.String(v)})
	}
	if run > 0 {
		rr.RequestedRunDuration = &computepb.Duration{Seconds: proto.Int64(run)}
	}
	return rr
}

func (e *env) getRR(mig, name string) *computepb.InstanceGroupManagerResizeRequest {
	e.t.Helper()
	rr, err := e.rrs.Get(e.ctx, &computepb.GetInstanceGroupManagerResizeRequestRequest{
		Project: testProject, Zone: testZone, InstanceGroupManager: mig, ResizeRequest: name,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return rr
}

func (e *env) getMIG(name string) *computepb.InstanceGroupManager {
	e.t.Helper()
	m, err := e.igm.Get(e.ctx, &computepb.GetInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManager: name})
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) getInstance(name string) (*computepb.Instance, error) {
	return e.inst.Get(e.ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: testZone, Instance: name})
}

// advance moves the clock by d and ticks.
func (e *env) advance(d time.Duration) {
	e.sim.Tick(e.clk.Advance(d))
}

func (e *env) sunkEntries() []sunk {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]sunk(nil), e.sunk...)
}

// field walks a decoded JSON object along keys.
func field(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}
