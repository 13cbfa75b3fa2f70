package gce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"cloud.google.com/go/compute/apiv1/computepb"
	computebeta "cloud.google.com/go/compute/apiv1beta"
	computebetapb "cloud.google.com/go/compute/apiv1beta/computepb"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/shared/config"
)

// Which API version the resize-request calls (insert, get, list, cancel,
// delete) go through (Client.SetResizeRequestAPI).
//
// Naming the VMs of a resize request (instances[]) is in the v1 discovery
// document, but Google's page marks it Preview
// (https://cloud.google.com/compute/docs/instance-groups/create-resize-requests-mig)
// and Google's own Slurm code sends named requests through the beta API
// (GoogleCloudPlatform/cluster-toolkit, community/modules/scheduler/
// schedmd-slurm-gcp-v6-controller/modules/slurm_files/scripts/mig_flex.py).
// Whether v1 accepts them is not settled; docs/compute-contract.md, "Open
// points".
const (
	// ResizeRequestAPIV1 sends every resize-request call through
	// /compute/v1/.
	ResizeRequestAPIV1 = "v1"
	// ResizeRequestAPIBeta sends every resize-request call through
	// /compute/beta/ (cloud.google.com/go/compute/apiv1beta).
	ResizeRequestAPIBeta = "beta"
	// ResizeRequestAPIAuto (the default) sends them through v1; when v1
	// refuses a named insert (HTTP 400) and beta accepts the same insert,
	// with the same request id, named inserts go through beta from then
	// on. When beta refuses it too and the request names one VM, it is
	// made with resizeBy 1 through v1, and so are later one-VM requests
	// (the caller gives the request's MIG that VM's name as its base
	// instance name: the MIG names the VM "<base>-xxxx"); a request for
	// several VMs is then refused, naming ResizeRequestAPICount. Reads,
	// cancels and deletes stay on v1: both versions serve the same
	// resources.
	ResizeRequestAPIAuto = "auto"
	// ResizeRequestAPICount never names VMs: every resize request goes
	// through v1 with resizeBy, for exactly one VM, whose MIG names it
	// from its base instance name, which the caller sets to the VM's
	// name. For projects where neither v1 nor beta accepts instances[]
	// (flexslurm probe settles it); flexslurm then requests every node
	// through a request of its own (plan.Policy.OneNodePerRequest).
	ResizeRequestAPICount = "count"
)

// resizeRequestAPI is the Client's choice of API version for resize
// requests. The zero value is ResizeRequestAPIAuto.
type resizeRequestAPI struct {
	mu   sync.Mutex
	mode string
	// opts are New's client options, for the beta client, which is made
	// when first needed.
	opts []option.ClientOption
	beta *computebeta.InstanceGroupManagerResizeRequestsClient
	// namedOnBeta: in auto mode, v1 refused a named insert that beta
	// accepted.
	namedOnBeta bool
	// unnamed: in auto mode, v1 and beta both refused a named insert, so
	// one-VM requests are made with resizeBy.
	unnamed bool
	// log receives the switch to beta (SetLogger); nil is slog.Default().
	log *slog.Logger
}

// SetLogger sets where the Client logs what it decides on its own (today:
// auto mode moving named resize requests to the beta API); nil, the
// default, is slog.Default(). Call it before the Client is used.
func (c *Client) SetLogger(l *slog.Logger) {
	c.rrAPI.mu.Lock()
	defer c.rrAPI.mu.Unlock()
	c.rrAPI.log = l
}

// SetResizeRequestAPI chooses the API version of the resize-request calls:
// ResizeRequestAPIV1, ResizeRequestAPIBeta or ResizeRequestAPIAuto ("" is
// auto). Call it before the Client is used.
func (c *Client) SetResizeRequestAPI(api string) error {
	switch api {
	case "":
		api = ResizeRequestAPIAuto
	case ResizeRequestAPIV1, ResizeRequestAPIBeta, ResizeRequestAPIAuto, ResizeRequestAPICount:
	default:
		return fmt.Errorf("resize request API %q: want %s, %s, %s or %s: %w", api, ResizeRequestAPIV1, ResizeRequestAPIBeta, ResizeRequestAPIAuto, ResizeRequestAPICount, ErrInvalidSpec)
	}
	c.rrAPI.mu.Lock()
	defer c.rrAPI.mu.Unlock()
	c.rrAPI.mode = api
	return nil
}

// ResizeRequestAPI reports how inserts go now: v1 or beta (named), or
// count (unnamed; auto mode reports which it has settled on).
func (c *Client) ResizeRequestAPI() string {
	c.rrAPI.mu.Lock()
	defer c.rrAPI.mu.Unlock()
	switch {
	case c.rrAPI.mode == ResizeRequestAPICount || c.rrAPI.unnamed:
		return ResizeRequestAPICount
	case c.rrAPI.mode == ResizeRequestAPIBeta || c.rrAPI.namedOnBeta:
		return ResizeRequestAPIBeta
	}
	return ResizeRequestAPIV1
}

// unnamedInserts reports whether inserts go without names (count mode, or
// auto mode after both versions refused names).
func (c *Client) unnamedInserts() bool {
	c.rrAPI.mu.Lock()
	defer c.rrAPI.mu.Unlock()
	return c.rrAPI.mode == ResizeRequestAPICount || c.rrAPI.unnamed
}

// rrMode is the configured mode.
func (c *Client) rrMode() string {
	c.rrAPI.mu.Lock()
	defer c.rrAPI.mu.Unlock()
	if c.rrAPI.mode == "" {
		return ResizeRequestAPIAuto
	}
	return c.rrAPI.mode
}

// betaRRs returns the beta resize-request client, made on first use.
func (c *Client) betaRRs(ctx context.Context) (*computebeta.InstanceGroupManagerResizeRequestsClient, error) {
	c.rrAPI.mu.Lock()
	defer c.rrAPI.mu.Unlock()
	if c.rrAPI.beta == nil {
		b, err := computebeta.NewInstanceGroupManagerResizeRequestsRESTClient(ctx, c.rrAPI.opts...)
		if err != nil {
			return nil, fmt.Errorf("creating beta resize requests client: %w", err)
		}
		c.rrAPI.beta = b
	}
	return c.rrAPI.beta, nil
}

// closeResizeRequestAPI closes the beta client, if one was made.
func (c *Client) closeResizeRequestAPI() error {
	c.rrAPI.mu.Lock()
	defer c.rrAPI.mu.Unlock()
	if c.rrAPI.beta == nil {
		return nil
	}
	err := c.rrAPI.beta.Close()
	c.rrAPI.beta = nil
	return err
}

// onBeta reports whether a call goes through beta: every call in beta
// mode, and named inserts once auto mode has switched.
func (c *Client) onBeta(namedInsert bool) bool {
	c.rrAPI.mu.Lock()
	defer c.rrAPI.mu.Unlock()
	return c.rrAPI.mode == ResizeRequestAPIBeta || (namedInsert && c.rrAPI.namedOnBeta)
}

// rrInsert inserts a resize request through the chosen version and waits
// for its operation (as wait(ctx)(c.rrs.Insert(ctx, req))).
func (c *Client) rrInsert(ctx context.Context, req *computepb.InsertInstanceGroupManagerResizeRequestRequest) error {
	instances := len(req.GetInstanceGroupManagerResizeRequestResource().GetInstances())
	named := instances > 0
	// Count mode names no VM. Auto mode, once both versions refused names,
	// makes one-VM requests unnamed at once; a request for several VMs
	// still tries names first, since only they can tell its VMs apart.
	if named && c.unnamedInserts() && (c.rrMode() == ResizeRequestAPICount || instances == 1) {
		return c.unnamedInsert(ctx, req, nil)
	}
	if c.onBeta(named) {
		return c.betaInsert(ctx, req)
	}
	err := wait(ctx)(c.rrs.Insert(ctx, req))
	if err == nil || !named || c.rrMode() != ResizeRequestAPIAuto || httpStatus(err) != http.StatusBadRequest {
		return err
	}
	// v1 refused a named request. Compute's wording for a refusal of
	// instances[] on v1, if it refuses, is not published, so any 400 is
	// tried again through beta, with the same request id; beta is kept
	// for named requests only if it accepts.
	berr := c.betaInsert(ctx, req)
	if berr != nil {
		if httpStatus(berr) != http.StatusBadRequest {
			return fmt.Errorf("%w (the same request through the beta API: %w)", err, berr)
		}
		// Both refused names: the request is made unnamed when it asks
		// for one VM, and so are later ones.
		return c.unnamedInsert(ctx, req, fmt.Errorf("v1: %w; beta: %w", err, berr))
	}
	c.settle(&c.rrAPI.namedOnBeta, slog.LevelInfo, "resize requests that name their VMs go through the Compute beta API from now on: v1 refused one that beta accepted",
		"v1_error", err.Error(), "mig", req.GetInstanceGroupManager(), "resize_request", req.GetInstanceGroupManagerResizeRequestResource().GetName())
	return nil
}

// settle sets one of auto mode's findings (namedOnBeta, unnamed) and logs
// msg the first time.
func (c *Client) settle(finding *bool, level slog.Level, msg string, args ...any) {
	c.rrAPI.mu.Lock()
	first := !*finding
	*finding = true
	log := c.rrAPI.log
	c.rrAPI.mu.Unlock()
	if log == nil {
		log = slog.Default()
	}
	if first {
		log.Log(context.Background(), level, msg, args...)
	}
}

// unnamedInsert makes a one-VM request with resizeBy 1 through v1 instead
// of naming the VM: its MIG names the VM from its base instance name,
// which the caller set to the VM's name. refused is why names were given
// up (auto mode, the first time), nil in count mode or once settled. A
// request for several VMs cannot be made so: its VMs would not tell their
// nodes apart.
func (c *Client) unnamedInsert(ctx context.Context, req *computepb.InsertInstanceGroupManagerResizeRequestRequest, refused error) error {
	return c.insertUnnamed(req.GetInstanceGroupManagerResizeRequestResource(), req.GetInstanceGroupManager(), refused,
		func(res *computepb.InstanceGroupManagerResizeRequest) error {
			unnamed := proto.Clone(req).(*computepb.InsertInstanceGroupManagerResizeRequestRequest)
			unnamed.InstanceGroupManagerResizeRequestResource = res
			return wait(ctx)(c.rrs.Insert(ctx, unnamed))
		})
}

// insertUnnamed is unnamedInsert for a zonal or a regional request: res is
// the request as named, insert makes it with the resource it is given.
func (c *Client) insertUnnamed(res *computepb.InstanceGroupManagerResizeRequest, mig string, refused error, insert func(*computepb.InstanceGroupManagerResizeRequest) error) error {
	if n := len(res.GetInstances()); n != 1 {
		why := "resize requests are made without names (" + config.EnvResizeRequestAPI + "=" + ResizeRequestAPICount + ")"
		if refused != nil {
			why = "Compute refused to name the VMs of a resize request on both APIs (" + refused.Error() + ")"
		}
		return fmt.Errorf("resize request %s asks for %d VMs, but %s and a request made with resizeBy cannot tell its VMs' nodes apart: set %s=%s, so that flexslurm requests each node on its own: %w",
			res.GetName(), n, why, config.EnvResizeRequestAPI, ResizeRequestAPICount, ErrInvalidSpec)
	}
	r := proto.Clone(res).(*computepb.InstanceGroupManagerResizeRequest)
	r.Instances = nil
	r.ResizeBy = proto.Int32(1)
	if err := insert(r); err != nil {
		if refused != nil {
			return fmt.Errorf("%w (and with resizeBy 1 instead of its name: %w)", refused, err)
		}
		return err
	}
	if refused != nil {
		c.settle(&c.rrAPI.unnamed, slog.LevelWarn, "resize requests are made with resizeBy from now on: Compute refused to name their VMs on v1 and on beta; a request for several VMs will be refused until "+config.EnvResizeRequestAPI+"="+ResizeRequestAPICount+" is set",
			"refused", refused.Error(), "mig", mig, "resize_request", r.GetName())
	}
	return nil
}

func (c *Client) betaInsert(ctx context.Context, req *computepb.InsertInstanceGroupManagerResizeRequestRequest) error {
	b, err := c.betaRRs(ctx)
	if err != nil {
		return err
	}
	breq := &computebetapb.InsertInstanceGroupManagerResizeRequestRequest{}
	if err := convertProto(req, breq); err != nil {
		return err
	}
	op, err := b.Insert(ctx, breq)
	return waitBetaOp(ctx, op, err)
}

// rrGet gets a resize request through the chosen version.
func (c *Client) rrGet(ctx context.Context, req *computepb.GetInstanceGroupManagerResizeRequestRequest) (*computepb.InstanceGroupManagerResizeRequest, error) {
	if !c.onBeta(false) {
		return c.rrs.Get(ctx, req)
	}
	b, err := c.betaRRs(ctx)
	if err != nil {
		return nil, err
	}
	breq := &computebetapb.GetInstanceGroupManagerResizeRequestRequest{}
	if err := convertProto(req, breq); err != nil {
		return nil, err
	}
	r, err := b.Get(ctx, breq)
	if err != nil {
		return nil, err
	}
	out := &computepb.InstanceGroupManagerResizeRequest{}
	return out, convertProto(r, out)
}

// rrList returns an iterator over a MIG's resize requests through the
// chosen version: next returns iterator.Done at the end.
func (c *Client) rrList(ctx context.Context, req *computepb.ListInstanceGroupManagerResizeRequestsRequest) (next func() (*computepb.InstanceGroupManagerResizeRequest, error)) {
	if !c.onBeta(false) {
		return c.rrs.List(ctx, req).Next
	}
	b, err := c.betaRRs(ctx)
	if err != nil {
		return func() (*computepb.InstanceGroupManagerResizeRequest, error) { return nil, err }
	}
	breq := &computebetapb.ListInstanceGroupManagerResizeRequestsRequest{}
	if err := convertProto(req, breq); err != nil {
		return func() (*computepb.InstanceGroupManagerResizeRequest, error) { return nil, err }
	}
	it := b.List(ctx, breq)
	return func() (*computepb.InstanceGroupManagerResizeRequest, error) {
		r, err := it.Next()
		if err != nil {
			return nil, err
		}
		out := &computepb.InstanceGroupManagerResizeRequest{}
		return out, convertProto(r, out)
	}
}

// rrCancel cancels a resize request through the chosen version and waits
// for its operation.
func (c *Client) rrCancel(ctx context.Context, req *computepb.CancelInstanceGroupManagerResizeRequestRequest) error {
	if !c.onBeta(false) {
		return wait(ctx)(c.rrs.Cancel(ctx, req))
	}
	b, err := c.betaRRs(ctx)
	if err != nil {
		return err
	}
	breq := &computebetapb.CancelInstanceGroupManagerResizeRequestRequest{}
	if err := convertProto(req, breq); err != nil {
		return err
	}
	op, err := b.Cancel(ctx, breq)
	return waitBetaOp(ctx, op, err)
}

// rrDelete deletes a resize request through the chosen version and waits
// for its operation.
func (c *Client) rrDelete(ctx context.Context, req *computepb.DeleteInstanceGroupManagerResizeRequestRequest) error {
	if !c.onBeta(false) {
		return wait(ctx)(c.rrs.Delete(ctx, req))
	}
	b, err := c.betaRRs(ctx)
	if err != nil {
		return err
	}
	breq := &computebetapb.DeleteInstanceGroupManagerResizeRequestRequest{}
	if err := convertProto(req, breq); err != nil {
		return err
	}
	op, err := b.Delete(ctx, breq)
	return waitBetaOp(ctx, op, err)
}

// convertProto copies a message between the v1 and beta computepb types,
// which share their JSON form; fields one version lacks are dropped.
func convertProto(from, to proto.Message) error {
	b, err := protojson.Marshal(from)
	if err != nil {
		return fmt.Errorf("encoding %T: %w", from, err)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, to); err != nil {
		return fmt.Errorf("decoding %T as %T: %w", from, to, err)
	}
	return nil
}

// waitBetaOp is waitOp for a beta operation: it waits at most
// maxOperationWait and turns an operation that ended DONE with errors into
// an *OperationError.
func waitBetaOp(ctx context.Context, op *computebeta.Operation, err error) error {
	if err != nil {
		return err
	}
	werr := boundedWait(ctx, op.Name(), func(wctx context.Context) error { return op.Wait(wctx) })
	p := &computepb.Operation{}
	if cerr := convertProto(op.Proto(), p); cerr != nil {
		return errors.Join(werr, cerr)
	}
	return opErrorOf(op.Name(), p, werr)
}

// HTTPStatus is httpStatus, for callers outside the package that decide
// on the HTTP status of a refusal alone (the body's wording is not
// published for every refusal).
func HTTPStatus(err error) int { return httpStatus(err) }

// httpStatus is the HTTP status of an API error, or the
// httpErrorStatusCode of an operation that ended with errors; 0 if err is
// neither.
func httpStatus(err error) int {
	var oe *OperationError
	if errors.As(err, &oe) {
		return oe.HTTPStatus
	}
	var ae *apierror.APIError
	if errors.As(err, &ae) && ae.HTTPCode() > 0 {
		return ae.HTTPCode()
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}
