package computesim

import (
	"net/http"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// quotasOf reads regions.get (region != "") or projects.get through the
// REST clients and returns metric → [limit, usage].
func (e *env) quotasOf(region string) map[string][2]float64 {
	e.t.Helper()
	co := []option.ClientOption{option.WithEndpoint(e.srv.URL), option.WithoutAuthentication()}
	var qs []*computepb.Quota
	if region != "" {
		c, err := compute.NewRegionsRESTClient(e.ctx, co...)
		if err != nil {
			e.t.Fatal(err)
		}
		defer c.Close()
		r, err := c.Get(e.ctx, &computepb.GetRegionRequest{Project: testProject, Region: region})
		if err != nil {
			e.t.Fatal(err)
		}
		qs = r.GetQuotas()
	} else {
		c, err := compute.NewProjectsRESTClient(e.ctx, co...)
		if err != nil {
			e.t.Fatal(err)
		}
		defer c.Close()
		p, err := c.Get(e.ctx, &computepb.GetProjectRequest{Project: testProject})
		if err != nil {
			e.t.Fatal(err)
		}
		qs = p.GetQuotas()
	}
	out := map[string][2]float64{}
	for _, q := range qs {
		out[q.GetMetric()] = [2]float64{q.GetLimit(), q.GetUsage()}
	}
	return out
}

func TestQuotasReportUsage(t *testing.T) {
	e := newEnv(t, Options{Quotas: map[string]float64{QuotaInstanceGroupManagers: 5}, UnlistedQuotas: []string{"PREEMPTIBLE_NVIDIA_L4_GPUS"}})
	e.setup()
	if err := e.insertRR("pool", namedRR("rr", 3600, "pool-0", "pool-1"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	r := e.quotasOf("us-central1")
	for metric, want := range map[string][2]float64{
		QuotaInstanceGroupManagers: {5, 1},
		QuotaInstances:             {DefaultQuotaLimit, 2},
	} {
		if got, ok := r[metric]; !ok || got != want {
			t.Errorf("regions.get %s = %v (listed %t), want %v", metric, got, ok, want)
		}
	}
	// H200 quotas are not in the discovery document's Quota.metric enum:
	// never listed. Options.UnlistedQuotas leaves out listable ones.
	for _, m := range []string{"PREEMPTIBLE_NVIDIA_H200_GPUS", "NVIDIA_H200_GPUS", "PREEMPTIBLE_NVIDIA_L4_GPUS"} {
		if _, ok := r[m]; ok {
			t.Errorf("regions.get lists %s", m)
		}
	}
	if got, ok := r["PREEMPTIBLE_NVIDIA_H100_GPUS"]; !ok || got[1] != 0 {
		t.Errorf("regions.get PREEMPTIBLE_NVIDIA_H100_GPUS = %v (listed %t), want usage 0", got, ok)
	}
	if got := e.quotasOf("europe-west4")[QuotaInstanceGroupManagers]; got != [2]float64{5, 0} {
		t.Errorf("another region's MIGs = %v, want limit 5 usage 0", got)
	}
	p := e.quotasOf("")
	if got := p[QuotaInstanceTemplates]; got != [2]float64{DefaultQuotaLimit, 1} {
		t.Errorf("projects.get INSTANCE_TEMPLATES = %v", got)
	}
	if got := p[QuotaGPUsAllRegions]; got[1] != 16 {
		t.Errorf("projects.get GPUS_ALL_REGIONS = %v, want usage 16", got)
	}
	if _, ok := p[QuotaInstanceGroupManagers]; ok {
		t.Errorf("projects.get lists the regional INSTANCE_GROUP_MANAGERS")
	}
}

func TestQuotasEnforced(t *testing.T) {
	e := newEnv(t, Options{Quotas: map[string]float64{
		QuotaInstanceGroupManagers:     1,
		QuotaInstanceTemplates:         1,
		"PREEMPTIBLE_NVIDIA_H200_GPUS": 8,
	}})
	e.setup()

	// A second MIG in the region, and a second template, are refused with
	// the quota named in errorDetails.quotaInfo.
	m := &computepb.InstanceGroupManager{Name: proto.String("other"), BaseInstanceName: proto.String("other"),
		InstanceTemplate: proto.String("projects/" + testProject + "/global/instanceTemplates/tpl"), TargetSize: proto.Int32(0)}
	op, err := e.igm.Insert(e.ctx, &computepb.InsertInstanceGroupManagerRequest{Project: testProject, Zone: testZone, InstanceGroupManagerResource: m})
	if err != nil {
		t.Fatal(err)
	}
	_ = op.Wait(e.ctx)
	limit := 1.0
	want := []*computepb.Errors{{
		Code:    proto.String("QUOTA_EXCEEDED"),
		Message: proto.String("Quota 'INSTANCE_GROUP_MANAGERS' exceeded.  Limit: 1.0 in region us-central1."),
		ErrorDetails: []*computepb.ErrorDetails{{QuotaInfo: &computepb.QuotaExceededInfo{
			MetricName: proto.String("compute.googleapis.com/instance_group_managers"),
			LimitName:  proto.String("INSTANCE-GROUP-MANAGERS-per-project-region"),
			Dimensions: map[string]string{"region": "us-central1"},
			Limit:      &limit,
		}}},
	}}
	if diff := cmp.Diff(want, op.Proto().GetError().GetErrors(), protocmp.Transform()); diff != "" {
		t.Errorf("MIG insert past the quota (-want +got):\n%s", diff)
	}
	if op.Proto().GetHttpErrorStatusCode() != http.StatusForbidden {
		t.Errorf("httpErrorStatusCode = %d, want 403", op.Proto().GetHttpErrorStatusCode())
	}
	if got := len(e.sim.MIGs()); got != 1 {
		t.Errorf("%d MIGs after the refusal, want 1", got)
	}
	if err := e.insertTemplate(flexTemplate("tpl2", 7200)); err == nil {
		t.Errorf("a second template was accepted past INSTANCE_TEMPLATES = 1")
	}

	// One VM of a3-ultragpu-8g takes the 8 preemptible H200 GPUs; a second
	// request stays queued, short of quota, until the first VM is gone.
	if err := e.insertRR("pool", namedRR("rr1", 3600, "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	if err := e.insertRR("pool", namedRR("rr2", 3600, "pool-1"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	rr2 := e.getRR("pool", "rr2")
	if rr2.GetState() != "ACCEPTED" {
		t.Fatalf("rr2 state = %s, want ACCEPTED (queued, short of quota)", rr2.GetState())
	}
	la := rr2.GetStatus().GetLastAttempt().GetError().GetErrors()
	if len(la) != 1 || la[0].GetCode() != "QUOTA_EXCEEDED" ||
		la[0].GetErrorDetails()[0].GetQuotaInfo().GetMetricName() != "compute.googleapis.com/preemptible_nvidia_h200_gpus" {
		t.Fatalf("rr2 lastAttempt.error = %v", la)
	}
	if err := do(e.inst.Delete(e.ctx, &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: "pool-0"})); err != nil {
		t.Fatal(err)
	}
	e.advance(DefaultAttemptInterval)
	if rr2 := e.getRR("pool", "rr2"); rr2.GetState() != "SUCCEEDED" {
		t.Errorf("rr2 state = %s after the quota freed, want SUCCEEDED", rr2.GetState())
	}
}

func TestInjectedQuotaCarriesQuotaInfo(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	e.sim.Inject(Injection{Match: Match{Method: "POST", Path: `/resizeRequests$`}, Status: 403, Code: "QUOTA_EXCEEDED",
		QuotaMetric: "PREEMPTIBLE_NVIDIA_H200_GPUS", QuotaLimit: 16, Times: 1})
	op, err := e.rrs.Insert(e.ctx, &computepb.InsertInstanceGroupManagerResizeRequestRequest{
		Project: testProject, Zone: testZone, InstanceGroupManager: "pool", InstanceGroupManagerResizeRequestResource: namedRR("rr", 3600, "pool-0")})
	if err != nil {
		t.Fatal(err)
	}
	_ = op.Wait(e.ctx)
	errs := op.Proto().GetError().GetErrors()
	if len(errs) != 1 {
		t.Fatalf("errors = %v", errs)
	}
	if diff := cmp.Diff(quotaErrorItem("PREEMPTIBLE_NVIDIA_H200_GPUS", "us-central1", 16), errs[0], protocmp.Transform()); diff != "" {
		t.Errorf("injected quota error (-want +got):\n%s", diff)
	}
}
