package health

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// nvlinkText renders `nvidia-smi nvlink -e` for gpus GPUs with links links
// each, the three documented counters per link, and the given non-zero
// values keyed by "gpu/link/counter".
func nvlinkText(gpus, links int, values map[string]int) string {
	var b strings.Builder
	for g := range gpus {
		fmt.Fprintf(&b, "GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-0000000%d-aaaa-bbbb-cccc-dddddddddddd)\n", g, g)
		for l := range links {
			for _, c := range []string{"Replay Errors", "Recovery Errors", "CRC Errors"} {
				fmt.Fprintf(&b, "\t Link %d: %s: %d\n", l, c, values[fmt.Sprintf("%d/%d/%s", g, l, c)])
			}
		}
	}
	return b.String()
}

func TestJudgeNVLink(t *testing.T) {
	tests := []struct {
		name string
		out  string
		opts Options
		want findings
	}{
		{name: "healthy 8x18", out: nvlinkText(8, 18, nil), opts: Options{ExpectNVLink: true}},
		{
			// The last link of the last GPU is checked too: a check of GPU 0
			// only would pass this.
			name: "CRC errors on GPU 7 link 17", out: nvlinkText(8, 18, map[string]int{"7/17/CRC Errors": 4}),
			want: findings{fail: []string{"GPU 7 link 17: CRC Errors = 4"}},
		},
		{
			name: "recovery error", out: nvlinkText(8, 18, map[string]int{"5/2/Recovery Errors": 1}),
			want: findings{fail: []string{"GPU 5 link 2: Recovery Errors = 1"}},
		},
		{
			name: "replay at the default threshold", out: nvlinkText(2, 4, map[string]int{"1/3/Replay Errors": 1}),
			want: findings{fail: []string{"GPU 1 link 3: Replay Errors = 1"}},
		},
		{
			name: "replay below a raised threshold", out: nvlinkText(2, 4, map[string]int{"1/3/Replay Errors": 9}), opts: Options{NVLinkReplayFailAt: 10},
			want: findings{warn: []string{"GPU 1 link 3: Replay Errors = 9 (below the failure threshold of 10)"}},
		},
		{
			name: "replay at a raised threshold", out: nvlinkText(2, 4, map[string]int{"1/3/Replay Errors": 10}), opts: Options{NVLinkReplayFailAt: 10},
			want: findings{fail: []string{"GPU 1 link 3: Replay Errors = 10"}},
		},
		{
			name: "CRC below a raised threshold", out: nvlinkText(2, 4, map[string]int{"0/1/CRC Errors": 99}), opts: Options{NVLinkCRCFailAt: 100},
			want: findings{warn: []string{"GPU 0 link 1: CRC Errors = 99 (below the failure threshold of 100)"}},
		},
		{
			name: "recovery errors ignore the raised thresholds", out: nvlinkText(2, 4, map[string]int{"0/1/Recovery Errors": 1}), opts: Options{NVLinkCRCFailAt: 100, NVLinkReplayFailAt: 100},
			want: findings{fail: []string{"GPU 0 link 1: Recovery Errors = 1"}},
		},
		{
			name: "split CRC counters and extra counters",
			out: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee)\n" +
				"         Link 0: Replay Errors: 0\n         Link 0: Recovery Errors: 0\n" +
				"         Link 0: CRC Flit Errors: 0\n         Link 0: CRC Data Errors: 3\n" +
				"         Link 0: ECC Errors: 2\n         Link 0: Data Tx Errors: 0\n         Link 0: Data Rx Errors: 0\n",
			want: findings{fail: []string{"GPU 0 link 0: CRC Data Errors = 3"}, warn: []string{"GPU 0 link 0: ECC Errors = 2"}},
		},
		{
			name: "Blackwell-style counter set",
			out: "GPU 0: NVIDIA B200 (UUID: GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee)\n" +
				"\t Link 0: Tx packets: 1234567\n\t Link 0: Rx Errors: 0\n\t Link 0: Symbol Errors: 5\n" +
				"\t Link 0: Link recovery successful events: 0\n\t Link 0: Link recovery failed events: 1\n" +
				"\t Link 0: FEC Errors - 0: 99999999\n\t Link 0: FEC Errors - 1: 42\n",
			want: findings{fail: []string{"GPU 0 link 0: Link recovery failed events = 1"}, warn: []string{"GPU 0 link 0: Symbol Errors = 5"}},
		},
		{
			name: "not available values", out: "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-x)\n\t Link 0: Replay Errors: N/A\n\t Link 0: CRC Errors: [N/A]\n",
		},
		{
			name: "unknown counter set", out: "GPU 0: NVIDIA Future GPU (UUID: GPU-x)\n\t Link 0: Tx packets: 5\n\t Link 0: Rx bytes: 7\n",
			want: findings{inconclusive: []string{"GPU 0: none of the NVLink error counters this check knows were printed"}},
		},
		{
			name: "no links, not expected", out: "GPU 0: NVIDIA L4 (UUID: GPU-x)\n",
			want: findings{warn: []string{"nvidia-smi nvlink -e reported no NVLink counters (GPUs without NVLink?)"}},
		},
		{
			name: "no links, expected", out: "", opts: Options{ExpectNVLink: true},
			want: findings{inconclusive: []string{"nvidia-smi nvlink -e reported no NVLink counters, but this pool's GPUs are NVLink-connected"}},
		},
		{
			name: "garbage count", out: "GPU 0: NVIDIA H100 (UUID: GPU-x)\n\t Link 0: CRC Errors: many\n",
			want: findings{inconclusive: []string{`GPU 0 link 0: CRC Errors = "many" is not a count`}},
		},
		{
			name: "unexpected line", out: "Failed to initialize NVML: Driver/library version mismatch\n",
			want: findings{
				inconclusive: []string{`unexpected nvidia-smi nvlink output: line 1: "Failed to initialize NVML: Driver/library version mismatch"`},
				warn:         []string{"nvidia-smi nvlink -e reported no NVLink counters (GPUs without NVLink?)"},
			},
		},
		{
			name: "lost GPU", out: "Unable to determine the device handle for GPU0000:8A:00.0: GPU is lost.  Reboot the system to recover this GPU\n",
			want: findings{fail: []string{"Unable to determine the device handle for GPU0000:8A:00.0: GPU is lost.  Reboot the system to recover this GPU"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeNVLink(Output{Stdout: []byte(tt.out)}, tt.opts)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(findings{}), cmpEmptyNil); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseNVLinkEveryGPUAndLink(t *testing.T) {
	r, err := parseNVLink([]byte(nvlinkText(8, 18, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GPUs) != 8 || len(r.Problems) != 0 {
		t.Fatalf("parsed %d GPUs, problems %q", len(r.GPUs), r.Problems)
	}
	for _, g := range r.GPUs {
		if len(g.Counters) != 18*3 {
			t.Errorf("GPU %d: %d counters, want %d", g.Index, len(g.Counters), 18*3)
		}
		if g.UUID == "" || g.Name != "NVIDIA H100 80GB HBM3" {
			t.Errorf("GPU %d header parsed as name %q uuid %q", g.Index, g.Name, g.UUID)
		}
	}
	if _, err := parseNVLink(make([]byte, MaxOutputBytes+1)); err == nil {
		t.Error("input above MaxOutputBytes was accepted")
	}
}
