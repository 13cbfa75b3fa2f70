package gce

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/api/iterator"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// Workload policies (compact placement, docs/design/placement.md). A workload
// policy is a regional resource policy (resourcePolicies.insert/get/delete
// in the Compute v1 discovery document,
// https://www.googleapis.com/discovery/v1/apis/compute/v1/rest:
// ResourcePolicy.workloadPolicy{type, maxTopologyDistance}); a zonal MIG
// references it through resourcePolicies.workloadPolicy. Google's REST
// example (https://cloud.google.com/ai-hypercomputer/docs/create/create-mig-with-a4-or-a3ultra,
// "Create a workload policy") sends exactly {name, workloadPolicy: {type:
// HIGH_THROUGHPUT[, maxTopologyDistance]}} to
// POST …/regions/REGION/resourcePolicies.

// WorkloadTypeHighThroughput is the workload policy type that places a
// MIG's VMs close together (ResourcePolicyWorkloadPolicy.type).
const WorkloadTypeHighThroughput = "HIGH_THROUGHPUT"

// WorkloadPolicySpec describes a pool's workload policy.
type WorkloadPolicySpec struct {
	// Region is the policy's region (the pool's zone's).
	Region string
	// Name is naming.WorkloadPolicy's.
	Name string
	// Description proves the policy the pool's
	// (naming.WorkloadPolicyDescription): resource policies carry no labels.
	Description string
	// MaxTopologyDistance is "", SUBBLOCK, BLOCK or CLUSTER.
	MaxTopologyDistance string
}

// WorkloadPolicy is a resource policy as read back.
type WorkloadPolicy struct {
	Name, Description, Type, MaxTopologyDistance string
}

func (w WorkloadPolicySpec) resource() *computepb.ResourcePolicy {
	wp := &computepb.ResourcePolicyWorkloadPolicy{Type: proto.String(WorkloadTypeHighThroughput)}
	if w.MaxTopologyDistance != "" {
		wp.MaxTopologyDistance = proto.String(w.MaxTopologyDistance)
	}
	return &computepb.ResourcePolicy{
		Name:           proto.String(w.Name),
		Description:    proto.String(w.Description),
		WorkloadPolicy: wp,
	}
}

// EnsureWorkloadPolicy creates a pool's workload policy (HIGH_THROUGHPUT,
// with its maximum topology distance when one is set). A policy of that
// name that already exists (409) is read back: it counts as done only when
// it is this policy — same description, type and distance; anything else
// (a policy of someone else's under that name, or one changed out of band:
// a workload policy cannot be updated) is refused as an invalid spec,
// naming what differs, and no MIG is made to reference it.
func (c *Client) EnsureWorkloadPolicy(ctx context.Context, w WorkloadPolicySpec, requestID string) error {
	if err := checkName("workload policy", w.Name); err != nil {
		return fmt.Errorf("creating workload policy %s: %w", w.Name, err)
	}
	if w.Region == "" {
		return fmt.Errorf("creating workload policy %s: empty region: %w", w.Name, ErrInvalidSpec)
	}
	err := wait(ctx)(c.policies.Insert(ctx, &computepb.InsertResourcePolicyRequest{
		Project:                c.project,
		Region:                 w.Region,
		ResourcePolicyResource: w.resource(),
		RequestId:              optRequestID(requestID),
	}))
	if err == nil {
		return nil
	}
	if !IsAlreadyExists(err) {
		return fmt.Errorf("creating workload policy %s: %w", w.Name, mark(err))
	}
	got, gerr := c.GetWorkloadPolicy(ctx, w.Region, w.Name)
	if gerr != nil {
		return fmt.Errorf("reading back workload policy %s, which exists: %w", w.Name, gerr)
	}
	if got.Description != w.Description || got.Type != WorkloadTypeHighThroughput || got.MaxTopologyDistance != w.MaxTopologyDistance {
		return fmt.Errorf("workload policy %s in %s exists but is not the pool's (description %q, type %q, maxTopologyDistance %q; want %q, %s, %q): %w",
			w.Name, w.Region, got.Description, got.Type, got.MaxTopologyDistance, w.Description, WorkloadTypeHighThroughput, w.MaxTopologyDistance, ErrInvalidSpec)
	}
	return nil
}

// GetWorkloadPolicy reads a resource policy (resourcePolicies.get).
func (c *Client) GetWorkloadPolicy(ctx context.Context, region, name string) (WorkloadPolicy, error) {
	rp, err := c.policies.Get(ctx, &computepb.GetResourcePolicyRequest{Project: c.project, Region: region, ResourcePolicy: name})
	if err != nil {
		return WorkloadPolicy{}, fmt.Errorf("getting resource policy %s: %w", name, mark(err))
	}
	return WorkloadPolicy{
		Name: rp.GetName(), Description: rp.GetDescription(),
		Type: rp.GetWorkloadPolicy().GetType(), MaxTopologyDistance: rp.GetWorkloadPolicy().GetMaxTopologyDistance(),
	}, nil
}

// DeleteWorkloadPolicy deletes a resource policy (resourcePolicies.delete).
// One that does not exist (404) counts as success.
func (c *Client) DeleteWorkloadPolicy(ctx context.Context, region, name, requestID string) error {
	err := wait(ctx)(c.policies.Delete(ctx, &computepb.DeleteResourcePolicyRequest{
		Project: c.project, Region: region, ResourcePolicy: name, RequestId: optRequestID(requestID),
	}))
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("deleting workload policy %s: %w", name, mark(err))
	}
	return nil
}

// PolicyRef is a resource policy found by listing.
type PolicyRef struct {
	Region, Name, Description string
}

// ListResourcePoliciesAllRegions lists the project's resource policies in
// every region (resourcePolicies.aggregatedList), following every page.
func (c *Client) ListResourcePoliciesAllRegions(ctx context.Context) ([]PolicyRef, error) {
	it := c.policies.AggregatedList(ctx, &computepb.AggregatedListResourcePoliciesRequest{Project: c.project})
	var out []PolicyRef
	for {
		p, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing resource policies in every region: %w", mark(err))
		}
		for _, rp := range p.Value.GetResourcePolicies() {
			region := lastSegment(rp.GetRegion())
			if region == "" {
				region = lastSegment(p.Key)
			}
			out = append(out, PolicyRef{Region: region, Name: rp.GetName(), Description: rp.GetDescription()})
		}
	}
	return out, nil
}
