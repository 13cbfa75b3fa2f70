package computesim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
)

// apiError is an HTTP error response in the Compute error shape.
type apiError struct {
	code    int
	reason  string
	message string
	// status is the canonical status name the Google front end adds to some
	// errors (INVALID_ARGUMENT for unparsable bodies, RESOURCE_EXHAUSTED for
	// 429, ...). Compute's own validation errors carry none.
	status string
}

// Error describes the error for logs.
func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.code, e.reason, e.message) }

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    int         `json:"code"`
	Message string      `json:"message"`
	Errors  []errorItem `json:"errors"`
	Status  string      `json:"status,omitempty"`
}

type errorItem struct {
	Message string `json:"message"`
	Domain  string `json:"domain"`
	Reason  string `json:"reason"`
}

func (e *apiError) write(w http.ResponseWriter) {
	body, _ := json.Marshal(errorBody{Error: errorDetail{
		Code:    e.code,
		Message: e.message,
		Errors:  []errorItem{{Message: e.message, Domain: "global", Reason: e.reason}},
		Status:  e.status,
	}})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(e.code)
	_, _ = w.Write(body)
}

// canonicalStatus maps an HTTP status to the google.rpc.Code name the front
// end reports for it.
func canonicalStatus(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ALREADY_EXISTS"
	case 412:
		return "FAILED_PRECONDITION"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 500:
		return "INTERNAL"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return ""
}

func errInvalid(format string, args ...any) *apiError {
	return &apiError{code: 400, reason: "invalid", message: fmt.Sprintf(format, args...)}
}

func errInvalidField(field, value, why string) *apiError {
	return errInvalid("Invalid value for field '%s': '%s'. %s", field, value, why)
}

func errRequired(field string) *apiError {
	return &apiError{code: 400, reason: "required", message: fmt.Sprintf("Required field '%s' not specified", field)}
}

func errNotFound(resource string) *apiError {
	return &apiError{code: 404, reason: "notFound", message: fmt.Sprintf("The resource '%s' was not found", resource)}
}

func errAlreadyExists(resource string) *apiError {
	return &apiError{code: 409, reason: "alreadyExists", message: fmt.Sprintf("The resource '%s' already exists", resource)}
}

func errNotReady(resource string) *apiError {
	return &apiError{code: 400, reason: "resourceNotReady", message: fmt.Sprintf("The resource '%s' is not ready", resource)}
}

func errInUse(resource, user string) *apiError {
	return &apiError{code: 400, reason: "resourceInUseByAnotherResource",
		message: fmt.Sprintf("The instance_template resource '%s' is already being used by '%s'", resource, user)}
}

func errParse(err error) *apiError {
	return &apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT",
		message: fmt.Sprintf("Invalid JSON payload received. %v", err)}
}

// rfc1035 is the Compute resource-name pattern: 1–63 characters, a lowercase
// letter first, lowercase letters, digits and hyphens after, no trailing
// hyphen.
var rfc1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

const rfc1035Pattern = "(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)"

func checkName(field, name string) *apiError {
	if name == "" {
		return errRequired(field)
	}
	if !rfc1035.MatchString(name) {
		return errInvalidField(field, name, "Must be a match of regex '"+rfc1035Pattern+"'")
	}
	return nil
}

// zoneName matches zone names such as us-central1-a.
var zoneName = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+-[a-z]$`)

// requestID is a UUID in its canonical 8-4-4-4-12 form; the API rejects the
// zero UUID.
var requestIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func checkRequestID(id string) *apiError {
	if !requestIDPattern.MatchString(id) || id == "00000000-0000-0000-0000-000000000000" {
		return errInvalidField("requestId", id, "The request ID must be a valid UUID with the exception that zero UUID is not supported (00000000-0000-0000-0000-000000000000).")
	}
	return nil
}

var (
	labelKey   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	labelValue = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
)

func checkLabels(field string, labels map[string]string) *apiError {
	for k, v := range labels {
		if !labelKey.MatchString(k) {
			return errInvalidField(field, k, "Label keys must start with a lowercase letter and contain only lowercase letters, digits, underscores and dashes (at most 63 characters).")
		}
		if !labelValue.MatchString(v) {
			return errInvalidField(field+"."+k, v, "Label values must contain only lowercase letters, digits, underscores and dashes (at most 63 characters).")
		}
	}
	return nil
}
