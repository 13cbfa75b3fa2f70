package node

import (
	"context"
	"fmt"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"
)

// simCreate creates template tpl, MIG pool and, through a resize request
// naming it, VM vm, on the Compute simulator at url.
func simCreate(ctx context.Context, url string, tpl *computepb.InstanceTemplate, vm string) error {
	co := []option.ClientOption{option.WithEndpoint(url), option.WithoutAuthentication()}
	tc, err := compute.NewInstanceTemplatesRESTClient(ctx, co...)
	if err != nil {
		return err
	}
	defer tc.Close()
	mc, err := compute.NewInstanceGroupManagersRESTClient(ctx, co...)
	if err != nil {
		return err
	}
	defer mc.Close()
	rc, err := compute.NewInstanceGroupManagerResizeRequestsRESTClient(ctx, co...)
	if err != nil {
		return err
	}
	defer rc.Close()
	ic, err := compute.NewInstancesRESTClient(ctx, co...)
	if err != nil {
		return err
	}
	defer ic.Close()
	wait := func(op *compute.Operation, err error) error {
		if err != nil {
			return err
		}
		return op.Wait(ctx)
	}
	if err := wait(tc.Insert(ctx, &computepb.InsertInstanceTemplateRequest{Project: "proj", InstanceTemplateResource: tpl})); err != nil {
		return fmt.Errorf("template: %w", err)
	}
	if err := wait(mc.Insert(ctx, &computepb.InsertInstanceGroupManagerRequest{Project: "proj", Zone: "us-central1-a",
		InstanceGroupManagerResource: &computepb.InstanceGroupManager{Name: proto.String("pool"), BaseInstanceName: proto.String("pool"),
			InstanceTemplate: proto.String("projects/proj/global/instanceTemplates/tpl"), TargetSize: proto.Int32(0),
			InstanceLifecyclePolicy: &computepb.InstanceGroupManagerInstanceLifecyclePolicy{DefaultActionOnFailure: proto.String("DO_NOTHING")}}})); err != nil {
		return fmt.Errorf("MIG: %w", err)
	}
	if err := wait(rc.Insert(ctx, &computepb.InsertInstanceGroupManagerResizeRequestRequest{Project: "proj", Zone: "us-central1-a", InstanceGroupManager: "pool",
		InstanceGroupManagerResizeRequestResource: &computepb.InstanceGroupManagerResizeRequest{Name: proto.String("rr"),
			Instances: []*computepb.PerInstanceConfig{{Name: proto.String(vm)}}}})); err != nil {
		return fmt.Errorf("resize request: %w", err)
	}
	for range 5 {
		if _, err = ic.Get(ctx, &computepb.GetInstanceRequest{Project: "proj", Zone: "us-central1-a", Instance: vm}); err == nil {
			return nil
		}
	}
	return fmt.Errorf("VM %s: %w", vm, err)
}
