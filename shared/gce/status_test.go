package gce

import (
	"strings"
	"testing"
	"unsafe"

	"cloud.google.com/go/compute/apiv1/computepb"
)

// TestCanonicalStatusSharesTheAPIsCopy: a decoded status (a string of its
// own) comes back equal and backed by computepb's enum table, so every VM
// listed RUNNING shares one "RUNNING"; a status the table does not know
// comes back as it was.
func TestCanonicalStatusSharesTheAPIsCopy(t *testing.T) {
	for v, name := range computepb.Instance_Status_name {
		decoded := strings.Clone(name)
		got := canonicalStatus(decoded)
		if got != name {
			t.Errorf("canonicalStatus(%q) = %q", decoded, got)
		}
		if unsafe.StringData(got) != unsafe.StringData(computepb.Instance_Status_name[v]) {
			t.Errorf("canonicalStatus(%q) is not the enum table's copy", decoded)
		}
	}
	for _, s := range []string{"", "running", "HIBERNATING"} {
		if got := canonicalStatus(s); got != s {
			t.Errorf("canonicalStatus(%q) = %q, want it unchanged", s, got)
		}
	}
}
