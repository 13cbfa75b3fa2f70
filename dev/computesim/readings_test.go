package computesim

import (
	"strings"
	"testing"
)

func TestParseReadings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Readings
	}{
		{"", LenientReadings()},
		{"lenient", LenientReadings()},
		{"STRICT", StrictReadings()},
		{"strict,-IgnoreLabelFilter", func() Readings { r := StrictReadings(); r.IgnoreLabelFilter = false; return r }()},
		{"lenient,RefuseNamedRequestsOnV1,RunEndAudit=migDelete", Readings{RefuseNamedRequestsOnV1: true, RunEndAudit: RunEndMIGDelete}},
		{"KeepTargetSizeAtRunEnd", Readings{KeepTargetSizeAtRunEnd: true, RunEndAudit: RunEndDeferredDelete}},
		{"strict, refusetargetsizewhileaccepted=false", func() Readings { r := StrictReadings(); r.RefuseTargetSizeWhileAccepted = false; return r }()},
	} {
		got, err := ParseReadings(tc.in)
		if err != nil {
			t.Errorf("ParseReadings(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseReadings(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		// String round-trips.
		back, err := ParseReadings(got.String())
		if err != nil || back != got {
			t.Errorf("ParseReadings(%q.String() = %q) = %+v, %v", tc.in, got.String(), back, err)
		}
	}
	for _, tc := range []struct{ in, word string }{
		{"strick", `"strick"`},
		{"strict,IgnoreLabelFilters", `"IgnoreLabelFilters"`},
		{"RunEndAudit", "needs a value"},
		{"RunEndAudit=delete", `not "delete"`},
		{"IgnoreLabelFilter=yes", `not "yes"`},
		{"strict,,lenient", "empty word"},
	} {
		_, err := ParseReadings(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.word) {
			t.Errorf("ParseReadings(%q) error = %v, want one containing %s", tc.in, err, tc.word)
		}
	}
	if s := StrictReadings(); !s.RefuseTargetSizeWhileAccepted || !s.RefuseNamedRequestsOnV1 || !s.IgnoreLabelFilter || !s.KeepTargetSizeAtRunEnd || s.RunEndAudit != RunEndMIGDelete {
		t.Errorf("StrictReadings() = %+v: want every switch on its strict side", s)
	}
}

func TestReadingsOptionDefaults(t *testing.T) {
	if got := (Options{}).withDefaults().Readings; got != LenientReadings() {
		t.Errorf("default readings = %+v, want lenient", got)
	}
	o := Options{ExpiryLogStyle: ExpiryLogMIGDelete}.withDefaults()
	if o.Readings.RunEndAudit != RunEndMIGDelete {
		t.Errorf("ExpiryLogStyle migDelete gives RunEndAudit %q", o.Readings.RunEndAudit)
	}
	o = Options{ExpiryLogStyle: ExpiryLogDeferredDelete, Readings: StrictReadings()}.withDefaults()
	if o.ExpiryLogStyle != ExpiryLogMIGDelete {
		t.Errorf("Readings.RunEndAudit does not win over ExpiryLogStyle: %q", o.ExpiryLogStyle)
	}
}
