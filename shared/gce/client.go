// Package gce is flexslurm's Compute Engine adapter: instance templates,
// zonal managed instance groups (MIGs), MIG resize requests and instances,
// through the cloud.google.com/go/compute/apiv1 REST clients only (a
// Compute Engine simulated in the same process may answer list calls
// without them: SetListShortcut).
//
// It owns the translation between flexslurm's plain Go values and the
// Compute API: building Flex-Start templates (https://docs.cloud.google.com/ai-hypercomputer/docs/create/create-mig-with-a4-or-a3ultra), waiting for every
// operation and treating an operation that ended DONE with errors as an
// error (https://github.com/googleapis/google-cloud-go/blob/main/compute/apiv1/operations.go), idempotent creation (409 → nil) and deletion (404 →
// nil), and classifying errors by code into a small set of classes (Classify)
// so that decision code never sees Compute codes.
//
// Every mutation takes a requestID, which should be a UUID derived
// deterministically from the triggering event: Compute ignores a repeated
// request ID for 60 minutes and returns the original operation, which makes
// at-least-once delivery safe. An empty requestID sends none.
//
// This package imports nothing from flexslurm.
package gce

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
)

// Run-duration limits of the Compute API for scheduling.maxRunDuration and a
// resize request's requestedRunDuration: 600–604800 s (10 min to 7 days;
// https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig).
const (
	MinRunDuration = 600 * time.Second
	MaxRunDuration = 604800 * time.Second
)

// Provisioning models (computepb Scheduling_ProvisioningModel names).
const (
	ProvisioningFlexStart = "FLEX_START"
	ProvisioningStandard  = "STANDARD"
	ProvisioningSpot      = "SPOT"
)

// Resize request states (computepb InstanceGroupManagerResizeRequest_State
// names).
const (
	StateCreating  = "CREATING"
	StateAccepted  = "ACCEPTED"
	StateSucceeded = "SUCCEEDED"
	StateFailed    = "FAILED"
	StateCancelled = "CANCELLED"
)

// Client calls Compute Engine for one project. It is safe for concurrent use.
type Client struct {
	project   string
	templates *compute.InstanceTemplatesClient
	migs      *compute.InstanceGroupManagersClient
	rrs       *compute.InstanceGroupManagerResizeRequestsClient
	instances *compute.InstancesClient
	images    *compute.ImagesClient
	policies  *compute.ResourcePoliciesClient
	// lists, if set, answers list calls before the REST clients
	// (SetListShortcut).
	lists ListShortcut
	// rrAPI is the API version of the resize-request calls
	// (SetResizeRequestAPI, resizeapi.go).
	rrAPI resizeRequestAPI
	// regional are the regional MIG and resize-request clients, made on
	// first use (regional.go).
	regional regionalClients
}

// ListShortcut answers some of the Client's list calls without the REST
// clients: a Compute Engine simulated in the same process
// (computesim.ListShortcut) hands the response message over instead of
// encoding it as JSON for the REST client to decode, which is most of the
// cost of a simulated reconcile pass. Each method gets the request the REST
// client would get and, if it answers, calls read once with the whole
// response (a single page) before it returns true; false (read not called)
// leaves the call to the REST client. The response stays the shortcut's:
// read neither changes it nor keeps any part of it that can change after
// it returns (the Client copies what it keeps, such as a VM's labels).
// Everything the Client does around the call (the request it builds, the
// filtering and translation of the result) is the same either way.
type ListShortcut interface {
	ListInstances(ctx context.Context, req *computepb.ListInstancesRequest, read func(*computepb.InstanceList)) bool
	ListInstanceGroupManagers(ctx context.Context, req *computepb.ListInstanceGroupManagersRequest, read func(*computepb.InstanceGroupManagerList)) bool
	ListResizeRequests(ctx context.Context, req *computepb.ListInstanceGroupManagerResizeRequestsRequest, read func(*computepb.InstanceGroupManagerResizeRequestsListResponse)) bool
}

// SetListShortcut makes ListInstances, ListMIGs and ListResizeRequests ask
// l first (nil: always the REST clients). For simulations only; call it
// before the Client is used.
func (c *Client) SetListShortcut(l ListShortcut) { c.lists = l }

// New creates the REST clients once. Pass option.WithEndpoint(url) and
// option.WithoutAuthentication() for the simulator, or
// option.WithUniverseDomain(domain) outside googleapis.com (S3NS: s3nsapis.fr).
func New(ctx context.Context, project string, opts ...option.ClientOption) (*Client, error) {
	if project == "" {
		return nil, fmt.Errorf("creating compute client: empty project: %w", ErrInvalidSpec)
	}
	c := &Client{project: project}
	c.rrAPI.opts = opts
	var err error
	if c.templates, err = compute.NewInstanceTemplatesRESTClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("creating instance templates client: %w", err)
	}
	if c.migs, err = compute.NewInstanceGroupManagersRESTClient(ctx, opts...); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating instance group managers client: %w", err)
	}
	if c.rrs, err = compute.NewInstanceGroupManagerResizeRequestsRESTClient(ctx, opts...); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating resize requests client: %w", err)
	}
	if c.instances, err = compute.NewInstancesRESTClient(ctx, opts...); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating instances client: %w", err)
	}
	if c.images, err = compute.NewImagesRESTClient(ctx, opts...); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating images client: %w", err)
	}
	if c.policies, err = compute.NewResourcePoliciesRESTClient(ctx, opts...); err != nil {
		c.Close()
		return nil, fmt.Errorf("creating resource policies client: %w", err)
	}
	return c, nil
}

// Close closes the underlying clients.
func (c *Client) Close() error {
	var errs []error
	if c.templates != nil {
		errs = append(errs, c.templates.Close())
	}
	if c.migs != nil {
		errs = append(errs, c.migs.Close())
	}
	if c.rrs != nil {
		errs = append(errs, c.rrs.Close())
	}
	if c.instances != nil {
		errs = append(errs, c.instances.Close())
	}
	if c.images != nil {
		errs = append(errs, c.images.Close())
	}
	if c.policies != nil {
		errs = append(errs, c.policies.Close())
	}
	errs = append(errs, c.closeResizeRequestAPI(), c.closeRegional())
	return errors.Join(errs...)
}

// wait returns a function that takes a mutation's results, waits for its
// operation and turns an operation that ended DONE with errors into an
// *OperationError: op.Wait alone reports such an operation only when it also
// carries a non-2xx httpErrorStatusCode (https://github.com/googleapis/google-cloud-go/blob/main/compute/apiv1/operations.go). Use it as
// wait(ctx)(client.Insert(ctx, req)).
func wait(ctx context.Context) func(*compute.Operation, error) error {
	return func(op *compute.Operation, err error) error { return waitOp(ctx, op, err) }
}

// maxOperationWait bounds each wait for an operation (a variable for
// tests). The operations flexslurm waits for (template and MIG inserts,
// deleting a MIG, deleteInstances, resize request insert, cancel and
// delete) end within seconds, far below a
// function's timeout; one that does not is left to Compute, which carries
// it on: the caller gets a transient error, and its retry with the same
// request id is answered with the same operation (docs/design/repair.md, "Waits
// on Compute operations").
var maxOperationWait = time.Minute

func waitOp(ctx context.Context, op *compute.Operation, err error) error {
	if err != nil {
		return err
	}
	return opError(op, boundedWait(ctx, op.Name(), func(wctx context.Context) error { return op.Wait(wctx) }))
}

// boundedWait waits for operation name at most maxOperationWait (wait is
// the client's Operation.Wait, v1 or beta); one not done by then is a
// transient error that names it.
func boundedWait(ctx context.Context, name string, wait func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, maxOperationWait)
	defer cancel()
	werr := wait(wctx)
	if werr != nil && ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
		werr = fmt.Errorf("operation %s not done after %s; Compute carries it on and a retry with the same request id finds it: %w",
			name, maxOperationWait, context.DeadlineExceeded)
	}
	return werr
}

// started takes a mutation's results without waiting for its operation:
// for calls whose operation runs long (a host repair takes 10–12 minutes)
// and whose outcome the reconciler observes on the resource itself. It
// returns the call's error, or the error of an operation that is already
// DONE with errors (a repeated request id answered with the original,
// failed, operation).
func started(op *compute.Operation, err error) error {
	if err != nil {
		return err
	}
	return opError(op, nil)
}

// opError turns an operation that ended DONE with errors into an
// *OperationError; otherwise it returns werr.
func opError(op *compute.Operation, werr error) error {
	return opErrorOf(op.Name(), op.Proto(), werr)
}

// opErrorOf is opError for operation name and its last state p.
func opErrorOf(name string, p *computepb.Operation, werr error) error {
	if p.GetStatus() == computepb.Operation_DONE {
		if errs := p.GetError().GetErrors(); len(errs) > 0 {
			oe := &OperationError{
				Op:         name,
				Code:       errs[0].GetCode(),
				Message:    errs[0].GetMessage(),
				HTTPStatus: int(p.GetHttpErrorStatusCode()),
			}
			for _, e := range errs {
				oe.Codes = append(oe.Codes, e.GetCode())
				for _, d := range e.GetErrorDetails() {
					if r := d.GetErrorInfo().GetReason(); r != "" {
						oe.Codes = append(oe.Codes, r)
					}
				}
			}
			oe.Quota = quotaOfErrors(errs)
			return oe
		}
	}
	return werr
}

func optRequestID(id string) *string {
	if id == "" {
		return nil
	}
	return proto.String(id)
}

var rfc1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

func checkName(kind, name string) error {
	if !rfc1035.MatchString(name) {
		return fmt.Errorf("%s name %q: want 1–63 characters [a-z]([-a-z0-9]*[a-z0-9])? (RFC 1035): %w", kind, name, ErrInvalidSpec)
	}
	return nil
}

func checkRunDuration(what string, d time.Duration) error {
	if d < MinRunDuration || d > MaxRunDuration {
		return fmt.Errorf("%s %v: want 600 s–604800 s (Compute API): %w", what, d, ErrInvalidSpec)
	}
	return nil
}

func durationpb(d time.Duration) *computepb.Duration {
	out := &computepb.Duration{Seconds: proto.Int64(int64(d / time.Second))}
	if n := int32(d % time.Second); n != 0 {
		out.Nanos = proto.Int32(n)
	}
	return out
}

// parseTime reads a Compute RFC 3339 timestamp; "" or garbage gives zero.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

func lastSegment(s string) string { return s[strings.LastIndexByte(s, '/')+1:] }

// ---------------------------------------------------------------------------
// Instance templates

// templateResource checks an instance template body the way Compute does
// for the fields flexslurm sets, and converts it to the client's type. The
// body's JSON is the REST resource (instancetemplate.Template), so the
// conversion is protojson's, field for field.
func templateResource(t instancetemplate.Template) (*computepb.InstanceTemplate, error) {
	if err := checkName("instance template", t.Name); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("instance template %s: %s: %w", t.Name, fmt.Sprintf(format, a...), ErrInvalidSpec)
	}
	p := t.Properties
	if p.MachineType == "" || strings.Contains(p.MachineType, "/") {
		return nil, bad("machine type %q: want a machine type name", p.MachineType)
	}
	if len(p.NetworkInterfaces) == 0 || p.NetworkInterfaces[0].Network == "" && p.NetworkInterfaces[0].Subnetwork == "" {
		return nil, bad("no network or subnetwork")
	}
	boots := 0
	for i, d := range p.Disks {
		if !d.Boot {
			continue
		}
		boots++
		// "When creating a new instance boot disk, one of
		// initializeParams.sourceImage or sourceSnapshot or disks.source is
		// required." (Compute v1 discovery document,
		// AttachedDiskInitializeParams.sourceImage)
		if d.InitializeParams.SourceImage == "" {
			return nil, bad("disks[%d]: a boot disk needs initializeParams.sourceImage", i)
		}
		if d.InitializeParams.DiskSizeGb < 0 {
			return nil, bad("disks[%d]: boot disk size %d GB", i, d.InitializeParams.DiskSizeGb)
		}
	}
	if boots != 1 {
		return nil, bad("%d boot disks: want one", boots)
	}
	for i, a := range p.GuestAccelerators {
		if a.AcceleratorType == "" || strings.Contains(a.AcceleratorType, "/") || a.AcceleratorCount <= 0 {
			return nil, bad("guestAccelerators[%d]: %q × %d: want a type name with a positive count", i, a.AcceleratorType, a.AcceleratorCount)
		}
	}
	sc := p.Scheduling
	switch sc.ProvisioningModel {
	case ProvisioningFlexStart:
		if sc.MaxRunDuration == nil {
			return nil, bad("a FLEX_START template needs scheduling.maxRunDuration")
		}
		if err := checkRunDuration("instance template "+t.Name+": max run duration", time.Duration(sc.MaxRunDuration.Seconds)*time.Second); err != nil {
			return nil, err
		}
		if sc.OnHostMaintenance != "TERMINATE" || sc.InstanceTerminationAction == "" {
			return nil, bad("FLEX_START needs onHostMaintenance TERMINATE and an instanceTerminationAction")
		}
	case ProvisioningStandard, ProvisioningSpot:
		if sc.MaxRunDuration != nil {
			return nil, bad("max run duration is only set for FLEX_START, not %s", sc.ProvisioningModel)
		}
	default:
		return nil, bad("provisioning model %q: want FLEX_START, STANDARD or SPOT", sc.ProvisioningModel)
	}
	tpl := &computepb.InstanceTemplate{}
	if err := protojson.Unmarshal(t.JSON(), tpl); err != nil {
		return nil, bad("%v", err)
	}
	return tpl, nil
}

// EnsureInstanceTemplate creates the global instance template described by t.
// A template of that name that already exists (409) counts as success;
// templates are immutable, so a changed spec needs a new name. An invalid
// spec (e.g. a FLEX_START MaxRunDuration outside 600–604800 s) is rejected
// with ErrInvalidSpec before any call.
func (c *Client) EnsureInstanceTemplate(ctx context.Context, t instancetemplate.Template, requestID string) error {
	tpl, err := templateResource(t)
	if err != nil {
		return fmt.Errorf("creating instance template %s: %w", t.Name, err)
	}
	err = wait(ctx)(c.templates.Insert(ctx, &computepb.InsertInstanceTemplateRequest{
		Project:                  c.project,
		InstanceTemplateResource: tpl,
		RequestId:                optRequestID(requestID),
	}))
	if err != nil && !IsAlreadyExists(err) {
		return fmt.Errorf("creating instance template %s: %w", t.Name, mark(err))
	}
	return nil
}

// ResolveImage turns an image reference into the specific image it names
// now: an image family ("projects/P/global/images/family/F") becomes the
// family's latest image, as gcloud resolves one before it creates a
// template (images.getFromFamily); a specific image
// ("projects/P/global/images/NAME") is checked to exist (images.get). It
// returns "projects/P/global/images/NAME".
func (c *Client) ResolveImage(ctx context.Context, ref string) (string, error) {
	project, name, family, err := nodeconfig.ParseImage(ref)
	if err != nil {
		return "", fmt.Errorf("image %w: %w", err, ErrInvalidSpec)
	}
	var img *computepb.Image
	if family {
		img, err = c.images.GetFromFamily(ctx, &computepb.GetFromFamilyImageRequest{Project: project, Family: name})
	} else {
		img, err = c.images.Get(ctx, &computepb.GetImageRequest{Project: project, Image: name})
	}
	if err != nil {
		return "", fmt.Errorf("resolving image %s: %w", ref, mark(err))
	}
	if st := img.GetStatus(); st != "" && st != computepb.Image_READY.String() {
		return "", fmt.Errorf("image %s is %s, not READY: %w", ref, st, ErrInvalidSpec)
	}
	return "projects/" + project + "/global/images/" + img.GetName(), nil
}

// ---------------------------------------------------------------------------
// Managed instance groups

// MIGSpec describes a zonal managed instance group, or a regional one.
type MIGSpec struct {
	// Zone is the zone name, e.g. "us-central1-a"; or, for a regional MIG,
	// its region ("us-central1", regional.go).
	Zone string
	// Zones are a regional MIG's zones (distributionPolicy.zones, target
	// shape ANY_SINGLE_ZONE); empty for a zonal MIG.
	Zones []string
	// Name is the MIG name (RFC 1035).
	Name string
	// Template is the instance template name, or a template path or URL.
	Template string
	// BaseInstanceName prefixes generated VM names (1–58 characters); ""
	// uses Name (truncated to 58 characters).
	BaseInstanceName string
	// Description is the MIG description.
	Description string
	// WorkloadPolicy is the workload policy the MIG references
	// (resourcePolicies.workloadPolicy, a partial URL
	// "regions/REGION/resourcePolicies/NAME": placement.go); "" for none.
	WorkloadPolicy string
}

// MIG is a zonal managed instance group.
type MIG struct {
	// Zone and Name identify the MIG.
	Zone, Name string
	// Template is the instance template name.
	Template string
	// Description is the MIG description.
	Description string
	// TargetSize is the number of VMs the MIG wants, counting queued resize
	// requests.
	TargetSize int32
	// Created is the creation time (UTC).
	Created time.Time
	// TargetShape and Zones are a regional MIG's distributionPolicy
	// (Zone is then its region); empty for a zonal MIG.
	TargetShape string
	Zones       []string
}

func (c *Client) templatePath(ref string) string {
	if strings.Contains(ref, "/") {
		return ref
	}
	return "projects/" + c.project + "/global/instanceTemplates/" + ref
}

// EnsureMIG creates a zonal MIG with target size 0, repairs off
// (instanceLifecyclePolicy.defaultActionOnFailure DO_NOTHING), an update
// policy that never replaces running VMs (updatePolicy.type OPPORTUNISTIC:
// a template change reaches only VMs created after it) and no autoscaler,
// as resize requests require (https://cloud.google.com/compute/docs/instance-groups/create-mig-with-gpu-vms;
// Google's resize-request samples set OPPORTUNISTIC explicitly, and the
// default type is not documented for such MIGs: docs/compute-contract.md).
// A MIG of that name that already exists (409, or a repeated request id
// that returns the first insert's operation) counts as success and is left
// as it is: its template is never changed (no setInstanceTemplate), so VMs
// it made keep theirs until they end.
func (c *Client) EnsureMIG(ctx context.Context, m MIGSpec, requestID string) error {
	if err := checkName("managed instance group", m.Name); err != nil {
		return fmt.Errorf("creating managed instance group %s: %w", m.Name, err)
	}
	if m.Zone == "" || m.Template == "" {
		return fmt.Errorf("creating managed instance group %s: zone %q, template %q: %w", m.Name, m.Zone, m.Template, ErrInvalidSpec)
	}
	base := m.BaseInstanceName
	if base == "" {
		base = strings.TrimRight(m.Name[:min(len(m.Name), 58)], "-")
	}
	res := &computepb.InstanceGroupManager{
		Name:             proto.String(m.Name),
		BaseInstanceName: proto.String(base),
		InstanceTemplate: proto.String(c.templatePath(m.Template)),
		TargetSize:       proto.Int32(0),
		InstanceLifecyclePolicy: &computepb.InstanceGroupManagerInstanceLifecyclePolicy{
			DefaultActionOnFailure: proto.String(computepb.InstanceGroupManagerInstanceLifecyclePolicy_DO_NOTHING.String()),
		},
		UpdatePolicy: &computepb.InstanceGroupManagerUpdatePolicy{
			Type: proto.String(computepb.InstanceGroupManagerUpdatePolicy_OPPORTUNISTIC.String()),
		},
	}
	if m.Description != "" {
		res.Description = proto.String(m.Description)
	}
	if m.WorkloadPolicy != "" {
		res.ResourcePolicies = &computepb.InstanceGroupManagerResourcePolicies{WorkloadPolicy: proto.String(m.WorkloadPolicy)}
	}
	if IsRegion(m.Zone) {
		return c.ensureRegionalMIG(ctx, m, res, requestID)
	}
	if len(m.Zones) > 0 {
		return fmt.Errorf("creating managed instance group %s: zones %q for a MIG in zone %s: only a regional MIG has zones: %w", m.Name, m.Zones, m.Zone, ErrInvalidSpec)
	}
	err := wait(ctx)(c.migs.Insert(ctx, &computepb.InsertInstanceGroupManagerRequest{
		Project:                      c.project,
		Zone:                         m.Zone,
		InstanceGroupManagerResource: res,
		RequestId:                    optRequestID(requestID),
	}))
	if err != nil && !IsAlreadyExists(err) {
		return fmt.Errorf("creating managed instance group %s: %w", m.Name, mark(err))
	}
	return nil
}

// DeleteMIG deletes a zonal MIG and, with it, its VMs and resize requests. A
// MIG that does not exist (404) counts as success.
func (c *Client) DeleteMIG(ctx context.Context, zone, name, requestID string) error {
	if IsRegion(zone) {
		return c.deleteRegionalMIG(ctx, zone, name, requestID)
	}
	err := wait(ctx)(c.migs.Delete(ctx, &computepb.DeleteInstanceGroupManagerRequest{
		Project:              c.project,
		Zone:                 zone,
		InstanceGroupManager: name,
		RequestId:            optRequestID(requestID),
	}))
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("deleting managed instance group %s: %w", name, mark(err))
	}
	return nil
}

// ListMIGs returns the zone's MIGs whose names start with namePrefix ("" for
// all), ordered by name, following every page.
func (c *Client) ListMIGs(ctx context.Context, zone, namePrefix string) ([]MIG, error) {
	if IsRegion(zone) {
		return c.listRegionalMIGs(ctx, zone, namePrefix)
	}
	req := &computepb.ListInstanceGroupManagersRequest{Project: c.project, Zone: zone}
	if namePrefix != "" {
		req.Filter = proto.String(`name eq "` + regexp.QuoteMeta(namePrefix) + `.*"`)
	}
	var out []MIG
	add := func(m *computepb.InstanceGroupManager) {
		if !strings.HasPrefix(m.GetName(), namePrefix) {
			return
		}
		tpl := m.GetInstanceTemplate()
		if tpl == "" && len(m.GetVersions()) > 0 {
			tpl = m.GetVersions()[0].GetInstanceTemplate()
		}
		out = append(out, MIG{
			Zone:        zone,
			Name:        m.GetName(),
			Template:    lastSegment(tpl),
			Description: m.GetDescription(),
			TargetSize:  m.GetTargetSize(),
			Created:     parseTime(m.GetCreationTimestamp()),
		})
	}
	if c.lists != nil && c.lists.ListInstanceGroupManagers(ctx, req, func(resp *computepb.InstanceGroupManagerList) {
		for _, m := range resp.GetItems() {
			add(m)
		}
	}) {
		return out, nil
	}
	it := c.migs.List(ctx, req)
	for {
		m, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing managed instance groups in %s: %w", zone, mark(err))
		}
		add(m)
	}
}

// DeleteInstances deletes the named VMs of a MIG (deleteInstances with
// skipInstancesOnValidationError, so names that are not members or are
// already being deleted are skipped). The MIG's target size shrinks. No
// names: no call.
func (c *Client) DeleteInstances(ctx context.Context, zone, mig string, names []string, requestID string) error {
	if len(names) == 0 {
		return nil
	}
	if IsRegion(zone) {
		return c.deleteRegionalInstances(ctx, zone, mig, names, requestID)
	}
	refs := make([]string, 0, len(names))
	for _, n := range names {
		if err := checkName("instance", n); err != nil {
			return fmt.Errorf("deleting instances of %s: %w", mig, err)
		}
		refs = append(refs, "zones/"+zone+"/instances/"+n)
	}
	err := wait(ctx)(c.migs.DeleteInstances(ctx, &computepb.DeleteInstancesInstanceGroupManagerRequest{
		Project:              c.project,
		Zone:                 zone,
		InstanceGroupManager: mig,
		InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{
			Instances:                      refs,
			SkipInstancesOnValidationError: proto.Bool(true),
		},
		RequestId: optRequestID(requestID),
	}))
	if err != nil {
		return fmt.Errorf("deleting instances %s of %s: %w", strings.Join(names, ","), mig, mark(err))
	}
	return nil
}

// ---------------------------------------------------------------------------
// Resize requests

// ResizeRequestSpec describes a resize request that creates named VMs.
type ResizeRequestSpec struct {
	// Name is the request name (RFC 1035), unique within the MIG.
	Name string
	// Instances are the names of the VMs to create (at least one).
	Instances []string
	// RunDuration is the requested run duration, 600 s–604800 s (Compute
	// API); 0 leaves it to the template's maxRunDuration. The VMs are deleted
	// when it ends.
	RunDuration time.Duration
	// Description is the request description.
	Description string
}

// ResizeRequest is a MIG resize request.
type ResizeRequest struct {
	// Zone, MIG and Name identify the request.
	Zone, MIG, Name string
	// State is CREATING, ACCEPTED, SUCCEEDED, FAILED or CANCELLED.
	State string
	// Instances are the requested VM names.
	Instances []string
	// Created is the creation time (UTC).
	Created time.Time
	// ErrorCode and ErrorMessage are the first of status.error: why it
	// FAILED (set only on that transition).
	ErrorCode, ErrorMessage string
	// LastAttemptCode and LastAttemptMessage are the first of
	// status.lastAttempt.error: the error of the latest provisioning
	// attempt of a queued (ACCEPTED) request, such as
	// ZONE_RESOURCE_POOL_EXHAUSTED or QUOTA_EXCEEDED. A request short of
	// capacity or quota stays queued and reports it only here; Compute
	// clears it when the request turns final (Compute v1 discovery
	// document, InstanceGroupManagerResizeRequestStatus.lastAttempt).
	LastAttemptCode, LastAttemptMessage string
	// ErrorQuota and LastAttemptQuota are the quotas status.error and
	// status.lastAttempt.error name (errorDetails[].quotaInfo, or the
	// message); zero when none.
	ErrorQuota, LastAttemptQuota QuotaInfo
}

// CreateResizeRequest asks MIG mig for the VMs named in rr (per-instance
// configs); capacity may queue (ACCEPTED) before the VMs are created. A
// request of that name that already exists (409) counts as success.
func (c *Client) CreateResizeRequest(ctx context.Context, zone, mig string, rr ResizeRequestSpec, requestID string) error {
	if err := checkName("resize request", rr.Name); err != nil {
		return fmt.Errorf("creating resize request %s: %w", rr.Name, err)
	}
	if len(rr.Instances) == 0 {
		return fmt.Errorf("creating resize request %s: no instances: %w", rr.Name, ErrInvalidSpec)
	}
	res := &computepb.InstanceGroupManagerResizeRequest{Name: proto.String(rr.Name)}
	for _, n := range rr.Instances {
		if err := checkName("instance", n); err != nil {
			return fmt.Errorf("creating resize request %s: %w", rr.Name, err)
		}
		res.Instances = append(res.Instances, &computepb.PerInstanceConfig{Name: proto.String(n)})
	}
	if rr.RunDuration != 0 {
		if err := checkRunDuration("run duration", rr.RunDuration); err != nil {
			return fmt.Errorf("creating resize request %s: %w", rr.Name, err)
		}
		res.RequestedRunDuration = durationpb(rr.RunDuration)
	}
	if rr.Description != "" {
		res.Description = proto.String(rr.Description)
	}
	var err error
	if IsRegion(zone) {
		err = c.insertRegionalResizeRequest(ctx, zone, mig, res, requestID)
	} else {
		err = c.rrInsert(ctx, &computepb.InsertInstanceGroupManagerResizeRequestRequest{
			Project:              c.project,
			Zone:                 zone,
			InstanceGroupManager: mig,
			InstanceGroupManagerResizeRequestResource: res,
			RequestId: optRequestID(requestID),
		})
	}
	if err != nil && !IsAlreadyExists(err) {
		return fmt.Errorf("creating resize request %s: %w", rr.Name, mark(err))
	}
	return nil
}

func toResizeRequest(zone, mig string, r *computepb.InstanceGroupManagerResizeRequest) ResizeRequest {
	out := ResizeRequest{
		Zone:    zone,
		MIG:     mig,
		Name:    r.GetName(),
		State:   r.GetState(),
		Created: parseTime(r.GetCreationTimestamp()),
	}
	for _, pic := range r.GetInstances() {
		out.Instances = append(out.Instances, pic.GetName())
	}
	if errs := r.GetStatus().GetError().GetErrors(); len(errs) > 0 {
		out.ErrorCode, out.ErrorMessage = errs[0].GetCode(), errs[0].GetMessage()
		out.ErrorQuota = quotaOfErrors(errs)
	}
	if errs := r.GetStatus().GetLastAttempt().GetError().GetErrors(); len(errs) > 0 {
		out.LastAttemptCode, out.LastAttemptMessage = errs[0].GetCode(), errs[0].GetMessage()
		out.LastAttemptQuota = quotaOfErrors(errs)
	}
	return out
}

// GetResizeRequest returns one resize request; a missing one (or MIG) is an
// error matching ErrNotFound.
func (c *Client) GetResizeRequest(ctx context.Context, zone, mig, name string) (ResizeRequest, error) {
	var r *computepb.InstanceGroupManagerResizeRequest
	var err error
	if IsRegion(zone) {
		r, err = c.getRegionalResizeRequest(ctx, zone, mig, name)
	} else {
		r, err = c.rrGet(ctx, &computepb.GetInstanceGroupManagerResizeRequestRequest{
			Project:              c.project,
			Zone:                 zone,
			InstanceGroupManager: mig,
			ResizeRequest:        name,
		})
	}
	if err != nil {
		return ResizeRequest{}, fmt.Errorf("getting resize request %s of %s: %w", name, mig, mark(err))
	}
	return toResizeRequest(zone, mig, r), nil
}

// ListResizeRequests returns every resize request of a MIG, ordered by name,
// following every page.
func (c *Client) ListResizeRequests(ctx context.Context, zone, mig string) ([]ResizeRequest, error) {
	req := &computepb.ListInstanceGroupManagerResizeRequestsRequest{
		Project:              c.project,
		Zone:                 zone,
		InstanceGroupManager: mig,
	}
	var out []ResizeRequest
	if IsRegion(zone) {
		next := c.listRegionalResizeRequests(ctx, zone, mig)
		for {
			r, err := next()
			if errors.Is(err, iterator.Done) {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("listing resize requests of %s: %w", mig, mark(err))
			}
			out = append(out, toResizeRequest(zone, mig, r))
		}
	}
	if c.lists != nil && c.lists.ListResizeRequests(ctx, req, func(resp *computepb.InstanceGroupManagerResizeRequestsListResponse) {
		// toResizeRequest keeps strings only.
		for _, r := range resp.GetItems() {
			out = append(out, toResizeRequest(zone, mig, r))
		}
	}) {
		return out, nil
	}
	next := c.rrList(ctx, req)
	for {
		r, err := next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing resize requests of %s: %w", mig, mark(err))
		}
		out = append(out, toResizeRequest(zone, mig, r))
	}
}

// CancelResizeRequest cancels a queued (ACCEPTED) resize request; the MIG's
// target size shrinks. If the request is no longer queued (SUCCEEDED,
// FAILED, CANCELLED) or is gone, the error matches ErrNotCancellable (and,
// if gone, ErrNotFound): there is nothing to cancel and the caller can ignore
// it; for a request that SUCCEEDED it also matches ErrRequestSucceeded (its
// VMs exist). A request still CREATING cannot be cancelled yet: that error
// is ClassTransient.
func (c *Client) CancelResizeRequest(ctx context.Context, zone, mig, name, requestID string) error {
	var err error
	if IsRegion(zone) {
		err = c.cancelRegionalResizeRequest(ctx, zone, mig, name, requestID)
	} else {
		err = c.rrCancel(ctx, &computepb.CancelInstanceGroupManagerResizeRequestRequest{
			Project:              c.project,
			Zone:                 zone,
			InstanceGroupManager: mig,
			ResizeRequest:        name,
			RequestId:            optRequestID(requestID),
		})
	}
	if err == nil {
		return nil
	}
	switch Classify(err) {
	case ClassNotFound:
		return fmt.Errorf("cancelling resize request %s of %s: %w: %w", name, mig, ErrNotCancellable, mark(err))
	case ClassPermanent:
		// The API answers 400 for a request in the wrong state; its state,
		// not the message, tells which.
		rr, gerr := c.GetResizeRequest(ctx, zone, mig, name)
		switch {
		case IsNotFound(gerr):
			return fmt.Errorf("cancelling resize request %s of %s: gone: %w: %w", name, mig, ErrNotCancellable, gerr)
		case gerr != nil:
		case rr.State == StateCreating:
			return fmt.Errorf("cancelling resize request %s of %s: state CREATING: %w: %w", name, mig, errRetryLater, err)
		case rr.State == StateSucceeded:
			return fmt.Errorf("cancelling resize request %s of %s: state %s: %w: %w: %w", name, mig, rr.State, ErrNotCancellable, ErrRequestSucceeded, err)
		case rr.State != StateAccepted:
			return fmt.Errorf("cancelling resize request %s of %s: state %s: %w: %w", name, mig, rr.State, ErrNotCancellable, err)
		}
	}
	return fmt.Errorf("cancelling resize request %s of %s: %w", name, mig, mark(err))
}

// DeleteResizeRequest deletes an inactive (SUCCEEDED, FAILED, CANCELLED)
// resize request; its VMs stay. A request that does not exist (404) counts
// as success. An ACCEPTED request must be cancelled first.
func (c *Client) DeleteResizeRequest(ctx context.Context, zone, mig, name, requestID string) error {
	var err error
	if IsRegion(zone) {
		err = c.deleteRegionalResizeRequest(ctx, zone, mig, name, requestID)
	} else {
		err = c.rrDelete(ctx, &computepb.DeleteInstanceGroupManagerResizeRequestRequest{
			Project:              c.project,
			Zone:                 zone,
			InstanceGroupManager: mig,
			ResizeRequest:        name,
			RequestId:            optRequestID(requestID),
		})
	}
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("deleting resize request %s of %s: %w", name, mig, mark(err))
	}
	return nil
}

// ---------------------------------------------------------------------------
// Instances

// Instance is a VM.
type Instance struct {
	// Zone and Name identify the VM.
	Zone, Name string
	// ID is the numeric instance ID; names are reused, IDs are not.
	ID uint64
	// Status is the Compute status: PROVISIONING, STAGING, RUNNING, STOPPING,
	// REPAIRING, TERMINATED, ...
	Status string
	// Labels are the VM's labels.
	Labels map[string]string
	// Created is the creation time (UTC).
	Created time.Time
	// TerminationTime is when Compute will end the VM
	// (resourceStatus.scheduling.terminationTimestamp); zero if none.
	TerminationTime time.Time
	// LastStart is when the VM last started (lastStartTimestamp; after a
	// host repair, on its new host); zero if unknown.
	LastStart time.Time
	// MIG is the owning MIG's name, from the created-by metadata; "" if none.
	MIG string
}

// canonicalStatus returns the API's own copy of a known instance status
// (computepb's enum table), so that the statuses of a pool's thousands of
// listed VMs share a handful of strings rather than each holding the one
// its response decoded; an unknown status is kept as it came.
func canonicalStatus(s string) string {
	if v, ok := computepb.Instance_Status_value[s]; ok {
		return computepb.Instance_Status_name[v]
	}
	return s
}

func toInstance(zone string, p *computepb.Instance) Instance {
	out := Instance{
		Zone:            zone,
		Name:            p.GetName(),
		ID:              p.GetId(),
		Status:          canonicalStatus(p.GetStatus()),
		Labels:          p.GetLabels(),
		Created:         parseTime(p.GetCreationTimestamp()),
		TerminationTime: parseTime(p.GetResourceStatus().GetScheduling().GetTerminationTimestamp()),
		LastStart:       parseTime(p.GetLastStartTimestamp()),
	}
	if z := p.GetZone(); z != "" {
		out.Zone = lastSegment(z)
	}
	for _, it := range p.GetMetadata().GetItems() {
		// created-by: projects/NUMBER/zones/Z/instanceGroupManagers/NAME
		if it.GetKey() == "created-by" && strings.Contains(it.GetValue(), "/instanceGroupManagers/") {
			out.MIG = lastSegment(it.GetValue())
		}
	}
	return out
}

// labelFilter builds the Compute list filter `(labels.K = "V") …` (a
// conjunction), with keys in sorted order. Each expression is in
// parentheses: "To filter on multiple expressions, provide each separate
// expression within parentheses" (the filter parameter of the Compute v1
// discovery document).
// Values are quoted as Go quotes them (strconv.Quote, what %q does).
func labelFilter(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	size := 0
	for k, v := range labels {
		keys = append(keys, k)
		size += len(k) + len(v) + len("(labels. = \"\") ")
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, "(labels."...)
		b = append(b, k...)
		b = append(b, " = "...)
		b = strconv.AppendQuote(b, labels[k])
		b = append(b, ')')
	}
	return string(b)
}

// ListInstances returns the zone's VMs carrying every label in labels (all
// VMs if labels is empty), ordered by name, following every page. The
// labels are sent as a server-side filter and checked again here on every
// VM returned: gcloud never trusts Compute's server-side label matching
// (googlecloudsdk/api_lib/compute/filter_rewrite.py in the Google Cloud
// SDK: "server side labels matching is currently problematic"), so a VM
// the filter let through without the labels is never taken as flexslurm's.
func (c *Client) ListInstances(ctx context.Context, zone string, labels map[string]string) ([]Instance, error) {
	req := &computepb.ListInstancesRequest{Project: c.project, Zone: zone}
	if len(labels) > 0 {
		req.Filter = proto.String(labelFilter(labels))
	}
	var out []Instance
	if c.lists != nil && c.lists.ListInstances(ctx, req, func(resp *computepb.InstanceList) {
		for _, p := range resp.GetItems() {
			if !hasLabels(p.GetLabels(), labels) {
				continue
			}
			in := toInstance(zone, p)
			// The answer is the shortcut's: keep a copy of the one
			// reference toInstance shares with it (none for no labels,
			// as a decoded answer has).
			in.Labels = nil
			if labels := p.GetLabels(); len(labels) > 0 {
				in.Labels = maps.Clone(labels)
			}
			out = append(out, in)
		}
	}) {
		return out, nil
	}
	it := c.instances.List(ctx, req)
	for {
		p, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing instances in %s: %w", zone, mark(err))
		}
		if hasLabels(p.GetLabels(), labels) {
			out = append(out, toInstance(zone, p))
		}
	}
}

// GetInstance returns one VM; a missing one is an error matching
// ErrNotFound.
func (c *Client) GetInstance(ctx context.Context, zone, name string) (Instance, error) {
	p, err := c.instances.Get(ctx, &computepb.GetInstanceRequest{Project: c.project, Zone: zone, Instance: name})
	if err != nil {
		return Instance{}, fmt.Errorf("getting instance %s: %w", name, mark(err))
	}
	return toInstance(zone, p), nil
}

// ReportHostAsFaulty reports the VM's host as faulty with disruption schedule
// IMMEDIATE (https://cloud.google.com/compute/docs/reference/rest/v1/instances/reportHostAsFaulty): Compute takes the host out of service and
// repairs the VM (it goes REPAIRING, then RUNNING again, or stays
// TERMINATED when scheduling.automaticRestart is false). Compute accepts it
// only for reservation-bound A4X Max, A4X, A4, A3 Ultra, A3 Mega and A3
// High (8 GPUs) VMs and refuses others with
// INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED or MACHINE_TYPE_NOT_SUPPORTED
// (https://docs.cloud.google.com/ai-hypercomputer/docs/troubleshooting/troubleshoot-faulty-host-api).
// behavior is CHIP_ERROR, PERFORMANCE, SILENT_DATA_CORRUPTION or
// UNRECOVERABLE_GPU_ERROR.
//
// It returns once Compute has accepted the request and does not wait for
// the operation, which takes 10–12 minutes (same page): longer than a
// function may run. The reconciler follows the VM's status to the end.
func (c *Client) ReportHostAsFaulty(ctx context.Context, zone, name, behavior, description, requestID string) error {
	if _, ok := computepb.InstancesReportHostAsFaultyRequestFaultReason_Behavior_value[behavior]; !ok ||
		strings.HasSuffix(behavior, "UNSPECIFIED") || strings.HasPrefix(behavior, "UNDEFINED") {
		return fmt.Errorf("reporting host of %s as faulty: behavior %q: %w", name, behavior, ErrInvalidSpec)
	}
	reason := &computepb.InstancesReportHostAsFaultyRequestFaultReason{Behavior: proto.String(behavior)}
	if description != "" {
		reason.Description = proto.String(description)
	}
	err := started(c.instances.ReportHostAsFaulty(ctx, &computepb.ReportHostAsFaultyInstanceRequest{
		Project:  c.project,
		Zone:     zone,
		Instance: name,
		InstancesReportHostAsFaultyRequestResource: &computepb.InstancesReportHostAsFaultyRequest{
			DisruptionSchedule: proto.String(computepb.InstancesReportHostAsFaultyRequest_IMMEDIATE.String()),
			FaultReasons:       []*computepb.InstancesReportHostAsFaultyRequestFaultReason{reason},
		},
		RequestId: optRequestID(requestID),
	}))
	if err != nil {
		return fmt.Errorf("reporting host of %s as faulty: %w", name, mark(err))
	}
	return nil
}

// StartInstance starts a stopped (TERMINATED) VM: a host-repaired VM whose
// scheduling.automaticRestart is false stays stopped after its repair, and
// Cluster Toolkit's repair script starts it again
// (https://cloud.google.com/compute/docs/reference/rest/v1/instances/start).
// requestID makes a repeated call start nothing twice. Like
// ReportHostAsFaulty it returns once Compute has accepted the request; the
// reconciler sees the VM RUNNING.
func (c *Client) StartInstance(ctx context.Context, zone, name, requestID string) error {
	err := started(c.instances.Start(ctx, &computepb.StartInstanceRequest{
		Project:   c.project,
		Zone:      zone,
		Instance:  name,
		RequestId: optRequestID(requestID),
	}))
	if err != nil {
		return fmt.Errorf("starting instance %s: %w", name, mark(err))
	}
	return nil
}
