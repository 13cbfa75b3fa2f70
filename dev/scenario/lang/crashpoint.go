package lang

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/flexslurm/flexslurm/shared/plan"
)

// CrashPoint is a parsed crash point (CrashStep.Point, DeliveryFaults.Crash):
// where a delivery's handler is made to crash at one of its side-effect
// boundaries (apply.Deps.Fault).
type CrashPoint struct {
	// After: crash after the action ran (at the next boundary).
	After bool
	// Kind is the normalized action kind; "" with N.
	Kind string
	// N is the 1-based external action index; 0 with Kind.
	N int
	// Commit: crash right after the transaction committed.
	Commit bool
}

func (p CrashPoint) String() string {
	switch {
	case p.Commit:
		return "commit"
	case p.N > 0 && p.After:
		return fmt.Sprintf("after#%d", p.N)
	case p.N > 0:
		return fmt.Sprintf("before#%d", p.N)
	case p.After:
		return "after:" + p.Kind
	}
	return "before:" + p.Kind
}

var crashPointRe = regexp.MustCompile(`^(?:(commit)|(before|after|action)(?::([a-z_]+)|#([1-9][0-9]*)))$`)

// ParseCrashPoint parses commit, before:KIND, after:KIND, before#N or
// after#N.
func ParseCrashPoint(s string) (CrashPoint, error) {
	m := crashPointRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return CrashPoint{}, fmt.Errorf("crash point %q: want commit, before:KIND, after:KIND, before#N or after#N (KIND: an action such as create_resize_request)", s)
	}
	if m[1] != "" {
		return CrashPoint{Commit: true}, nil
	}
	p := CrashPoint{After: m[2] == "after"}
	if m[3] != "" {
		p.Kind = normKind(m[3])
		return p, nil
	}
	n, _ := strconv.Atoi(m[4])
	p.N = n
	return p, nil
}

// Hits reports whether the point names the n-th external action a (by index
// or by kind).
func (p CrashPoint) Hits(n int, a plan.Action) bool {
	return (p.N > 0 && p.N == n) || (p.Kind != "" && normKind(actionKind(a)) == p.Kind)
}

// normKind normalizes an action kind for comparison: lowercase without
// underscores, so create_resize_request, CreateResizeRequest and
// createresizerequest are the same kind.
func normKind(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "") }

// actionKind is the snake_case kind of a plan action (CreateResizeRequest →
// create_resize_request).
func actionKind(a plan.Action) string {
	if a == nil {
		return ""
	}
	t := reflect.TypeOf(a)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return snake(t.Name())
}
