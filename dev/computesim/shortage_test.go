package computesim

import (
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// A stock-out keeps the request ACCEPTED with the error of each attempt in
// status.lastAttempt.error (never status.error); capacity returning
// provisions it and clears lastAttempt.
func TestShortageStockOutStaysAccepted(t *testing.T) {
	e := newEnv(t, Options{AttemptInterval: 10 * time.Minute, CapacityDelay: func(string, string) time.Duration { return 5 * time.Minute }})
	e.setup()
	e.sim.SetShortage(Shortage{Name: "stockout", Zone: testZone, Until: t0.Add(time.Hour)})
	if err := e.insertRR("pool", namedRR("rr", 3600, "pool-0"), ""); err != nil {
		t.Fatalf("insert during a stock-out must succeed (the request queues): %v", err)
	}
	e.advance(4 * time.Minute)
	if la := e.getRR("pool", "rr").GetStatus().GetLastAttempt(); la != nil {
		t.Fatalf("lastAttempt before the first attempt = %v", la)
	}
	e.advance(time.Minute) // the first attempt, at the capacity delay
	rr := e.getRR("pool", "rr")
	if rr.GetState() != "ACCEPTED" || rr.GetStatus().GetError() != nil {
		t.Fatalf("state = %s, status.error = %v; want ACCEPTED without status.error", rr.GetState(), rr.GetStatus().GetError())
	}
	want := &computepb.Errors{
		Code:    proto.String("ZONE_RESOURCE_POOL_EXHAUSTED"),
		Message: proto.String("The zone 'projects/proj/zones/us-central1-a' does not have enough resources available to fulfill the request.  Try a different zone, or try again later."),
		ErrorDetails: []*computepb.ErrorDetails{
			{Help: &computepb.Help{Links: []*computepb.HelpLink{{Description: proto.String("Troubleshooting documentation"), Url: proto.String("https://cloud.google.com/compute/docs/resource-error")}}}},
			{LocalizedMessage: &computepb.LocalizedMessage{Locale: proto.String("en-US"), Message: proto.String("A a3-ultragpu-8g VM instance is currently unavailable in the us-central1-a zone. Alternatively, you can try your request again with a different VM hardware configuration or at a later time. For more information, see the troubleshooting documentation.")}},
			{ErrorInfo: &computepb.ErrorInfo{Reason: proto.String("resource_availability"), Domain: proto.String("compute.googleapis.com"),
				Metadatas: map[string]string{"zone": testZone, "vmType": "a3-ultragpu-8g", "attachment": "", "zonesAvailable": ""}}},
		},
	}
	if diff := cmp.Diff([]*computepb.Errors{want}, rr.GetStatus().GetLastAttempt().GetError().GetErrors(), protocmp.Transform()); diff != "" {
		t.Errorf("lastAttempt.error (-want +got):\n%s", diff)
	}
	if at, ok := e.sim.NextDue(); !ok || !at.Equal(t0.Add(15*time.Minute)) {
		t.Errorf("next attempt = %v %v, want %v", at, ok, t0.Add(15*time.Minute))
	}
	if _, err := e.getInstance("pool-0"); err == nil {
		t.Fatal("a VM exists during the stock-out")
	}
	e.advance(50 * time.Minute) // t0+55m: still short
	if rr := e.getRR("pool", "rr"); rr.GetState() != "ACCEPTED" || rr.GetStatus().GetLastAttempt() == nil {
		t.Fatalf("at 55 min: state %s lastAttempt %v", rr.GetState(), rr.GetStatus().GetLastAttempt())
	}
	e.advance(5 * time.Minute) // the shortage ends at t0+1h: attempted then
	rr = e.getRR("pool", "rr")
	if rr.GetState() != "SUCCEEDED" || rr.GetStatus().GetLastAttempt() != nil || rr.GetStatus().GetError() != nil {
		t.Fatalf("after the shortage: state %s status %v; want SUCCEEDED with lastAttempt cleared", rr.GetState(), rr.GetStatus())
	}
	if _, err := e.getInstance("pool-0"); err != nil {
		t.Fatalf("VM after the shortage: %v", err)
	}
}

// A quota shortage reports QUOTA_EXCEEDED with quotaInfo; cancelling the
// queued request clears lastAttempt; a shortage in another zone or for
// another machine type does not apply.
func TestShortageQuotaAndCancel(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	e.sim.SetShortage(Shortage{Name: "other", Zone: "europe-west4-a"})
	e.sim.SetShortage(Shortage{Name: "other-type", MachineType: "a4-highgpu-8g"})
	e.sim.SetShortage(Shortage{Name: "quota", Code: "QUOTA_EXCEEDED", Metric: "compute.googleapis.com/preemptible_nvidia_h200_gpus", Limit: 8})
	if err := e.insertRR("pool", namedRR("rr", 3600, "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	rr := e.getRR("pool", "rr")
	limit := 8.0
	want := []*computepb.Errors{{
		Code:    proto.String("QUOTA_EXCEEDED"),
		Message: proto.String("Quota 'PREEMPTIBLE_NVIDIA_H200_GPUS' exceeded.  Limit: 8.0 in region us-central1."),
		ErrorDetails: []*computepb.ErrorDetails{{QuotaInfo: &computepb.QuotaExceededInfo{
			MetricName: proto.String("compute.googleapis.com/preemptible_nvidia_h200_gpus"),
			LimitName:  proto.String("PREEMPTIBLE-NVIDIA-H200-GPUS-per-project-region"),
			Dimensions: map[string]string{"region": "us-central1"},
			Limit:      &limit,
		}}},
	}}
	if rr.GetState() != "ACCEPTED" {
		t.Fatalf("state = %s", rr.GetState())
	}
	if diff := cmp.Diff(want, rr.GetStatus().GetLastAttempt().GetError().GetErrors(), protocmp.Transform()); diff != "" {
		t.Errorf("lastAttempt.error (-want +got):\n%s", diff)
	}
	if got := e.sim.ResizeRequests(); len(got) != 1 || got[0].LastAttemptCode != "QUOTA_EXCEEDED" || got[0].ErrorCode != "" {
		t.Errorf("ResizeRequests() = %+v", got)
	}
	if err := do(e.rrs.Cancel(e.ctx, &computepb.CancelInstanceGroupManagerResizeRequestRequest{
		Project: testProject, Zone: testZone, InstanceGroupManager: "pool", ResizeRequest: "rr"})); err != nil {
		t.Fatal(err)
	}
	if rr := e.getRR("pool", "rr"); rr.GetState() != "CANCELLED" || rr.GetStatus().GetLastAttempt() != nil {
		t.Errorf("after cancel: state %s status %v", rr.GetState(), rr.GetStatus())
	}
	// Once the quota shortage is cleared, the other two do not hold a new
	// request back.
	e.sim.ClearShortage("quota")
	if err := e.insertRR("pool", namedRR("rr2", 3600, "pool-1"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	if rr := e.getRR("pool", "rr2"); rr.GetState() != "SUCCEEDED" {
		t.Errorf("rr2 state = %s, want SUCCEEDED (shortages elsewhere do not apply)", rr.GetState())
	}
}

// FailResizeRequest sets status.error and clears lastAttempt.
func TestShortageThenFailed(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	e.sim.SetShortage(Shortage{Name: "stockout"})
	if err := e.insertRR("pool", namedRR("rr", 3600, "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	if err := e.sim.FailResizeRequest(testZone, "pool", "rr", "ZONE_RESOURCE_POOL_EXHAUSTED", "gave up"); err != nil {
		t.Fatal(err)
	}
	rr := e.getRR("pool", "rr")
	if rr.GetState() != "FAILED" || rr.GetStatus().GetLastAttempt() != nil || len(rr.GetStatus().GetError().GetErrors()) != 1 {
		t.Errorf("state %s status %v; want FAILED, status.error set, lastAttempt cleared", rr.GetState(), rr.GetStatus())
	}
}
