package gce

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
)

// Quota is one entry of a region's or a project's quotas[] (Compute v1
// discovery document, schema Quota: metric, limit, usage).
type Quota struct {
	// Metric is the quota metric, e.g. INSTANCE_GROUP_MANAGERS or
	// PREEMPTIBLE_NVIDIA_H100_GPUS (Quota.metric; Compute returns it as a
	// string, and may return metrics newer than the enum of the discovery
	// document the client was built from).
	Metric string
	// Limit and Usage are the quota's limit and current usage.
	Limit, Usage float64
}

// QuotaSet is what regions.get or projects.get said of the quotas.
type QuotaSet struct {
	Quotas []Quota
	// Warning is Region.quotaStatusWarning, "CODE: message": set only when
	// Compute could not fetch the region's quotas, which it then answers
	// without (fail-open); "" otherwise.
	Warning string
}

// Find returns the quota of metric, if listed.
func (s QuotaSet) Find(metric string) (Quota, bool) {
	for _, q := range s.Quotas {
		if q.Metric == metric {
			return q, true
		}
	}
	return Quota{}, false
}

// QuotaClient reads a project's Compute quotas: regions.get and
// projects.get, which both return quotas[] (Compute v1 discovery document,
// Region.quotas and Project.quotas). It is for the operator's tools
// (preflight); the functions never read quotas. It is safe for concurrent
// use.
type QuotaClient struct {
	project  string
	regions  *compute.RegionsClient
	projects *compute.ProjectsClient
}

// NewQuotaClient creates the REST clients; opts as for New. The caller
// closes it.
func NewQuotaClient(ctx context.Context, project string, opts ...option.ClientOption) (*QuotaClient, error) {
	if project == "" {
		return nil, fmt.Errorf("creating compute quota client: empty project: %w", ErrInvalidSpec)
	}
	q := &QuotaClient{project: project}
	var err error
	if q.regions, err = compute.NewRegionsRESTClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("creating regions client: %w", err)
	}
	if q.projects, err = compute.NewProjectsRESTClient(ctx, opts...); err != nil {
		q.regions.Close()
		return nil, fmt.Errorf("creating projects client: %w", err)
	}
	return q, nil
}

// Close closes the underlying clients.
func (q *QuotaClient) Close() error {
	return errors.Join(q.regions.Close(), q.projects.Close())
}

// RegionQuotas returns the region's quotas (regions.get; needs
// compute.regions.get). Regional quotas include INSTANCE_GROUP_MANAGERS,
// CPUS, PREEMPTIBLE_CPUS and the per-model GPU quotas.
func (q *QuotaClient) RegionQuotas(ctx context.Context, region string) (QuotaSet, error) {
	r, err := q.regions.Get(ctx, &computepb.GetRegionRequest{Project: q.project, Region: region})
	if err != nil {
		return QuotaSet{}, fmt.Errorf("reading the quotas of region %s (regions.get): %w", region, mark(err))
	}
	out := QuotaSet{Quotas: quotas(r.GetQuotas())}
	if w := r.GetQuotaStatusWarning(); w != nil {
		out.Warning = strings.TrimPrefix(w.GetCode()+": "+w.GetMessage(), ": ")
	}
	return out, nil
}

// ProjectQuotas returns the project-wide quotas (projects.get; needs
// compute.projects.get), such as INSTANCE_TEMPLATES and GPUS_ALL_REGIONS.
func (q *QuotaClient) ProjectQuotas(ctx context.Context) (QuotaSet, error) {
	p, err := q.projects.Get(ctx, &computepb.GetProjectRequest{Project: q.project})
	if err != nil {
		return QuotaSet{}, fmt.Errorf("reading the quotas of project %s (projects.get): %w", q.project, mark(err))
	}
	return QuotaSet{Quotas: quotas(p.GetQuotas())}, nil
}

func quotas(in []*computepb.Quota) []Quota {
	out := make([]Quota, 0, len(in))
	for _, q := range in {
		out = append(out, Quota{Metric: q.GetMetric(), Limit: q.GetLimit(), Usage: q.GetUsage()})
	}
	return out
}

// QuotaInfo is the quota an error names: errorDetails[].quotaInfo
// (Compute v1 discovery document, ErrorDetails.quotaInfo, schema
// QuotaExceededInfo: metricName, limitName, dimensions, limit), or, when
// an error carries none, the quota its message names ("Quota 'CPUS'
// exceeded.  Limit: 24.0 in region us-central1."). The zero value names
// no quota.
type QuotaInfo struct {
	// Metric is the quota metric as Compute gave it: quotaInfo.metricName
	// (e.g. compute.googleapis.com/preemptible_nvidia_h100_gpus), or the
	// name in the message (PREEMPTIBLE_NVIDIA_H100_GPUS).
	Metric string
	// LimitName is quotaInfo.limitName, e.g.
	// PREEMPTIBLE-NVIDIA-H100-GPUS-per-project-region; "" when not given.
	LimitName string
	// Region is the region the quota applies to (dimensions.region, or
	// the message's "in region R"); "" for a project-wide quota or when not
	// given.
	Region string
	// Limit is the quota's limit, when HasLimit.
	Limit    float64
	HasLimit bool
}

// Name is the metric as regions.get and projects.get list it (and the
// Google Cloud console shows it): upper case, without the service prefix
// (compute.googleapis.com/preemptible_cpus → PREEMPTIBLE_CPUS).
func (q QuotaInfo) Name() string {
	m := q.Metric
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	return strings.ToUpper(m)
}

// String describes the quota for people, e.g. "PREEMPTIBLE_NVIDIA_H100_GPUS
// in region us-central1 (limit 8)"; "" for the zero value.
func (q QuotaInfo) String() string {
	if q.Metric == "" {
		return ""
	}
	s := q.Name()
	if q.Region != "" {
		s += " in region " + q.Region
	}
	if q.HasLimit {
		s += " (limit " + strconv.FormatFloat(q.Limit, 'f', -1, 64) + ")"
	}
	return s
}

// quotaMessage matches the quota named in Compute's QUOTA_EXCEEDED messages:
// "Quota 'NVIDIA_H100_GPUS' exceeded.  Limit: 8.0 in region us-central1."
var quotaMessage = regexp.MustCompile(`Quota '([A-Za-z0-9_./-]+)' exceeded\.(?:\s+Limit:\s+([0-9.]+)(?:\s+in region ([a-z0-9-]+))?)?`)

// quotaOfError returns the quota one Compute error item names: its
// errorDetails' quotaInfo, else its message.
func quotaOfError(e *computepb.Errors) (QuotaInfo, bool) {
	for _, d := range e.GetErrorDetails() {
		qi := d.GetQuotaInfo()
		if qi.GetMetricName() == "" {
			continue
		}
		out := QuotaInfo{Metric: qi.GetMetricName(), LimitName: qi.GetLimitName(), Region: qi.GetDimensions()["region"]}
		if qi.Limit != nil {
			out.Limit, out.HasLimit = qi.GetLimit(), true
		}
		if out.Region == "" {
			if m, ok := quotaOfMessage(e.GetMessage()); ok {
				out.Region = m.Region
			}
		}
		return out, true
	}
	return quotaOfMessage(e.GetMessage())
}

func quotaOfMessage(msg string) (QuotaInfo, bool) {
	m := quotaMessage.FindStringSubmatch(msg)
	if m == nil {
		return QuotaInfo{}, false
	}
	out := QuotaInfo{Metric: m[1], Region: m[3]}
	if m[2] != "" {
		if f, err := strconv.ParseFloat(m[2], 64); err == nil {
			out.Limit, out.HasLimit = f, true
		}
	}
	return out, true
}

// quotaOfErrors returns the first quota a list of error items names.
func quotaOfErrors(errs []*computepb.Errors) QuotaInfo {
	for _, e := range errs {
		if q, ok := quotaOfError(e); ok {
			return q
		}
	}
	return QuotaInfo{}
}

// QuotaOf returns the quota a failed call's error names, if any: an
// operation that ended with a quota error (its errorDetails' quotaInfo,
// else its message), or an HTTP error whose message names one. It reads
// what Compute said for people (status lines, alerts); decisions go by
// Classify.
func QuotaOf(err error) (QuotaInfo, bool) {
	if err == nil {
		return QuotaInfo{}, false
	}
	var oe *OperationError
	if errors.As(err, &oe) && oe.Quota.Metric != "" {
		return oe.Quota, true
	}
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		if q := ae.Details().QuotaFailure; q != nil {
			for _, v := range q.GetViolations() {
				if m, ok := quotaOfMessage(v.GetDescription()); ok {
					return m, true
				}
			}
		}
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		msgs := []string{ge.Message}
		for _, it := range ge.Errors {
			msgs = append(msgs, it.Message)
		}
		for _, m := range slices.Compact(msgs) {
			if q, ok := quotaOfMessage(m); ok {
				return q, true
			}
		}
	}
	if oe != nil {
		return quotaOfMessage(oe.Message)
	}
	return QuotaInfo{}, false
}
