package computesim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
)

// Shortage makes queued resize requests wait for capacity or quota the way
// Compute Engine reports it: a request short of either does not fail. It
// stays ACCEPTED and carries the error of its latest provisioning attempt in
// status.lastAttempt.error, replaced at every attempt and cleared when the
// request turns SUCCEEDED, CANCELLED or FAILED; status.error is set only on
// the transition to FAILED (Compute v1 discovery document,
// InstanceGroupManagerResizeRequestStatus.lastAttempt and .error; "If you
// don't have enough quota … your resize request remains pending until you
// have sufficient quota",
// https://cloud.google.com/compute/docs/instance-groups/create-resize-requests-mig;
// https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig).
// Insert-time errors (rate limits, invalid arguments, permissions) are
// injected with Inject instead.
type Shortage struct {
	// Name identifies the shortage for ClearShortage; a shortage with the
	// name of an active one replaces it.
	Name string
	// Zone and MachineType select the requests short of capacity or quota
	// (by their MIG's zone and its template's machine type); "" matches
	// any.
	Zone, MachineType string
	// Code is the error code of each attempt: ZONE_RESOURCE_POOL_EXHAUSTED
	// (the default), ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS,
	// RESOURCE_POOL_EXHAUSTED, or QUOTA_EXCEEDED for a quota shortage.
	Code string
	// Message is the error message; the default is the one Compute writes
	// for the code.
	Message string
	// Metric and Limit describe a quota shortage's errorDetails.quotaInfo:
	// the quota metric (default compute.googleapis.com/preemptible_cpus,
	// the quota Flex-Start VMs count against) and its limit.
	Metric string
	Limit  float64
	// Until ends the shortage; zero: until ClearShortage.
	Until time.Time
}

// DefaultAttemptInterval is how often a queued request short of capacity or
// quota is attempted again when Options.AttemptInterval is zero.
const DefaultAttemptInterval = 5 * time.Minute

// SetShortage starts (or replaces, by name) a shortage. Requests already
// queued are attempted at their next due time.
func (s *Sim) SetShortage(sh Shortage) {
	if sh.Code == "" {
		sh.Code = "ZONE_RESOURCE_POOL_EXHAUSTED"
	}
	s.lockForWrite()
	defer s.mu.Unlock()
	s.advanceLocked(s.nowLocked())
	s.shortages = slices.DeleteFunc(s.shortages, func(o Shortage) bool { return o.Name == sh.Name })
	s.shortages = append(s.shortages, sh)
}

// ClearShortage ends the shortage of that name, if any; queued requests are
// provisioned at their next attempt.
func (s *Sim) ClearShortage(name string) {
	s.lockForWrite()
	defer s.mu.Unlock()
	s.advanceLocked(s.nowLocked())
	s.shortages = slices.DeleteFunc(s.shortages, func(o Shortage) bool { return o.Name == name })
}

// shortageLocked returns the first shortage in force at at for requests of
// MIG m.
func (s *Sim) shortageLocked(m *migRec, zone string, at time.Time) (Shortage, bool) {
	mt := lastSegment(s.migMachineTypeLocked(m))
	for _, sh := range s.shortages {
		if !sh.Until.IsZero() && !at.Before(sh.Until) {
			continue
		}
		if (sh.Zone == "" || sh.Zone == zone) && (sh.MachineType == "" || sh.MachineType == mt) {
			return sh, true
		}
	}
	return Shortage{}, false
}

// attemptLocked is one provisioning attempt of an ACCEPTED request whose
// capacity delay has passed: it provisions, or, short of capacity or quota,
// records the attempt's error in status.lastAttempt.error and tries again
// an attempt interval later (or when the shortage ends, if sooner).
func (s *Sim) attemptLocked(m *migRec, rr *rrRec, at time.Time) {
	// A regional MIG (ANY_SINGLE_ZONE) places the whole request in the
	// first of its zones with capacity: the zone its VMs are in, if it
	// has any, else any of its distribution zones (regional.go).
	var sh Shortage
	var short bool
	var e *computepb.Errors
	candidates := s.candidateZonesLocked(m)
	for i, z := range candidates {
		zsh, zshort := s.shortageLocked(m, z, at)
		if !zshort {
			m.place, short = z, false
			break
		}
		if i == 0 {
			sh, short = zsh, true
			e = s.shortageErrorLocked(m, z, zsh)
		}
		short = true
	}
	if !short {
		if e = s.gpuQuotaShortLocked(m, rr.count); e == nil {
			s.provisionLocked(m, rr, at)
			return
		}
	}
	rr.pb.Status = &computepb.InstanceGroupManagerResizeRequestStatus{
		LastAttempt: &computepb.InstanceGroupManagerResizeRequestStatusLastAttempt{
			Error: &computepb.Error{Errors: []*computepb.Errors{e}},
		},
	}
	every := s.opts.AttemptInterval
	if every <= 0 {
		every = DefaultAttemptInterval
	}
	next := at.Add(every)
	if !sh.Until.IsZero() && sh.Until.After(at) && sh.Until.Before(next) {
		next = sh.Until
	}
	rr.capacityAt = next
}

// shortageErrorLocked is the error of one attempt in the shapes Compute
// reports: a stock-out with errorDetails errorInfo{reason
// resource_availability, domain compute.googleapis.com, metadatas{zone,
// vmType, attachment, zonesAvailable}} beside help and localizedMessage, a
// quota error with errorDetails quotaInfo{metricName, limitName,
// dimensions, limit} (Compute v1 discovery document, ErrorDetails,
// ErrorInfo, QuotaExceededInfo; the same shapes as the errors gcloud
// prints for instances.insert).
func (s *Sim) shortageErrorLocked(m *migRec, zone string, sh Shortage) *computepb.Errors {
	mt := lastSegment(s.migMachineTypeLocked(m))
	msg := sh.Message
	if strings.Contains(sh.Code, "QUOTA") {
		metric := sh.Metric
		if metric == "" {
			metric = "compute.googleapis.com/preemptible_cpus"
		}
		quota := strings.ToUpper(strings.TrimPrefix(metric, "compute.googleapis.com/"))
		region := regionOf(zone)
		if msg == "" {
			msg = fmt.Sprintf("Quota '%s' exceeded.  Limit: %.1f in region %s.", quota, sh.Limit, region)
		}
		limit := sh.Limit
		return &computepb.Errors{Code: strp(sh.Code), Message: strp(msg), ErrorDetails: []*computepb.ErrorDetails{{
			QuotaInfo: &computepb.QuotaExceededInfo{
				MetricName: strp(metric),
				LimitName:  strp(strings.ReplaceAll(quota, "_", "-") + "-per-project-region"),
				Dimensions: map[string]string{"region": region},
				Limit:      &limit,
			},
		}}}
	}
	if msg == "" {
		msg = fmt.Sprintf("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", m.project, zone)
	}
	return &computepb.Errors{Code: strp(sh.Code), Message: strp(msg), ErrorDetails: []*computepb.ErrorDetails{
		{Help: &computepb.Help{Links: []*computepb.HelpLink{{
			Description: strp("Troubleshooting documentation"), Url: strp("https://cloud.google.com/compute/docs/resource-error"),
		}}}},
		{LocalizedMessage: &computepb.LocalizedMessage{Locale: strp("en-US"), Message: strp(fmt.Sprintf(
			"A %s VM instance is currently unavailable in the %s zone. Alternatively, you can try your request again with a different VM hardware configuration or at a later time. For more information, see the troubleshooting documentation.", mt, zone))}},
		{ErrorInfo: &computepb.ErrorInfo{
			Reason: strp("resource_availability"),
			Domain: strp("compute.googleapis.com"),
			Metadatas: map[string]string{
				"zone": zone, "vmType": mt, "attachment": "", "zonesAvailable": "",
			},
		}},
	}}
}
