package gce_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/gce"
)

// TestListShortcutMatchesREST: a Client whose list calls the simulator
// answers without JSON (computesim.ListShortcut) returns what the same
// calls return over REST, in every state a pool goes through, and leaves
// to REST exactly the calls it must: one whose answer has a next page,
// one that fails, one an injected error matches (which REST then gets,
// once).
func TestListShortcutMatchesREST(t *testing.T) {
	h := newHarness(t, computesim.Options{CapacityDelay: func(zone, machineType string) time.Duration {
		if machineType == "a4-highgpu-8g" {
			return 30 * time.Minute // b200 requests stay queued a while
		}
		return 0
	}})
	s, err := gce.New(h.ctx, project, option.WithEndpoint(h.url), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var answered []string
	s.SetListShortcut(computesim.ListShortcut{Sim: h.sim, Answered: func(method, path string) {
		if method != http.MethodGet {
			t.Errorf("answered %s %s", method, path)
		}
		answered = append(answered, path)
	}})

	type lists struct {
		Pool, Other, All []gce.Instance
		MIGs, Prefix     []gce.MIG
		RRs, OtherRRs    []gce.ResizeRequest
		Errs             []string
	}
	list := func(c *gce.Client) lists {
		var l lists
		errs := func(err error) {
			if err != nil {
				l.Errs = append(l.Errs, gce.Classify(err).String())
			} else {
				l.Errs = append(l.Errs, "")
			}
		}
		var err error
		l.Pool, err = c.ListInstances(h.ctx, zone, map[string]string{"flexslurm-cluster": "c1", "flexslurm-pool": "h200"})
		errs(err)
		l.Other, err = c.ListInstances(h.ctx, zone, map[string]string{"flexslurm-pool": "b200"})
		errs(err)
		l.All, err = c.ListInstances(h.ctx, zone, nil)
		errs(err)
		l.MIGs, err = c.ListMIGs(h.ctx, zone, "")
		errs(err)
		l.Prefix, err = c.ListMIGs(h.ctx, zone, "c1-h200")
		errs(err)
		l.RRs, err = c.ListResizeRequests(h.ctx, zone, "c1-h200")
		errs(err)
		l.OtherRRs, err = c.ListResizeRequests(h.ctx, zone, "c1-b200")
		errs(err)
		return l
	}
	check := func(when string, wantAnswered int) {
		t.Helper()
		answered = nil
		rest, short := list(h.c), list(s)
		if d := cmp.Diff(rest, short); d != "" {
			t.Errorf("%s: shortcut differs from REST (-REST +shortcut):\n%s", when, d)
		}
		if len(answered) != wantAnswered {
			t.Errorf("%s: %d calls answered without REST, want %d: %q", when, len(answered), wantAnswered, answered)
		}
	}

	// No MIG yet: the resize request lists fail (404) over REST.
	check("empty project", 5)
	h.pool()
	other := flexSpec("c1-b200-v1")
	other.Properties.Labels = map[string]string{"flexslurm-cluster": "c1", "flexslurm-pool": "b200"}
	other.Properties.MachineType = "a4-highgpu-8g"
	other.Properties.GuestAccelerators[0].AcceleratorType = "nvidia-b200"
	if err := h.c.EnsureInstanceTemplate(h.ctx, other, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: "c1-b200", Template: "c1-b200-v1"}, ""); err != nil {
		t.Fatal(err)
	}
	check("two MIGs", 7)
	var names []string
	for i := range 3 {
		names = append(names, fmt.Sprintf("c1-h200-%d", i))
	}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr-1", Instances: names, RunDuration: time.Hour}, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-b200", gce.ResizeRequestSpec{Name: "rr-2", Instances: []string{"c1-b200-0"}, RunDuration: time.Hour}, ""); err != nil {
		t.Fatal(err)
	}
	check("requests created", 7)
	h.tick(0)
	h.tick(time.Minute)
	check("h200 provisioned, b200 queued", 7)
	if err := h.c.DeleteInstances(h.ctx, zone, "c1-h200", names[:1], ""); err != nil {
		t.Fatal(err)
	}
	check("a VM being deleted", 7)
	h.tick(time.Hour)
	check("an hour later", 7)

	// An injected error is left to REST, which gets it once.
	h.sim.InjectError(computesim.Match{Method: "GET", Path: `/instances$`}, 403, "forbidden", "", 1)
	answered = nil
	if _, err := s.ListInstances(h.ctx, zone, nil); gce.Classify(err) != gce.ClassPermanent {
		t.Errorf("injected 403: %v", err)
	}
	if len(answered) != 0 {
		t.Errorf("the shortcut answered a call an injection matches: %q", answered)
	}
	if _, err := s.ListInstances(h.ctx, zone, nil); err != nil || len(answered) != 1 {
		t.Errorf("after the injection: %v, answered %q", err, answered)
	}

	// More VMs than one page holds: left to REST, which follows the pages.
	var many []string
	for i := range 510 {
		many = append(many, fmt.Sprintf("c1-h200-x%03d", i))
	}
	if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr-3", Instances: many, RunDuration: time.Hour}, ""); err != nil {
		t.Fatal(err)
	}
	h.tick(0)
	h.tick(time.Minute)
	if n := len(h.sim.Instances()); n < 500 {
		t.Fatalf("%d VMs, want more than a page", n)
	}
	h.gets.Store(0)
	check("512 VMs", 5)
	// REST: 2 lists of 2 pages and one of 1; the shortcut's client: the
	// 2 lists of 2 pages.
	if n := h.gets.Load(); n != 5+4 {
		t.Errorf("%d VM list pages fetched over REST, want 9", n)
	}

	// Allow refuses: everything goes over REST.
	s.SetListShortcut(computesim.ListShortcut{Sim: h.sim, Allow: func(string, string) bool { return false },
		Answered: func(_, path string) { answered = append(answered, path) }})
	check("Allow refusing", 0)
}
