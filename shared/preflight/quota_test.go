package preflight

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeQuotas answers from fixed sets, or fails.
type fakeQuotas struct {
	regions map[string]QuotaSet
	project QuotaSet
	err     error
	asked   []string
}

func (f *fakeQuotas) RegionQuotas(_ context.Context, region string) (QuotaSet, error) {
	f.asked = append(f.asked, region)
	return f.regions[region], f.err
}

func (f *fakeQuotas) ProjectQuotas(context.Context) (QuotaSet, error) {
	f.asked = append(f.asked, "project")
	return f.project, f.err
}

type row struct {
	Scope, Metric string
	Need, Unit    float64
	Verdict       Verdict
}

func rows(r *QuotaReport) []row {
	var out []row
	for _, c := range r.Checks {
		out = append(out, row{c.Scope(), c.Metric, c.Need, c.Unit, c.Verdict})
	}
	return out
}

func TestCheckQuotas(t *testing.T) {
	h100 := func(id string, max int) QuotaPool {
		return QuotaPool{ID: id, Region: "us-central1", MaxNodes: max, VCPUs: 208, GPUs: 8, Accelerator: "nvidia-h100-80gb"}
	}
	f := &fakeQuotas{
		regions: map[string]QuotaSet{
			"us-central1": {Quotas: []Quota{
				{MetricInstanceGroupManagers, 150, 140}, // 10 free, 12 needed
				{"PREEMPTIBLE_NVIDIA_H100_GPUS", 96, 0}, // 96 free, 96 needed
				{MetricPreemptibleCPUs, 100, 0},         // below one node's 208
			}},
			"europe-west4": {Warning: "QUOTA_INFO_UNAVAILABLE: quotas unavailable", Quotas: []Quota{{MetricInstanceGroupManagers, 100, 0}}},
		},
		project: QuotaSet{Quotas: []Quota{{MetricInstanceTemplates, 100, 99}, {MetricGPUsAllRegions, 1000, 0}}},
	}
	pools := []QuotaPool{
		h100("a3h", 10),
		h100("a3h2", 2),
		{ID: "a3u", Region: "europe-west4", MaxNodes: 3, VCPUs: 224, GPUs: 8, Accelerator: "nvidia-h200-141gb"},
	}
	r, err := CheckQuotas(context.Background(), f, pools)
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{"region us-central1", MetricResizeRequests, 12, 1, QuotaUnknown},
		{"region us-central1", MetricInstanceGroupManagers, 12, 1, QuotaWarning},
		{"region us-central1", "PREEMPTIBLE_NVIDIA_H100_GPUS", 96, 8, QuotaOK},
		{"region us-central1", MetricPreemptibleCPUs, 2496, 208, QuotaShort},
		{"region europe-west4", MetricResizeRequests, 3, 1, QuotaUnknown},
		{"region europe-west4", MetricInstanceGroupManagers, 3, 1, QuotaOK},
		{"region europe-west4", "PREEMPTIBLE_NVIDIA_H200_GPUS", 24, 8, QuotaUnknown},
		{"region europe-west4", MetricPreemptibleCPUs, 672, 224, QuotaUnknown},
		{"project", MetricGPUsAllRegions, 120, 8, QuotaOK},
		{"project", MetricInstanceTemplates, 6, 1, QuotaWarning},
	}
	if d := cmp.Diff(want, rows(r)); d != "" {
		t.Errorf("checks (-want +got):\n%s", d)
	}
	if r.Worst() != QuotaShort {
		t.Errorf("worst %s, want SHORT", r.Worst())
	}
	if d := cmp.Diff([]string{"us-central1", "europe-west4", "project"}, f.asked); d != "" {
		t.Errorf("reads (-want +got):\n%s", d)
	}

	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{
		"WARNING: INSTANCE_GROUP_MANAGERS in region us-central1: the spec's maximums could need 12 (a3h: 10, a3h2: 2), 10 free (limit 150, usage 140)",
		"WARNING: INSTANCE_TEMPLATES in project: the spec's maximums could need 6",
		"SHORT: PREEMPTIBLE_CPUS in region us-central1: limit 100 is below one node's 208 (a3h: 10 × 208, a3h2: 2 × 208)",
		"unknown: resize requests in flight in region us-central1 (need 12: a3h: 10, a3h2: 2): Compute lists no quota metric for resize requests",
		"unknown: PREEMPTIBLE_NVIDIA_H200_GPUS in region europe-west4 (need 24: a3u: 3 × 8): not listed by regions.get",
		"note: Compute could not read the quotas of region europe-west4: QUOTA_INFO_UNAVAILABLE: quotas unavailable",
		"  region us-central1   PREEMPTIBLE_NVIDIA_H100_GPUS             96          0         96         96  ok",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("report lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "PREEMPTIBLE_NVIDIA_H100_GPUS in region") {
		t.Errorf("a quota that holds the maximum is reported as a finding:\n%s", out)
	}
}

func TestCheckQuotasErrors(t *testing.T) {
	if _, err := CheckQuotas(context.Background(), &fakeQuotas{}, nil); !errors.Is(err, ErrNoPools) {
		t.Errorf("no pools: %v", err)
	}
	if _, err := CheckQuotas(context.Background(), &fakeQuotas{}, []QuotaPool{{ID: "x", MaxNodes: 1}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no region: %v", err)
	}
	denied := errors.New("403 compute.regions.get denied")
	if _, err := CheckQuotas(context.Background(), &fakeQuotas{err: denied}, []QuotaPool{{ID: "x", Region: "r1", MaxNodes: 1}}); !errors.Is(err, denied) {
		t.Errorf("read failure: %v", err)
	}
}

func TestGPUQuotaMetric(t *testing.T) {
	for acc, want := range map[string]string{
		"nvidia-h100-80gb":  "PREEMPTIBLE_NVIDIA_H100_GPUS",
		"nvidia-a100-80gb":  "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS",
		"nvidia-tesla-a100": "PREEMPTIBLE_NVIDIA_A100_GPUS",
		"nvidia-l4":         "PREEMPTIBLE_NVIDIA_L4_GPUS",
		"nvidia-tesla-t4":   "PREEMPTIBLE_NVIDIA_T4_GPUS",
		"tpu-v9":            "",
	} {
		if got := GPUQuotaMetric(acc); got != want {
			t.Errorf("GPUQuotaMetric(%q) = %q, want %q", acc, got, want)
		}
	}
}
