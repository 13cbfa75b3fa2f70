package gce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	computebeta "cloud.google.com/go/compute/apiv1beta"
	computebetapb "cloud.google.com/go/compute/apiv1beta/computepb"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/shared/inputs"
)

// Regional managed instance groups, for node pools that name several zones
// (the pool extension "zones", docs/design/zones.md).
//
// Every Client method that takes a zone for a MIG or a resize request
// (EnsureMIG's MIGSpec.Zone, DeleteMIG, ListMIGs, DeleteInstances,
// CreateResizeRequest, GetResizeRequest, ListResizeRequests,
// CancelResizeRequest, DeleteResizeRequest) also takes a region: the call
// then goes to the regional resource of the Compute v1 API
// (https://www.googleapis.com/discovery/v1/apis/compute/v1/rest):
//
//	regionInstanceGroupManagers.insert   POST   projects/{project}/regions/{region}/instanceGroupManagers
//	regionInstanceGroupManagers.delete   DELETE …/instanceGroupManagers/{instanceGroupManager}
//	regionInstanceGroupManagers.list     GET    …/instanceGroupManagers
//	regionInstanceGroupManagers.listManagedInstances POST …/{instanceGroupManager}/listManagedInstances
//	regionInstanceGroupManagers.deleteInstances      POST …/{instanceGroupManager}/deleteInstances
//	regionInstanceGroupManagerResizeRequests.insert|list  POST|GET …/{instanceGroupManager}/resizeRequests
//	regionInstanceGroupManagerResizeRequests.get|delete   GET|DELETE …/resizeRequests/{resizeRequest}
//	regionInstanceGroupManagerResizeRequests.cancel       POST …/resizeRequests/{resizeRequest}/cancel
//
// Their operations are region operations, which the Go client polls
// itself. The VM calls (instances.get, start, reportHostAsFaulty, list)
// stay zonal: a regional MIG's VMs are zonal resources, and the caller
// passes the zone each VM landed in.

// IsRegion reports whether loc, passed where a zone is expected, names a
// region ("us-central1") rather than a zone ("us-central1-a").
func IsRegion(loc string) bool { return inputs.Region.Match(loc) }

// RegionOf returns a zone's region ("us-central1-a" → "us-central1"), or ""
// for something that is not a zone.
func RegionOf(zone string) string {
	if m := inputs.Zone.Submatch(zone); m != nil {
		return m[1]
	}
	return ""
}

// regionalClients are the regional MIG and resize-request clients, made on
// first use with New's options: a Client of single-zone pools never makes
// them.
type regionalClients struct {
	once sync.Once
	err  error
	migs *compute.RegionInstanceGroupManagersClient
	rrs  *compute.RegionInstanceGroupManagerResizeRequestsClient
	// betaMu guards beta, the beta client for named inserts, made when
	// first needed (insertRegionalResizeRequest).
	betaMu sync.Mutex
	beta   *computebeta.RegionInstanceGroupManagerResizeRequestsClient
}

func (c *Client) regionalAPI(ctx context.Context) (*regionalClients, error) {
	r := &c.regional
	r.once.Do(func() {
		if r.migs, r.err = compute.NewRegionInstanceGroupManagersRESTClient(ctx, c.rrAPI.opts...); r.err != nil {
			r.err = fmt.Errorf("creating region instance group managers client: %w", r.err)
			return
		}
		if r.rrs, r.err = compute.NewRegionInstanceGroupManagerResizeRequestsRESTClient(ctx, c.rrAPI.opts...); r.err != nil {
			r.err = fmt.Errorf("creating region resize requests client: %w", r.err)
		}
	})
	return r, r.err
}

func (c *Client) closeRegional() error {
	var errs []error
	if c.regional.migs != nil {
		errs = append(errs, c.regional.migs.Close())
	}
	if c.regional.rrs != nil {
		errs = append(errs, c.regional.rrs.Close())
	}
	c.regional.betaMu.Lock()
	if c.regional.beta != nil {
		errs = append(errs, c.regional.beta.Close())
		c.regional.beta = nil
	}
	c.regional.betaMu.Unlock()
	return errors.Join(errs...)
}

// checkDistributionZones checks a regional MIG's zones: at least one, each
// a zone of region (distributionPolicy.zones[].zone "must exist in the
// region where the managed instance group is located", discovery document
// DistributionPolicyZoneConfiguration), none twice.
func checkDistributionZones(region string, zones []string) error {
	if len(zones) == 0 {
		return fmt.Errorf("regional MIG in %s: no zones: %w", region, ErrInvalidSpec)
	}
	seen := map[string]bool{}
	for _, z := range zones {
		if RegionOf(z) != region {
			return fmt.Errorf("regional MIG in %s: zone %q is not a zone of the region: %w", region, z, ErrInvalidSpec)
		}
		if seen[z] {
			return fmt.Errorf("regional MIG in %s: zone %q listed twice: %w", region, z, ErrInvalidSpec)
		}
		seen[z] = true
	}
	return nil
}

// regionalMIGResource turns the zonal MIG resource EnsureMIG built into a
// regional one: distributionPolicy targetShape ANY_SINGLE_ZONE over
// exactly m.Zones, so that Compute creates all VMs of a request in one
// zone it picks by capacity, and updatePolicy.instanceRedistributionType
// NONE, which ANY_SINGLE_ZONE requires ("To set the target distribution
// shape to BALANCED or ANY_SINGLE_ZONE, you must disable proactive
// instance redistribution",
// https://cloud.google.com/compute/docs/instance-groups/regional-mig-set-target-distribution-shape).
// Zones are sent as partial URLs "projects/P/zones/Z" (the field is "The
// URL of the zone"; gcloud sends the zone's full self link).
func (c *Client) regionalMIGResource(res *computepb.InstanceGroupManager, zones []string) {
	dp := &computepb.DistributionPolicy{
		TargetShape: proto.String(computepb.DistributionPolicy_ANY_SINGLE_ZONE.String()),
	}
	for _, z := range zones {
		dp.Zones = append(dp.Zones, &computepb.DistributionPolicyZoneConfiguration{Zone: proto.String("projects/" + c.project + "/zones/" + z)})
	}
	res.DistributionPolicy = dp
	if res.UpdatePolicy == nil {
		res.UpdatePolicy = &computepb.InstanceGroupManagerUpdatePolicy{}
	}
	// computepb has no constant for it ("Additional supported values
	// which may be not listed in the enum directly": NONE, PROACTIVE).
	res.UpdatePolicy.InstanceRedistributionType = proto.String("NONE")
}

func (c *Client) ensureRegionalMIG(ctx context.Context, m MIGSpec, res *computepb.InstanceGroupManager, requestID string) error {
	if err := checkDistributionZones(m.Zone, m.Zones); err != nil {
		return fmt.Errorf("creating managed instance group %s: %w", m.Name, err)
	}
	api, err := c.regionalAPI(ctx)
	if err != nil {
		return err
	}
	c.regionalMIGResource(res, m.Zones)
	err = wait(ctx)(api.migs.Insert(ctx, &computepb.InsertRegionInstanceGroupManagerRequest{
		Project:                      c.project,
		Region:                       m.Zone,
		InstanceGroupManagerResource: res,
		RequestId:                    optRequestID(requestID),
	}))
	if err != nil && !IsAlreadyExists(err) {
		return fmt.Errorf("creating regional managed instance group %s in %s: %w", m.Name, m.Zone, mark(err))
	}
	return nil
}

func (c *Client) deleteRegionalMIG(ctx context.Context, region, name, requestID string) error {
	api, err := c.regionalAPI(ctx)
	if err != nil {
		return err
	}
	err = wait(ctx)(api.migs.Delete(ctx, &computepb.DeleteRegionInstanceGroupManagerRequest{
		Project:              c.project,
		Region:               region,
		InstanceGroupManager: name,
		RequestId:            optRequestID(requestID),
	}))
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("deleting regional managed instance group %s: %w", name, mark(err))
	}
	return nil
}

func (c *Client) listRegionalMIGs(ctx context.Context, region, namePrefix string) ([]MIG, error) {
	api, err := c.regionalAPI(ctx)
	if err != nil {
		return nil, err
	}
	req := &computepb.ListRegionInstanceGroupManagersRequest{Project: c.project, Region: region}
	if namePrefix != "" {
		req.Filter = proto.String(`name eq "` + regexp.QuoteMeta(namePrefix) + `.*"`)
	}
	var out []MIG
	it := api.migs.List(ctx, req)
	for {
		m, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing managed instance groups in %s: %w", region, mark(err))
		}
		if !strings.HasPrefix(m.GetName(), namePrefix) {
			continue
		}
		tpl := m.GetInstanceTemplate()
		if tpl == "" && len(m.GetVersions()) > 0 {
			tpl = m.GetVersions()[0].GetInstanceTemplate()
		}
		mig := MIG{
			Zone:        region,
			Name:        m.GetName(),
			Template:    lastSegment(tpl),
			Description: m.GetDescription(),
			TargetSize:  m.GetTargetSize(),
			Created:     parseTime(m.GetCreationTimestamp()),
			TargetShape: m.GetDistributionPolicy().GetTargetShape(),
		}
		for _, z := range m.GetDistributionPolicy().GetZones() {
			mig.Zones = append(mig.Zones, lastSegment(z.GetZone()))
		}
		out = append(out, mig)
	}
}

// deleteRegionalInstances deletes the named VMs of a regional MIG. Its
// deleteInstances takes each VM's URL, which names the VM's zone
// (InstanceGroupManagersDeleteInstancesRequest.instances: "The URLs of
// one or more instances to delete"); the zones are read from the MIG's own
// listManagedInstances, so a VM is addressed in the zone Compute placed
// it in. A name the MIG does not list is skipped, as
// skipInstancesOnValidationError skips it for a zonal MIG.
func (c *Client) deleteRegionalInstances(ctx context.Context, region, mig string, names []string, requestID string) error {
	api, err := c.regionalAPI(ctx)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, n := range names {
		if err := checkName("instance", n); err != nil {
			return fmt.Errorf("deleting instances of %s: %w", mig, err)
		}
		want[n] = true
	}
	var refs []string
	it := api.migs.ListManagedInstances(ctx, &computepb.ListManagedInstancesRegionInstanceGroupManagersRequest{
		Project: c.project, Region: region, InstanceGroupManager: mig,
	})
	for {
		mi, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return fmt.Errorf("listing the VMs of %s before deleting %s: %w", mig, strings.Join(names, ","), mark(err))
		}
		if want[lastSegment(mi.GetInstance())] {
			refs = append(refs, relPath(mi.GetInstance()))
		}
	}
	if len(refs) == 0 {
		return nil
	}
	err = wait(ctx)(api.migs.DeleteInstances(ctx, &computepb.DeleteInstancesRegionInstanceGroupManagerRequest{
		Project:              c.project,
		Region:               region,
		InstanceGroupManager: mig,
		RegionInstanceGroupManagersDeleteInstancesRequestResource: &computepb.RegionInstanceGroupManagersDeleteInstancesRequest{
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

// insertRegionalResizeRequest inserts a regional resize request through
// v1. A request naming one VM goes with resizeBy 1 instead when inserts go
// unnamed (count mode, or auto mode after both versions refused names):
// the MIG's base instance name is then the VM's name.
func (c *Client) insertRegionalResizeRequest(ctx context.Context, region, mig string, res *computepb.InstanceGroupManagerResizeRequest, requestID string) error {
	api, err := c.regionalAPI(ctx)
	if err != nil {
		return err
	}
	req := &computepb.InsertRegionInstanceGroupManagerResizeRequestRequest{
		Project:              c.project,
		Region:               region,
		InstanceGroupManager: mig,
		InstanceGroupManagerResizeRequestResource: res,
		RequestId: optRequestID(requestID),
	}
	named := len(res.GetInstances()) > 0
	// The same choice of API version as a zonal request's (rrInsert):
	// named inserts go through beta in beta mode or once auto mode found
	// v1 refusing names; without names in count mode, or in auto mode
	// once both versions refused them.
	if named && c.unnamedInserts() && (c.rrMode() == ResizeRequestAPICount || len(res.GetInstances()) == 1) {
		return c.unnamedRegionalInsert(ctx, api, req, nil)
	}
	if named && c.onBeta(true) {
		return c.betaRegionalInsert(ctx, api, req)
	}
	err = wait(ctx)(api.rrs.Insert(ctx, req))
	if err == nil || !named || c.rrMode() != ResizeRequestAPIAuto || httpStatus(err) != http.StatusBadRequest {
		return err
	}
	// v1 refused a named request: tried again through beta with the same
	// request id, as for a zonal request.
	berr := c.betaRegionalInsert(ctx, api, req)
	if berr != nil {
		if httpStatus(berr) != http.StatusBadRequest {
			return fmt.Errorf("%w (the same request through the beta API: %w)", err, berr)
		}
		return c.unnamedRegionalInsert(ctx, api, req, fmt.Errorf("v1: %w; beta: %w", err, berr))
	}
	c.settle(&c.rrAPI.namedOnBeta, slog.LevelInfo, "resize requests that name their VMs go through the Compute beta API from now on: v1 refused one that beta accepted",
		"v1_error", err.Error(), "mig", mig, "region", region, "resize_request", res.GetName())
	return nil
}

// betaRegionalInsert inserts a regional resize request through the beta
// API (cloud.google.com/go/compute/apiv1beta
// RegionInstanceGroupManagerResizeRequestsClient; the beta discovery
// document's regionInstanceGroupManagerResizeRequests.insert).
func (c *Client) betaRegionalInsert(ctx context.Context, api *regionalClients, req *computepb.InsertRegionInstanceGroupManagerResizeRequestRequest) error {
	api.betaMu.Lock()
	if api.beta == nil {
		b, err := computebeta.NewRegionInstanceGroupManagerResizeRequestsRESTClient(ctx, c.rrAPI.opts...)
		if err != nil {
			api.betaMu.Unlock()
			return fmt.Errorf("creating beta region resize requests client: %w", err)
		}
		api.beta = b
	}
	b := api.beta
	api.betaMu.Unlock()
	breq := &computebetapb.InsertRegionInstanceGroupManagerResizeRequestRequest{}
	if err := convertProto(req, breq); err != nil {
		return err
	}
	op, err := b.Insert(ctx, breq)
	return waitBetaOp(ctx, op, err)
}

// unnamedRegionalInsert makes a one-VM regional request with resizeBy 1
// through v1 (unnamedInsert's regional form); a request for several VMs
// cannot be made so.
func (c *Client) unnamedRegionalInsert(ctx context.Context, api *regionalClients, req *computepb.InsertRegionInstanceGroupManagerResizeRequestRequest, refused error) error {
	return c.insertUnnamed(req.GetInstanceGroupManagerResizeRequestResource(), req.GetInstanceGroupManager(), refused,
		func(res *computepb.InstanceGroupManagerResizeRequest) error {
			unnamed := proto.Clone(req).(*computepb.InsertRegionInstanceGroupManagerResizeRequestRequest)
			unnamed.InstanceGroupManagerResizeRequestResource = res
			return wait(ctx)(api.rrs.Insert(ctx, unnamed))
		})
}

func (c *Client) getRegionalResizeRequest(ctx context.Context, region, mig, name string) (*computepb.InstanceGroupManagerResizeRequest, error) {
	api, err := c.regionalAPI(ctx)
	if err != nil {
		return nil, err
	}
	return api.rrs.Get(ctx, &computepb.GetRegionInstanceGroupManagerResizeRequestRequest{
		Project: c.project, Region: region, InstanceGroupManager: mig, ResizeRequest: name,
	})
}

func (c *Client) listRegionalResizeRequests(ctx context.Context, region, mig string) func() (*computepb.InstanceGroupManagerResizeRequest, error) {
	api, err := c.regionalAPI(ctx)
	if err != nil {
		return func() (*computepb.InstanceGroupManagerResizeRequest, error) { return nil, err }
	}
	return api.rrs.List(ctx, &computepb.ListRegionInstanceGroupManagerResizeRequestsRequest{
		Project: c.project, Region: region, InstanceGroupManager: mig,
	}).Next
}

func (c *Client) cancelRegionalResizeRequest(ctx context.Context, region, mig, name, requestID string) error {
	api, err := c.regionalAPI(ctx)
	if err != nil {
		return err
	}
	return wait(ctx)(api.rrs.Cancel(ctx, &computepb.CancelRegionInstanceGroupManagerResizeRequestRequest{
		Project: c.project, Region: region, InstanceGroupManager: mig, ResizeRequest: name, RequestId: optRequestID(requestID),
	}))
}

func (c *Client) deleteRegionalResizeRequest(ctx context.Context, region, mig, name, requestID string) error {
	api, err := c.regionalAPI(ctx)
	if err != nil {
		return err
	}
	return wait(ctx)(api.rrs.Delete(ctx, &computepb.DeleteRegionInstanceGroupManagerResizeRequestRequest{
		Project: c.project, Region: region, InstanceGroupManager: mig, ResizeRequest: name, RequestId: optRequestID(requestID),
	}))
}

// ListInstancesInZones lists the labelled VMs of every zone in zones
// (ListInstances, zone by zone, in the order given): a multi-zone pool's
// VMs, each with the zone it landed in.
func (c *Client) ListInstancesInZones(ctx context.Context, zones []string, labels map[string]string) ([]Instance, error) {
	var out []Instance
	for _, z := range zones {
		vms, err := c.ListInstances(ctx, z, labels)
		if err != nil {
			return nil, err
		}
		out = append(out, vms...)
	}
	return out, nil
}
