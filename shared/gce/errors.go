package gce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
)

// Class is what a Compute error means for the caller's next step. Plan code
// sees only classes, never Compute codes.
type Class int

// Error classes, from Classify.
const (
	// ClassNone: no error.
	ClassNone Class = iota
	// ClassNotFound: the resource does not exist (HTTP 404, notFound,
	// RESOURCE_NOT_FOUND).
	ClassNotFound
	// ClassAlreadyExists: a resource with that name exists (HTTP 409,
	// alreadyExists, RESOURCE_ALREADY_EXISTS).
	ClassAlreadyExists
	// ClassCapacity: the zone has no capacity for the request (stockout,
	// ZONE_RESOURCE_POOL_EXHAUSTED and friends). Retry later or elsewhere; a
	// quota increase does not help.
	ClassCapacity
	// ClassQuota: a project quota or API limit is exhausted (QUOTA_EXCEEDED,
	// quotaExceeded, limitExceeded, dailyLimitExceeded). Needs a quota change
	// or less usage.
	ClassQuota
	// ClassRateLimit: too many requests (HTTP 429, rateLimitExceeded,
	// userRateLimitExceeded, RESOURCE_OPERATION_RATE_EXCEEDED). Retry with
	// backoff.
	ClassRateLimit
	// ClassTransient: a server or transport failure (HTTP 5xx except 501,
	// backendError, resourceNotReady, deadlines, timeouts, connection
	// errors). Retry.
	ClassTransient
	// ClassPermanent: everything else (400 invalid, 403 permission, 501, an
	// invalid spec, ...). Retrying the same call will fail again.
	ClassPermanent
)

// String returns the class name used in logs and metrics.
func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassNotFound:
		return "not-found"
	case ClassAlreadyExists:
		return "already-exists"
	case ClassCapacity:
		return "capacity"
	case ClassQuota:
		return "quota"
	case ClassRateLimit:
		return "rate-limit"
	case ClassTransient:
		return "transient"
	case ClassPermanent:
		return "permanent"
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// Retryable reports whether the same call may succeed if repeated later:
// true for ClassCapacity, ClassRateLimit and ClassTransient. Capacity comes
// back on its own but slowly, so back off longer than for the other two.
func (c Class) Retryable() bool {
	return c == ClassCapacity || c == ClassRateLimit || c == ClassTransient
}

// Sentinel errors. Errors returned by Client match them with errors.Is.
var (
	// ErrNotFound matches errors of ClassNotFound returned by Client.
	ErrNotFound = errors.New("gce: not found")
	// ErrAlreadyExists matches errors of ClassAlreadyExists returned by
	// Client.
	ErrAlreadyExists = errors.New("gce: already exists")
	// ErrNotCancellable is returned by CancelResizeRequest when the request
	// is no longer queued (SUCCEEDED, FAILED, CANCELLED or gone); there is
	// nothing left to cancel and the caller can ignore it.
	ErrNotCancellable = errors.New("gce: resize request is not cancellable")
	// ErrRequestSucceeded is matched, with ErrNotCancellable, by the error
	// of CancelResizeRequest for a request that SUCCEEDED: Compute
	// fulfilled it before the cancellation, and its VMs exist.
	ErrRequestSucceeded = errors.New("gce: resize request succeeded")
	// ErrInvalidSpec is returned, before any API call, for a spec the API
	// would reject (ClassPermanent).
	ErrInvalidSpec = errors.New("gce: invalid spec")

	// errRetryLater marks a state that resolves by itself (a resize request
	// still CREATING cannot be cancelled yet): ClassTransient.
	errRetryLater = errors.New("gce: not ready yet, retry")
)

// OperationError is an operation that ended DONE with error.errors[]
// (https://github.com/googleapis/google-cloud-go/blob/main/compute/apiv1/operations.go): the call was accepted but the work failed.
type OperationError struct {
	// Op is the operation name.
	Op string
	// Code and Message are the first error's code (e.g.
	// ZONE_RESOURCE_POOL_EXHAUSTED) and message.
	Code, Message string
	// HTTPStatus is the operation's httpErrorStatusCode, 0 if absent.
	HTTPStatus int
	// Codes lists every errors[].code and errorDetails[].errorInfo.reason of
	// the operation, in order; Classify uses all of them.
	Codes []string
	// Quota is the quota the operation's errors name (QuotaOf); zero when
	// none does.
	Quota QuotaInfo
}

// Error reports the operation, its first error code and message.
func (e *OperationError) Error() string {
	return fmt.Sprintf("operation %s failed: %s: %s", e.Op, e.Code, e.Message)
}

// codeClasses maps Compute error codes (operation errors[].code, errorInfo
// reasons) and HTTP error reasons (errors[].reason) to classes. Keys are
// compared after normalize, so QUOTA_EXCEEDED and quotaExceeded are one
// entry. Sources: Compute Engine "Troubleshoot resource availability errors"
// (ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS], errorInfo reason
// RESOURCE_AVAILABILITY); cluster-autoscaler's GCE provider
// (RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED, IP_SPACE_EXHAUSTED and
// PERMISSIONS_ERROR as "other"); GKE's GCE_STOCKOUT; the standard Google API
// error reasons (notFound, alreadyExists, rateLimitExceeded, backendError,
// ...); Compute operation codes (RESOURCE_NOT_FOUND, RESOURCE_ALREADY_EXISTS,
// RESOURCE_OPERATION_RATE_EXCEEDED, RESOURCE_NOT_READY, ...).
var codeClasses = map[string]Class{
	// Capacity (stockouts).
	"ZONE_RESOURCE_POOL_EXHAUSTED":              ClassCapacity,
	"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": ClassCapacity,
	"RESOURCE_POOL_EXHAUSTED":                   ClassCapacity,
	"RESOURCE_AVAILABILITY":                     ClassCapacity,
	"GCE_STOCKOUT":                              ClassCapacity,
	"STOCKOUT":                                  ClassCapacity,

	// Quota.
	"QUOTA_EXCEEDED":     ClassQuota, // also quotaExceeded
	"limitExceeded":      ClassQuota,
	"dailyLimitExceeded": ClassQuota,

	// Rate limits.
	"rateLimitExceeded":                ClassRateLimit, // also RATE_LIMIT_EXCEEDED
	"userRateLimitExceeded":            ClassRateLimit,
	"RESOURCE_OPERATION_RATE_EXCEEDED": ClassRateLimit,

	// Not found / already exists.
	"notFound":                ClassNotFound, // also NOT_FOUND
	"RESOURCE_NOT_FOUND":      ClassNotFound,
	"alreadyExists":           ClassAlreadyExists, // also ALREADY_EXISTS
	"RESOURCE_ALREADY_EXISTS": ClassAlreadyExists,

	// Transient.
	"backendError":        ClassTransient,
	"internalError":       ClassTransient, // also INTERNAL_ERROR
	"INTERNAL":            ClassTransient,
	"UNAVAILABLE":         ClassTransient,
	"SERVICE_UNAVAILABLE": ClassTransient,
	"DEADLINE_EXCEEDED":   ClassTransient,
	"ABORTED":             ClassTransient,
	"resourceNotReady":    ClassTransient, // also RESOURCE_NOT_READY: another operation is in progress
	"TIMEOUT":             ClassTransient,

	// Permanent (listed so that they never fall through to a status rule).
	"invalid":                        ClassPermanent,
	"required":                       ClassPermanent,
	"badRequest":                     ClassPermanent,
	"INVALID_ARGUMENT":               ClassPermanent,
	"INVALID_FIELD_VALUE":            ClassPermanent,
	"forbidden":                      ClassPermanent,
	"insufficientPermissions":        ClassPermanent,
	"PERMISSION_DENIED":              ClassPermanent,
	"PERMISSIONS_ERROR":              ClassPermanent,
	"accessNotConfigured":            ClassPermanent,
	"resourceInUseByAnotherResource": ClassPermanent,
	"conditionNotMet":                ClassPermanent,
	"UNSUPPORTED_OPERATION":          ClassPermanent,
	"notImplemented":                 ClassPermanent,
	"IP_SPACE_EXHAUSTED":             ClassPermanent,
}

// normalize folds the spellings of one code together: lower case, without
// underscores (QUOTA_EXCEEDED and quotaExceeded → quotaexceeded).
func normalize(code string) string {
	return strings.ToLower(strings.ReplaceAll(code, "_", ""))
}

var normalizedClasses = func() map[string]Class {
	m := make(map[string]Class, len(codeClasses))
	for k, v := range codeClasses {
		if prev, dup := m[normalize(k)]; dup && prev != v {
			panic("gce: conflicting classes for code " + k)
		}
		m[normalize(k)] = v
	}
	return m
}()

// classifyCodes returns the class of the first known code, else the class of
// the HTTP status.
func classifyCodes(status int, codes []string) Class {
	for _, c := range codes {
		if cl, ok := normalizedClasses[normalize(c)]; ok {
			return cl
		}
	}
	switch {
	case status == 404:
		return ClassNotFound
	case status == 409:
		return ClassAlreadyExists
	case status == 429:
		return ClassRateLimit
	case status == 408:
		return ClassTransient
	case status == 501:
		return ClassPermanent
	case status >= 500 && status <= 599:
		return ClassTransient
	}
	return ClassPermanent
}

// Classify maps an error from this package, the Compute REST clients or the
// network to a Class, using error codes and HTTP statuses, never message
// text. Order: this package's sentinels, *OperationError codes,
// *apierror.APIError / *googleapi.Error reasons then HTTP status, context
// deadline/cancellation and network errors (ClassTransient), else
// ClassPermanent.
func Classify(err error) Class {
	if err == nil {
		return ClassNone
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return ClassNotFound
	case errors.Is(err, ErrAlreadyExists):
		return ClassAlreadyExists
	case errors.Is(err, errRetryLater):
		return ClassTransient
	case errors.Is(err, ErrNotCancellable), errors.Is(err, ErrInvalidSpec):
		return ClassPermanent
	}
	var oe *OperationError
	if errors.As(err, &oe) {
		return classifyCodes(oe.HTTPStatus, append([]string{oe.Code}, oe.Codes...))
	}
	var (
		status int
		codes  []string
		found  bool
	)
	var ae *apierror.APIError
	if errors.As(err, &ae) {
		found = true
		status = ae.HTTPCode()
		if r := ae.Reason(); r != "" {
			codes = append(codes, r)
		}
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		found = true
		if status <= 0 {
			status = ge.Code
		}
		for _, it := range ge.Errors {
			codes = append(codes, it.Reason)
		}
	}
	if found {
		return classifyCodes(status, codes)
	}
	var (
		ne net.Error
		ue *url.Error
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return ClassTransient
	case errors.As(err, &ne), errors.As(err, &ue):
		return ClassTransient
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return ClassTransient
	}
	return ClassPermanent
}

// IsNotFound reports whether err is of ClassNotFound.
func IsNotFound(err error) bool { return Classify(err) == ClassNotFound }

// IsNotReady reports whether err says the resource is not ready for the
// call (resourceNotReady, RESOURCE_NOT_READY: another operation is in
// progress on it, or it is not in a state the call accepts, e.g.
// reportHostAsFaulty on a VM that is not RUNNING). Classify counts it
// transient; a caller for which waiting does not help can tell it apart.
func IsNotReady(err error) bool {
	if err == nil {
		return false
	}
	want := normalize("resourceNotReady")
	var oe *OperationError
	if errors.As(err, &oe) {
		for _, c := range append([]string{oe.Code}, oe.Codes...) {
			if normalize(c) == want {
				return true
			}
		}
	}
	var ae *apierror.APIError
	if errors.As(err, &ae) && normalize(ae.Reason()) == want {
		return true
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		for _, it := range ge.Errors {
			if normalize(it.Reason) == want {
				return true
			}
		}
	}
	return false
}

// IsAlreadyExists reports whether err is of ClassAlreadyExists.
func IsAlreadyExists(err error) bool { return Classify(err) == ClassAlreadyExists }

// marked adds a sentinel to an error chain without changing its text.
type marked struct {
	err      error
	sentinel error
}

// Error is the marked error's text.
func (m *marked) Error() string { return m.err.Error() }

// Unwrap exposes both the error and the sentinel to errors.Is and errors.As.
func (m *marked) Unwrap() []error { return []error{m.err, m.sentinel} }

// mark makes err match ErrNotFound or ErrAlreadyExists when its class says
// so.
func mark(err error) error {
	switch Classify(err) {
	case ClassNotFound:
		if !errors.Is(err, ErrNotFound) {
			return &marked{err, ErrNotFound}
		}
	case ClassAlreadyExists:
		if !errors.Is(err, ErrAlreadyExists) {
			return &marked{err, ErrAlreadyExists}
		}
	}
	return err
}

// ClassifyCode returns the class of one Compute error code (as found in a
// resize request's status.error), ClassPermanent when the code is unknown.
func ClassifyCode(code string) Class {
	if code == "" {
		return ClassNone
	}
	return classifyCodes(0, []string{code})
}
