package probe

import (
	"fmt"
	"strings"
)

// Point is one open point of Compute Engine behaviour
// (docs/compute-contract.md, "Open points").
type Point string

// The open points the probe settles, in the order it prints them.
const (
	// PointTargetSizeWhileAccepted: may a MIG's target size change
	// (deleteInstances) while one of its resize requests is ACCEPTED?
	PointTargetSizeWhileAccepted Point = "target-size change while a request is ACCEPTED"
	// PointNamedRequests: which endpoint accepts a resize request that
	// names its VMs (instances[])?
	PointNamedRequests Point = "resize request naming its VMs"
	// PointRunEndAudit: how is a VM's deletion at the end of its run
	// duration logged?
	PointRunEndAudit Point = "audit entry at the end of a run"
	// PointLabelFilter: does a list filter on labels apply on the server?
	PointLabelFilter Point = "label filter of a list"
	// PointTargetSizeAtRunEnd: what is the MIG's targetSize after its VM
	// ended at its run duration?
	PointTargetSizeAtRunEnd Point = "MIG targetSize after a run ends"
)

// Points lists every point in order.
var Points = []Point{PointTargetSizeWhileAccepted, PointNamedRequests, PointRunEndAudit, PointLabelFilter, PointTargetSizeAtRunEnd}

// Outcomes. Each settled verdict has one; NotSettled is the outcome of a
// point the run could not observe.
const (
	NotSettled = "not settled"

	Refused = "refused" // PointTargetSizeWhileAccepted
	Allowed = "allowed"

	NamedOnV1       = "v1"        // PointNamedRequests: v1 accepts instances[]
	NamedOnBetaOnly = "beta only" // v1 refuses, beta accepts
	NamedNowhere    = "neither"   // both refuse

	AuditDeferredDelete = "deferredDelete" // PointRunEndAudit: system event compute.instances.deferredDelete
	AuditMIGDelete      = "migDelete"      // a versioned …compute.instances.delete by the cloudservices account
	AuditBoth           = "both"

	FilterHonoured = "honoured" // PointLabelFilter
	FilterIgnored  = "ignored"

	TargetSizeKept        = "kept" // PointTargetSizeAtRunEnd
	TargetSizeDecremented = "decremented"
)

// Verdict is what the probe concluded about one point.
type Verdict struct {
	Point   Point
	Outcome string
	// Evidence says what was observed.
	Evidence string
	// Hint, for a point not settled, says what to do about it.
	Hint string
}

// Settled reports whether the point was settled.
func (v Verdict) Settled() bool { return v.Outcome != "" && v.Outcome != NotSettled }

func notSettled(p Point, evidence, hint string) Verdict {
	return Verdict{Point: p, Outcome: NotSettled, Evidence: evidence, Hint: hint}
}

// TargetSizeObservation is what the probe saw around its target-size call
// (deleteInstances of a running VM of a MIG that also holds a second
// resize request).
type TargetSizeObservation struct {
	// Before and After are the second request's states read just before
	// and just after the call.
	Before, After string
	// CallErr is the call's error: a *Refusal is Compute's answer.
	CallErr error
	// Retried is true when the call was made again after the second
	// request was cancelled; RetryErr is that call's error.
	Retried  bool
	RetryErr error
	// NoVM explains why no call was made (no VM to release); "" if one was.
	NoVM string
}

// DecideTargetSize settles PointTargetSizeWhileAccepted. A refusal counts
// only when the request was ACCEPTED before the call and the same call was
// accepted once the request was cancelled; an acceptance counts only when
// the request was ACCEPTED both before and after the call. Anything else
// is not settled, never a guess.
func DecideTargetSize(o TargetSizeObservation) Verdict {
	const p = PointTargetSizeWhileAccepted
	const hint = "run the probe again (capacity came too fast or too slow), or in a zone or machine type with other capacity"
	if o.NoVM != "" {
		return notSettled(p, o.NoVM, hint)
	}
	if o.Before != "ACCEPTED" {
		return notSettled(p, fmt.Sprintf("the second request was %s, not ACCEPTED, when deleteInstances was due", o.Before), hint)
	}
	if o.CallErr == nil {
		if o.After == "ACCEPTED" {
			return Verdict{Point: p, Outcome: Allowed, Evidence: "deleteInstances succeeded while the MIG's other request stayed ACCEPTED"}
		}
		return notSettled(p, fmt.Sprintf("deleteInstances succeeded, but the other request was %s after it: it may have left ACCEPTED first", o.After), hint)
	}
	if !IsRefusal(o.CallErr) {
		return notSettled(p, "deleteInstances failed without an answer from Compute: "+o.CallErr.Error(), hint)
	}
	switch {
	case !o.Retried:
		return notSettled(p, "deleteInstances was refused, and could not be tried again without the other request: "+o.CallErr.Error(), hint)
	case o.RetryErr != nil:
		return notSettled(p, "deleteInstances was refused, also once the other request was cancelled (another cause): "+o.CallErr.Error()+"; then: "+o.RetryErr.Error(), hint)
	}
	return Verdict{Point: p, Outcome: Refused, Evidence: "deleteInstances refused while the other request was ACCEPTED (" + o.CallErr.Error() + "), accepted once it was cancelled"}
}

// DecideNamedRequests settles PointNamedRequests from the answers of the
// v1 and beta inserts of a request with instances[] (betaErr is ignored
// when v1 accepted; beta is not tried then). An error that is not a
// *Refusal is no answer.
func DecideNamedRequests(v1Err, betaErr error, betaTried bool) Verdict {
	const p = PointNamedRequests
	switch {
	case v1Err == nil:
		return Verdict{Point: p, Outcome: NamedOnV1, Evidence: "v1 accepted a resize request with instances[]"}
	case !IsRefusal(v1Err):
		return notSettled(p, "the v1 insert failed without an answer: "+v1Err.Error(), "check the probe's permissions (roles/compute.instanceAdmin.v1) and run it again")
	case !betaTried:
		return notSettled(p, "v1 refused instances[] ("+v1Err.Error()+"); beta was not tried", "run the probe again")
	case betaErr == nil:
		return Verdict{Point: p, Outcome: NamedOnBetaOnly, Evidence: "v1 refused instances[] (" + v1Err.Error() + "); beta accepted it"}
	case !IsRefusal(betaErr):
		return notSettled(p, "v1 refused instances[] ("+v1Err.Error()+"); the beta insert failed without an answer: "+betaErr.Error(), "run the probe again")
	}
	return Verdict{Point: p, Outcome: NamedNowhere, Evidence: "v1 refused instances[] (" + v1Err.Error() + "); beta too (" + betaErr.Error() + ")"}
}

// DecideRunEndAudit settles PointRunEndAudit from the audit entries about
// a VM that ended at its run duration (and that nobody else deleted).
func DecideRunEndAudit(entries []AuditEntry, vm string) Verdict {
	const p = PointRunEndAudit
	var deferred, migDelete bool
	var seen []string
	for _, e := range entries {
		seen = append(seen, e.Method+" by "+e.Principal)
		switch {
		case e.Method == "compute.instances.deferredDelete":
			deferred = true
		case strings.HasSuffix(e.Method, ".compute.instances.delete") && strings.HasSuffix(e.Principal, "@cloudservices.gserviceaccount.com"):
			migDelete = true
		}
	}
	evidence := "entries about " + vm + ": " + strings.Join(seen, "; ")
	switch {
	case deferred && migDelete:
		return Verdict{Point: p, Outcome: AuditBoth, Evidence: evidence}
	case deferred:
		return Verdict{Point: p, Outcome: AuditDeferredDelete, Evidence: evidence}
	case migDelete:
		return Verdict{Point: p, Outcome: AuditMIGDelete, Evidence: evidence}
	case len(entries) == 0:
		return notSettled(p, "no audit entry about "+vm+" was found in time", "Cloud Logging may lag: look for it later with the filter the probe printed")
	}
	return notSettled(p, evidence+" (neither form)", "look at these entries: flexslurm's sink filter may need them (deploy/events.tf)")
}

// DecideLabelFilter settles PointLabelFilter from two lists made while a VM
// carrying label=value existed: one filtered on that label (matching), one
// on a value no VM has (absent). Each holds the label values the listed VMs
// carry under key.
func DecideLabelFilter(vm string, matching, absent []string, value string) Verdict {
	const p = PointLabelFilter
	found := false
	for _, v := range matching {
		if v == value {
			found = true
		}
	}
	if !found {
		return notSettled(p, "a list filtered on the probe's label did not return "+vm, "run the probe again")
	}
	for _, v := range absent {
		if v == value {
			return Verdict{Point: p, Outcome: FilterIgnored, Evidence: fmt.Sprintf("a list filtered on a label value no VM has returned %d VMs, %s among them", len(absent), vm)}
		}
	}
	if len(absent) > 0 {
		return Verdict{Point: p, Outcome: FilterIgnored, Evidence: fmt.Sprintf("a list filtered on a label value no VM has returned %d VMs", len(absent))}
	}
	return Verdict{Point: p, Outcome: FilterHonoured, Evidence: "a list filtered on a label value no VM has returned nothing, one on the probe's label returned " + vm}
}

// DecideTargetSizeAtRunEnd settles PointTargetSizeAtRunEnd from the MIG's
// targetSize while its one VM ran (before) and once it was gone (after).
func DecideTargetSizeAtRunEnd(before, after int32, gone bool) Verdict {
	const p = PointTargetSizeAtRunEnd
	switch {
	case !gone:
		return notSettled(p, "the VM was not gone in time after its run duration", "run the probe with a longer --timeout")
	case before != 1:
		return notSettled(p, fmt.Sprintf("the MIG's targetSize was %d, not 1, while its VM ran", before), "run the probe again")
	case after == before:
		return Verdict{Point: p, Outcome: TargetSizeKept, Evidence: fmt.Sprintf("targetSize %d while the VM ran, %d once it ended", before, after)}
	case after == before-1:
		return Verdict{Point: p, Outcome: TargetSizeDecremented, Evidence: fmt.Sprintf("targetSize %d while the VM ran, %d once it ended", before, after)}
	}
	return notSettled(p, fmt.Sprintf("targetSize %d while the VM ran, %d once it ended", before, after), "run the probe again")
}
