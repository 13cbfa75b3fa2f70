package lang

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flexslurm/flexslurm/shared/plan"
)

// base is a small scenario the tests extend: the example cluster, applied
// at the start, with capacity after 10 minutes.
const base = `
name: test
cluster: ../../../examples/cluster_config.json
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
		{"a comment of two lines", base + "slurm: {simulate: true}\nsteps:\n  - submit: {id: \"1\", nodes: 1, comment: \"a\\nb\"}\n", `steps[0].submit.comment (line 12): "a\nb": one line`},
		{"bad health verdict", base + "steps:\n  - health: {node: flexvm-a3u-0, verdict: PASS}\n", `steps[0].health.verdict (line 11): want FAIL or INCONCLUSIVE, got "PASS"`},
		{"drained INCONCLUSIVE", base + "steps:\n  - health: {node: flexvm-a3u-0, verdict: INCONCLUSIVE, drained: true}\n", `steps[0].health.drained (line 11): only a FAIL`},
		{"unknown repair state", base + "steps:\n  - assert:\n      - nodes: [{name: flexvm-a3u-0, repair: fixing}]\n", `unknown repair state "fixing"; states: none, await_drain, host_repair, blocked, diagnosis`},
		{"unknown shortage code", base + "steps:\n  - shortage: {code: INVALID_FIELD_VALUE}\n", `steps[0].shortage.code (line 11): unknown code "INVALID_FIELD_VALUE"`},
		{"bad pool shortage", base + "steps:\n  - assert:\n      - pools: [{id: a3u, shortage: stock}]\n", `want capacity, quota or none, got "stock"`},
		{"resize request check that only selects", base + "steps:\n  - assert:\n      - resize_requests: {name: rr-flexvm-a3u-0-g2, state: active}\n",
			`steps[0].assert[0].resize_requests (line 12): selects resize requests but checks nothing`},
		{"VM check that only selects", base + "steps:\n  - assert:\n      - vms: {pool: a3u}\n", `steps[0].assert[0].vms (line 12): selects VMs but checks nothing`},
		{"late decision without a lag", base + "steps:\n  - late_decision: {for: 1h}\n", `steps[0].late_decision.lag (line 11): required: a duration > 0, got 0`},
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
	if d := cmp.Diff(want, f.StepTimes()); d != "" {
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

func TestSlurmState(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      string
	}{
		{in: "IDLE+CLOUD+POWERED_DOWN", want: "IDLE+CLOUD+POWERED_DOWN"},
		{in: "idle+powered_down+cloud", want: "IDLE+CLOUD+POWERED_DOWN"},
		{in: " DOWN+POWERED_DOWN+NOT_RESPONDING+CLOUD ", want: "DOWN+CLOUD+NOT_RESPONDING+POWERED_DOWN"},
		{in: "ALLOCATED+ZZZ+CLOUD+AAA", want: "ALLOCATED+CLOUD+AAA+ZZZ"},
		{in: "MIXED", want: "MIXED"},
		{in: "", err: "empty Slurm state"},
		{in: "SLEEPY+CLOUD", err: `base "SLEEPY"`},
		{in: "IDLE++CLOUD", err: "empty flag"},
	} {
		base, flags, err := ParseSlurmState(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSlurmState(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSlurmState(%q): %v", tc.in, err)
			continue
		}
		if got := FormatSlurmState(base, flags); got != tc.want {
			t.Errorf("FormatSlurmState(ParseSlurmState(%q)) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCrashPoint(t *testing.T) {
	create := plan.CreateResizeRequest{}
	for _, tc := range []struct {
		in     string
		want   CrashPoint
		hits   map[int]bool // action index → Hits(index, create)
		errSub string
	}{
		{in: "commit", want: CrashPoint{Commit: true}, hits: map[int]bool{1: false}},
		{in: "before#2", want: CrashPoint{N: 2}, hits: map[int]bool{1: false, 2: true}},
		{in: "after#1", want: CrashPoint{After: true, N: 1}, hits: map[int]bool{1: true, 2: false}},
		{in: "after:create_resize_request", want: CrashPoint{After: true, Kind: "createresizerequest"}, hits: map[int]bool{1: true, 5: true}},
		{in: "before:delete_instance", want: CrashPoint{Kind: "deleteinstance"}, hits: map[int]bool{1: false}},
		{in: "during:commit", errSub: `crash point "during:commit"`},
		{in: "before#0", errSub: "want commit"},
	} {
		got, err := ParseCrashPoint(tc.in)
		if tc.errSub != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errSub) {
				t.Errorf("ParseCrashPoint(%q) error = %v, want one containing %q", tc.in, err, tc.errSub)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ParseCrashPoint(%q): %v", tc.in, err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("ParseCrashPoint(%q) (-want +got):\n%s", tc.in, d)
		}
		if back, err := ParseCrashPoint(got.String()); err != nil || back != got {
			t.Errorf("%q prints as %q, which parses to %+v, %v", tc.in, got.String(), back, err)
		}
		for n, want := range tc.hits {
			if h := got.Hits(n, create); h != want {
				t.Errorf("%q Hits(%d, CreateResizeRequest) = %t, want %t", tc.in, n, h, want)
			}
		}
	}
}
