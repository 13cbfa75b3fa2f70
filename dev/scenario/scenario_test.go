package scenario

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestScenarioFiles runs every shipped scenario and fails on any failed
// assertion, printing the report.
func TestScenarioFiles(t *testing.T) {
	files, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("found %d scenario files, want at least 6", len(files))
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			t.Parallel()
			rep, err := Run(testContext(t), path)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if len(rep.Results) == 0 {
				t.Fatal("the scenario asserted nothing")
			}
			if rep.Failed() {
				var b strings.Builder
				rep.Write(&b, false)
				t.Errorf("failed assertions:\n%s", b.String())
			}
		})
	}
}

// base is a small scenario the tests extend: the example cluster, applied
// at the start, with capacity after 10 minutes.
const base = `
name: test
cluster: ../../examples/cluster_config.json
simulator:
  capacity_delay: 10m
reconcile:
  every: 5m
initial:
  apply: true
`

func parse(t *testing.T, text string) *File {
	t.Helper()
	f, err := Parse([]byte(text))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return f
}

func run(t *testing.T, text string) Report {
	t.Helper()
	rep, err := RunFile(testContext(t), parse(t, text), RunOptions{Trace: true})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return rep
}

// failures returns the names of the failed results.
func failures(rep Report) []string {
	var out []string
	for _, r := range rep.Failures() {
		out = append(out, r.Name)
	}
	return out
}

// TestWrongExpectationsFail: every kind of assertion reports a failure
// when the expectation is wrong, so no scenario can pass vacuously.
func TestWrongExpectationsFail(t *testing.T) {
	rep := run(t, base+`
steps:
  - at: 1m
    job: {type: pending, id: "7", partition: a3u, count: 1}
  - always:
      name: no request at all
      for: 30m
      checks: [{resize_requests: {state: active, max: 0}}]
  - at: 1h
    assert:
      - vms: {pool: a3u, names: [flexvm-a3u-0-g1]}
      - vms: {pool: a3u, count: 3}
      - nodes: [{name: flexvm-a3u-1, phase: requested}]
      - nodes: [{name: flexvm-a3u-2, exists: true}]
      - nodes: [{name: flexvm-a3u-0, repair: blocked}]
      - nodes: [{name: flexvm-a3u-0, host_repaired: 1}]
      - jobs: [{id: "7", state: finished}]
      - resize_requests: {job: "7", state: CANCELLED, count: 1}
      - resize_requests: {states: {rr-flexvm-a3u-j7-g1: FAILED}}
      - slurm_commands: {command: drain, min: 1}
      - counter: {counter: resize_requests_created, count: 5}
      - counter: {counter: compute_calls, method: POST, path: /resizeRequests$, per_hour_max: 1}
      - counter: {counter: nacks, min: 1}
      - invariant: [no_unrecorded_vm]
`)
	want := []string{
		"no request at all: resize requests (in active) count",
		"VMs of pool a3u",
		"VMs of pool a3u count",
		"node flexvm-a3u-1 phase",
		"node flexvm-a3u-2 exists",
		"node flexvm-a3u-0 repair",
		"node flexvm-a3u-0 host repaired",
		"job 7 state",
		"resize requests (of job 7, in CANCELLED) count",
		"resize request rr-flexvm-a3u-j7-g1 state",
		"Slurm commands (command drain)",
		"resize_requests_created",
		"compute_calls POST /resizeRequests$ per hour",
		"nacks",
	}
	if d := cmp.Diff(want, failures(rep)); d != "" {
		t.Errorf("failed checks (-want +got):\n%s", d)
	}
}

// TestInvariantsCatchViolations plants a VM labelled as the cluster's that
// no node record names, a second VM for node 0 (in a MIG of its own, so
// flexslurm's deletions through the pool's MIG cannot remove it), and
// checks that the invariants fail.
func TestInvariantsCatchViolations(t *testing.T) {
	ours := "{managed-by: flexslurm, flexslurm-cluster: flexvm, flexslurm-pool: a3u}"
	// A VM labelled as the pool's, named as node 0's, in a MIG that is not
	// the cluster's: flexslurm leaves it (it deletes only members of its
	// own MIGs), and the invariants see an unrecorded VM, a second VM for
	// node 0.
	rep := run(t, base+`
  foreign_vms:
    - {name: flexvm-a3u-0-g7, labels: `+ours+`}
    - {name: flexvm-a3u-9-g1}
invariants:
  one_vm_per_node: true
  no_unrecorded_vm: {within: 15m}
  foreign_untouched: true
steps:
  - at: 1h
    assert:
      - vms: {pool: a3u, names: [flexvm-a3u-0-g1, flexvm-a3u-0-g7]}
`)
	got := failures(rep)
	want := []string{"invariant no_unrecorded_vm", "invariant one_vm_per_node"}
	if d := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Errorf("failed checks (-want +got):\n%s\n%s", d, strings.Join(rep.Trace, "\n"))
	}
	// The same VM in the pool's MIG of the layout before one MIG per
	// request: flexslurm deletes it as an orphan, which foreign_untouched
	// reports (the scenario calls it foreign).
	rep = run(t, base+`
  foreign_vms:
    - {name: flexvm-a3u-0-g7, labels: `+ours+`, mig: fs-flexvm-a3u}
invariants:
  one_vm_per_node: true
  no_unrecorded_vm: {within: 15m}
  foreign_untouched: true
steps:
  - at: 1h
    assert:
      - vms: {pool: a3u, names: [flexvm-a3u-0-g1]}
`)
	got = failures(rep)
	want = []string{"invariant foreign_untouched"}
	if d := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Errorf("failed checks (-want +got):\n%s\n%s", d, strings.Join(rep.Trace, "\n"))
	}
	// VMs that are not the cluster's — unlabelled, or labelled for another
	// cluster, with names like the cluster's — are left alone.
	rep = run(t, base+`
  foreign_vms:
    - {name: flexvm-a3u-9-g1}
    - {name: flexvm-a3u-8-g1, labels: {managed-by: flexslurm, flexslurm-cluster: other, flexslurm-pool: a3u}}
invariants:
  one_vm_per_node: true
  no_unrecorded_vm: {within: 15m}
  foreign_untouched: true
steps:
  - at: 1h
    assert:
      - vms: {pool: a3u, names: [flexvm-a3u-0-g1]}
      - vms: {foreign: true, names: [flexvm-a3u-8-g1, flexvm-a3u-9-g1]}
      - invariant: [foreign_untouched]
`)
	if rep.Failed() {
		var b strings.Builder
		rep.Write(&b, true)
		t.Errorf("unexpected failures:\n%s", b.String())
	}
}

// TestDeterministic: the same scenario gives the same timeline.
func TestDeterministic(t *testing.T) {
	text := base + `
random_faults: {seed: 11, duplicate: 0.5, delay: 0.5, crash: 0.3}
steps:
  - at: 1m
    job: {type: pending, id: "7", partition: a3u, count: 2}
  - at: 2h
    expire: {node: flexvm-a3u-1}
  - at: 4h
    tick: {}
`
	a, b := run(t, text), run(t, text)
	if d := cmp.Diff(a.Trace, b.Trace); d != "" {
		t.Errorf("two runs differ (-first +second):\n%s", d)
	}
	if a.Stats.Crashes == 0 || a.Stats.Duplicates == 0 {
		t.Errorf("random faults did nothing: %+v", a.Stats)
	}
}

func TestComputeErrorWindowAndCounters(t *testing.T) {
	rep := run(t, base+`
delivery: {max_attempts: 100}
steps:
  - at: 30m
    compute_error: {name: quota, method: POST, path: /resizeRequests$, code: QUOTA_EXCEEDED, for: 2h}
  - job: {type: pending, id: "7", partition: a3u, count: 1}
  - at: 2h29m
    assert:
      - resize_requests: {job: "7", count: 0}
  - at: 3h30m
    assert:
      - vms: {pool: a3u, count: 2}
        nodes: [{name: flexvm-a3u-1, phase: running, job: "7"}]
      - counter: {counter: injected_errors, fault: quota, min: 2}
      - counter: {counter: compute_calls, path: /resizeRequests$, outcome: injected, from: 2h31m, count: 0}
      - counter: {counter: compute_calls, path: /resizeRequests$, outcome: error, to: 2h30m, min: 2}
`)
	if rep.Failed() {
		var b strings.Builder
		rep.Write(&b, true)
		t.Errorf("unexpected failures:\n%s", b.String())
	}
}

// TestShortage: a shortage queues the request (no failed call), the pool
// checks see the shortage, and a wrong expectation fails.
func TestShortage(t *testing.T) {
	rep := run(t, base+`
invariants:
  static_at_min: {within: 20m}
steps:
  - at: 30m
    shortage: {name: out, for: 2h}
  - job: {type: pending, id: "7", partition: a3u, count: 1}
  - at: 1h
    assert:
      - name: queued
        resize_requests: {job: "7", state: ACCEPTED, count: 1}
        counter: {counter: compute_calls, path: /resizeRequests$, outcome: error, count: 0}
      - name: right
        pools: [{id: a3u, shortage: capacity, shortage_code: ZONE_RESOURCE_POOL_EXHAUSTED, condition: "WaitingForCapacity:", backoff: capacity}]
      - name: wrong
        pools: [{id: a3u, shortage: quota, condition: none}]
  - at: 3h
    assert:
      - name: served
        nodes: [{name: flexvm-a3u-1, phase: running, job: "7"}]
        pools: [{id: a3u, shortage: none, condition: none, backoff: none}]
`)
	if d := cmp.Diff([]string{"wrong: pool a3u shortage", "wrong: pool a3u condition"}, failures(rep)); d != "" {
		var b strings.Builder
		rep.Write(&b, true)
		t.Errorf("failed checks (-want +got):\n%s\n%s", d, b.String())
	}
}

// TestIdleCountsFromTheEndOfARepairHold: a dynamic node drained for
// diagnosis is held (not idle) however long it waits for an operator; a
// FAIL then ends the hold and, once the next snapshot confirms the drain,
// flexslurm deletes its VM in that snapshot's event, which two crashes
// before the deletion delay by 30 s (chaos seed 1040). The node is idle
// from the end of the hold, not from its job's end hours before.
func TestIdleCountsFromTheEndOfARepairHold(t *testing.T) {
	rep := run(t, base+`
slurm: {simulate: true, suspend_time: 10m, snapshot_every: 5m}
invariants:
  idle_dynamic_released: {within: 20m}
steps:
  - at: 10m
    submit: {id: "1", nodes: 3, runtime: 20m}
  - at: 25m
    health: {node: flexvm-a3u-1, verdict: INCONCLUSIVE, reasons: ["dcgmi diag did not finish within 2m"]}
  - at: 30m
    health: {node: flexvm-a3u-1, verdict: INCONCLUSIVE, reasons: ["dcgmi diag did not finish within 2m"]}
  - at: 4h
    health: {node: flexvm-a3u-1, reasons: ["GPU 0: Xid 79"]}
  - at: 4h1m
    deliveries: {topic: slurm-snapshot, times: 1, crash: ["before:delete_mig", "before:delete_mig"]}
  - at: 5h
    assert:
      - counter: {counter: nacks, topic: health-failure, count: 0}
      - counter: {counter: nacks, topic: slurm-snapshot, count: 2}
      - vms: {node: flexvm-a3u-1, count: 0}
`)
	if d := cmp.Diff([]string(nil), failures(rep)); d != "" {
		t.Errorf("failed checks (-want +got):\n%s\n%s", d, strings.Join(rep.Trace, "\n"))
	}
}

// TestTimeBoundInvariantsFail withholds what flexslurm needs to converge —
// the audit entries of a lost static VM with a reconciler told to wait 100
// passes; the suspend reports of an idle dynamic node with no snapshots —
// and checks that static_at_min and idle_dynamic_released fail.
func TestTimeBoundInvariantsFail(t *testing.T) {
	rep := run(t, base+`
policy: {miss_threshold: 100}
invariants:
  static_at_min: {within: 20m}
steps:
  - at: 30m
    deliveries: {topic: instance-expiry, hold: lost}
  - delete_vm: {node: flexvm-a3u-0}
  - at: 2h
    tick: {}
`)
	if d := cmp.Diff([]string{"invariant static_at_min"}, failures(rep)); d != "" {
		t.Errorf("failed checks (-want +got):\n%s", d)
	}
	rep = run(t, base+`
slurm: {simulate: true, suspend_time: 10m}
invariants:
  idle_dynamic_released: {within: 20m}
steps:
  - at: 0s
    deliveries: {type: node.suspend, hold: lost}
  - at: 10m
    submit: {id: "1", nodes: 3, runtime: 20m}
  - at: 3h
    tick: {}
`)
	if d := cmp.Diff([]string{"invariant idle_dynamic_released"}, failures(rep)); d != "" {
		t.Errorf("failed checks (-want +got):\n%s\n%s", d, strings.Join(rep.Trace, "\n"))
	}
	// A FAIL on a node Slurm never shows drained (no snapshot ever comes):
	// the repair waits for the drain past the bound.
	rep = run(t, base+`
invariants:
  repair_progress: {within: 30m}
steps:
  - at: 30m
    health: {node: flexvm-a3u-0, reasons: ["GPU 0: Xid 79"]}
  - at: 2h
    tick: {}
`)
	if d := cmp.Diff([]string{"invariant repair_progress"}, failures(rep)); d != "" {
		t.Errorf("failed checks (-want +got):\n%s\n%s", d, strings.Join(rep.Trace, "\n"))
	}
}

// TestLateDecision: under a late_decision step a reconcile pass lists
// Compute, then what is due within the lag happens (here the passes of the
// next ticks, on time), and only then does it decide and its delivery end;
// a pass that starts while another is late, or after the step's window,
// is on time; a lag ends at the next step's time at the latest.
func TestLateDecision(t *testing.T) {
	for _, tc := range []struct {
		name, steps string
		late        int
		want        []string // lines of the trace, in this order (prefixes)
	}{
		{"decides after the next ticks", "  - late_decision: {lag: 12m, for: 14m}\nend: 30m\n", 1, []string{
			"5m        reconcile pass listed Compute: it decides at 17m",
			"10m       deliver reconcile-tick",
			"15m       deliver reconcile-tick",
			"17m       deliver reconcile-tick",
			"20m       deliver reconcile-tick",
		}},
		{"a step ends the lag", "  - late_decision: {lag: 12m, for: 9m}\n  - at: 8m\n    tick: {}\nend: 20m\n", 1, []string{
			"5m        reconcile pass listed Compute: it decides at 8m",
			"8m        deliver reconcile-tick",
			"8m        deliver reconcile-tick",
			"10m       deliver reconcile-tick",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := run(t, base+"steps:\n"+tc.steps)
			if rep.Stats.LateDecisions != tc.late {
				t.Errorf("late decisions = %d, want %d", rep.Stats.LateDecisions, tc.late)
			}
			for _, n := range rep.Notes {
				if strings.Contains(n, "late_decision") {
					t.Errorf("note: %s", n)
				}
			}
			i := 0
			for _, line := range rep.Trace {
				if i < len(tc.want) && strings.HasPrefix(line, tc.want[i]) {
					i++
				}
			}
			if i < len(tc.want) {
				t.Errorf("trace lacks, in order, %q (after %q):\n%s", tc.want[i], tc.want[:i], strings.Join(rep.Trace, "\n"))
			}
		})
	}
}

// TestOwnDrainFollowed: a node drained by flexslurm's hook whose report is
// lost is repaired within the bound; with the reconciler told to wait for
// the report longer than that, own_drain_followed fails.
func TestOwnDrainFollowed(t *testing.T) {
	const steps = `
slurm: {simulate: true, snapshot_every: 30s}
invariants:
  own_drain_followed: {within: 40m}
steps:
  - at: 30m
    health: {node: flexvm-a3u-0, reasons: ["GPU 0: Xid 79"]}
    delivery: {hold: lost}
  - at: 3h
    tick: {}
`
	if d := cmp.Diff([]string(nil), failures(run(t, base+steps))); d != "" {
		t.Errorf("report lost, reconciler on its defaults: failed checks (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"invariant own_drain_followed"}, failures(run(t, base+"policy: {unreported_drain_grace: 2h}\n"+steps))); d != "" {
		t.Errorf("report lost, grace past the bound: failed checks (-want +got):\n%s", d)
	}
}
