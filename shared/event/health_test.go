package event

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeHealthVerdicts(t *testing.T) {
	const head = `{"version":1,"type":"health.failure","cluster":"flexvm","node":"flexvm-a3u-1",`
	tests := []struct {
		name, body  string
		wantErr     string // substring of the error; "" accepts
		wantVerdict string
		wantDrained bool
	}{
		{name: "FAIL", body: `"verdict":"FAIL"}`, wantVerdict: VerdictFail},
		{name: "FAIL drained", body: `"verdict":"FAIL","drained":true}`, wantVerdict: VerdictFail, wantDrained: true},
		{name: "INCONCLUSIVE", body: `"verdict":"INCONCLUSIVE","reasons":["dcgmi timed out"]}`, wantVerdict: VerdictInconclusive},
		{name: "PASS is never published", body: `"verdict":"PASS"}`, wantErr: `verdict "PASS" is not FAIL or INCONCLUSIVE`},
		{name: "lower case", body: `"verdict":"fail"}`, wantErr: `verdict "fail"`},
		{name: "missing verdict", body: `"generation":1}`, wantErr: `verdict ""`},
		{name: "drained without a FAIL", body: `"verdict":"INCONCLUSIVE","drained":true}`, wantErr: "drained is only reported with a FAIL"},
		{name: "drained must be a bool", body: `"verdict":"FAIL","drained":"yes"}`, wantErr: "decoding payload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := DecodeHealth([]byte(head + tc.body))
			if tc.wantErr != "" {
				if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrMalformed containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Verdict != tc.wantVerdict || h.Drained != tc.wantDrained {
				t.Errorf("verdict %q drained %v, want %q %v", h.Verdict, h.Drained, tc.wantVerdict, tc.wantDrained)
			}
		})
	}
}

// TestDecodeHealthHook: the hook a report names is one of the node-side
// hooks (prolog, epilog, health_check); a report of an earlier hook
// without the field still decodes (hook ""); any other value — another
// case, another hook, a string a message would carry — is malformed, so
// nothing but the enum reaches the records and messages.
func TestDecodeHealthHook(t *testing.T) {
	const head = `{"version":1,"type":"health.failure","cluster":"flexvm","node":"flexvm-a3u-1","verdict":"FAIL"`
	for _, tc := range []struct{ body, want, wantErr string }{
		{body: `}`, want: ""},
		{body: `,"hook":"prolog"}`, want: HealthHookProlog},
		{body: `,"hook":"epilog"}`, want: HealthHookEpilog},
		{body: `,"hook":"health_check"}`, want: HealthHookHealthCheck},
		{body: `,"hook":""}`, want: ""},
		{body: `,"hook":"Prolog"}`, wantErr: `hook "Prolog" is not one of prolog, epilog, health_check`},
		{body: `,"hook":"prolog-ctld"}`, wantErr: `hook "prolog-ctld"`},
		{body: `,"hook":"epilog: all fine\nNODE_REPAIRED"}`, wantErr: `hook "epilog: all fine\nNODE_REPAIRED"`},
		{body: `,"hook":7}`, wantErr: "decoding payload"},
	} {
		h, err := DecodeHealth([]byte(head + tc.body))
		if tc.wantErr != "" {
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want ErrMalformed containing %q", tc.body, err, tc.wantErr)
			}
			continue
		}
		if err != nil || h.Hook != tc.want {
			t.Errorf("%s: hook %q, err %v; want %q", tc.body, h.Hook, err, tc.want)
		}
	}
}
