package naming

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

// rfc1035 is Compute's rule for resource names: 1–63 characters, a
// lowercase letter first, then lowercase letters, digits or hyphens, not
// ending in a hyphen
// (https://cloud.google.com/compute/docs/naming-resources#resource-name-format).
var rfc1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// The longest ids shared/spec and shared/event accept: a cluster id matches
// ^[a-z][a-z0-9]{0,9}$, a pool id ^[a-z]([a-z0-9-]{0,14}[a-z0-9])?$, a pool
// holds at most 1000 nodes (indexes 0–999), and a job id matches
// ^[0-9]{1,12}(_[0-9]{1,9})?$.
const (
	maxCluster = "c123456789"
	maxPool    = "p12345678901234z"
	maxIndex   = 999
	maxJobID   = "123456789012_123456789"
	// maxJobGeneration is the largest job generation whose resize request
	// name still fits 63 characters with the longest ids above.
	maxJobGeneration = 9_999_999
)

func TestNamesFitRFC1035AtMaximumIDLengths(t *testing.T) {
	node := fmt.Sprintf("%s-%s-%d", maxCluster, maxPool, maxIndex)
	names := map[string]string{
		"MIG":                        MIG(maxCluster, maxPool),
		"Template":                   Template(maxCluster, maxPool, strings.Repeat("x", 100000)),
		"NodeResizeRequest":          NodeResizeRequest(node, 1<<62),
		"JobResizeRequest":           JobResizeRequest(maxCluster, maxPool, maxJobID, maxJobGeneration),
		"JobResizeRequest (min ids)": JobResizeRequest("c", "p", "1", 1),
		"MIG (min ids)":              MIG("c", "p"),
	}
	for what, name := range names {
		if !rfc1035.MatchString(name) {
			t.Errorf("%s = %q (%d characters) is not a valid Compute resource name", what, name, len(name))
		}
	}
	// One more job generation digit no longer fits: the bound above is
	// tight, so a change to the format that costs a character fails here.
	if n := JobResizeRequest(maxCluster, maxPool, maxJobID, maxJobGeneration*10+9); len(n) <= 63 {
		t.Errorf("JobResizeRequest at generation %d is %d characters; the documented bound is no longer tight", maxJobGeneration*10+9, len(n))
	}
}

func TestNamesAreTodays(t *testing.T) {
	// Fixed values: names are recorded in Firestore and exist in Compute, so
	// a format change would orphan them.
	got := []string{
		MIG("c1", "a3u"),
		Template("c1", "a3u", "x"),
		NodeResizeRequest("c1-a3u-3", 2),
		JobResizeRequest("c1", "a3u", "12_3", 1),
		JobResizeRequest("c1", "a3u", "12", 4),
	}
	want := []string{"fs-c1-a3u", "fs-c1-a3u-2d711642", "rr-c1-a3u-3-g2", "rr-c1-a3u-j12-3-g1", "rr-c1-a3u-j12-g4"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("names changed (-want +got):\n%s", d)
	}
}

// TestRequestIDsAreTodays pins every constructor to the id the previous,
// hand-assembled form produced, so that an operation in flight across an
// upgrade carries the same requestId and Compute deduplicates it.
func TestRequestIDsAreTodays(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"DeleteInstances", DeleteInstancesRequestID("fs-c1-a3u", "c1-a3u-3-g2"), "df98623a-5852-5aac-bcb1-fd35204513af"},
		{"ReportHostAsFaulty", ReportHostAsFaultyRequestID("us-central1-a", "c1-a3u-3-g2"), "26171e15-332e-5fec-9992-018966a467eb"},
		{"StartInstance", StartInstanceRequestID("us-central1-a", "c1-a3u-3-g2"), "f8f42b05-774c-56e8-b624-fd89c25da81b"},
		{"DeleteMIG", DeleteMIGRequestID("us-central1-a", "fs-c1-a3u", 2), "e21e3d4d-33e4-5194-9682-ef5261081efa"},
		{"CreateResizeRequest", CreateResizeRequestID("fs-c1-a3u", "rr-c1-a3u-3-g2"), "04d8613d-2f3a-565a-94a3-538e82dc2542"},
		{"CancelResizeRequest", CancelResizeRequestID("fs-c1-a3u", "rr-c1-a3u-3-g2"), "6200ed10-693c-5864-98f2-8a0f14a66660"},
		{"DeleteResizeRequest", DeleteResizeRequestID("fs-c1-a3u", "rr-c1-a3u-3-g2", 2), "fbd09fdc-f99e-5c2c-af33-e78a3afc423c"},
		{"InsertTemplate", InsertTemplateRequestID("fs-c1-a3u-0123abcd"), "136210bb-0076-5e66-a2c1-31d8a79f9909"},
		{"InsertMIG", InsertMIGRequestID("us-central1-a", "fs-c1-a3u", 0), "12d23edf-7eab-5b23-ae7c-292cb410d4b5"},
		{"Teardown", TeardownRequestID("run-1", "delete-mig", "zones/us-central1-a/instanceGroupManagers/fs-c1-a3u"), "74dde66d-62f2-5d74-895c-55d4f4e35ba3"},
		{"CommandID", CommandID("drain", "c1-a3u-3"), "3118241f-071b-5208-86ea-73321cc180d6"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %s, want %s (the id of the same operation before this release)", tc.name, tc.got, tc.want)
		}
	}
}

func TestRequestIDsAreNameBasedUUIDsInFlexslurmsNamespace(t *testing.T) {
	id := DeleteInstancesRequestID("fs-c1-a3u", "c1-a3u-3-g2")
	u, err := uuid.Parse(id)
	if err != nil {
		t.Fatalf("request id %q is not a UUID: %v", id, err)
	}
	if u.Version() != 5 || u.Variant() != uuid.RFC4122 {
		t.Errorf("request id %s: version %d variant %s, want a version 5 (SHA-1 name-based) RFC 4122 UUID", id, u.Version(), u.Variant())
	}
	want := uuid.NewSHA1(uuid.MustParse("6f0b6c3e-5a0f-4f5e-9a43-5f1e7c2d9b10"), []byte("delete-instances/fs-c1-a3u/c1-a3u-3-g2"))
	if u != want {
		t.Errorf("request id %s, want %s: the namespace or the hashed string changed", u, want)
	}
	if other := uuid.NewSHA1(uuid.NameSpaceDNS, []byte("delete-instances/fs-c1-a3u/c1-a3u-3-g2")); u == other {
		t.Error("request id does not depend on flexslurm's namespace")
	}
}

func TestDeterministicAndDistinct(t *testing.T) {
	build := func() []string {
		var out []string
		for _, mig := range []string{"fs-c1-a", "fs-c1-b"} {
			for _, res := range []string{"c1-a-0-g1", "c1-a-0-g2", "c1-a-1-g1"} {
				out = append(out,
					DeleteInstancesRequestID(mig, res),
					CreateResizeRequestID(mig, "rr-"+res),
					CancelResizeRequestID(mig, "rr-"+res),
					DeleteResizeRequestID(mig, "rr-"+res, 0),
					DeleteResizeRequestID(mig, "rr-"+res, 1),
				)
			}
			out = append(out, InsertMIGRequestID("z1", mig, 0), InsertMIGRequestID("z1", mig, 1), InsertMIGRequestID("z2", mig, 0),
				DeleteMIGRequestID("z1", mig, 0), DeleteMIGRequestID("z1", mig, 1), InsertTemplateRequestID(mig+"-t"))
		}
		for _, vm := range []string{"c1-a-0-g1", "c1-a-0-g2"} {
			for _, zone := range []string{"z1", "z2"} {
				out = append(out, ReportHostAsFaultyRequestID(zone, vm), StartInstanceRequestID(zone, vm))
			}
		}
		out = append(out, TeardownRequestID("r1", "delete-mig", "x"), TeardownRequestID("r2", "delete-mig", "x"), TeardownRequestID("r1", "delete-template", "x"),
			CommandID("drain", "n1"), CommandID("drain", "n2"), CommandID("resume", "n1"))
		for _, c := range []string{"a", "b"} {
			for _, p := range []string{"p", "q"} {
				out = append(out, MIG(c, p), Template(c, p, "1"), Template(c, p, "2"),
					JobResizeRequest(c, p, "12", 1), JobResizeRequest(c, p, "12", 2), JobResizeRequest(c, p, "12_3", 1), JobResizeRequest(c, p, "123", 1))
			}
		}
		out = append(out, NodeResizeRequest("a-p-0", 1), NodeResizeRequest("a-p-0", 2), NodeResizeRequest("a-p-1", 1))
		return out
	}
	first, second := build(), build()
	if d := cmp.Diff(first, second); d != "" {
		t.Fatalf("the same inputs built different names or ids (-first +second):\n%s", d)
	}
	seen := map[string]int{}
	for i, s := range first {
		if j, dup := seen[s]; dup {
			t.Errorf("entries %d and %d are both %q: distinct inputs must give distinct names", j, i, s)
		}
		seen[s] = i
	}
}

func TestJobResizeRequestArrayJobs(t *testing.T) {
	// An array task "12_3" cannot be told apart from job "12" task "3" by
	// any other spelling; "_" is not allowed in a Compute name.
	got := JobResizeRequest("c1", "a3u", "12_3", 1)
	if got != "rr-c1-a3u-j12-3-g1" || !rfc1035.MatchString(got) {
		t.Errorf("JobResizeRequest(array task 12_3) = %q, want rr-c1-a3u-j12-3-g1", got)
	}
	if a, b := JobResizeRequest("c1", "a3u", "12_3", 1), JobResizeRequest("c1", "a3u", "123", 1); a == b {
		t.Errorf("array task 12_3 and job 123 share the name %q", a)
	}
}

func TestParseVMNameRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		vm                  string
		node, cluster, pool string
		gen                 int64
		ok                  bool
	}{
		{"c1-a3u-3-g2", "c1-a3u-3", "c1", "a3u", 2, true},
		{"c1-my-pool-12-g7", "c1-my-pool-12", "c1", "my-pool", 7, true},
		{maxCluster + "-" + maxPool + "-999-g1", maxCluster + "-" + maxPool + "-999", maxCluster, maxPool, 1, true},
		{"c1-a3u-3-g0", "", "", "", 0, false},
		{"c1-a3u-03-g1", "", "", "", 0, false},
		{"c1-a3u-3", "", "", "", 0, false},
		{"c1-3-g1", "", "", "", 0, false},
		{"-a3u-3-g1", "", "", "", 0, false},
		{"c1-a3u-3-g+1", "", "", "", 0, false},
		// VMs a MIG named from the base "<node>-g<generation>".
		{"c1-a3u-3-g2-x7k2", "c1-a3u-3", "c1", "a3u", 2, true},
		{"c1-a3u-3-g2-g123", "c1-a3u-3", "c1", "a3u", 2, true},
		{"c1-a3u-3-g2-1234", "c1-a3u-3", "c1", "a3u", 2, true},
		{"c1-a3u-3-g2-X7K2", "", "", "", 0, false},
		{"c1-a3u-3-g2-x7k", "", "", "", 0, false},
		{"c1-a3u-3-g2-x7k22", "", "", "", 0, false},
		{"c1-a3u-3-x7k2", "", "", "", 0, false},
	} {
		node, cluster, pool, gen, ok := ParseVMName(tc.vm)
		if ok != tc.ok || node != tc.node || cluster != tc.cluster || pool != tc.pool || gen != tc.gen {
			t.Errorf("ParseVMName(%q) = %q %q %q %d %v, want %q %q %q %d %v", tc.vm, node, cluster, pool, gen, ok, tc.node, tc.cluster, tc.pool, tc.gen, tc.ok)
		}
	}
}

func TestBaseVMName(t *testing.T) {
	for vm, want := range map[string]string{
		"c1-a3u-3-g2":      "c1-a3u-3-g2",
		"c1-a3u-3-g2-x7k2": "c1-a3u-3-g2",
		"c1-a3u-3-g2-g123": "c1-a3u-3-g2",
		"controller":       "controller",
		"abc-x7k2":         "abc-x7k2",
		"c1-a3u-3-x7k2":    "c1-a3u-3-x7k2",
	} {
		if got := BaseVMName(vm); got != want {
			t.Errorf("BaseVMName(%q) = %q, want %q", vm, got, want)
		}
	}
	if !SameVM("c1-a3u-3-g2", "c1-a3u-3-g2-x7k2") || !SameVM("c1-a3u-3-g2", "c1-a3u-3-g2") {
		t.Error("SameVM refuses a generation's VM")
	}
	if SameVM("c1-a3u-3-g2", "c1-a3u-3-g3-x7k2") || SameVM("c1-a3u-3-g2", "c1-a3u-3-g22") || SameVM("", "") {
		t.Error("SameVM accepts another generation's VM")
	}
}

// TestVMBaseNameFits: a node generation's VM name is a MIG's
// baseInstanceName when its request cannot name VMs, which the API bounds
// at 58 characters; with the MIG's suffix it is a valid instance name.
func TestVMBaseNameFits(t *testing.T) {
	node := fmt.Sprintf("%s-%s-%d", maxCluster, maxPool, maxIndex)
	base := fmt.Sprintf("%s-g%d", node, int64(1)<<62)
	if len(base) > 58 {
		t.Errorf("VM base name %q is %d characters, more than baseInstanceName's 58", base, len(base))
	}
	if vm := base + "-x7k2"; !rfc1035.MatchString(vm) {
		t.Errorf("%q is not a valid Compute instance name", vm)
	}
}

func TestLabelsAreValidComputeLabels(t *testing.T) {
	// Label keys and values: lowercase letters, digits, '-' and '_', keys
	// starting with a letter, at most 63 characters
	// (https://cloud.google.com/compute/docs/labeling-resources#requirements).
	key := regexp.MustCompile(`^[a-z][-_a-z0-9]{0,62}$`)
	val := regexp.MustCompile(`^[-_a-z0-9]{0,63}$`)
	for k, v := range Labels(maxCluster, maxPool) {
		if !key.MatchString(k) || !val.MatchString(v) {
			t.Errorf("label %q=%q is not a valid Compute label", k, v)
		}
	}
}

func TestRequestMIG(t *testing.T) {
	long := RequestMIG("abcdefghij", "abcdefghijklmnop", JobResizeRequest("abcdefghij", "abcdefghijklmnop", "123456789_1234", 99))
	if !rfc1035.MatchString(long) {
		t.Errorf("RequestMIG = %q (%d chars): not a Compute name", long, len(long))
	}
	a := RequestMIG("c", "gpu", "rr-c-gpu-0-g1")
	if a == RequestMIG("c", "gpu", "rr-c-gpu-0-g2") || a == RequestMIG("c", "gpu2", "rr-c-gpu-0-g1") || a == MIG("c", "gpu") {
		t.Errorf("request MIGs of different requests or pools share a name: %s", a)
	}
	if !strings.HasPrefix(a, RequestMIGPrefix("c", "gpu")) {
		t.Errorf("%s does not start with %s", a, RequestMIGPrefix("c", "gpu"))
	}
	d := RequestMIGDescription("c", "gpu", "rr-c-gpu-0-g1")
	if r, ok := IsRequestMIG("c", "gpu", a, d); !ok || r != "rr-c-gpu-0-g1" {
		t.Errorf("IsRequestMIG(own) = %q, %v", r, ok)
	}
	for _, tc := range []struct{ cluster, pool, name, desc string }{
		{"d", "gpu", a, d},                           // another cluster
		{"c", "gpu2", a, d},                          // another pool
		{"c", "gpu", RequestMIG("c", "gpu", "x"), d}, // name of another request
		{"c", "gpu", a, "flexslurm node pool gpu of cluster c"},
		{"c", "gpu", a, d + " extra"},
		{"c", "gpu", a, ""},
	} {
		if _, ok := IsRequestMIG(tc.cluster, tc.pool, tc.name, tc.desc); ok {
			t.Errorf("IsRequestMIG(%q, %q, %q, %q) accepted", tc.cluster, tc.pool, tc.name, tc.desc)
		}
	}
}

// TestInsertTemplateRequestIDIn: the template insert's request id depends on
// the cluster's incarnation, and incarnation "" gives the id of before.
func TestInsertTemplateRequestIDIn(t *testing.T) {
	const tpl = "fs-c1-a3u-0123abcd"
	if got, want := InsertTemplateRequestIDIn(tpl, ""), "136210bb-0076-5e66-a2c1-31d8a79f9909"; got != want {
		t.Errorf("InsertTemplateRequestIDIn(%q, \"\") = %s, want today's %s", tpl, got, want)
	}
	a := InsertTemplateRequestIDIn(tpl, "1796000000000000000")
	b := InsertTemplateRequestIDIn(tpl, "1796000000000000001")
	if a == b || a == InsertTemplateRequestID(tpl) || b == InsertTemplateRequestID(tpl) {
		t.Errorf("incarnations give ids %s and %s (legacy %s): want three different ids", a, b, InsertTemplateRequestID(tpl))
	}
	if a != InsertTemplateRequestIDIn(tpl, "1796000000000000000") {
		t.Error("the id of one incarnation changes between calls")
	}
	if InsertTemplateRequestIDIn(tpl, "1") == InsertTemplateRequestIDIn(tpl+"1", "") {
		t.Error("template and incarnation run together")
	}
}

func TestWorkloadPolicy(t *testing.T) {
	for _, d := range []string{"", "SUBBLOCK", "BLOCK", "CLUSTER"} {
		name := WorkloadPolicy("abcdefghij", "pool-0123456789a", d)
		if len(name) > 63 || !rfc1035.MatchString(name) {
			t.Errorf("WorkloadPolicy(%q) = %q: not an RFC1035 name of at most 63 characters", d, name)
		}
		got, ok := IsWorkloadPolicy("abcdefghij", "pool-0123456789a", name, WorkloadPolicyDescription("abcdefghij", "pool-0123456789a"))
		if !ok || got != d {
			t.Errorf("IsWorkloadPolicy(%q) = %q, %v; want %q, true", name, got, ok, d)
		}
		if _, ok := IsWorkloadPolicy("abcdefghij", "other", name, WorkloadPolicyDescription("abcdefghij", "other")); ok {
			t.Errorf("%q proved another pool's policy", name)
		}
	}
	if _, ok := IsWorkloadPolicy("c", "p", WorkloadPolicy("c", "p", "BLOCK"), "someone's policy"); ok {
		t.Error("a policy of the right name but another description was taken for the pool's")
	}
	c, p, ok := ParseWorkloadPolicyDescription(WorkloadPolicyDescription("c1", "gpu"))
	if !ok || c != "c1" || p != "gpu" {
		t.Errorf("ParseWorkloadPolicyDescription = %q %q %v", c, p, ok)
	}
	if got := WorkloadPolicyPath("us-central1-a", "fs-c-p-wp-any"); got != "regions/us-central1/resourcePolicies/fs-c-p-wp-any" {
		t.Errorf("WorkloadPolicyPath = %q", got)
	}
}
