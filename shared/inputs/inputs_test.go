package inputs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/naming"
)

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		r         Rule
		good, bad []string
	}{
		{"ClusterID", ClusterID, []string{"a", "flexvm", "a123456789"}, []string{"", "a1234567890", "flex-vm", "Flexvm", "1a", "a\n"}},
		{"PoolID", PoolID, []string{"a", "a3u", "a-b", "a23456789012345b"}, []string{"", "a-", "-a", "A", "a23456789012345bc", "a_b", "a\nb", "a,b"}},
		{"PartitionID", PartitionID, []string{"a", "A3u_big-1", "a" + strings.Repeat("b", 62)}, []string{"", "_a", "-a", "1a", "a b", "a=b", "a,b", "a#", "a:b", "a[1]", "a\nb", "a" + strings.Repeat("b", 63)}},
		{"ProjectID", ProjectID, []string{"abcdef", "flexslurm-demo", "s3ns:flex-demo", "example.com:my-proj", "a" + strings.Repeat("b", 29)},
			[]string{"abcde", "a" + strings.Repeat("b", 30), "-abcdef", "abcdef-", "Abcdef", "abc def", "abc/def", "1abcdef", ":abcdef", "abcdef\n"}},
		{"ProjectRef", ProjectRef, []string{"p", "proj", "flexslurm-demo", "123456", "s3ns:p"}, []string{"", "P", "p/q", "p q", "-p", "p-", "p%2f", ".."}},
		{"Region", Region, []string{"us-central1", "europe-west4", "northamerica-northeast1", "u-france-east1", "me-central2"},
			[]string{"", "us-central1-a", "uscentral1", "us-central", "US-central1", "us-central1/", "us_central1", "a-b-c-d1"}},
		{"Zone", Zone, []string{"us-central1-a", "u-france-east1-b", "europe-west4-c"},
			[]string{"", "us-central1", "us-central1-abc", "us-central1-a/../../x", "us-central1-A", "us-central1-1", "us-central1-a ", "us-central1-a\n"}},
		{"Network", Network, []string{"projects/p/global/networks/default", "projects/123/global/networks/a-b"},
			[]string{"default", "projects/p/global/networks/", "projects/p/global/networks/a/../b", "projects/p/global/networks/A", "global/networks/default"}},
		{"Subnetwork", Subnetwork, []string{"projects/p/regions/us-central1/subnetworks/default"},
			[]string{"projects/p/regions/us-central1-a/subnetworks/default", "projects/p/regions/us-central1/subnetworks/a b", "regions/us-central1/subnetworks/default"}},
		{"Image", Image, []string{"projects/debian-cloud/global/images/family/debian-12", "projects/p/global/images/i-1"},
			[]string{"debian-12", "projects/p/global/images/family/", "projects/p/global/images/a/b", "projects/p/global/images/I"}},
		{"HomeStorage", HomeStorage, []string{"projects/p/locations/us-central1-a/instances/home", "projects/p/locations/us-central1/instances/h"},
			[]string{"10.0.0.2:/home", "projects/p/locations/us-central1-a/instances/home,exec", "projects/p/locations/x/instances/home", "projects/p/locations/us-central1-a/instances/"}},
		{"NFSSource", NFSSource, []string{"10.0.0.2:/home", "10.0.0.2:/", "fs.example.internal:/vol_1/h.o+m-e"},
			[]string{"", "-oexec:/x", "-o:/x", "10.0.0.2:/home,exec", "10.0.0.2:home", ":/home", "10.0.0.2:/ho me", "10.0.0.2:/home\n", "host-:/x", "[fd00::1]:/home", "10.0.0.2:/a:b"}},
		{"LocalPath", LocalPath, []string{"/", "/home", "/srv/a.b_c+d@e-f"}, []string{"", "home", "/a b", "/a,b", "/a\nb", "-/a"}},
		{"ConfServer", ConfServer, []string{"ctl", "ctl:6817", "10.0.0.5:6817,10.0.0.6", "ctl.c.p.internal:1"},
			[]string{"", "-ctl", "ctl:", "ctl:123456", "ctl,", ",ctl", "ctl 1", "ctl:6817/x", "ctl\n"}},
		{"TopicID", TopicID, []string{"job-pending", "abc", "a.b_c~d+e-f"}, []string{"", "ab", "1abc", "a/b", "a b", "a%2F", "abc\n", "a" + strings.Repeat("b", 255)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range tc.good {
				if !tc.r.Match(s) {
					t.Errorf("%q refused", s)
				}
				if err := tc.r.Check("f", s); err != nil {
					t.Errorf("Check(%q) = %v", s, err)
				}
			}
			for _, s := range tc.bad {
				if tc.r.Match(s) {
					t.Errorf("%q accepted", s)
				}
				if err := tc.r.Check("f.g", s); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("f.g: %q", s)) {
					t.Errorf("Check(%q) = %v, want an error naming the field and quoting the value", s, err)
				}
			}
		})
	}
}

// TestDerivedNamesFit: the longest cluster and pool ids ClusterID and
// PoolID allow give VM, MIG, template and resize request names (shared/naming)
// that are RFC 1035 names of at most 63 characters, for every node index a
// pool can have and any generation.
func TestDerivedNamesFit(t *testing.T) {
	cluster, pool := "a123456789", "a23456789012345b"
	if !ClusterID.Match(cluster) || !PoolID.Match(pool) {
		t.Fatal("the longest ids are not valid")
	}
	const maxIndex, maxGen = 999, int64(1<<63 - 1) // spec.MaxPoolNodes - 1
	node := fmt.Sprintf("%s-%s-%d", cluster, pool, maxIndex)
	for _, name := range []string{
		node,
		fmt.Sprintf("%s-g%d", node, maxGen),
		naming.MIG(cluster, pool),
		naming.Template(cluster, pool, "content"),
		naming.NodeResizeRequest(node, maxGen),
	} {
		if !ResourceName.Match(name) {
			t.Errorf("%q (%d characters) is not an RFC 1035 name of at most 63 characters", name, len(name))
		}
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"a":                "a",
		"a\nb":             "a b",
		"a\r\nb":           "a  b",
		"a\tb\x00c\x7fd":   "a b c d",
		"a\u2028b\u2029c":  "a b c",
		"a\u0085b":         "a b",
		"ünïcode stays ok": "ünïcode stays ok",
	} {
		if got := OneLine(in); got != want || HasControl(got) {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
