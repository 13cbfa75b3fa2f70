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

func TestStrictDecodingNamesPathAndLine(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"top-level key", base + "colour: blue\n", `colour (line 10): unknown key "colour"`},
		{"nested in a step", base + "steps:\n  - at: 1h\n    job: {type: pending, id: \"7\", count: 1, partiton: a3u}\n",
			`steps[0].job.partiton (line 12): unknown key "partiton"`},
		{"in an assertion", base + "steps:\n  - at: 1h\n    assert:\n      - vms: {pool: a3u, cuont: 1}\n",
			`steps[0].assert[0].vms.cuont (line 13): unknown key`},
		{"inline delivery faults", base + "steps:\n  - deliveries: {topic: instance-expiry, hold: x, dleay: 5m}\n",
			`steps[0].deliveries.dleay (line 11)`},
		{"bad duration", base + "steps:\n  - at: 1 hour\n    tick: {}\n", `line 11`},
		{"unknown policy knob", base + "policy:\n  requets_grace: 1m\n", `policy.requets_grace: unknown knob`},
		{"two actions", base + "steps:\n  - at: 1h\n    tick: {}\n    advance: 1h\n", `steps[0] (line 11): a step has one action`},
		{"steps out of order", base + "steps:\n  - at: 2h\n    tick: {}\n  - at: 1h\n    tick: {}\n", `steps[1].at (line 13): 1h is before`},
		{"bad crash point", base + "steps:\n  - crash: {point: \"during:commit\"}\n", `steps[0].crash.point`},
		{"unknown counter", base + "steps:\n  - assert:\n      - counter: {counter: vms, count: 1}\n", `unknown counter "vms"`},
		{"bad Slurm state", base + "steps:\n  - snapshot:\n      nodes: [{name: flexvm-a3u-1, state: SLEEPY+CLOUD}]\n", `base "SLEEPY"`},
		{"unknown record field", base + "  nodes: [{name: flexvm-a3u-1, pool: a3u, phaze: running}]\n", `initial.nodes[0]: json: unknown field "phaze"`},
		{"submit without the Slurm model", base + "steps:\n  - submit: {id: \"1\", nodes: 1}\n", `needs slurm.simulate`},
		{"bad health verdict", base + "steps:\n  - health: {node: flexvm-a3u-0, verdict: PASS}\n", `steps[0].health.verdict (line 11): want FAIL or INCONCLUSIVE, got "PASS"`},
		{"drained INCONCLUSIVE", base + "steps:\n  - health: {node: flexvm-a3u-0, verdict: INCONCLUSIVE, drained: true}\n", `steps[0].health.drained (line 11): only a FAIL`},
		{"unknown repair state", base + "steps:\n  - assert:\n      - nodes: [{name: flexvm-a3u-0, repair: fixing}]\n", `unknown repair state "fixing"; states: none, await_drain, host_repair, blocked, diagnosis`},
		{"unknown shortage code", base + "steps:\n  - shortage: {code: INVALID_FIELD_VALUE}\n", `steps[0].shortage.code (line 11): unknown code "INVALID_FIELD_VALUE"`},
		{"bad pool shortage", base + "steps:\n  - assert:\n      - pools: [{id: a3u, shortage: stock}]\n", `want capacity, quota or none, got "stock"`},
		{"pool check without id", base + "steps:\n  - assert:\n      - pools: [{condition: none}]\n", `steps[0].assert[0].pools[0].id (line 12): required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text))
			if err == nil {
				t.Fatalf("parsed without error; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestDurationsAndTimes(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "90s": 90 * time.Second, "2h30m": 150 * time.Minute, "7d": 7 * 24 * time.Hour,
		"1d12h": 36 * time.Hour, "never": Never} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := ParseDuration(FormatDuration(want)); err != nil || back != want {
			t.Errorf("FormatDuration(%v) = %q does not parse back: %v, %v", want, FormatDuration(want), back, err)
		}
	}
	for _, bad := range []string{"", "-5m", "1 hour", "xd"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) succeeded", bad)
		}
	}
	f := parse(t, base+"steps:\n  - at: 1h\n    tick: {}\n  - tick: {}\n  - at: +15m\n    advance: 1h\n  - at: +5m\n    tick: {}\n")
	want := []time.Duration{time.Hour, time.Hour, 75 * time.Minute, 140 * time.Minute}
	if d := cmp.Diff(want, f.stepTimes()); d != "" {
		t.Errorf("step times (-want +got):\n%s", d)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	f := parse(t, base+`
random_faults: {seed: 3, duplicate: 0.5, delay: 0.25, max_delay: 5m, crash: 0.1}
invariants:
  one_vm_per_node: true
  no_unrecorded_vm: {within: 15m}
steps:
  - at: 1h
    label: j7
    job: {type: pending, id: "7", partition: a3u, count: 1}
    delivery: {crash: [commit, "after:create_resize_request"], duplicates: [0s, 10m]}
  - at: +1m
    compute_error: {name: stockout, method: POST, path: /resizeRequests$, code: ZONE_RESOURCE_POOL_EXHAUSTED, for: 2h}
  - at: 4h
    assert:
      - vms: {pool: a3u, count: 2}
        counter: {counter: compute_calls, path: /resizeRequests$, per_hour_max: 10}
`)
	data, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(data)
	if err != nil {
		t.Fatalf("the marshalled scenario does not parse: %v\n%s", err, data)
	}
	opts := cmp.Options{cmp.AllowUnexported(File{}, Step{}, Check{}), cmpopts.IgnoreFields(Step{}, "line"), cmpopts.IgnoreFields(Check{}, "line")}
	if d := cmp.Diff(f, g, opts); d != "" {
		t.Errorf("round trip (-parsed +reparsed):\n%s", d)
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"RequestGrace": "request_grace", "SnapshotMaxAge": "snapshot_max_age",
		"DeleteVMs": "delete_vms", "CreateResizeRequest": "create_resize_request", "MissThreshold": "miss_threshold", "VMID": "vmid"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
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
	want := []string{"invariant foreign_untouched", "invariant no_unrecorded_vm", "invariant one_vm_per_node"}
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

func TestForeignReservationCheck(t *testing.T) {
	r := &runner{start: DefaultStart}
	r.cmds = []slurmCommandRecord{
		{Command: "reservation_create", Raw: map[string]any{"command": "reservation_create", "reservation": "flexslurm-eol-flexvm-a3u-0", "start_time": "2026-12-07T00:00:00Z"}},
		{Command: "reservation_delete", Raw: map[string]any{"command": "reservation_delete", "reservation": "maint-gpu-swap"}},
		{Command: "update_reservation", Raw: map[string]any{"command": "update_reservation", "name": "maint-gpu-swap"}},
		{Command: "drain", Raw: map[string]any{"command": "drain", "nodes": []any{"flexvm-a3u-0"}, "reason": "maint-gpu-swap"}},
	}
	got := r.foreignReservations("flexslurm-")
	if len(got) != 2 || !strings.Contains(got[0], "reservation_delete") || !strings.Contains(got[1], "update_reservation") {
		t.Errorf("violations = %q; want the reservation_delete and update_reservation of maint-gpu-swap", got)
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

func TestMaxPerHour(t *testing.T) {
	at := func(m int) time.Time { return DefaultStart.Add(time.Duration(m) * time.Minute) }
	n, start := maxPerHour([]time.Time{at(0), at(10), at(59), at(61), at(62), at(63), at(120)})
	if n != 5 || !start.Equal(at(10)) {
		t.Errorf("maxPerHour = %d from %v, want 5 from %v", n, start, at(10))
	}
}

// TestIdleCountsFromTheEndOfARepairHold: a dynamic node drained for
// diagnosis is held (not idle) however long it waits for an operator; a
// FAIL then ends the hold and flexslurm deletes its VM, which two crashes
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
    delivery: {crash: ["before:delete_vms", "before:delete_vms"]}
  - at: 5h
    assert:
      - counter: {counter: nacks, topic: health-failure, count: 2}
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
