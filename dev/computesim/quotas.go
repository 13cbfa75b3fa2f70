package computesim

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// Quotas. regions.get and projects.get return quotas[]{metric, limit,
// usage} (Compute v1 discovery document, Region.quotas, Project.quotas).
// The simulator lists the metrics whose usage it can compute from what it
// holds; the limits come from Options.Quotas, else DefaultQuotaLimit. A
// metric set in Options.Quotas is also enforced, the way Compute refuses
// or queues work past a quota:
//   - instanceGroupManagers.insert past INSTANCE_GROUP_MANAGERS (per
//     region) and instanceTemplates.insert past INSTANCE_TEMPLATES (per
//     project) end DONE with a QUOTA_EXCEEDED error;
//   - a resize request whose VMs would take a GPU quota past its limit
//     (the per-model regional quota, PREEMPTIBLE_ for Flex-Start and Spot
//     VMs, or GPUS_ALL_REGIONS) does not fail: it stays queued and each
//     attempt reports QUOTA_EXCEEDED in status.lastAttempt.error, until
//     the usage falls ("If you don't have enough quota … your resize
//     request remains pending until you have sufficient quota",
//     https://cloud.google.com/compute/docs/instance-groups/create-resize-requests-mig).
//
// Every quota error carries errorDetails[].quotaInfo{metricName,
// limitName, dimensions, limit} (Compute v1 discovery document,
// ErrorDetails.quotaInfo, schema QuotaExceededInfo) and the message
// Compute writes ("Quota 'CPUS' exceeded.  Limit: 24.0 in region
// us-central1.").

// DefaultQuotaLimit is the limit regions.get and projects.get report for a
// metric that Options.Quotas does not set; such a metric is not enforced.
const DefaultQuotaLimit = 1000

// Quota metrics the simulator computes (names as in the Compute v1
// discovery document's Quota.metric enum, where listed).
const (
	QuotaInstanceGroupManagers = "INSTANCE_GROUP_MANAGERS" // per region: zonal MIGs of its zones
	QuotaInstances             = "INSTANCES"               // per region: VMs of its zones
	QuotaInstanceTemplates     = "INSTANCE_TEMPLATES"      // per project: global instance templates
	QuotaGPUsAllRegions        = "GPUS_ALL_REGIONS"        // per project: every VM's GPUs
)

// gpuQuotaMetrics maps a Compute accelerator type to its regional GPU quota
// metric; Flex-Start and Spot VMs count against the metric with the
// PREEMPTIBLE_ prefix (Flex-Start VMs "consume preemptible quota":
// https://cloud.google.com/blog/products/compute/introducing-flex-start-vms-for-the-compute-engine-instance-api).
// The simulator's own table, kept apart from flexslurm's.
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

// preemptibleModel reports whether VMs of the provisioning model count
// against preemptible quotas.
func preemptibleModel(model string) bool { return model == "FLEX_START" || model == "SPOT" }

// gpuUse is the GPUs one VM of a machine type and template properties
// takes: its regional quota metric and count (metric "" for none).
func gpuUse(machineType string, props *computepb.InstanceProperties) (string, int) {
	acc, n := "", 0
	if shape, ok := acceleratorOptimized[lastSegment(machineType)]; ok {
		acc, n = shape.accelerator, shape.count
	}
	for _, a := range props.GetGuestAccelerators() {
		acc, n = lastSegment(a.GetAcceleratorType()), int(a.GetAcceleratorCount())
	}
	metric := gpuQuotaMetrics[acc]
	if metric == "" || n == 0 {
		return "", 0
	}
	if preemptibleModel(props.GetScheduling().GetProvisioningModel()) || props.GetScheduling().GetPreemptible() {
		metric = "PREEMPTIBLE_" + metric
	}
	return metric, n
}

func regionOf(zone string) string {
	if isRegionName(zone) {
		return zone // a regional MIG's location
	}
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		return zone[:i]
	}
	return zone
}

// quotaUsageLocked computes the usage of every metric the simulator knows,
// for region ("" for the project-wide metrics).
func (s *Sim) quotaUsageLocked(project, region string) map[string]float64 {
	use := map[string]float64{}
	if region == "" {
		use[QuotaInstanceTemplates] = 0
		use[QuotaGPUsAllRegions] = 0
		for _, t := range s.templates {
			if t.project == project {
				use[QuotaInstanceTemplates]++
			}
		}
		for _, in := range s.instances {
			if in.project == project {
				_, n := s.instanceGPUsLocked(in)
				use[QuotaGPUsAllRegions] += float64(n)
			}
		}
		return use
	}
	use[QuotaInstanceGroupManagers] = 0
	use[QuotaInstances] = 0
	for _, m := range gpuQuotaMetrics {
		use[m], use["PREEMPTIBLE_"+m] = 0, 0
	}
	for _, m := range s.migs {
		if m.project == project && regionOf(m.zone) == region {
			use[QuotaInstanceGroupManagers]++
		}
	}
	for _, in := range s.instances {
		if in.project != project || regionOf(in.zone) != region {
			continue
		}
		use[QuotaInstances]++
		if metric, n := s.instanceGPUsLocked(in); metric != "" {
			use[metric] += float64(n)
		}
	}
	return use
}

// instanceGPUsLocked is the GPU quota metric and count a VM takes.
func (s *Sim) instanceGPUsLocked(in *instanceRec) (string, int) {
	p := in.pb
	return gpuUse(p.GetMachineType(), &computepb.InstanceProperties{
		GuestAccelerators: p.GetGuestAccelerators(),
		Scheduling:        p.GetScheduling(),
	})
}

// quotaLimit is the limit of metric and whether Options.Quotas sets it
// (then it is enforced).
func (s *Sim) quotaLimit(metric string) (float64, bool) {
	if l, ok := s.opts.Quotas[metric]; ok {
		return l, true
	}
	return DefaultQuotaLimit, false
}

func (s *Sim) quotaListLocked(project, region string) []*computepb.Quota {
	use := s.quotaUsageLocked(project, region)
	metrics := make([]string, 0, len(use))
	for m := range use {
		metrics = append(metrics, m)
	}
	slices.Sort(metrics)
	out := make([]*computepb.Quota, 0, len(metrics))
	for _, m := range metrics {
		if slices.Contains(s.opts.UnlistedQuotas, m) || !listableMetric(m) {
			continue
		}
		limit, _ := s.quotaLimit(m)
		out = append(out, &computepb.Quota{Metric: strp(m), Limit: proto.Float64(limit), Usage: proto.Float64(use[m])})
	}
	return out
}

// listableMetric reports whether the discovery document's Quota.metric
// enum has metric: the simulator answers nothing the schema does not allow.
// NVIDIA_H100_GPUS, NVIDIA_H100_MEGA_GPUS, NVIDIA_H200_GPUS and
// NVIDIA_B200_GPUS (and their PREEMPTIBLE_ forms, but for
// PREEMPTIBLE_NVIDIA_H100_GPUS) are not in it, so those quotas are never
// listed; set in Options.Quotas they are still enforced.
func listableMetric(m string) bool {
	q := apiContract().Schemas["Quota"]
	if q == nil || q.Properties["metric"] == nil {
		return false
	}
	return slices.Contains(q.Properties["metric"].Enum, m)
}

// regionGetLocked serves regions.get for any well-formed region name (the
// simulator has no region catalog), UP, with its quotas.
func (s *Sim) regionGetLocked(req *request) (proto.Message, *apiError) {
	if !regionName.MatchString(req.name) {
		return nil, errInvalidField("region", req.name, "Unknown region.")
	}
	var zones []string
	for _, z := range []string{"a", "b", "c", "f"} {
		zones = append(zones, link("projects/"+req.project+"/zones/"+req.name+"-"+z))
	}
	return &computepb.Region{
		Kind:              strp("compute#region"),
		Id:                u64p(1000),
		Name:              strp(req.name),
		Description:       strp(req.name),
		Status:            strp("UP"),
		Zones:             zones,
		Quotas:            s.quotaListLocked(req.project, req.name),
		SelfLink:          strp(link("projects/" + req.project + "/regions/" + req.name)),
		CreationTimestamp: strp("1969-12-31T16:00:00.000-08:00"),
	}, nil
}

// projectGetLocked serves projects.get with the project-wide quotas.
func (s *Sim) projectGetLocked(req *request) (proto.Message, *apiError) {
	return &computepb.Project{
		Kind:                  strp("compute#project"),
		Id:                    u64p(4000),
		Name:                  strp(req.project),
		Quotas:                s.quotaListLocked(req.project, ""),
		SelfLink:              strp(link("projects/" + req.project)),
		CreationTimestamp:     strp("1969-12-31T16:00:00.000-08:00"),
		DefaultServiceAccount: strp(s.opts.ProjectNumber + "-compute@developer.gserviceaccount.com"),
	}, nil
}

// regionName matches region names such as us-central1.
var regionName = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+$`)

// quotaErrorItem is one QUOTA_EXCEEDED error item as Compute writes it.
// region "" is a project-wide quota.
func quotaErrorItem(metric, region string, limit float64) *computepb.Errors {
	var msg string
	dims := map[string]string{}
	limitName := strings.ReplaceAll(metric, "_", "-") + "-per-project"
	if region != "" {
		msg = fmt.Sprintf("Quota '%s' exceeded.  Limit: %.1f in region %s.", metric, limit, region)
		dims["region"] = region
		limitName += "-region"
	} else {
		msg = fmt.Sprintf("Quota '%s' exceeded.  Limit: %.1f globally.", metric, limit)
	}
	l := limit
	return &computepb.Errors{Code: strp("QUOTA_EXCEEDED"), Message: strp(msg), ErrorDetails: []*computepb.ErrorDetails{{
		QuotaInfo: &computepb.QuotaExceededInfo{
			MetricName: strp("compute.googleapis.com/" + strings.ToLower(metric)),
			LimitName:  strp(limitName),
			Dimensions: dims, // none for a project-wide quota
			Limit:      &l,
		},
	}}}
}

// quotaRefusalLocked returns the quota error an insert that adds one unit
// of metric (in region; "" project-wide) meets, or nil.
func (s *Sim) quotaRefusalLocked(project, region, metric string) *computepb.Errors {
	limit, enforced := s.quotaLimit(metric)
	if !enforced {
		return nil
	}
	if s.quotaUsageLocked(project, region)[metric]+1 > limit {
		return quotaErrorItem(metric, region, limit)
	}
	return nil
}

// refusedOpLocked is the operation of an insert refused for quota: DONE
// with the error, HTTP 403 as Compute reports quota errors of operations.
func (s *Sim) refusedOpLocked(req *request, target string, e *computepb.Errors) *computepb.Operation {
	op := s.newOpLocked(req.project, req.zone, "insert", link(target), 0, s.callerPrincipal(req.project), req.now)
	failOp(op, 403, e.GetCode(), e.GetMessage())
	op.Error.Errors[0].ErrorDetails = e.ErrorDetails
	return op
}

// gpuQuotaShortLocked returns the quota error a resize request of MIG m for
// n VMs meets when its VMs' GPUs would exceed an enforced GPU quota, or
// nil.
func (s *Sim) gpuQuotaShortLocked(m *migRec, n int) *computepb.Errors {
	t := s.templates[m.templateKey]
	if t == nil {
		return nil
	}
	props := t.pb.GetProperties()
	metric, per := gpuUse(props.GetMachineType(), props)
	if metric == "" {
		return nil
	}
	need := float64(per * n)
	region := regionOf(m.zone)
	if limit, enforced := s.quotaLimit(metric); enforced && s.quotaUsageLocked(m.project, region)[metric]+need > limit {
		return quotaErrorItem(metric, region, limit)
	}
	if limit, enforced := s.quotaLimit(QuotaGPUsAllRegions); enforced && s.quotaUsageLocked(m.project, "")[QuotaGPUsAllRegions]+need > limit {
		return quotaErrorItem(QuotaGPUsAllRegions, "", limit)
	}
	return nil
}
