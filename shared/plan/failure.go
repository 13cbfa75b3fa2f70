package plan

import "fmt"

// What to do about an external action that failed. The executor
// classifies each failure at the adapter edge (shared/gce's table of
// Compute error codes; the Slurm command publisher) into a FailureClass;
// Respond decides what follows from it.

// FailureClass is how an external action failed, as the executor
// classified it.
type FailureClass int

// Failure classes.
const (
	// FailTransient: a server or transport failure, or a Slurm command not
	// published (the topic exists and the payload is flexslurm's).
	FailTransient FailureClass = iota + 1
	// FailRateLimit: too many requests.
	FailRateLimit
	// FailNotReady: the resource is not in a state the call accepts now
	// (resourceNotReady: another operation on it in progress, or e.g. a
	// host repair of a VM that is not RUNNING).
	FailNotReady
	// FailNotFound: the resource does not exist.
	FailNotFound
	// FailAlreadyExists: a resource of that name exists.
	FailAlreadyExists
	// FailCapacity: the zone has no capacity (a stock-out).
	FailCapacity
	// FailQuota: a project quota or API limit is exhausted.
	FailQuota
	// FailPermanent: the call will fail again as it is (invalid, permission,
	// unsupported; a resource that is not flexslurm's).
	FailPermanent
	// FailWorkloadPolicy: Compute refused (HTTP 400) the insert of a
	// request's MIG that referenced the pool's workload policy. Some of
	// Google's pages say a Flex-Start MIG takes no workload policy
	// (docs/design/placement.md, "When Compute refuses the policy").
	FailWorkloadPolicy
)

// String returns the class's name, for logs and metrics.
func (c FailureClass) String() string {
	switch c {
	case FailTransient:
		return "transient"
	case FailRateLimit:
		return "rate-limit"
	case FailNotReady:
		return "not-ready"
	case FailNotFound:
		return "not-found"
	case FailAlreadyExists:
		return "already-exists"
	case FailCapacity:
		return "capacity"
	case FailQuota:
		return "quota"
	case FailPermanent:
		return "permanent"
	case FailWorkloadPolicy:
		return "workload-policy"
	}
	return fmt.Sprintf("failure-class(%d)", int(c))
}

// Provisioning returns the class a pool backs off on after a refused
// request for capacity (ClassCapacity, ClassQuota, ClassPermanent), or ""
// when the failure is not such a refusal (it is retried, or left to the
// reconciler).
func (c FailureClass) Provisioning() string {
	switch c {
	case FailCapacity:
		return ClassCapacity
	case FailQuota:
		return ClassQuota
	case FailPermanent:
		return ClassPermanent
	case FailWorkloadPolicy:
		return ClassWorkloadPolicy
	}
	return ""
}

// Failure is an external action that failed.
type Failure struct {
	Action Action
	Class  FailureClass
	// Code is the Compute error code, for operators and metrics ("" when
	// there is none).
	Code string
}

// Response is what follows a failed external action.
type Response int

// Responses.
const (
	// LeaveToReconciler: nothing now. Asking again would fail the same way;
	// the reconciler converges from what it observes.
	LeaveToReconciler Response = iota
	// RetryEvent: the event is redelivered, and its actions, idempotent by
	// name and request id, are carried out again.
	RetryEvent
	// RecordProvisioningFailed: Compute refused a resize request (capacity,
	// quota, permanent): ProvisioningFailed backs the pool off, releases
	// the request's nodes and leaves the job pending, and the reconciler
	// asks again after the backoff. Redelivering the event would only
	// hammer the API.
	RecordProvisioningFailed
	// RecordHostRepairFailed: Compute will not repair the host (invalid,
	// unsupported, the VM not in a state to repair, or gone):
	// HostRepairFailed deletes and replaces the node's VM, drained already.
	RecordHostRepairFailed
)

// String returns the response's name, for logs.
func (r Response) String() string {
	switch r {
	case LeaveToReconciler:
		return "leave-to-reconciler"
	case RetryEvent:
		return "retry-event"
	case RecordProvisioningFailed:
		return "record-provisioning-failed"
	case RecordHostRepairFailed:
		return "record-host-repair-failed"
	}
	return fmt.Sprintf("response(%d)", int(r))
}

// Respond decides what follows a failed external action:
//   - a host repair that waiting cannot help (every class but transient
//     and rate-limit; not-ready too: the VM is not RUNNING) → the VM is
//     replaced (RecordHostRepairFailed);
//   - a resize request refused for capacity, quota or a permanent reason →
//     the pool backs off (RecordProvisioningFailed);
//   - any other transient, rate-limited or not-ready failure → the event is
//     retried;
//   - anything else (a refusal that would repeat, a resource gone) → left
//     to the reconciler.
func Respond(f Failure) Response {
	retryable := f.Class == FailTransient || f.Class == FailRateLimit
	switch f.Action.(type) {
	case ReportHostAsFaulty:
		if retryable {
			return RetryEvent
		}
		return RecordHostRepairFailed
	case CreateResizeRequest:
		if f.Class.Provisioning() != "" {
			return RecordProvisioningFailed
		}
	}
	if retryable || f.Class == FailNotReady {
		return RetryEvent
	}
	return LeaveToReconciler
}
