package gce_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/gce"
)

func TestQuotaClientReadsQuotas(t *testing.T) {
	h := newHarness(t, computesim.Options{Quotas: map[string]float64{"INSTANCE_GROUP_MANAGERS": 3}})
	h.pool()
	q, err := gce.NewQuotaClient(h.ctx, project, option.WithEndpoint(h.url), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	r, err := q.RegionQuotas(h.ctx, "us-central1")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Find("INSTANCE_GROUP_MANAGERS"); !ok || got.Limit != 3 || got.Usage != 1 {
		t.Errorf("INSTANCE_GROUP_MANAGERS = %+v (listed %t), want limit 3 usage 1", got, ok)
	}
	if r.Warning != "" {
		t.Errorf("warning %q", r.Warning)
	}
	p, err := q.ProjectQuotas(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := p.Find("INSTANCE_TEMPLATES"); !ok || got.Usage != 1 {
		t.Errorf("INSTANCE_TEMPLATES = %+v (listed %t), want usage 1", got, ok)
	}
	if _, err := q.RegionQuotas(h.ctx, "Not_A_Region"); err == nil {
		t.Errorf("an invalid region was read")
	}
}

// A MIG refused for quota: the error is of the quota class and names the
// quota from errorDetails.quotaInfo.
func TestQuotaOfRefusedMIG(t *testing.T) {
	h := newHarness(t, computesim.Options{Quotas: map[string]float64{"INSTANCE_GROUP_MANAGERS": 1}})
	h.pool()
	err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: "c1-h200-b", Template: "c1-h200-v1", BaseInstanceName: "c1-h200-b"}, rid("ensure MIG c1-h200-b"))
	if gce.Classify(err) != gce.ClassQuota {
		t.Fatalf("EnsureMIG past the quota: %v (class %s), want a quota error", err, gce.Classify(err))
	}
	q, ok := gce.QuotaOf(err)
	if !ok {
		t.Fatalf("QuotaOf(%v) found none", err)
	}
	if q.Metric != "compute.googleapis.com/instance_group_managers" || q.Region != "us-central1" || !q.HasLimit || q.Limit != 1 {
		t.Errorf("QuotaOf = %+v", q)
	}
	if got, want := q.String(), "INSTANCE_GROUP_MANAGERS in region us-central1 (limit 1)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// A queued request short of a GPU quota names it in LastAttemptQuota.
func TestResizeRequestLastAttemptQuota(t *testing.T) {
	h := newHarness(t, computesim.Options{Quotas: map[string]float64{"PREEMPTIBLE_NVIDIA_H200_GPUS": 8}})
	h.pool()
	spec := gce.ResizeRequestSpec{Name: "rr-1", Instances: []string{"c1-h200-0", "c1-h200-1"}, RunDuration: time.Hour}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, rid("scale up rr-1")); err != nil {
		t.Fatal(err)
	}
	h.tick(time.Second)
	rrs, err := h.c.ListResizeRequests(h.ctx, zone, "c1-h200")
	if err != nil {
		t.Fatal(err)
	}
	if len(rrs) != 1 || rrs[0].State != gce.StateAccepted || rrs[0].LastAttemptCode != "QUOTA_EXCEEDED" {
		t.Fatalf("resize requests = %+v", rrs)
	}
	if got, want := rrs[0].LastAttemptQuota.String(), "PREEMPTIBLE_NVIDIA_H200_GPUS in region us-central1 (limit 8)"; got != want {
		t.Errorf("LastAttemptQuota = %q, want %q", got, want)
	}
	if rrs[0].ErrorQuota.String() != "" {
		t.Errorf("ErrorQuota = %+v, want none", rrs[0].ErrorQuota)
	}
}

// An error without quotaInfo names its quota in the message only.
func TestQuotaOfMessage(t *testing.T) {
	err := &googleapi.Error{Code: http.StatusForbidden, Message: "Quota 'CPUS' exceeded.  Limit: 24.0 in region us-central1.",
		Errors: []googleapi.ErrorItem{{Reason: "quotaExceeded"}}}
	q, ok := gce.QuotaOf(err)
	if !ok || q.String() != "CPUS in region us-central1 (limit 24)" {
		t.Errorf("QuotaOf = %+v, %t", q, ok)
	}
	if _, ok := gce.QuotaOf(errors.New("Quota exceeded")); ok {
		t.Errorf("a plain error named a quota")
	}
	if _, ok := gce.QuotaOf(&googleapi.Error{Code: 403, Message: "Required 'compute.instances.create' permission"}); ok {
		t.Errorf("a permission error named a quota")
	}
}

// What an operator sees with gcloud is what preflight reads: gcloud's
// regions describe and project-info describe get the simulator's quotas.
func TestGcloudReadsQuotas(t *testing.T) {
	gs := newRecordedSim(t)
	g := newGcloud(t, gs.url)
	mig := gce.MIGSpec{Zone: zone, Name: "c1-h200", Template: "c1-h200-v1", BaseInstanceName: "c1-h200"}
	c, err := gce.New(t.Context(), project, option.WithEndpoint(gs.url), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.EnsureInstanceTemplate(t.Context(), flexSpec("c1-h200-v1"), rid("template")); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureMIG(t.Context(), mig, rid("mig")); err != nil {
		t.Fatal(err)
	}
	reads := g.runAll(
		[]string{"compute", "regions", "describe", "us-central1"},
		[]string{"compute", "project-info", "describe"},
	)
	quota := func(v any, metric string) (float64, bool) {
		qs, _ := at(one(t, v), "quotas").([]any)
		for _, q := range qs {
			if m, _ := q.(map[string]any); m["metric"] == metric {
				u, _ := m["usage"].(float64)
				return u, true
			}
		}
		return 0, false
	}
	if u, ok := quota(reads[0], "INSTANCE_GROUP_MANAGERS"); !ok || u != 1 {
		t.Errorf("gcloud compute regions describe: INSTANCE_GROUP_MANAGERS usage %v (listed %t), want 1", u, ok)
	}
	if u, ok := quota(reads[1], "INSTANCE_TEMPLATES"); !ok || u != 1 {
		t.Errorf("gcloud compute project-info describe: INSTANCE_TEMPLATES usage %v (listed %t), want 1", u, ok)
	}
}
