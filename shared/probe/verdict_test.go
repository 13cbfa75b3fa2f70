package probe

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/config"
)

var (
	refusal    = &Refusal{Call: "x", HTTPStatus: 400, Reason: "invalid", Message: "no"}
	errNoReply = errors.New("connection reset")
)

func TestDecideTargetSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    TargetSizeObservation
		want string
	}{
		{"allowed while ACCEPTED", TargetSizeObservation{Before: "ACCEPTED", After: "ACCEPTED"}, Allowed},
		{"allowed but the request left ACCEPTED", TargetSizeObservation{Before: "ACCEPTED", After: "SUCCEEDED"}, NotSettled},
		{"refused, accepted once cancelled", TargetSizeObservation{Before: "ACCEPTED", After: "ACCEPTED", CallErr: refusal, Retried: true}, Refused},
		{"refused, refused again once cancelled", TargetSizeObservation{Before: "ACCEPTED", After: "ACCEPTED", CallErr: refusal, Retried: true, RetryErr: refusal}, NotSettled},
		{"refused, not retried", TargetSizeObservation{Before: "ACCEPTED", After: "SUCCEEDED", CallErr: refusal}, NotSettled},
		{"no answer", TargetSizeObservation{Before: "ACCEPTED", After: "ACCEPTED", CallErr: errNoReply, Retried: true}, NotSettled},
		{"request already SUCCEEDED", TargetSizeObservation{Before: "SUCCEEDED"}, NotSettled},
		{"no VM", TargetSizeObservation{NoVM: "no capacity"}, NotSettled},
	} {
		v := DecideTargetSize(tc.o)
		if v.Outcome != tc.want {
			t.Errorf("%s: %q (%s), want %q", tc.name, v.Outcome, v.Evidence, tc.want)
		}
		if !v.Settled() && v.Hint == "" {
			t.Errorf("%s: not settled without a hint", tc.name)
		}
	}
}

func TestDecideNamedRequests(t *testing.T) {
	for _, tc := range []struct {
		name      string
		v1, beta  error
		betaTried bool
		want      string
	}{
		{"v1 accepts", nil, nil, false, NamedOnV1},
		{"beta only", refusal, nil, true, NamedOnBetaOnly},
		{"neither", refusal, refusal, true, NamedNowhere},
		{"v1 no answer", errNoReply, nil, false, NotSettled},
		{"beta no answer", refusal, errNoReply, true, NotSettled},
		{"beta not tried", refusal, nil, false, NotSettled},
	} {
		if v := DecideNamedRequests(tc.v1, tc.beta, tc.betaTried); v.Outcome != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, v.Outcome, tc.want)
		}
	}
}

func TestDecideRunEndAudit(t *testing.T) {
	deferred := AuditEntry{Method: "compute.instances.deferredDelete", Principal: "system@google.com"}
	mig := AuditEntry{Method: "v1.compute.instances.delete", Principal: "123@cloudservices.gserviceaccount.com"}
	betaMIG := AuditEntry{Method: "beta.compute.instances.delete", Principal: "123@cloudservices.gserviceaccount.com"}
	someone := AuditEntry{Method: "v1.compute.instances.delete", Principal: "alice@example.com"}
	for _, tc := range []struct {
		name    string
		entries []AuditEntry
		want    string
	}{
		{"deferredDelete", []AuditEntry{deferred}, AuditDeferredDelete},
		{"MIG delete, first and last", []AuditEntry{mig, mig}, AuditMIGDelete},
		{"MIG delete through beta", []AuditEntry{betaMIG}, AuditMIGDelete},
		{"both", []AuditEntry{mig, deferred}, AuditBoth},
		{"none", nil, NotSettled},
		{"a person's delete is neither form", []AuditEntry{someone}, NotSettled},
	} {
		if v := DecideRunEndAudit(tc.entries, "vm"); v.Outcome != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, v.Outcome, tc.want)
		}
	}
}

func TestDecideLabelFilter(t *testing.T) {
	for _, tc := range []struct {
		name             string
		matching, absent []string
		want             string
	}{
		{"honoured", []string{"r1"}, nil, FilterHonoured},
		{"ignored: the VM comes back", []string{"r1", ""}, []string{"r1", ""}, FilterIgnored},
		{"ignored: other VMs come back", []string{"r1"}, []string{""}, FilterIgnored},
		{"the VM not listed at all", nil, nil, NotSettled},
	} {
		if v := DecideLabelFilter("vm", tc.matching, tc.absent, "r1"); v.Outcome != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, v.Outcome, tc.want)
		}
	}
}

func TestDecideTargetSizeAtRunEnd(t *testing.T) {
	for _, tc := range []struct {
		before, after int32
		gone          bool
		want          string
	}{
		{1, 1, true, TargetSizeKept},
		{1, 0, true, TargetSizeDecremented},
		{1, 1, false, NotSettled},
		{2, 1, true, NotSettled},
		{1, 3, true, NotSettled},
	} {
		if v := DecideTargetSizeAtRunEnd(tc.before, tc.after, tc.gone); v.Outcome != tc.want {
			t.Errorf("%d→%d gone=%v: %q, want %q", tc.before, tc.after, tc.gone, v.Outcome, tc.want)
		}
	}
}

func TestSettingsFor(t *testing.T) {
	for outcome, want := range map[string]string{NamedOnV1: "v1", NamedOnBetaOnly: "beta", NamedNowhere: "count", NotSettled: "auto"} {
		rep := Report{RunID: "r", Verdicts: []Verdict{{Point: PointNamedRequests, Outcome: outcome}, {Point: PointLabelFilter, Outcome: FilterIgnored}}}
		s := SettingsFor(rep, "p", "z", t0)
		if s.ResizeRequestAPI != want {
			t.Errorf("%s: resize_request_api %q, want %q", outcome, s.ResizeRequestAPI, want)
		}
		env := map[string]string{config.EnvProject: "p", config.EnvResizeRequestAPI: s.ResizeRequestAPI}
		if _, err := config.FromEnv(func(k string) string { return env[k] }); err != nil && strings.Contains(err.Error(), config.EnvResizeRequestAPI) {
			t.Errorf("%s: the functions refuse %s=%q: %v", outcome, config.EnvResizeRequestAPI, s.ResizeRequestAPI, err)
		}
		if s.Observed["label_filter"] != FilterIgnored || s.Observed["named_requests"] != outcome || s.Observed["zone"] != "z" {
			t.Errorf("%s: observed %v", outcome, s.Observed)
		}
	}
}

var t0 = mustTime("2026-12-07T06:00:00Z")

func mustTime(s string) (t time.Time) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}
