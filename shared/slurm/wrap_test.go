package slurm

import (
	"encoding/json"
	"errors"
	"testing"
)

// A parse failure is both ErrParse and its cause, so callers can tell a
// malformed output from other failures and still see what was wrong.
func TestParseErrorsWrapSentinelAndCause(t *testing.T) {
	for name, parse := range map[string]func([]byte) error{
		"squeue": func(b []byte) error { _, err := ParseSqueueJSON(b); return err },
		"sinfo":  func(b []byte) error { _, err := ParseSinfoJSON(b); return err },
	} {
		err := parse([]byte(`{"jobs": [`))
		if !errors.Is(err, ErrParse) {
			t.Errorf("%s: error %v is not ErrParse", name, err)
		}
		var syn *json.SyntaxError
		if !errors.As(err, &syn) {
			t.Errorf("%s: error %v does not wrap its JSON cause", name, err)
		}
		var typ *json.UnmarshalTypeError
		if err := parse([]byte(`{"jobs": 5, "nodes": 5}`)); !errors.Is(err, ErrParse) || !errors.As(err, &typ) {
			t.Errorf("%s: error %v is not both ErrParse and the *json.UnmarshalTypeError", name, err)
		}
	}
}
