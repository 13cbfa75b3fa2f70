package api

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Code is a google.rpc.Code
// (https://github.com/googleapis/googleapis/blob/master/google/rpc/code.proto).
type Code int32

// The codes this API returns, with the HTTP status each maps to in Google's
// HTTP mapping (https://cloud.google.com/apis/design/errors#handling_errors).
const (
	CodeInvalidArgument    Code = 3  // 400
	CodeDeadlineExceeded   Code = 4  // 504
	CodeNotFound           Code = 5  // 404
	CodeAlreadyExists      Code = 6  // 409
	CodeFailedPrecondition Code = 9  // 400
	CodeAborted            Code = 10 // 409
	CodeInternal           Code = 13 // 500
	CodeUnavailable        Code = 14 // 503
)

var codeNames = map[Code]string{
	CodeInvalidArgument: "INVALID_ARGUMENT", CodeDeadlineExceeded: "DEADLINE_EXCEEDED", CodeNotFound: "NOT_FOUND",
	CodeAlreadyExists: "ALREADY_EXISTS", CodeFailedPrecondition: "FAILED_PRECONDITION", CodeAborted: "ABORTED",
	CodeInternal: "INTERNAL", CodeUnavailable: "UNAVAILABLE",
}

var httpStatus = map[Code]int{
	CodeInvalidArgument: http.StatusBadRequest, CodeDeadlineExceeded: http.StatusGatewayTimeout, CodeNotFound: http.StatusNotFound,
	CodeAlreadyExists: http.StatusConflict, CodeFailedPrecondition: http.StatusBadRequest, CodeAborted: http.StatusConflict,
	CodeInternal: http.StatusInternalServerError, CodeUnavailable: http.StatusServiceUnavailable,
}

// String is the code's name, e.g. "INVALID_ARGUMENT".
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("CODE_%d", int32(c))
}

// FieldViolation is a google.rpc.BadRequest.FieldViolation: field is a path
// in the request, in JSON names (nodePools[1].scalingSpec), or a query
// parameter's name.
type FieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

// Error is a google.rpc.Status to return: the code, a message, and for
// INVALID_ARGUMENT the violations.
type Error struct {
	Code       Code
	Message    string
	Violations []FieldViolation
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Message }

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// invalid is INVALID_ARGUMENT naming each field.
func invalid(violations ...FieldViolation) *Error {
	msg := "request contains an invalid argument"
	if len(violations) == 1 {
		msg = violations[0].Field + ": " + violations[0].Description
	} else if len(violations) > 1 {
		msg = fmt.Sprintf("request contains %d invalid arguments (details name each field)", len(violations))
	}
	return &Error{Code: CodeInvalidArgument, Message: msg, Violations: violations}
}

// badRequestType is the @type of a google.rpc.BadRequest in Any's JSON form.
const badRequestType = "type.googleapis.com/google.rpc.BadRequest"

// statusJSON is a google.rpc.Status in its JSON form, as in an operation's
// error (code is the numeric google.rpc.Code).
type statusJSON struct {
	Code    int32            `json:"code"`
	Message string           `json:"message"`
	Details []map[string]any `json:"details,omitempty"`
}

func (e *Error) status() statusJSON {
	s := statusJSON{Code: int32(e.Code), Message: e.Message}
	if len(e.Violations) > 0 {
		s.Details = []map[string]any{{"@type": badRequestType, "fieldViolations": e.Violations}}
	}
	return s
}

// writeError writes e as Google's HTTP error response: {"error": {code (the
// HTTP status), message, status (the google.rpc.Code name), details}}
// (https://cloud.google.com/apis/design/errors#http_mapping).
func writeError(w http.ResponseWriter, e *Error) {
	hs, ok := httpStatus[e.Code]
	if !ok {
		hs = http.StatusInternalServerError
	}
	body := map[string]any{"code": hs, "message": e.Message, "status": e.Code.String()}
	if s := e.status(); len(s.Details) > 0 {
		body["details"] = s.Details
	}
	writeJSON(w, hs, map[string]any{"error": body})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, `{"error":{"code":500,"message":"encoding the response","status":"INTERNAL"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
