package gce_test

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/gce"
)

// TestResizeRequestAPI runs every resize-request call in each mode (v1,
// beta, auto) against the simulator with named requests accepted on v1 and
// with them refused there (Readings.RefuseNamedRequestsOnV1): auto and beta
// must succeed under both, v1 must fail clearly when v1 refuses. The calls
// recorded by the simulator show which version each went through.
func TestResizeRequestAPI(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		for _, mode := range []string{gce.ResizeRequestAPIV1, gce.ResizeRequestAPIBeta, gce.ResizeRequestAPIAuto} {
			name := mode + "/" + map[bool]string{false: "v1-accepts-names", true: "v1-refuses-names"}[refuse]
			t.Run(name, func(t *testing.T) {
				r := computesim.LenientReadings()
				r.RefuseNamedRequestsOnV1 = refuse
				h := newHarness(t, computesim.Options{Readings: r, CapacityDelay: func(string, string) time.Duration { return time.Hour }})
				if err := h.c.SetResizeRequestAPI(mode); err != nil {
					t.Fatal(err)
				}
				var logged strings.Builder
				h.c.SetLogger(slog.New(slog.NewTextHandler(&logged, nil)))
				h.pool()
				spec := gce.ResizeRequestSpec{Name: "rr-1", Instances: []string{"c1-h200-0"}, RunDuration: time.Hour}
				err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", spec, rid("rr-1"))
				if mode == gce.ResizeRequestAPIV1 && refuse {
					if err == nil {
						t.Fatal("v1 mode: a named request v1 refuses succeeded")
					}
					if gce.Classify(err) != gce.ClassPermanent || !strings.Contains(err.Error(), "resource.instances") || !strings.Contains(err.Error(), "rr-1") {
						t.Errorf("v1 mode: error %v (class %v): want a permanent error naming the request and the field", err, gce.Classify(err))
					}
					return
				}
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				h.tick(0)
				rr, err := h.c.GetResizeRequest(h.ctx, zone, "c1-h200", "rr-1")
				if err != nil || rr.State != gce.StateAccepted || len(rr.Instances) != 1 || rr.Instances[0] != "c1-h200-0" {
					t.Fatalf("get: %+v %v", rr, err)
				}
				// A second named request: auto keeps to the version that worked.
				if err := h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr-2", Instances: []string{"c1-h200-1"}}, rid("rr-2")); err != nil {
					t.Fatalf("second create: %v", err)
				}
				list, err := h.c.ListResizeRequests(h.ctx, zone, "c1-h200")
				if err != nil || len(list) != 2 {
					t.Fatalf("list: %+v %v", list, err)
				}
				if err := h.c.CancelResizeRequest(h.ctx, zone, "c1-h200", "rr-1", rid("cancel rr-1")); err != nil {
					t.Fatalf("cancel: %v", err)
				}
				if err := h.c.DeleteResizeRequest(h.ctx, zone, "c1-h200", "rr-1", rid("delete rr-1")); err != nil {
					t.Fatalf("delete: %v", err)
				}
				if _, err := h.c.GetResizeRequest(h.ctx, zone, "c1-h200", "rr-1"); !gce.IsNotFound(err) {
					t.Fatalf("get after delete: %v", err)
				}

				// Which version each resize-request call went through.
				var inserts []string
				var others []string
				for _, c := range h.sim.Calls() {
					if !strings.Contains(c.Path, "/resizeRequests") {
						continue
					}
					api := strings.Split(strings.TrimPrefix(c.Path, "/compute/"), "/")[0]
					if c.Method == "POST" && strings.HasSuffix(c.Path, "/resizeRequests") {
						inserts = append(inserts, api+":"+c.RequestID[:8]+":"+statusWord(c.Status))
					} else {
						others = append(others, api)
					}
				}
				var want []string
				r1, r2 := rid("rr-1")[:8], rid("rr-2")[:8]
				switch {
				case mode == gce.ResizeRequestAPIBeta:
					want = []string{"beta:" + r1 + ":ok", "beta:" + r2 + ":ok"}
				case mode == gce.ResizeRequestAPIAuto && refuse:
					// The refused insert is sent again through beta with the
					// same request id; the next named insert goes to beta.
					want = []string{"v1:" + r1 + ":400", "beta:" + r1 + ":ok", "beta:" + r2 + ":ok"}
				default:
					want = []string{"v1:" + r1 + ":ok", "v1:" + r2 + ":ok"}
				}
				if strings.Join(inserts, " ") != strings.Join(want, " ") {
					t.Errorf("inserts went %v, want %v", inserts, want)
				}
				wantOther := "v1"
				if mode == gce.ResizeRequestAPIBeta {
					wantOther = "beta"
				}
				for _, o := range others {
					if o != wantOther {
						t.Errorf("cancel/delete went through %s, want %s (all: %v)", o, wantOther, others)
						break
					}
				}
				wantAPI := gce.ResizeRequestAPIV1
				if mode == gce.ResizeRequestAPIBeta || (mode == gce.ResizeRequestAPIAuto && refuse) {
					wantAPI = gce.ResizeRequestAPIBeta
				}
				if got := h.c.ResizeRequestAPI(); got != wantAPI {
					t.Errorf("ResizeRequestAPI() = %s, want %s", got, wantAPI)
				}
				wantLines := 0
				if mode == gce.ResizeRequestAPIAuto && refuse {
					wantLines = 1 // once, at INFO, however many requests follow
				}
				if n := strings.Count(logged.String(), "level=INFO msg=\"resize requests that name their VMs go through the Compute beta API"); n != wantLines || strings.Count(logged.String(), "\n") != wantLines {
					t.Errorf("logged %d switch line(s), want %d:\n%s", n, wantLines, logged.String())
				}
			})
		}
	}
}

func statusWord(code int) string {
	if code == 200 {
		return "ok"
	}
	return strconv.Itoa(code)
}

// TestResizeRequestAPIAutoKeepsOtherErrors: in auto mode a named insert
// for several VMs that both versions refuse returns v1's error with
// beta's and the setting that would serve it, and auto stays on v1.
func TestResizeRequestAPIAutoKeepsOtherErrors(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	h.pool()
	// A MIG that does not exist: 404 on v1, not a 400, so beta is not tried.
	err := h.c.CreateResizeRequest(h.ctx, zone, "nope", gce.ResizeRequestSpec{Name: "rr", Instances: []string{"a"}}, "")
	if !gce.IsNotFound(err) {
		t.Fatalf("missing MIG: %v", err)
	}
	// Inject the same 400 on both versions.
	for _, api := range []string{"v1", "beta"} {
		h.sim.Inject(computesim.Injection{Match: computesim.Match{Method: "POST", Path: "^/compute/" + api + "/.*/resizeRequests$"}, Status: 400, Reason: "invalid", Message: "injected", Times: 1})
	}
	err = h.c.CreateResizeRequest(h.ctx, zone, "c1-h200", gce.ResizeRequestSpec{Name: "rr", Instances: []string{"a", "b"}}, "")
	if err == nil || strings.Count(err.Error(), "injected") != 2 || !strings.Contains(err.Error(), "beta: ") ||
		!strings.Contains(err.Error(), "FLEXSLURM_RESIZE_REQUEST_API=count") || !errors.Is(err, gce.ErrInvalidSpec) {
		t.Fatalf("both refuse: %v", err)
	}
	if got := h.c.ResizeRequestAPI(); got != gce.ResizeRequestAPIV1 {
		t.Errorf("after both refused, named inserts go through %s", got)
	}
}

func TestSetResizeRequestAPIRefusesUnknown(t *testing.T) {
	h := newHarness(t, computesim.Options{})
	err := h.c.SetResizeRequestAPI("v2")
	if err == nil || !strings.Contains(err.Error(), `"v2"`) || !errors.Is(err, gce.ErrInvalidSpec) {
		t.Errorf("SetResizeRequestAPI(v2) = %v", err)
	}
	if err := h.c.SetResizeRequestAPI(""); err != nil {
		t.Errorf("empty (auto): %v", err)
	}
}

// TestResizeRequestAPIUnnamed runs against a simulator that accepts no
// named request on either version (RefuseNamedRequestsOnV1 and
// RefuseNamedRequestsOnBeta). Count mode makes every one-VM request with
// resizeBy 1 through v1, without trying names; auto mode tries v1, then
// beta, then resizeBy, and makes later one-VM requests unnamed at once.
// Both refuse a request for several VMs, naming the setting. The VM the
// MIG makes is named from the MIG's base instance name, and GetInstance
// finds it under that base.
func TestResizeRequestAPIUnnamed(t *testing.T) {
	for _, mode := range []string{gce.ResizeRequestAPICount, gce.ResizeRequestAPIAuto} {
		t.Run(mode, func(t *testing.T) {
			r := computesim.StrictReadings()
			r.RefuseNamedRequestsOnBeta = true
			h := newHarness(t, computesim.Options{Readings: r, CapacityDelay: func(string, string) time.Duration { return 0 }})
			if err := h.c.SetResizeRequestAPI(mode); err != nil {
				t.Fatal(err)
			}
			var logged strings.Builder
			h.c.SetLogger(slog.New(slog.NewTextHandler(&logged, nil)))
			if err := h.c.EnsureInstanceTemplate(h.ctx, flexSpec("c1-h200-v1"), rid("ensure template c1-h200-v1")); err != nil {
				t.Fatal(err)
			}
			const vm0, vm1 = "c1-h200-0-g1", "c1-h200-1-g1"
			for _, vm := range []string{vm0, vm1} {
				if err := h.c.EnsureMIG(h.ctx, gce.MIGSpec{Zone: zone, Name: "mig-" + vm, Template: "c1-h200-v1", BaseInstanceName: vm}, rid("mig "+vm)); err != nil {
					t.Fatal(err)
				}
				if err := h.c.CreateResizeRequest(h.ctx, zone, "mig-"+vm, gce.ResizeRequestSpec{Name: "rr-" + vm, Instances: []string{vm}, RunDuration: time.Hour}, rid("rr "+vm)); err != nil {
					t.Fatalf("one-VM request for %s: %v", vm, err)
				}
			}
			err := h.c.CreateResizeRequest(h.ctx, zone, "mig-"+vm0, gce.ResizeRequestSpec{Name: "rr-two", Instances: []string{"c1-h200-2-g1", "c1-h200-3-g1"}}, rid("rr-two"))
			if err == nil || !strings.Contains(err.Error(), "asks for 2 VMs") || !strings.Contains(err.Error(), "FLEXSLURM_RESIZE_REQUEST_API=count") {
				t.Errorf("two-VM request: %v, want a refusal naming the setting", err)
			}
			if got := h.c.ResizeRequestAPI(); got != gce.ResizeRequestAPICount {
				t.Errorf("ResizeRequestAPI() = %s, want count", got)
			}
			h.tick(time.Minute)

			// The inserts, in order: which version answered how (the
			// simulator refuses every named one, so a 200 is a resizeBy).
			var inserts []string
			for _, c := range h.sim.Calls() {
				if c.Method != "POST" || !strings.HasSuffix(c.Path, "/resizeRequests") {
					continue
				}
				api := strings.Split(strings.TrimPrefix(c.Path, "/compute/"), "/")[0]
				inserts = append(inserts, api+":"+statusWord(c.Status))
			}
			want := []string{"v1:ok", "v1:ok"}
			if mode == gce.ResizeRequestAPIAuto {
				// The first one-VM request finds out; the second goes
				// unnamed at once; the two-VM one tries names on both.
				want = []string{"v1:400", "beta:400", "v1:ok", "v1:ok", "v1:400", "beta:400"}
			}
			if strings.Join(inserts, " ") != strings.Join(want, " ") {
				t.Errorf("inserts %v, want %v", inserts, want)
			}
			if n := strings.Count(logged.String(), "resize requests are made with resizeBy from now on"); n != map[string]int{gce.ResizeRequestAPICount: 0, gce.ResizeRequestAPIAuto: 1}[mode] {
				t.Errorf("logged the switch %d times:\n%s", n, logged.String())
			}

			// Each MIG named its VM from its base; GetInstance finds it.
			for _, vm := range []string{vm0, vm1} {
				rr, err := h.c.GetResizeRequest(h.ctx, zone, "mig-"+vm, "rr-"+vm)
				if err != nil || len(rr.Instances) != 0 || rr.State != gce.StateSucceeded {
					t.Errorf("request of %s: %+v %v, want a SUCCEEDED request naming no VM", vm, rr, err)
				}
				in, err := h.c.GetInstance(h.ctx, zone, vm)
				if err != nil {
					t.Fatalf("GetInstance(%s): %v", vm, err)
				}
				if !strings.HasPrefix(in.Name, vm+"-") || len(in.Name) != len(vm)+5 {
					t.Errorf("GetInstance(%s) = %s, want %s-xxxx", vm, in.Name, vm)
				}
				if _, err := h.c.GetInstance(h.ctx, zone, in.Name); err != nil {
					t.Errorf("GetInstance(%s) by its own name: %v", in.Name, err)
				}
			}
			if _, err := h.c.GetInstance(h.ctx, zone, "c1-h200-0-g2"); !gce.IsNotFound(err) {
				t.Errorf("GetInstance of a generation with no VM: %v, want not found", err)
			}
		})
	}
}
