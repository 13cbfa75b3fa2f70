package gce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
)

func httpError(code int, reasons ...string) *googleapi.Error {
	e := &googleapi.Error{Code: code, Message: "m"}
	for _, r := range reasons {
		e.Errors = append(e.Errors, googleapi.ErrorItem{Reason: r, Message: "m"})
	}
	return e
}

// wrapped returns err as the REST clients return it: an *apierror.APIError
// wrapping the *googleapi.Error.
func wrapped(t *testing.T, err *googleapi.Error) error {
	t.Helper()
	ae, ok := apierror.FromError(err)
	if !ok {
		t.Fatalf("apierror.FromError(%v) failed", err)
	}
	return ae
}

func TestClassifyTable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, ClassNone},

		// Sentinels, wrapped.
		{"ErrNotFound", fmt.Errorf("x: %w", ErrNotFound), ClassNotFound},
		{"ErrAlreadyExists", fmt.Errorf("x: %w", ErrAlreadyExists), ClassAlreadyExists},
		{"ErrNotCancellable", fmt.Errorf("x: %w", ErrNotCancellable), ClassPermanent},
		{"ErrNotCancellable and ErrNotFound", fmt.Errorf("x: %w: %w", ErrNotCancellable, ErrNotFound), ClassNotFound},
		{"ErrInvalidSpec", fmt.Errorf("x: %w", ErrInvalidSpec), ClassPermanent},
		{"errRetryLater over a 400", fmt.Errorf("x: %w: %w", errRetryLater, httpError(400, "invalid")), ClassTransient},

		// Operations DONE with errors.
		{"op stockout", &OperationError{Code: "ZONE_RESOURCE_POOL_EXHAUSTED", HTTPStatus: 503}, ClassCapacity},
		{"op stockout with details", &OperationError{Code: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"}, ClassCapacity},
		{"op resource pool", &OperationError{Code: "RESOURCE_POOL_EXHAUSTED"}, ClassCapacity},
		{"op errorInfo reason", &OperationError{Code: "SOMETHING_NEW", Codes: []string{"SOMETHING_NEW", "RESOURCE_AVAILABILITY"}}, ClassCapacity},
		{"op GKE stockout", &OperationError{Code: "GCE_STOCKOUT"}, ClassCapacity},
		{"op quota", &OperationError{Code: "QUOTA_EXCEEDED", HTTPStatus: 403}, ClassQuota},
		{"op rate", &OperationError{Code: "RESOURCE_OPERATION_RATE_EXCEEDED"}, ClassRateLimit},
		{"op not found", &OperationError{Code: "RESOURCE_NOT_FOUND", HTTPStatus: 404}, ClassNotFound},
		{"op exists", &OperationError{Code: "RESOURCE_ALREADY_EXISTS", HTTPStatus: 409}, ClassAlreadyExists},
		{"op not ready", &OperationError{Code: "RESOURCE_NOT_READY", HTTPStatus: 400}, ClassTransient},
		{"op internal", &OperationError{Code: "INTERNAL_ERROR", HTTPStatus: 500}, ClassTransient},
		{"op in use", &OperationError{Code: "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", HTTPStatus: 400}, ClassPermanent},
		{"op invalid", &OperationError{Code: "INVALID_FIELD_VALUE", HTTPStatus: 400}, ClassPermanent},
		{"op unknown code, 503", &OperationError{Code: "NEW_CODE", HTTPStatus: 503}, ClassTransient},
		{"op unknown code, no status", &OperationError{Code: "NEW_CODE"}, ClassPermanent},
		{"op wrapped", fmt.Errorf("creating resize request rr: %w", &OperationError{Code: "ZONE_RESOURCE_POOL_EXHAUSTED"}), ClassCapacity},

		// HTTP errors: reason first, then status.
		{"404", httpError(404), ClassNotFound},
		{"404 notFound", httpError(404, "notFound"), ClassNotFound},
		{"409", httpError(409), ClassAlreadyExists},
		{"409 alreadyExists", httpError(409, "alreadyExists"), ClassAlreadyExists},
		{"429", httpError(429), ClassRateLimit},
		{"403 rateLimitExceeded", httpError(403, "rateLimitExceeded"), ClassRateLimit},
		{"403 userRateLimitExceeded", httpError(403, "userRateLimitExceeded"), ClassRateLimit},
		{"403 quotaExceeded", httpError(403, "quotaExceeded"), ClassQuota},
		{"403 limitExceeded", httpError(403, "limitExceeded"), ClassQuota},
		{"403 dailyLimitExceeded", httpError(403, "dailyLimitExceeded"), ClassQuota},
		{"403 forbidden", httpError(403, "forbidden"), ClassPermanent},
		{"403 no reason", httpError(403), ClassPermanent},
		{"400 invalid", httpError(400, "invalid"), ClassPermanent},
		{"400 resourceNotReady", httpError(400, "resourceNotReady"), ClassTransient},
		{"400 resourceInUse", httpError(400, "resourceInUseByAnotherResource"), ClassPermanent},
		{"400 no reason", httpError(400), ClassPermanent},
		{"401", httpError(401), ClassPermanent},
		{"408", httpError(408), ClassTransient},
		{"412 conditionNotMet", httpError(412, "conditionNotMet"), ClassPermanent},
		{"500", httpError(500), ClassTransient},
		{"500 backendError", httpError(500, "backendError"), ClassTransient},
		{"501", httpError(501, "notImplemented"), ClassPermanent},
		{"501 no reason", httpError(501), ClassPermanent},
		{"502", httpError(502), ClassTransient},
		{"503", httpError(503), ClassTransient},
		{"504", httpError(504), ClassTransient},
		{"503 quota reason wins", httpError(503, "quotaExceeded"), ClassQuota},
		{"unknown reason falls back to status", httpError(429, "somethingElse"), ClassRateLimit},
		{"second reason known", httpError(400, "somethingElse", "alreadyExists"), ClassAlreadyExists},

		// Context, network.
		{"deadline", context.DeadlineExceeded, ClassTransient},
		{"deadline wrapped", fmt.Errorf("x: %w", context.DeadlineExceeded), ClassTransient},
		{"canceled", context.Canceled, ClassTransient},
		{"os deadline", os.ErrDeadlineExceeded, ClassTransient},
		{"net.OpError", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, ClassTransient},
		{"url.Error", &url.Error{Op: "Get", URL: "http://x", Err: io.EOF}, ClassTransient},
		{"ECONNRESET", fmt.Errorf("read: %w", syscall.ECONNRESET), ClassTransient},
		{"unexpected EOF", io.ErrUnexpectedEOF, ClassTransient},
		{"DNS", &net.DNSError{Err: "no such host", Name: "x", IsTemporary: true}, ClassTransient},

		// Everything else.
		{"plain", errors.New("boom"), ClassPermanent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
			// As returned by the REST clients (apierror wrapping googleapi).
			var ge *googleapi.Error
			if errors.As(tc.err, &ge) && tc.err == error(ge) {
				if got := Classify(wrapped(t, ge)); got != tc.want {
					t.Errorf("Classify(apierror(%v)) = %v, want %v", tc.err, got, tc.want)
				}
			}
		})
	}
}

// TestCodeTable checks every entry of the code table in both of its
// spellings, as an operation code and as an HTTP reason.
func TestCodeTable(t *testing.T) {
	for code, want := range codeClasses {
		spellings := []string{code, snake(code), camel(code)}
		for _, s := range spellings {
			if got := Classify(&OperationError{Code: s, HTTPStatus: 418}); got != want {
				t.Errorf("operation code %q: %v, want %v", s, got, want)
			}
			if got := Classify(httpError(418, s)); got != want {
				t.Errorf("HTTP reason %q: %v, want %v", s, got, want)
			}
		}
	}
}

// snake turns quotaExceeded into QUOTA_EXCEEDED.
func snake(s string) string {
	var out []rune
	for i, r := range s {
		if r >= 'A' && r <= 'Z' && i > 0 && s[i-1] >= 'a' && s[i-1] <= 'z' {
			out = append(out, '_')
		}
		if r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		out = append(out, r)
	}
	return string(out)
}

// camel turns QUOTA_EXCEEDED into quotaExceeded.
func camel(s string) string {
	var out []rune
	up := false
	for i, r := range s {
		switch {
		case r == '_':
			up = true
			continue
		case up && r >= 'a' && r <= 'z':
			r -= 'a' - 'A'
		case !up && i > 0 && r >= 'A' && r <= 'Z' && s[i-1] >= 'A' && s[i-1] <= 'Z':
			r += 'a' - 'A'
		case i == 0 && r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
		}
		up = false
		out = append(out, r)
	}
	return string(out)
}

func TestClassStringAndRetryable(t *testing.T) {
	tests := []struct {
		c         Class
		name      string
		retryable bool
	}{
		{ClassNone, "none", false},
		{ClassNotFound, "not-found", false},
		{ClassAlreadyExists, "already-exists", false},
		{ClassCapacity, "capacity", true},
		{ClassQuota, "quota", false},
		{ClassRateLimit, "rate-limit", true},
		{ClassTransient, "transient", true},
		{ClassPermanent, "permanent", false},
		{Class(99), "class(99)", false},
	}
	for _, tc := range tests {
		if got := tc.c.String(); got != tc.name {
			t.Errorf("String(%d) = %q, want %q", int(tc.c), got, tc.name)
		}
		if got := tc.c.Retryable(); got != tc.retryable {
			t.Errorf("%v.Retryable() = %v, want %v", tc.c, got, tc.retryable)
		}
	}
}

func TestHelpersAndMark(t *testing.T) {
	nf := wrapped(t, httpError(404, "notFound"))
	m := mark(nf)
	if !errors.Is(m, ErrNotFound) || !IsNotFound(m) || IsAlreadyExists(m) {
		t.Errorf("mark(404) = %v", m)
	}
	var ae *apierror.APIError
	if !errors.As(m, &ae) || ae.HTTPCode() != 404 || m.Error() != nf.Error() {
		t.Errorf("mark hides the API error: %v", m)
	}
	ex := mark(&OperationError{Code: "RESOURCE_ALREADY_EXISTS"})
	if !errors.Is(ex, ErrAlreadyExists) || !IsAlreadyExists(ex) {
		t.Errorf("mark(op exists) = %v", ex)
	}
	plain := errors.New("x")
	if mark(plain) != plain {
		t.Error("mark changed a permanent error")
	}
	oe := &OperationError{Op: "operation-1", Code: "QUOTA_EXCEEDED", Message: "Quota 'GPUS' exceeded"}
	if got, want := oe.Error(), "operation operation-1 failed: QUOTA_EXCEEDED: Quota 'GPUS' exceeded"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestLabelFilter(t *testing.T) {
	got := labelFilter(map[string]string{"pool": "h200", "cluster": "c1"})
	if want := `(labels.cluster = "c1") (labels.pool = "h200")`; got != want {
		t.Errorf("labelFilter = %q, want %q", got, want)
	}
	// The same text as formatting each expression with %q and joining
	// them, for values that need escaping too.
	for _, labels := range []map[string]string{
		nil, {}, {"a": ""}, {"flexslurm-cluster": "c1", "flexslurm-pool": "h200", "x": `q"uo\te`}, {"k": "é\n\x00"},
	} {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			parts = append(parts, fmt.Sprintf("(labels.%s = %q)", k, labels[k]))
		}
		if got, want := labelFilter(labels), strings.Join(parts, " "); got != want {
			t.Errorf("labelFilter(%v) = %q, want %q", labels, got, want)
		}
	}
}
