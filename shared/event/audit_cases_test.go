package event

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// auditCases is testdata/audit/cases.json, shared with deploy's sink-filter
// test.
type auditCases struct {
	Project string `json:"project"`
	Cases   []struct {
		File   string `json:"file"`
		Routed bool   `json:"routed"`
		Kind   string `json:"kind"`
	} `json:"cases"`
}

// TestDecodeRecordedAuditEntries decodes every recorded entry and checks
// its kind, the same entries deploy/logfilter_test.go runs through the sink
// filter.
func TestDecodeRecordedAuditEntries(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "audit", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cs auditCases
	if err := json.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	if len(cs.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range cs.Cases {
		data, err := os.ReadFile(filepath.Join("testdata", "audit", c.File))
		if err != nil {
			t.Fatal(err)
		}
		a, err := DecodeAudit(data)
		if c.Kind == "malformed" {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: got %v, want ErrMalformed", c.File, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.File, err)
			continue
		}
		if string(a.Kind) != c.Kind {
			t.Errorf("%s: method %s decoded as %s, want %s", c.File, a.Method, a.Kind, c.Kind)
		}
		if a.Project != cs.Project || a.Instance == "" || a.Zone == "" {
			t.Errorf("%s: project %q zone %q instance %q", c.File, a.Project, a.Zone, a.Instance)
		}
	}
}
