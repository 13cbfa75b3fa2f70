package preflight

// Quotas before they bite. flexslurm makes one managed instance group and
// one resize request for every request for capacity, and at worst one node
// per request, so a spec's Flex-Start pools at their maximums can hold
// about sum(max_node_count) MIGs and resize requests at once, and
// max_node_count × (GPUs, vCPUs per VM) of each pool's quotas. CheckQuotas
// reads the quotas Compute reports and says where those maximums could
// exceed what is free.
//
// Where the quotas are read (Compute v1 discovery document:
// https://www.googleapis.com/discovery/v1/apis/compute/v1/rest, schemas
// Region, Project and Quota, whose metric enum names every quota below
// that it lists):
//   - regions.get returns the regional quotas[]{metric, limit, usage}:
//     INSTANCE_GROUP_MANAGERS (zonal MIGs of the region's zones),
//     PREEMPTIBLE_CPUS, and the per-model GPU quotas such as
//     PREEMPTIBLE_NVIDIA_H100_GPUS;
//   - projects.get returns the project-wide quotas: INSTANCE_TEMPLATES
//     (global instance templates) and GPUS_ALL_REGIONS.
//
// Flex-Start VMs consume preemptible quota
// (https://cloud.google.com/blog/products/compute/introducing-flex-start-vms-for-the-compute-engine-instance-api),
// so a Flex-Start pool counts against the PREEMPTIBLE_ form of its GPU
// quota and against PREEMPTIBLE_CPUS.
//
// Resize requests in flight: the discovery document's Quota.metric enum
// has no metric for them, and no Google page read names one (a third-party
// summary mentions about 100 active requests per project), so the check
// reports that need with no limit, as unknown. The GPU quotas of the newest
// models (H100 Mega, H200, B200) are not in that enum either; the names
// used here (NVIDIA_H100_MEGA_GPUS, NVIDIA_H200_GPUS, NVIDIA_B200_GPUS and
// their PREEMPTIBLE_ forms) follow the pattern of the listed ones and are
// not confirmed by a Google page read. When regions.get does not list a
// metric the check reports it as unknown and points to the console's
// Quotas page, where the quota is shown whatever its name.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Quota metrics the check reads.
const (
	MetricInstanceGroupManagers = "INSTANCE_GROUP_MANAGERS"
	MetricInstanceTemplates     = "INSTANCE_TEMPLATES"
	MetricPreemptibleCPUs       = "PREEMPTIBLE_CPUS"
	MetricGPUsAllRegions        = "GPUS_ALL_REGIONS"
	// MetricResizeRequests names the need for resize requests in flight,
	// for which Compute lists no quota metric.
	MetricResizeRequests = "resize requests in flight"
)

// gpuQuotaMetrics maps a Compute accelerator type to its regional GPU quota
// metric (Compute v1 discovery document, Quota.metric; for the models that
// enum lacks, the same pattern, unconfirmed). Flex-Start pools count
// against "PREEMPTIBLE_" + the metric.
var gpuQuotaMetrics = map[string]string{
	"nvidia-b200":           "NVIDIA_B200_GPUS",
	"nvidia-h200-141gb":     "NVIDIA_H200_GPUS",
	"nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA_GPUS",
	"nvidia-h100-80gb":      "NVIDIA_H100_GPUS",
	"nvidia-tesla-a100":     "NVIDIA_A100_GPUS",
	"nvidia-a100-80gb":      "NVIDIA_A100_80GB_GPUS",
	"nvidia-l4":             "NVIDIA_L4_GPUS",
	"nvidia-tesla-t4":       "NVIDIA_T4_GPUS",
	"nvidia-tesla-v100":     "NVIDIA_V100_GPUS",
	"nvidia-tesla-p100":     "NVIDIA_P100_GPUS",
	"nvidia-tesla-p4":       "NVIDIA_P4_GPUS",
}

// GPUQuotaMetric returns the regional quota metric a Flex-Start VM's GPUs
// of the accelerator type count against, e.g. nvidia-h100-80gb →
// PREEMPTIBLE_NVIDIA_H100_GPUS; "" for an accelerator the table lacks.
func GPUQuotaMetric(accelerator string) string {
	if m, ok := gpuQuotaMetrics[accelerator]; ok {
		return "PREEMPTIBLE_" + m
	}
	return ""
}

// Quota is one quota as Compute reports it.
type Quota struct {
	Metric       string
	Limit, Usage float64
}

// QuotaSet is the quotas of one region, or of the project.
type QuotaSet struct {
	Quotas []Quota
	// Warning is Region.quotaStatusWarning: Compute could not fetch the
	// region's quotas and answered without them.
	Warning string
}

// QuotaReader reads a project's Compute quotas (shared/gce's QuotaClient,
// adapted).
type QuotaReader interface {
	// RegionQuotas is regions.get's quotas[].
	RegionQuotas(ctx context.Context, region string) (QuotaSet, error)
	// ProjectQuotas is projects.get's quotas[].
	ProjectQuotas(ctx context.Context) (QuotaSet, error)
}

// QuotaPool is one Flex-Start pool at its maximum.
type QuotaPool struct {
	ID string
	// Region is the region of the pool's zone.
	Region string
	// MaxNodes is scaling_spec.max_node_count.
	MaxNodes int
	// VCPUs and GPUs are each VM's vCPUs and GPUs; Accelerator is the
	// GPUs' Compute accelerator type ("" for none).
	VCPUs, GPUs int
	Accelerator string
}

// Verdict is what one quota means for the spec.
type Verdict int

// Verdicts, from best to worst.
const (
	// QuotaOK: what is free covers the spec's maximum.
	QuotaOK Verdict = iota
	// QuotaUnknown: Compute lists no such quota (resize requests in flight;
	// GPU quotas regions.get does not report).
	QuotaUnknown
	// QuotaWarning: the spec's maximum could exceed what is free (limit −
	// usage): requests past it are refused or queue, and the pool backs
	// off with a condition naming the quota.
	QuotaWarning
	// QuotaShort: the limit cannot hold even one node of a pool: the pool
	// can never get a VM until the quota is raised.
	QuotaShort
)

func (v Verdict) String() string {
	switch v {
	case QuotaOK:
		return "ok"
	case QuotaUnknown:
		return "unknown"
	case QuotaWarning:
		return "WARNING"
	case QuotaShort:
		return "SHORT"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// QuotaCheck is the finding for one quota.
type QuotaCheck struct {
	// Region is the quota's region; "" for a project-wide quota.
	Region string
	Metric string
	// Listed reports whether Compute listed the metric; Limit and Usage
	// are its values then.
	Listed       bool
	Limit, Usage float64
	// Need is what the spec's Flex-Start pools could take at their
	// maximums; Unit is one node's smallest need (to hold at least one
	// node of some pool).
	Need, Unit float64
	// Why says where Need comes from, e.g. "a3h: 10 nodes × 8".
	Why     string
	Verdict Verdict
	// Note explains an unknown verdict.
	Note string
}

// Free is the quota's limit minus its usage.
func (c QuotaCheck) Free() float64 { return c.Limit - c.Usage }

// Scope names the quota's scope for people: "region R" or "project".
func (c QuotaCheck) Scope() string {
	if c.Region == "" {
		return "project"
	}
	return "region " + c.Region
}

// QuotaReport is the outcome of CheckQuotas.
type QuotaReport struct {
	Checks []QuotaCheck
	// Warnings are quotaStatusWarning texts, "region R: CODE: message".
	Warnings []string
}

// Worst is the worst verdict of the report.
func (r *QuotaReport) Worst() Verdict {
	w := QuotaOK
	for _, c := range r.Checks {
		w = max(w, c.Verdict)
	}
	return w
}

// ErrNoPools: CheckQuotas got no Flex-Start pool to check.
var ErrNoPools = errors.New("no Flex-Start pool to check quotas for")

// need accumulates one quota's need.
type need struct {
	region, metric string
	total, unit    float64
	why            []string
}

// CheckQuotas reads the quotas of every region of the pools and of the
// project, and reports, per quota this layout consumes, its limit, usage,
// what the pools could need at their maximums, and the verdict.
func CheckQuotas(ctx context.Context, q QuotaReader, pools []QuotaPool) (*QuotaReport, error) {
	if len(pools) == 0 {
		return nil, ErrNoPools
	}
	var needs []*need
	add := func(region, metric string, perNode, nodes int, pool string) {
		if perNode <= 0 || nodes <= 0 {
			return
		}
		i := slices.IndexFunc(needs, func(n *need) bool { return n.region == region && n.metric == metric })
		if i < 0 {
			needs = append(needs, &need{region: region, metric: metric, unit: math.Inf(1)})
			i = len(needs) - 1
		}
		n := needs[i]
		n.total += float64(perNode * nodes)
		n.unit = min(n.unit, float64(perNode))
		if perNode == 1 {
			n.why = append(n.why, fmt.Sprintf("%s: %d", pool, nodes))
		} else {
			n.why = append(n.why, fmt.Sprintf("%s: %d × %d", pool, nodes, perNode))
		}
	}
	var regions []string
	for _, p := range pools {
		if p.Region == "" {
			return nil, fmt.Errorf("%w: pool %s has no region", ErrInvalid, p.ID)
		}
		if !slices.Contains(regions, p.Region) {
			regions = append(regions, p.Region)
		}
		// One resize request and one MIG per node at worst.
		add(p.Region, MetricResizeRequests, 1, p.MaxNodes, p.ID)
		add(p.Region, MetricInstanceGroupManagers, 1, p.MaxNodes, p.ID)
		if p.GPUs > 0 {
			metric := GPUQuotaMetric(p.Accelerator)
			if metric == "" {
				metric = "PREEMPTIBLE GPUs of " + p.Accelerator
			}
			add(p.Region, metric, p.GPUs, p.MaxNodes, p.ID)
			add("", MetricGPUsAllRegions, p.GPUs, p.MaxNodes, p.ID)
		}
		add(p.Region, MetricPreemptibleCPUs, p.VCPUs, p.MaxNodes, p.ID)
		// One template per pool, and one more while VMs made before a
		// spec change still run on the old one.
		add("", MetricInstanceTemplates, 1, 2, p.ID)
	}

	// Regions in pool order, then the project.
	slices.SortStableFunc(needs, func(a, b *need) int {
		return slices.Index(append(slices.Clone(regions), ""), a.region) - slices.Index(append(slices.Clone(regions), ""), b.region)
	})
	r := &QuotaReport{}
	sets := map[string]QuotaSet{}
	for _, region := range regions {
		s, err := q.RegionQuotas(ctx, region)
		if err != nil {
			return nil, err
		}
		if s.Warning != "" {
			r.Warnings = append(r.Warnings, "region "+region+": "+s.Warning)
		}
		sets[region] = s
	}
	ps, err := q.ProjectQuotas(ctx)
	if err != nil {
		return nil, err
	}
	sets[""] = ps

	for _, n := range needs {
		c := QuotaCheck{Region: n.region, Metric: n.metric, Need: n.total, Unit: n.unit, Why: strings.Join(n.why, ", ")}
		if n.metric == MetricResizeRequests {
			c.Verdict = QuotaUnknown
			c.Note = "Compute lists no quota metric for resize requests (the v1 discovery document's Quota.metric enum has none); not checked"
			r.Checks = append(r.Checks, c)
			continue
		}
		i := slices.IndexFunc(sets[n.region].Quotas, func(q Quota) bool { return q.Metric == n.metric })
		if i < 0 {
			c.Verdict = QuotaUnknown
			c.Note = "not listed by " + map[bool]string{true: "projects.get", false: "regions.get"}[n.region == ""] +
				"; check it on the console's Quotas page (IAM & Admin > Quotas)"
			r.Checks = append(r.Checks, c)
			continue
		}
		got := sets[n.region].Quotas[i]
		c.Listed, c.Limit, c.Usage = true, got.Limit, got.Usage
		switch {
		case c.Limit < c.Unit:
			c.Verdict = QuotaShort
		case c.Need > c.Free():
			c.Verdict = QuotaWarning
		}
		r.Checks = append(r.Checks, c)
	}
	return r, nil
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Write prints the report: a table of every quota, then a line for each
// quota that could bite, naming its metric and scope.
func (r *QuotaReport) Write(w io.Writer) error {
	var b strings.Builder
	b.WriteString("quotas this layout consumes (one MIG and one resize request per node at worst; Flex-Start pools at max_node_count):\n")
	fmt.Fprintf(&b, "  %-20s %-32s %10s %10s %10s %10s  %s\n", "SCOPE", "METRIC", "LIMIT", "USAGE", "FREE", "NEED", "VERDICT")
	for _, c := range r.Checks {
		limit, usage, free := "-", "-", "-"
		if c.Listed {
			limit, usage, free = num(c.Limit), num(c.Usage), num(c.Free())
		}
		fmt.Fprintf(&b, "  %-20s %-32s %10s %10s %10s %10s  %s\n", c.Scope(), c.Metric, limit, usage, free, num(c.Need), c.Verdict)
	}
	for _, wmsg := range r.Warnings {
		fmt.Fprintf(&b, "note: Compute could not read the quotas of %s\n", wmsg)
	}
	for _, c := range r.Checks {
		switch c.Verdict {
		case QuotaShort:
			fmt.Fprintf(&b, "SHORT: %s in %s: limit %s is below one node's %s (%s): raise the quota, or the pool never gets a VM\n",
				c.Metric, c.Scope(), num(c.Limit), num(c.Unit), c.Why)
		case QuotaWarning:
			fmt.Fprintf(&b, "WARNING: %s in %s: the spec's maximums could need %s (%s), %s free (limit %s, usage %s); past it, requests are refused or queue and the pool backs off naming this quota\n",
				c.Metric, c.Scope(), num(c.Need), c.Why, num(c.Free()), num(c.Limit), num(c.Usage))
		case QuotaUnknown:
			fmt.Fprintf(&b, "unknown: %s in %s (need %s: %s): %s\n", c.Metric, c.Scope(), num(c.Need), c.Why, c.Note)
		}
	}
	b.WriteString("Usage counts whatever already runs in the project, this cluster's own VMs included.\n")
	_, err := io.WriteString(w, b.String())
	return err
}
