package spec

import (
	"bytes"
	"testing"
)

// TestUseJobDuration: "use_job_duration": true turns the setting on for a
// FLEX_START pool only; false, or no key, leaves the pool as the managed
// spec describes it; the effective spec carries it (so a spec published
// through the API keeps it) and nothing for a pool without it.
func TestUseJobDuration(t *testing.T) {
	c, err := Load("testdata/good/jobduration.json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"login": false, "a3u": true, "off": false}
	for _, p := range c.NodePools {
		if got := p.Ext.UseJobDuration; got != want[p.ID] {
			t.Errorf("pool %s: UseJobDuration = %v, want %v", p.ID, got, want[p.ID])
		}
	}
	eff, err := c.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(eff, []byte(`"flexslurm"`)); n != 1 {
		t.Errorf("effective spec has %d \"flexslurm\" objects, want 1 (the pool that sets a key):\n%s", n, eff)
	}
	if !bytes.Contains(eff, []byte(`"use_job_duration": true`)) {
		t.Errorf("effective spec lacks use_job_duration:\n%s", eff)
	}
}
