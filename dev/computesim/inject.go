package computesim

import (
	"fmt"
	"regexp"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// Match selects the calls an injected error applies to.
type Match struct {
	// Method is the HTTP method ("POST", "GET", "DELETE"); "" matches any.
	Method string
	// Path is a regular expression (RE2) matched against the URL path, e.g.
	// `/instanceGroupManagers/[^/]+/resizeRequests$`; "" matches any path.
	Path string
}

// Injection is an error the simulator returns instead of serving matching
// calls. Build one with InjectError, or fill it directly for Inject.
type Injection struct {
	// Match selects the calls that fail.
	Match Match
	// Status is the HTTP status: of the error response, or the operation's
	// httpErrorStatusCode when Code is set.
	Status int
	// Reason is errors[].reason of an HTTP error response (e.g. "invalid",
	// "rateLimitExceeded", "backendError").
	Reason string
	// Code, when set on a mutating call, makes the call succeed with an
	// operation that ends DONE with error.errors[{code: Code}] (e.g.
	// ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED) instead of an HTTP error.
	// Nothing changes state. Non-mutating calls always get an HTTP error.
	// A resize request short of capacity or quota does not fail at insert
	// on Compute: it queues, and each attempt's error shows in
	// status.lastAttempt.error; model that with SetShortage.
	Code string
	// Message is the error message; a default naming the injection is used
	// if empty.
	Message string
	// QuotaMetric and QuotaLimit describe a quota error (Code or Reason
	// naming a quota: QUOTA_EXCEEDED, quotaExceeded): its
	// errorDetails[].quotaInfo and message name the metric (default
	// PREEMPTIBLE_CPUS, which Flex-Start VMs count against) in the call's
	// region, as Compute's quota errors do (quotas.go).
	QuotaMetric string
	QuotaLimit  float64
	// Times is how many matching calls fail; ≤ 0 means every matching call
	// until ClearInjections.
	Times int

	re *regexp.Regexp
}

// InjectError makes the next times calls matching match fail (times ≤ 0:
// every matching call until ClearInjections). With code == "" the call gets
// an HTTP error response with the given status and reason, e.g. 429
// "rateLimitExceeded" or 503 "backendError". With code set, a mutating call
// returns an operation that ends DONE with error.errors[{code}] and
// httpErrorStatusCode status, e.g. 503 "ZONE_RESOURCE_POOL_EXHAUSTED" or 403
// "QUOTA_EXCEEDED". Injections are checked in the order they were added,
// after request-ID deduplication and before validation. It panics if
// match.Path is not a valid regular expression.
func (s *Sim) InjectError(match Match, status int, reason, code string, times int) {
	s.Inject(Injection{Match: match, Status: status, Reason: reason, Code: code, Times: times})
}

// Inject adds an injection; see InjectError. It panics if inj.Match.Path is
// not a valid regular expression.
func (s *Sim) Inject(inj Injection) {
	inj.re = regexp.MustCompile(inj.Match.Path)
	if inj.Status == 0 {
		inj.Status = 500
	}
	s.lockForWrite()
	defer s.mu.Unlock()
	s.injections = append(s.injections, &inj)
}

// ClearInjections removes every pending injection.
func (s *Sim) ClearInjections() {
	s.lockForWrite()
	defer s.mu.Unlock()
	s.injections = nil
}

// injectionMatchesLocked reports whether an injection matches the call.
func (s *Sim) injectionMatchesLocked(method, path string) bool {
	for _, inj := range s.injections {
		if (inj.Match.Method == "" || strings.EqualFold(inj.Match.Method, method)) && inj.re.MatchString(path) {
			return true
		}
	}
	return false
}

// errLeftToHTTP answers a direct call that an injection matches.
var errLeftToHTTP = &apiError{code: 500, reason: "internalError", status: "INTERNAL", message: "computesim: call left to HTTP"}

// takeInjectionLocked returns the first injection matching the call and
// consumes one of its uses.
func (s *Sim) takeInjectionLocked(method, path string) *Injection {
	for i, inj := range s.injections {
		if inj.Match.Method != "" && !strings.EqualFold(inj.Match.Method, method) {
			continue
		}
		if !inj.re.MatchString(path) {
			continue
		}
		out := *inj
		if inj.Times > 0 {
			inj.Times--
			if inj.Times == 0 {
				s.injections = append(s.injections[:i:i], s.injections[i+1:]...)
			}
		}
		return &out
	}
	return nil
}

// injectedLocked produces the injected failure for req.
func (s *Sim) injectedLocked(req *request, inj *Injection) (proto.Message, *apiError) {
	msg := inj.Message
	if inj.Code != "" && req.mutating() {
		if msg == "" {
			msg = fmt.Sprintf("computesim: injected %s", inj.Code)
		}
		var q *computepb.Errors
		if isQuotaCode(inj.Code) {
			q = injectedQuota(req, inj)
			if inj.Message == "" {
				msg = q.GetMessage()
			}
		}
		op := s.newOpLocked(req.project, req.zone, opTypeOf(req.method), link(targetOf(req)), 0,
			s.callerPrincipal(req.project), req.now)
		failOp(op, inj.Status, inj.Code, msg)
		if q != nil {
			op.Error.Errors[0].ErrorDetails = q.GetErrorDetails()
		}
		return op, nil
	}
	reason := inj.Reason
	if reason == "" {
		reason = inj.Code
	}
	if msg == "" && isQuotaCode(reason) {
		msg = injectedQuota(req, inj).GetMessage()
	}
	if msg == "" {
		msg = fmt.Sprintf("computesim: injected %d %s", inj.Status, reason)
	}
	e := &apiError{code: inj.Status, reason: reason, message: msg}
	// The Google front end reports throttling and availability errors with a
	// canonical status.
	if inj.Status == 401 || inj.Status == 403 || inj.Status == 429 || inj.Status >= 500 {
		e.status = canonicalStatus(inj.Status)
	}
	return nil, e
}

// opTypeOf is Operation.operationType for a Compute method.
func opTypeOf(method string) string {
	switch baseMethod(method) {
	case "instanceTemplates.insert", "instanceGroupManagers.insert":
		return "insert"
	case "instanceTemplates.delete", "instanceGroupManagers.delete", "instances.delete":
		return "delete"
	case "instances.start":
		return "start"
	}
	return "compute." + method
}

// targetOf is the relative path of the resource a call acts on.
func targetOf(req *request) string {
	switch method := baseMethod(req.method); {
	case strings.HasPrefix(req.method, "instanceTemplates."):
		if req.name == "" {
			return "projects/" + req.project + "/global/instanceTemplates"
		}
		return templateKey(req.project, req.name)
	case strings.HasPrefix(method, "instanceGroupManagerResizeRequests."):
		base := migKey(req.project, req.zone, req.name) + "/resizeRequests"
		if req.rr != "" {
			return base + "/" + req.rr
		}
		return base
	case strings.HasPrefix(method, "instanceGroupManagers."):
		if req.name == "" {
			return "projects/" + req.project + "/" + scopeOf(req.zone) + "/instanceGroupManagers"
		}
		return migKey(req.project, req.zone, req.name)
	case strings.HasPrefix(req.method, "instances."):
		return instanceKey(req.project, req.zone, req.name)
	}
	return "projects/" + req.project
}

// isQuotaCode reports whether an injected code or reason is a quota error.
func isQuotaCode(code string) bool {
	return strings.Contains(strings.ToUpper(code), "QUOTA")
}

// injectedQuota is the quota error item of an injected quota failure.
func injectedQuota(req *request, inj *Injection) *computepb.Errors {
	metric := inj.QuotaMetric
	if metric == "" {
		metric = "PREEMPTIBLE_CPUS"
	}
	region := ""
	if req.zone != "" {
		region = regionOf(req.zone)
	}
	return quotaErrorItem(metric, region, inj.QuotaLimit)
}
