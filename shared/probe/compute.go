package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	computebeta "cloud.google.com/go/compute/apiv1beta"
	betapb "cloud.google.com/go/compute/apiv1beta/computepb"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/shared/gce"
)

// Compute is the probe's own small Compute Engine adapter: the calls the
// probe makes, through the cloud.google.com/go/compute REST clients
// (apiv1, and apiv1beta for the one call that tries the beta endpoint). It
// is separate from shared/gce because the probe makes calls flexslurm never
// makes (a resize request by count, a resize request through beta,
// deleting templates by name) and must show Compute's answer as it came.
type Compute struct {
	project   string
	templates *compute.InstanceTemplatesClient
	migs      *compute.InstanceGroupManagersClient
	rrs       *compute.InstanceGroupManagerResizeRequestsClient
	betaRRs   *computebeta.InstanceGroupManagerResizeRequestsClient
	instances *compute.InstancesClient
	zoneOps   *compute.ZoneOperationsClient
	globalOps *compute.GlobalOperationsClient
}

// NewCompute creates the REST clients for project. Pass
// option.WithEndpoint and option.WithoutAuthentication for a simulator.
func NewCompute(ctx context.Context, project string, opts ...option.ClientOption) (*Compute, error) {
	c := &Compute{project: project}
	var err error
	fail := func(what string, err error) (*Compute, error) {
		c.Close()
		return nil, fmt.Errorf("creating the %s client: %w", what, err)
	}
	if c.templates, err = compute.NewInstanceTemplatesRESTClient(ctx, opts...); err != nil {
		return fail("instance templates", err)
	}
	if c.migs, err = compute.NewInstanceGroupManagersRESTClient(ctx, opts...); err != nil {
		return fail("instance group managers", err)
	}
	if c.rrs, err = compute.NewInstanceGroupManagerResizeRequestsRESTClient(ctx, opts...); err != nil {
		return fail("resize requests", err)
	}
	if c.betaRRs, err = computebeta.NewInstanceGroupManagerResizeRequestsRESTClient(ctx, opts...); err != nil {
		return fail("resize requests (beta)", err)
	}
	if c.instances, err = compute.NewInstancesRESTClient(ctx, opts...); err != nil {
		return fail("instances", err)
	}
	if c.zoneOps, err = compute.NewZoneOperationsRESTClient(ctx, opts...); err != nil {
		return fail("zone operations", err)
	}
	if c.globalOps, err = compute.NewGlobalOperationsRESTClient(ctx, opts...); err != nil {
		return fail("global operations", err)
	}
	return c, nil
}

// Close closes the clients.
func (c *Compute) Close() error {
	var errs []error
	closeIf := func(ok bool, f func() error) {
		if ok {
			errs = append(errs, f())
		}
	}
	closeIf(c.templates != nil, func() error { return c.templates.Close() })
	closeIf(c.migs != nil, func() error { return c.migs.Close() })
	closeIf(c.rrs != nil, func() error { return c.rrs.Close() })
	closeIf(c.betaRRs != nil, func() error { return c.betaRRs.Close() })
	closeIf(c.instances != nil, func() error { return c.instances.Close() })
	closeIf(c.zoneOps != nil, func() error { return c.zoneOps.Close() })
	closeIf(c.globalOps != nil, func() error { return c.globalOps.Close() })
	return errors.Join(errs...)
}

// Refusal is Compute's refusal of a call: an HTTP 4xx other than 404 and
// 409, or an operation that ended DONE with errors. The probe reads a
// refusal of the call it is asking about as Compute's answer.
type Refusal struct {
	// Call names the call.
	Call string
	// HTTPStatus is the HTTP status (0 for an operation error).
	HTTPStatus int
	// Reason and Message are the first error's.
	Reason, Message string
}

func (r *Refusal) Error() string {
	if r.HTTPStatus != 0 {
		return fmt.Sprintf("%s: refused (HTTP %d, %s): %s", r.Call, r.HTTPStatus, r.Reason, r.Message)
	}
	return fmt.Sprintf("%s: operation failed (%s): %s", r.Call, r.Reason, r.Message)
}

// asRefusal turns a client error into a *Refusal when Compute answered it
// with a 4xx about the call itself; 401 and 403 (who calls, and quotas),
// 404, 409 and 429 are not answers about the call's shape or timing, and
// they and every other error are returned as they are, wrapped.
func asRefusal(call string, err error) error {
	if err == nil {
		return nil
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) && answersCall(ge.Code) {
		r := &Refusal{Call: call, HTTPStatus: ge.Code, Message: ge.Message}
		if len(ge.Errors) > 0 {
			r.Reason = ge.Errors[0].Reason
			if r.Message == "" {
				r.Message = ge.Errors[0].Message
			}
		}
		return r
	}
	var ae *apierror.APIError
	if errors.As(err, &ae) && answersCall(ae.HTTPCode()) {
		return &Refusal{Call: call, HTTPStatus: ae.HTTPCode(), Reason: ae.Reason(), Message: ae.Error()}
	}
	return fmt.Errorf("%s: %w", call, err)
}

// answersCall reports whether an HTTP status is Compute's answer about the
// call itself (400, 405, 412, 422, …).
func answersCall(status int) bool {
	switch status {
	case 401, 403, 404, 409, 429:
		return false
	}
	return status >= 400 && status < 500
}

// IsRefusal reports whether err is a *Refusal.
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// opDone waits for a zonal or global operation named name and turns one
// that ended DONE with errors into a *Refusal.
func (c *Compute) waitZoneOp(ctx context.Context, call, zone, name string) error {
	for {
		op, err := c.zoneOps.Wait(ctx, &computepb.WaitZoneOperationRequest{Project: c.project, Zone: zone, Operation: name})
		if err != nil {
			return fmt.Errorf("%s: waiting for operation %s: %w", call, name, err)
		}
		if op.GetStatus() == computepb.Operation_DONE {
			return opErr(call, op)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: waiting for operation %s: %w", call, name, err)
		}
	}
}

func (c *Compute) waitGlobalOp(ctx context.Context, call, name string) error {
	for {
		op, err := c.globalOps.Wait(ctx, &computepb.WaitGlobalOperationRequest{Project: c.project, Operation: name})
		if err != nil {
			return fmt.Errorf("%s: waiting for operation %s: %w", call, name, err)
		}
		if op.GetStatus() == computepb.Operation_DONE {
			return opErr(call, op)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: waiting for operation %s: %w", call, name, err)
		}
	}
}

func opErr(call string, op *computepb.Operation) error {
	errs := op.GetError().GetErrors()
	if len(errs) == 0 {
		return nil
	}
	r := &Refusal{Call: call, Reason: errs[0].GetCode(), Message: errs[0].GetMessage()}
	if s := int(op.GetHttpErrorStatusCode()); s != 0 && !answersCall(s) {
		return fmt.Errorf("%s: operation %s failed: HTTP %d %s: %s", call, op.GetName(), s, r.Reason, r.Message)
	}
	return r
}

// zonal runs a zonal mutation and waits for its operation.
func (c *Compute) zonal(ctx context.Context, call, zone string, op *compute.Operation, err error) error {
	if err != nil {
		return asRefusal(call, err)
	}
	return c.waitZoneOp(ctx, call, zone, op.Name())
}

// InsertTemplate creates the global instance template t.
func (c *Compute) InsertTemplate(ctx context.Context, t *computepb.InstanceTemplate, requestID string) error {
	call := "instanceTemplates.insert " + t.GetName()
	op, err := c.templates.Insert(ctx, &computepb.InsertInstanceTemplateRequest{Project: c.project, InstanceTemplateResource: t, RequestId: proto.String(requestID)})
	if err != nil {
		return asRefusal(call, err)
	}
	return c.waitGlobalOp(ctx, call, op.Name())
}

// DeleteTemplate deletes a global instance template; a missing one is
// success.
func (c *Compute) DeleteTemplate(ctx context.Context, name, requestID string) error {
	call := "instanceTemplates.delete " + name
	op, err := c.templates.Delete(ctx, &computepb.DeleteInstanceTemplateRequest{Project: c.project, InstanceTemplate: name, RequestId: proto.String(requestID)})
	if gce.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return asRefusal(call, err)
	}
	return c.waitGlobalOp(ctx, call, op.Name())
}

// Named is a listed resource: its name and description.
type Named struct {
	Name, Description string
}

// ListTemplates returns the global instance templates whose names start
// with prefix (checked here, whatever the server's filter did).
func (c *Compute) ListTemplates(ctx context.Context, prefix string) ([]Named, error) {
	it := c.templates.List(ctx, &computepb.ListInstanceTemplatesRequest{Project: c.project, Filter: proto.String(`name eq "` + prefix + `.*"`)})
	var out []Named
	for {
		t, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing instance templates: %w", err)
		}
		if strings.HasPrefix(t.GetName(), prefix) {
			out = append(out, Named{t.GetName(), t.GetDescription()})
		}
	}
}

// InsertMIG creates the zonal MIG m.
func (c *Compute) InsertMIG(ctx context.Context, zone string, m *computepb.InstanceGroupManager, requestID string) error {
	call := "instanceGroupManagers.insert " + m.GetName()
	op, err := c.migs.Insert(ctx, &computepb.InsertInstanceGroupManagerRequest{Project: c.project, Zone: zone, InstanceGroupManagerResource: m, RequestId: proto.String(requestID)})
	return c.zonal(ctx, call, zone, op, err)
}

// MIGTargetSize returns a MIG's targetSize.
func (c *Compute) MIGTargetSize(ctx context.Context, zone, mig string) (int32, error) {
	m, err := c.migs.Get(ctx, &computepb.GetInstanceGroupManagerRequest{Project: c.project, Zone: zone, InstanceGroupManager: mig})
	if err != nil {
		return 0, fmt.Errorf("instanceGroupManagers.get %s: %w", mig, err)
	}
	return m.GetTargetSize(), nil
}

// DeleteMIG deletes a zonal MIG and its VMs; a missing one is success.
func (c *Compute) DeleteMIG(ctx context.Context, zone, mig, requestID string) error {
	call := "instanceGroupManagers.delete " + mig
	op, err := c.migs.Delete(ctx, &computepb.DeleteInstanceGroupManagerRequest{Project: c.project, Zone: zone, InstanceGroupManager: mig, RequestId: proto.String(requestID)})
	if gce.IsNotFound(err) {
		return nil
	}
	return c.zonal(ctx, call, zone, op, err)
}

// ListMIGs returns the zone's MIGs whose names start with prefix (checked
// here, whatever the server's filter did).
func (c *Compute) ListMIGs(ctx context.Context, zone, prefix string) ([]Named, error) {
	it := c.migs.List(ctx, &computepb.ListInstanceGroupManagersRequest{Project: c.project, Zone: zone, Filter: proto.String(`name eq "` + prefix + `.*"`)})
	var out []Named
	for {
		m, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing managed instance groups in %s: %w", zone, err)
		}
		if strings.HasPrefix(m.GetName(), prefix) {
			out = append(out, Named{m.GetName(), m.GetDescription()})
		}
	}
}

// ManagedInstances returns the names of a MIG's VMs.
func (c *Compute) ManagedInstances(ctx context.Context, zone, mig string) ([]string, error) {
	it := c.migs.ListManagedInstances(ctx, &computepb.ListManagedInstancesInstanceGroupManagersRequest{Project: c.project, Zone: zone, InstanceGroupManager: mig})
	var out []string
	for {
		m, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("instanceGroupManagers.listManagedInstances %s: %w", mig, err)
		}
		out = append(out, lastSegment(m.GetInstance()))
	}
}

// DeleteInstances deletes VMs of a MIG (deleteInstances, as flexslurm
// releases a VM: skipInstancesOnValidationError true).
func (c *Compute) DeleteInstances(ctx context.Context, zone, mig string, names []string, requestID string) error {
	call := "instanceGroupManagers.deleteInstances " + mig
	refs := make([]string, len(names))
	for i, n := range names {
		refs[i] = "zones/" + zone + "/instances/" + n
	}
	op, err := c.migs.DeleteInstances(ctx, &computepb.DeleteInstancesInstanceGroupManagerRequest{
		Project: c.project, Zone: zone, InstanceGroupManager: mig, RequestId: proto.String(requestID),
		InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{
			Instances: refs, SkipInstancesOnValidationError: proto.Bool(true),
		},
	})
	return c.zonal(ctx, call, zone, op, err)
}

// ResizeRequest is what the probe asks for: Count VMs, or the VMs named in
// Instances.
type ResizeRequest struct {
	Name        string
	Count       int32
	Instances   []string
	RunDuration time.Duration
	Description string
}

// InsertResizeRequest creates a resize request through the v1 endpoint, or
// through beta when beta is true, and waits for its operation (through the
// v1 zone operations, which see every operation of the zone whatever the
// endpoint that started it).
func (c *Compute) InsertResizeRequest(ctx context.Context, zone, mig string, rr ResizeRequest, beta bool, requestID string) error {
	if beta {
		call := "beta instanceGroupManagerResizeRequests.insert " + rr.Name
		res := &betapb.InstanceGroupManagerResizeRequest{
			Name:                 proto.String(rr.Name),
			RequestedRunDuration: &betapb.Duration{Seconds: proto.Int64(int64(rr.RunDuration / time.Second))},
		}
		if rr.Description != "" {
			res.Description = proto.String(rr.Description)
		}
		if len(rr.Instances) > 0 {
			for _, n := range rr.Instances {
				res.Instances = append(res.Instances, &betapb.PerInstanceConfig{Name: proto.String(n)})
			}
		} else {
			res.ResizeBy = proto.Int32(rr.Count)
		}
		op, err := c.betaRRs.Insert(ctx, &betapb.InsertInstanceGroupManagerResizeRequestRequest{
			Project: c.project, Zone: zone, InstanceGroupManager: mig, RequestId: proto.String(requestID),
			InstanceGroupManagerResizeRequestResource: res,
		})
		if err != nil {
			return asRefusal(call, err)
		}
		return c.waitZoneOp(ctx, call, zone, op.Name())
	}
	call := "instanceGroupManagerResizeRequests.insert " + rr.Name
	res := &computepb.InstanceGroupManagerResizeRequest{
		Name:                 proto.String(rr.Name),
		RequestedRunDuration: &computepb.Duration{Seconds: proto.Int64(int64(rr.RunDuration / time.Second))},
	}
	if rr.Description != "" {
		res.Description = proto.String(rr.Description)
	}
	if len(rr.Instances) > 0 {
		for _, n := range rr.Instances {
			res.Instances = append(res.Instances, &computepb.PerInstanceConfig{Name: proto.String(n)})
		}
	} else {
		res.ResizeBy = proto.Int32(rr.Count)
	}
	op, err := c.rrs.Insert(ctx, &computepb.InsertInstanceGroupManagerResizeRequestRequest{
		Project: c.project, Zone: zone, InstanceGroupManager: mig, RequestId: proto.String(requestID),
		InstanceGroupManagerResizeRequestResource: res,
	})
	return c.zonal(ctx, call, zone, op, err)
}

// ResizeRequestState returns a resize request's state, and the first
// error of its status (why it FAILED), if any.
func (c *Compute) ResizeRequestState(ctx context.Context, zone, mig, name string) (state, errMsg string, err error) {
	r, err := c.rrs.Get(ctx, &computepb.GetInstanceGroupManagerResizeRequestRequest{Project: c.project, Zone: zone, InstanceGroupManager: mig, ResizeRequest: name})
	if err != nil {
		return "", "", fmt.Errorf("instanceGroupManagerResizeRequests.get %s: %w", name, err)
	}
	if errs := r.GetStatus().GetError().GetErrors(); len(errs) > 0 {
		errMsg = errs[0].GetCode() + ": " + errs[0].GetMessage()
	}
	return r.GetState(), errMsg, nil
}

// ListResizeRequests returns the names and states of a MIG's resize
// requests.
func (c *Compute) ListResizeRequests(ctx context.Context, zone, mig string) (map[string]string, error) {
	it := c.rrs.List(ctx, &computepb.ListInstanceGroupManagerResizeRequestsRequest{Project: c.project, Zone: zone, InstanceGroupManager: mig})
	out := map[string]string{}
	for {
		r, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing resize requests of %s: %w", mig, err)
		}
		out[r.GetName()] = r.GetState()
	}
}

// CancelResizeRequest cancels an ACCEPTED resize request.
func (c *Compute) CancelResizeRequest(ctx context.Context, zone, mig, name, requestID string) error {
	call := "instanceGroupManagerResizeRequests.cancel " + name
	op, err := c.rrs.Cancel(ctx, &computepb.CancelInstanceGroupManagerResizeRequestRequest{Project: c.project, Zone: zone, InstanceGroupManager: mig, ResizeRequest: name, RequestId: proto.String(requestID)})
	return c.zonal(ctx, call, zone, op, err)
}

// Instance is a VM as the probe sees it.
type Instance struct {
	Name   string
	Status string
	Labels map[string]string
	// Termination is resourceStatus.scheduling.terminationTimestamp (zero
	// if none).
	Termination time.Time
	Created     time.Time
}

func toInstance(p *computepb.Instance) Instance {
	return Instance{
		Name:        p.GetName(),
		Status:      p.GetStatus(),
		Labels:      p.GetLabels(),
		Termination: parseTime(p.GetResourceStatus().GetScheduling().GetTerminationTimestamp()),
		Created:     parseTime(p.GetCreationTimestamp()),
	}
}

// ListInstances lists the zone's VMs with filter sent as it is ("" for
// none): the probe looks at what the server returns, so it filters
// nothing itself.
func (c *Compute) ListInstances(ctx context.Context, zone, filter string) ([]Instance, error) {
	req := &computepb.ListInstancesRequest{Project: c.project, Zone: zone}
	if filter != "" {
		req.Filter = proto.String(filter)
	}
	it := c.instances.List(ctx, req)
	var out []Instance
	for {
		p, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing instances in %s: %w", zone, err)
		}
		out = append(out, toInstance(p))
	}
}

// GetInstance returns a VM; found is false when it does not exist.
func (c *Compute) GetInstance(ctx context.Context, zone, name string) (in Instance, found bool, err error) {
	p, err := c.instances.Get(ctx, &computepb.GetInstanceRequest{Project: c.project, Zone: zone, Instance: name})
	if gce.IsNotFound(err) {
		return Instance{}, false, nil
	}
	if err != nil {
		return Instance{}, false, fmt.Errorf("instances.get %s: %w", name, err)
	}
	return toInstance(p), true, nil
}

// DeleteInstance deletes a VM outside any MIG; a missing one is success.
func (c *Compute) DeleteInstance(ctx context.Context, zone, name, requestID string) error {
	call := "instances.delete " + name
	op, err := c.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: c.project, Zone: zone, Instance: name, RequestId: proto.String(requestID)})
	if gce.IsNotFound(err) {
		return nil
	}
	return c.zonal(ctx, call, zone, op, err)
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

func lastSegment(s string) string { return s[strings.LastIndexByte(s, '/')+1:] }
