package plan

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/naming"
)

func tdLabels(cluster string) map[string]string {
	return map[string]string{"managed-by": "flexslurm", "flexslurm-cluster": cluster, "flexslurm-pool": "a3"}
}

func tdPath(name string) string { return "projects/p/global/instanceTemplates/" + name }

// tdInventory is a project holding cluster c1, cluster c2 and things that
// only look like c1's.
func tdInventory() TeardownInventory {
	return TeardownInventory{
		Templates: []TeardownTemplate{
			{Name: "fs-c1-a3-1111", Path: tdPath("fs-c1-a3-1111"), Labels: tdLabels("c1")},
			{Name: "fs-c1-a3-2222", Path: tdPath("fs-c1-a3-2222"), Labels: tdLabels("c1")},
			{Name: "fs-c1-fake", Path: tdPath("fs-c1-fake"), Labels: map[string]string{"flexslurm-cluster": "c1"}}, // no managed-by
			{Name: "fs-c2-a3-3333", Path: tdPath("fs-c2-a3-3333"), Labels: tdLabels("c2")},
			{Name: "fs-c1-shared", Path: tdPath("fs-c1-shared"), Labels: tdLabels("c1")},
			{Name: "fs-c1-region", Path: tdPath("fs-c1-region"), Labels: tdLabels("c1")},
		},
		MIGs: []TeardownMIG{
			{Zone: "z1", Name: "fs-c1-a3", Templates: []string{tdPath("fs-c1-a3-2222")}},
			{Zone: "z2", Name: "fs-c1-old", Templates: []string{tdPath("fs-c1-a3-1111")}}, // a pool removed from the spec, another zone
			{Zone: "z1", Name: "fs-c1-lookalike", Templates: []string{tdPath("fs-c1-fake")}},
			{Zone: "z1", Name: "fs-c2-a3", Templates: []string{tdPath("fs-c2-a3-3333")}},
			{Zone: "z1", Name: "mixed", Templates: []string{tdPath("fs-c1-shared"), tdPath("fs-c2-a3-3333")}},
			{Region: "r1", Name: "regional", Templates: []string{tdPath("fs-c1-region")}},
		},
		ResizeRequests: []TeardownResizeRequest{
			{Zone: "z1", MIG: "fs-c1-a3", Name: "rr-1", State: "ACCEPTED"},
			{Zone: "z1", MIG: "fs-c1-a3", Name: "rr-2", State: "SUCCEEDED"},
			{Zone: "z1", MIG: "fs-c2-a3", Name: "rr-x", State: "ACCEPTED"}, // listed by mistake: never touched
		},
		VMs: []TeardownVM{
			{Zone: "z1", Name: "c1-a3-0-g1", ID: 1, Status: "RUNNING", Labels: tdLabels("c1"), MIG: "fs-c1-a3"},
			{Zone: "z2", Name: "c1-old-0-g1", ID: 2, Status: "RUNNING", Labels: tdLabels("c1"), MIG: "fs-c1-old"},
			{Zone: "z3", Name: "c1-a3-9-g2", ID: 3, Status: "RUNNING", Labels: tdLabels("c1")},                  // standalone
			{Zone: "z1", Name: "c1-a3-8-g1", ID: 4, Status: "RUNNING", Labels: tdLabels("c1"), MIG: "gone-mig"}, // its MIG is gone
			{Zone: "z1", Name: "in-c2", ID: 5, Status: "RUNNING", Labels: tdLabels("c1"), MIG: "fs-c2-a3"},
			{Zone: "z1", Name: "c2-a3-0-g1", ID: 6, Status: "RUNNING", Labels: tdLabels("c2"), MIG: "fs-c2-a3"},
			{Zone: "z1", Name: "c1-half", ID: 7, Status: "RUNNING", Labels: map[string]string{"flexslurm-cluster": "c1"}},
		},
	}
}

func tdNames[T any](xs []T, name func(T) string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, name(x))
	}
	return out
}

func TestPlanTeardown(t *testing.T) {
	p := PlanTeardown("c1", tdInventory())
	got := map[string][]string{
		"rrs":       tdNames(p.ResizeRequests, func(r TeardownResizeRequest) string { return r.MIG + "/" + r.Name }),
		"migs":      tdNames(p.MIGs, func(m TeardownMIG) string { return m.Scope() + "/" + m.Name }),
		"migVMs":    tdNames(p.MIGVMs, func(v TeardownVM) string { return v.Name }),
		"vms":       tdNames(p.VMs, func(v TeardownVM) string { return v.Zone + "/" + v.Name }),
		"templates": tdNames(p.Templates, func(t TeardownTemplate) string { return t.Name }),
		"left":      tdNames(p.Left, func(i TeardownItem) string { return i.Kind + " " + i.Scope + "/" + i.Name }),
	}
	want := map[string][]string{
		"rrs":       {"fs-c1-a3/rr-1", "fs-c1-a3/rr-2"},
		"migs":      {"zones/z1/fs-c1-a3", "zones/z2/fs-c1-old"},
		"migVMs":    {"c1-a3-0-g1", "c1-old-0-g1"},
		"vms":       {"z3/c1-a3-9-g2", "z1/c1-a3-8-g1"},
		"templates": {"fs-c1-a3-1111", "fs-c1-a3-2222"},
		"left": {
			"MIG zones/z1/mixed", "MIG regions/r1/regional", "VM zones/z1/in-c2",
			"instance template global/fs-c1-shared", "instance template global/fs-c1-region",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	for _, it := range p.Left {
		if it.Note == "" {
			t.Errorf("%s: no reason given", it)
		}
	}
	if other := PlanTeardown("c3", tdInventory()); !other.Empty() {
		t.Errorf("cluster c3 has nothing, got plan %+v", other)
	}
	unreachable := PlanTeardown("c3", TeardownInventory{Unreachable: []string{"zones/z9"}})
	if unreachable.Empty() {
		t.Error("an unreachable zone must leave the plan non-empty (unknown is not clean)")
	}
}

func TestTeardownResizeRequestStep(t *testing.T) {
	for state, want := range map[string]TeardownRRStep{
		"": RRGone, "CREATING": RRWait, "ACCEPTED": RRCancel, "SUCCEEDED": RRDelete,
		"FAILED": RRDelete, "CANCELLED": RRDelete, "STATE_UNSPECIFIED": RRWait,
	} {
		if got := TeardownResizeRequestStep(state); got != want {
			t.Errorf("%q: got %d, want %d", state, got, want)
		}
	}
}

func TestTeardownRemaining(t *testing.T) {
	before := tdInventory()
	after := TeardownInventory{
		Templates: before.Templates,
		MIGs:      before.MIGs[2:], // c1's two MIGs are gone
		VMs: []TeardownVM{
			{Zone: "z3", Name: "c1-a3-9-g2", ID: 3, Status: "STOPPING", Labels: tdLabels("c1")},
			{Zone: "z1", Name: "c1-a3-0-g1", ID: 99, Status: "RUNNING", Labels: tdLabels("c1")}, // same name, new VM
		},
	}
	after.Templates = after.Templates[2:] // c1's two templates are gone
	got := tdNames(TeardownRemaining("c1", before, after), func(i TeardownItem) string {
		return i.Kind + " " + i.Name + ": " + strings.SplitN(i.Note, ":", 2)[0]
	})
	want := []string{
		"VM c1-a3-9-g2: still being deleted (STOPPING)",
		"VM c1-a3-0-g1: appeared during the teardown",
		"MIG mixed: uses the cluster's template projects/p/global/instanceTemplates/fs-c1-shared but also projects/p/global/instanceTemplates/fs-c2-a3-3333, which is not the cluster's",
		"MIG regional: a regional MIG using the cluster's templates; flexslurm creates only zonal MIGs, so it is not deleted",
		"instance template fs-c1-shared: in use by MIG zones/z1/mixed, which is not deleted",
		"instance template fs-c1-region: in use by MIG regions/r1/regional, which is not deleted",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("remaining (-want +got):\n%s", diff)
	}
	if got := TeardownRemaining("c1", before, TeardownInventory{}); len(got) != 0 {
		t.Errorf("nothing left: got %v", got)
	}
}

func TestCheckTeardownCluster(t *testing.T) {
	for _, c := range []string{"c1", "a", "abcdefghij"} {
		if err := CheckTeardownCluster(c); err != nil {
			t.Errorf("%q: %v", c, err)
		}
	}
	for _, c := range []string{"", "C1", "1c", "c-1", "abcdefghijk", "c1 "} {
		if err := CheckTeardownCluster(c); err == nil || !strings.Contains(err.Error(), "cluster") {
			t.Errorf("%q: got %v, want an error naming the cluster", c, err)
		}
	}
}

// TestTeardownOwnsRequestMIGsByProof: a MIG of the one-MIG-per-request
// layout is the cluster's only when its templates are and its name is
// naming.RequestMIG of the request, pool and cluster its description
// names; a MIG that looks like one but whose description lies, or names
// another cluster, is left and reported; another cluster's MIG under the
// same name prefix is not even mentioned; the legacy pool MIG still goes.
func TestTeardownOwnsRequestMIGsByProof(t *testing.T) {
	const req, other = "rr-c1-a3-j12-g1", "rr-c1-a3-0-g2"
	mine := naming.RequestMIG("c1", "a3", req)
	lying := naming.RequestMIG("c1", "a3", "rr-c1-a3-j13-g1")
	inv := TeardownInventory{
		Templates: []TeardownTemplate{
			{Name: "fs-c1-a3-1111", Path: tdPath("fs-c1-a3-1111"), Labels: tdLabels("c1")},
			{Name: "fs-c2-a3-3333", Path: tdPath("fs-c2-a3-3333"), Labels: tdLabels("c2")},
		},
		MIGs: []TeardownMIG{
			{Zone: "z1", Name: "fs-c1-a3", Templates: []string{tdPath("fs-c1-a3-1111")}}, // legacy pool MIG, no description
			{Zone: "z1", Name: mine, Templates: []string{tdPath("fs-c1-a3-1111")}, Description: naming.RequestMIGDescription("c1", "a3", req)},
			// The description names another request than the name's.
			{Zone: "z1", Name: lying, Templates: []string{tdPath("fs-c1-a3-1111")}, Description: naming.RequestMIGDescription("c1", "a3", other)},
			// Named like c1's, described as c2's, on c1's template.
			{Zone: "z1", Name: naming.RequestMIG("c1", "a3", "rr-z"), Templates: []string{tdPath("fs-c1-a3-1111")}, Description: naming.RequestMIGDescription("c2", "a3", "rr-z")},
			// Named like c1's, no description, on c1's template.
			{Zone: "z1", Name: naming.RequestMIG("c1", "a3", "rr-w"), Templates: []string{tdPath("fs-c1-a3-1111")}},
			// A description naming c1 on a MIG named otherwise.
			{Zone: "z1", Name: "someones-mig", Templates: []string{tdPath("fs-c1-a3-1111")}, Description: naming.RequestMIGDescription("c1", "a3", req)},
			// Another cluster's MIG whose name shares c1's request-MIG
			// prefix and whose description proves it c1's: its template
			// is c2's.
			{Zone: "z1", Name: naming.RequestMIG("c1", "a3", "rr-v"), Templates: []string{tdPath("fs-c2-a3-3333")}, Description: naming.RequestMIGDescription("c1", "a3", "rr-v")},
			{Zone: "z1", Name: naming.RequestMIG("c2", "a3", req), Templates: []string{tdPath("fs-c2-a3-3333")}, Description: naming.RequestMIGDescription("c2", "a3", req)},
		},
		ResizeRequests: []TeardownResizeRequest{
			{Zone: "z1", MIG: mine, Name: req, State: "ACCEPTED"},
		},
		VMs: []TeardownVM{
			{Zone: "z1", Name: "c1-a3-0-g1", ID: 1, Status: "RUNNING", Labels: tdLabels("c1"), MIG: "fs-c1-a3"},
			{Zone: "z1", Name: "c1-a3-1-g1", ID: 2, Status: "RUNNING", Labels: tdLabels("c1"), MIG: mine},
		},
	}
	p := PlanTeardown("c1", inv)
	got := map[string][]string{
		"migs":   tdNames(p.MIGs, func(m TeardownMIG) string { return m.Name }),
		"rrs":    tdNames(p.ResizeRequests, func(r TeardownResizeRequest) string { return r.MIG + "/" + r.Name }),
		"migVMs": tdNames(p.MIGVMs, func(v TeardownVM) string { return v.Name }),
		"left":   tdNames(p.Left, func(i TeardownItem) string { return i.Kind + " " + i.Name }),
	}
	want := map[string][]string{
		"migs":   {"fs-c1-a3", mine},
		"rrs":    {mine + "/" + req},
		"migVMs": {"c1-a3-0-g1", "c1-a3-1-g1"},
		"left": {
			"MIG " + lying, "MIG " + naming.RequestMIG("c1", "a3", "rr-z"), "MIG " + naming.RequestMIG("c1", "a3", "rr-w"), "MIG someones-mig",
			"instance template fs-c1-a3-1111",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	notes := map[string]string{}
	for _, it := range p.Left {
		notes[it.Name] = it.Note
	}
	for name, want := range map[string]string{
		lying:                                 "its description names request " + other + " of pool a3, whose MIG is " + naming.RequestMIG("c1", "a3", other) + ", not " + lying,
		naming.RequestMIG("c1", "a3", "rr-z"): "its description names cluster c2",
		naming.RequestMIG("c1", "a3", "rr-w"): "names no request",
		"someones-mig":                        "whose MIG is " + mine + ", not someones-mig",
		"fs-c1-a3-1111":                       "which is not deleted",
	} {
		if !strings.Contains(notes[name], want) || !strings.Contains(notes[name], "not deleted") {
			t.Errorf("%s: note %q, want it to say %q and that it is not deleted", name, notes[name], want)
		}
	}
}
