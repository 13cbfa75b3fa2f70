package computesim

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/shared/clock"
)

// TestServerRunsLive serves on a real port with a fast scaled clock and lets
// Run move a resize request along without any Tick from the test.
func TestServerRunsLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clk := clock.NewScaled(t0, 600) // 1 s wall = 10 min
	srv := NewServer(Options{CapacityDelay: func(string, string) time.Duration { return 5 * time.Minute }}, clk)
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go srv.Run(runCtx, 10*time.Millisecond)

	co := []option.ClientOption{option.WithEndpoint(srv.URL()), option.WithoutAuthentication()}
	tc, err := compute.NewInstanceTemplatesRESTClient(ctx, co...)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	ic, err := compute.NewInstanceGroupManagersRESTClient(ctx, co...)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	rc, err := compute.NewInstanceGroupManagerResizeRequestsRESTClient(ctx, co...)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := do(tc.Insert(ctx, &computepb.InsertInstanceTemplateRequest{Project: testProject, InstanceTemplateResource: flexTemplate("tpl", 3600)})); err != nil {
		t.Fatal(err)
	}
	if err := do(ic.Insert(ctx, &computepb.InsertInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManagerResource: &computepb.InstanceGroupManager{
		Name: proto.String("pool"), BaseInstanceName: proto.String("pool"), InstanceTemplate: proto.String("global/instanceTemplates/tpl"), TargetSize: proto.Int32(0),
		InstanceLifecyclePolicy: &computepb.InstanceGroupManagerInstanceLifecyclePolicy{DefaultActionOnFailure: proto.String("DO_NOTHING")},
	}})); err != nil {
		t.Fatal(err)
	}
	if err := do(rc.Insert(ctx, &computepb.InsertInstanceGroupManagerResizeRequestRequest{Project: testProject, Zone: testZone, InstanceGroupManager: "pool",
		InstanceGroupManagerResizeRequestResource: namedRR("rr", 0, "pool-0")})); err != nil {
		t.Fatal(err)
	}
	for {
		if rrs := srv.ResizeRequests(); len(rrs) == 1 && rrs[0].State == "SUCCEEDED" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("resize request never succeeded: %+v", srv.ResizeRequests())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if vms := srv.Instances(); len(vms) != 1 || vms[0].Name != "pool-0" || vms[0].Status != "RUNNING" {
		t.Errorf("VMs = %+v", vms)
	}
}

func TestListenAndServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := ListenAndServe(ctx, addr, Options{}, clock.Real{}); err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	// A busy address is an error.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := ListenAndServe(context.Background(), busy.Addr().String(), Options{}, clock.Real{}); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("busy address: %v", err)
	}
}
