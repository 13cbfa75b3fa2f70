package instancetemplate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/naming"
)

// TestBodyRoundTrip: the body is what the name hashes, and FromBody gives
// back exactly the template Build made, name included, without building.
func TestBodyRoundTrip(t *testing.T) {
	c, p := example(t)
	built, err := Build(c, p, settings())
	if err != nil {
		t.Fatal(err)
	}
	body := built.Body()
	if naming.Template(c.ID, p.ID, body) != built.Name {
		t.Fatalf("name %s is not the hash of the body", built.Name)
	}
	if strings.Contains(body, built.Name) {
		t.Errorf("the body holds its own name: %s", body)
	}
	got, err := FromBody(c.ID, p.ID, built.Name, body)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(built, got); d != "" {
		t.Errorf("FromBody (-built +got):\n%s", d)
	}
	if string(got.JSON()) != string(built.JSON()) {
		t.Errorf("what would be sent differs:\n%s\n%s", got.JSON(), built.JSON())
	}
	// A pool record holds it: a few KB (Firestore's document limit is 1 MiB).
	if len(body) > 16<<10 {
		t.Errorf("body of %d bytes, want a few KB", len(body))
	}
	t.Logf("template body of pool %s: %d bytes", p.ID, len(body))
}

// TestFromBodyRefuses: a body that is not exactly what its name was made
// from is refused, and the error names the template and the pool.
func TestFromBodyRefuses(t *testing.T) {
	c, p := example(t)
	built, err := Build(c, p, settings())
	if err != nil {
		t.Fatal(err)
	}
	body := built.Body()
	hashed := func(b string) (string, string) { return naming.Template(c.ID, p.ID, b), b }
	tests := []struct {
		name       string
		tmpl, body string
		want       string
	}{
		{"no body", built.Name, "", "no body"},
		{"another template's name", "fs-flexvm-a3u-00000000", body, "named " + built.Name},
		{"another pool", built.Name, body, "named"}, // checked with pool "other" below
		{"an unknown field", "", `{"properties":{},"bogus":1}`, "unknown field"},
		{"not Build's form", "", strings.Replace(body, `{"description"`, `{ "description"`, 1), "not in the form"},
		{"two values", "", body + body, "more than one"},
		{"not JSON", "", "{", "decoding"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name, b, pool := tc.tmpl, tc.body, p.ID
			if name == "" {
				name, b = hashed(tc.body)
			}
			if tc.name == "another pool" {
				pool = "other"
			}
			_, err := FromBody(c.ID, pool, name, b)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pool "+pool) {
				t.Errorf("FromBody = %v, want an error naming pool %s and saying %q", err, pool, tc.want)
			}
		})
	}
}

// TestBuildPools: one template per pool flexslurm manages, each Build's;
// a pool whose template cannot be built is an error naming it.
func TestBuildPools(t *testing.T) {
	c, _ := example(t)
	got, err := BuildPools(c, settings())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(c.FlexPools()) {
		t.Fatalf("%d templates for %d pools", len(got), len(c.FlexPools()))
	}
	for _, p := range c.FlexPools() {
		want, err := Build(c, p, settings())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got[p.ID]); d != "" {
			t.Errorf("pool %s (-Build +BuildPools):\n%s", p.ID, d)
		}
	}
	bad := *c
	bad.NodePools = append(bad.NodePools[:0:0], c.NodePools...)
	for i := range bad.NodePools {
		if bad.NodePools[i].ID == "a3u" {
			bad.NodePools[i].NodeImage = "projects/mine/global/images/family/gpu"
		}
	}
	if m, err := BuildPools(&bad, settings()); err == nil || m != nil || !strings.Contains(err.Error(), "pool a3u") {
		t.Errorf("BuildPools with pool a3u unbuildable = %v, %v; want no templates and an error naming pool a3u", m, err)
	}
}
