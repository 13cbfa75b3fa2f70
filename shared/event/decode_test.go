package event

import (
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeBefore is how every payload decoder read its input before
// decodePayload: a strict decode, then PeekHeader over the same bytes.
func decodeBefore(data []byte, v any) error {
	if err := decodeStrict(data, v); err != nil {
		return err
	}
	_, err := PeekHeader(data)
	return err
}

// decodeSamples are payloads of every kind and ways to spoil them: what
// follows the value, the header, unknown fields, types.
func decodeSamples() [][]byte {
	bases := []string{
		`{"version":1,"type":"slurm.snapshot","cluster":"flexvm","taken_at":"2026-11-30T12:00:00Z","nodes":[{"name":"flexvm-a3u-1","state":"idle","flags":["CLOUD"],"reason":"flexslurm: x (flexvm-a3u-1-g3)"}],"jobs":[{"id":"1_2","state":"PENDING"}],"config":{"spec_sha256":"ab"}}`,
		`{"version":1,"type":"job.pending","cluster":"flexvm","job_id":"4242","partition":"a3u","node_count":2,"nodes":["flexvm-a3u-1","flexvm-a3u-2"]}`,
		`{"version":1,"type":"health.failure","cluster":"flexvm","node":"flexvm-a3u-1","generation":2,"verdict":"FAIL","reasons":["GPU 3: ECC"]}`,
		`{"version":1,"type":"node.suspend","cluster":"flexvm","nodes":["flexvm-a3u-1"]}`,
		`{"version":1,"type":"node.bootstrap_failed","cluster":"flexvm","node":"flexvm-a3u-1","vm_name":"flexvm-a3u-1-g2","step":"munged"}`,
		`{"version":1,"type":"slurm.command","cluster":"flexvm","id":"c1","command":"drain","nodes":["flexvm-a3u-1"],"reason":"flexslurm: x"}`,
	}
	spoil := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return " \n" + s + "\t\r\n " },
		func(s string) string { return s + "]" },
		func(s string) string { return s + "}" },
		func(s string) string { return s + " x" },
		func(s string) string { return s + s },
		func(s string) string { return s + "," },
		func(s string) string { return s[:len(s)-1] },
		func(s string) string { return strings.Replace(s, `"version":1`, `"version":2`, 1) },
		func(s string) string { return strings.Replace(s, `"version":1`, `"version":"1"`, 1) },
		func(s string) string { return strings.Replace(s, `"version":1`, `"version":1,"VERSION":2`, 1) },
		func(s string) string { return strings.Replace(s, `"version":1,`, ``, 1) },
		func(s string) string { return strings.Replace(s, `"cluster":"flexvm"`, `"cluster":"Flex"`, 1) },
		func(s string) string {
			return strings.Replace(s, `"cluster":"flexvm"`, `"Cluster":"flexvm","cluster":"x"`, 1)
		},
		func(s string) string { return strings.Replace(s, `"type":`, `"extra":1,"type":`, 1) },
		func(s string) string { return strings.Replace(s, `"type":"`, `"type":"x`, 1) },
		func(s string) string { return strings.Replace(s, `"nodes":[`, `"nodes":[1,`, 1) },
		func(s string) string { return "[" + s + "]" },
		func(s string) string { return "null" },
		func(s string) string { return "" },
	}
	var out [][]byte
	for _, b := range bases {
		for _, f := range spoil {
			out = append(out, []byte(f(b)))
		}
	}
	return out
}

// TestDecodePayloadMatchesBefore: every payload decoder gives the same
// value and the same error as when it read the header a second time.
func TestDecodePayloadMatchesBefore(t *testing.T) {
	type decoder struct {
		name string
		now  func([]byte) (any, error)
		v    func() (any, *Header)
	}
	decoders := []decoder{
		{"snapshot", func(d []byte) (any, error) { return DecodeSnapshot(d) }, func() (any, *Header) { v := &SlurmSnapshot{}; return v, &v.Header }},
		{"job", func(d []byte) (any, error) { return DecodeJob(d) }, func() (any, *Header) { v := &Job{}; return v, &v.Header }},
		{"health", func(d []byte) (any, error) { return DecodeHealth(d) }, func() (any, *Header) { v := &Health{}; return v, &v.Header }},
		{"node", func(d []byte) (any, error) { return DecodeNode(d) }, func() (any, *Header) { v := &Node{}; return v, &v.Header }},
		{"bootstrap", func(d []byte) (any, error) { return DecodeBootstrap(d) }, func() (any, *Header) { v := &Bootstrap{}; return v, &v.Header }},
		{"command", func(d []byte) (any, error) { return DecodeSlurmCommand(d) }, func() (any, *Header) { v := &SlurmCommand{}; return v, &v.Header }},
		{"cluster", func(d []byte) (any, error) { return DecodeCluster(d) }, func() (any, *Header) { v := &Cluster{}; return v, &v.Header }},
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	kinds := map[string]int{}
	for _, data := range decodeSamples() {
		for _, d := range decoders {
			before, _ := d.v()
			beforeErr := decodeBefore(data, before)
			now, h := d.v()
			nowErr := decodePayload(data, now, h)
			if diff := cmp.Diff(errText(beforeErr), errText(nowErr)); diff != "" {
				t.Errorf("%s %q: error (-before +now):\n%s", d.name, data, diff)
			}
			if beforeErr == nil {
				if diff := cmp.Diff(before, now); diff != "" {
					t.Errorf("%s %q: value (-before +now):\n%s", d.name, data, diff)
				}
			}
			kinds[errKind(beforeErr)]++
			if _, err := d.now(data); (err == nil) != (beforeErr == nil) && beforeErr != nil {
				t.Errorf("%s %q: decoded although the payload is malformed: %v", d.name, data, beforeErr)
			}
		}
	}
	for _, k := range []string{"", "trailing data", "decoding payload:", "decoding payload header", "payload version", "cluster"} {
		if kinds[k] == 0 {
			t.Errorf("no sample gave %q: %v", k, kinds)
		}
	}
}

func errKind(err error) string {
	if err == nil {
		return ""
	}
	for _, k := range []string{"trailing data", "decoding payload header", "decoding payload:", "payload version", "cluster"} {
		if strings.Contains(err.Error(), k) {
			return k
		}
	}
	return "other"
}

// TestValidatorsMatchTheirPatterns: the hand-written name and job id
// checks accept exactly what their regular expressions do.
func TestValidatorsMatchTheirPatterns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	alphabet := "az09-_A\n\xff."
	cases := []string{"", "a", "a-", "-a", "0a", strings.Repeat("a", 63), strings.Repeat("a", 64), "a\n", "1", "1_", "_1", "1_2",
		strings.Repeat("1", 12), strings.Repeat("1", 13), "1_" + strings.Repeat("2", 9), "1_" + strings.Repeat("2", 10), "1_2_3", "1\n"}
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(70) {
			if rng.IntN(3) == 0 {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			} else if rng.IntN(2) == 0 {
				b.WriteByte(byte('0' + rng.IntN(10)))
			} else {
				b.WriteByte(byte('a' + rng.IntN(26)))
			}
		}
		cases = append(cases, b.String())
	}
	accepted := map[string]int{}
	for _, s := range cases {
		for _, c := range []struct {
			name string
			re   *regexp.Regexp
			f    func(string) bool
		}{{"node name", nodeNameRe, ValidNodeName}, {"job id", jobIDRe, validJobID}} {
			if want, got := c.re.MatchString(s), c.f(s); want != got {
				t.Errorf("%s %q: %t, the pattern says %t", c.name, s, got, want)
			} else if got {
				accepted[c.name]++
			}
		}
	}
	if accepted["node name"] < 100 || accepted["job id"] < 10 {
		t.Errorf("too few accepted cases to compare: %v", accepted)
	}
}

// TestDecodeSnapshotJSONRoundTrip: a decoded snapshot encodes to the words
// it was decoded from and decodes again to itself.
func TestDecodeSnapshotJSONRoundTrip(t *testing.T) {
	for _, data := range decodeSamples()[:2] {
		s, err := DecodeSnapshot(data)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeSnapshot(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if d := cmp.Diff(s, again); d != "" {
			t.Errorf("decoding the encoded snapshot (-first +again):\n%s", d)
		}
	}
}

// TestDecodeSnapshotOrTickMatchesBefore: DecodeSnapshotOrTick gives the
// snapshot, the tick and the error that the reconciler's two steps gave —
// PeekHeader, then DecodeSnapshot for a valid snapshot header and
// DecodeTick otherwise — for payloads of every kind, spoiled every way.
func TestDecodeSnapshotOrTickMatchesBefore(t *testing.T) {
	before := func(data []byte) (*SlurmSnapshot, *Tick, error) {
		if h, err := PeekHeader(data); err == nil && h.Type == TypeSlurmSnapshot {
			s, err := DecodeSnapshot(data)
			return s, nil, err
		}
		tick, err := DecodeTick(data)
		return nil, tick, err
	}
	type result struct {
		Snap *SlurmSnapshot
		Tick *Tick
		Err  string
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	samples := decodeSamples()
	for _, s := range []string{
		`{"version":1,"type":"reconcile.tick","cluster":"flexvm"}`,
		`{"version":1,"type":"reconcile.tick"}`,
		`{"version":1,"type":"reconcile.tick","cluster":"flexvm","nodes":[]}`,
		`{"version":1,"type":"slurm.snapshot","cluster":"flexvm","taken_at":"2026-11-30T12:00:00Z","nodes":[{"name":"Bad_Name","state":"idle"}]}`,
		`{"version":1,"type":"slurm.snapshot","cluster":"flexvm","taken_at":"2026-11-30T12:00:00Z","jobs":[{"id":"x1","state":"PENDING"}]}`,
		`{"version":1,"type":"slurm.snapshot","cluster":"flexvm","nodes":[{"name":"flexvm-a3u-1","state":"idle","unknown":1}]}`,
		`{"version":1,"type":"slurm.snapshot","cluster":"flexvm","nodes":[{"name":"flexvm-a3u-1","state":"idle"}]} ]`,
		`{}`, ` {} `, `{"version":1}`, `{"type":"slurm.snapshot"}`,
	} {
		samples = append(samples, []byte(s))
	}
	kinds := map[string]int{}
	for _, data := range samples {
		s, tick, err := before(data)
		want := result{s, tick, errText(err)}
		s, tick, err = DecodeSnapshotOrTick(data)
		got := result{s, tick, errText(err)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q (-before +now):\n%s", data, diff)
		}
		switch {
		case want.Snap != nil:
			kinds["snapshot"]++
		case want.Tick != nil:
			kinds["tick"]++
		case isSnapshot(data):
			kinds["snapshot rejected"]++
		default:
			kinds[errKind(err)]++
		}
	}
	for _, k := range []string{"snapshot", "tick", "snapshot rejected", "decoding payload:", "other"} {
		if kinds[k] == 0 {
			t.Errorf("no sample gave %q: %v", k, kinds)
		}
	}
}

func isSnapshot(data []byte) bool {
	h, err := PeekHeader(data)
	return err == nil && h.Type == TypeSlurmSnapshot
}

// TestDecodeJobNodesUp: nodes_up says the nodes of a finished job were up,
// so it comes only with job.finished and the nodes it speaks of.
func TestDecodeJobNodesUp(t *testing.T) {
	tests := []struct {
		payload string
		err     string // "" when the payload decodes
	}{
		{`{"version":1,"type":"job.finished","cluster":"flexvm","job_id":"7","nodes":["flexvm-a3u-1","flexvm-a3u-2"],"nodes_up":true}`, ""},
		{`{"version":1,"type":"job.finished","cluster":"flexvm","job_id":"7","nodes":["flexvm-a3u-1"]}`, ""},
		{`{"version":1,"type":"job.finished","cluster":"flexvm","job_id":"7","nodes_up":true}`, "nodes_up is only for a job.finished that names its nodes (job.finished of job 7 names 0)"},
		{`{"version":1,"type":"job.cancelled","cluster":"flexvm","job_id":"7","nodes":["flexvm-a3u-1"],"nodes_up":true}`, "nodes_up is only for a job.finished that names its nodes (job.cancelled of job 7 names 1)"},
		{`{"version":1,"type":"job.pending","cluster":"flexvm","job_id":"7","nodes":["flexvm-a3u-1"],"nodes_up":true}`, "nodes_up is only for a job.finished"},
	}
	for _, tt := range tests {
		j, err := DecodeJob([]byte(tt.payload))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.payload, err)
		case tt.err == "" && j.NodesUp != strings.Contains(tt.payload, `"nodes_up":true`):
			t.Errorf("%s: nodes_up decoded as %v", tt.payload, j.NodesUp)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want one containing %q", tt.payload, err, tt.err)
		}
	}
}
