package slurm

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A partition line of `scontrol show partition -o`, as 22.05 and 24.11
// print it (the keys ParseLiveConf reads are the same in both).
const partitionLines = `PartitionName=gpu AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=NO QoS=N/A DefaultTime=01:00:00 DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=4 MaxTime=7-00:00:00 MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=flexci-gpu-[0-3] PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=EXCLUSIVE OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=4 TotalNodes=4 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED
PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=(null) PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=0 TotalNodes=0 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED
`

func TestParseLiveConf(t *testing.T) {
	for _, release := range []string{"22.05", "24.11"} {
		t.Run(release, func(t *testing.T) {
			nodes, err := os.ReadFile("testdata/" + release + "/show-node.txt")
			if err != nil {
				t.Fatal(err)
			}
			gpu := []byte("NodeName=flexvm-a3u-0 Arch=x86_64 Gres=gpu:h200:8(S:0-1) NodeAddr=x State=IDLE+CLOUD\n" +
				"NodeName=flexvm-a3u-1 Gres=gpu:8,nic:1 State=IDLE+CLOUD\n")
			v, err := ParseLiveConf(append(nodes, gpu...), []byte(partitionLines))
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Nodes) < 6 {
				t.Errorf("%d nodes from show-node.txt and two more, want at least 6: %v", len(v.Nodes), v.Nodes)
			}
			first := map[string]string{"22.05": "exp-a-0", "24.11": "flexci-gpu-0"}[release] // Gres=(null)
			for name, want := range map[string]ConfNode{first: {GPUs: 0}, "flexvm-a3u-0": {GPUs: 8}, "flexvm-a3u-1": {GPUs: 8}} {
				if got, ok := v.Nodes[name]; !ok || got != want {
					t.Errorf("node %s: %+v (present %v), want %+v", name, got, ok, want)
				}
			}
			want := map[string]ConfPartition{
				"gpu":   {Nodes: []string{"flexci-gpu-0", "flexci-gpu-1", "flexci-gpu-2", "flexci-gpu-3"}, MaxTime: 7 * 24 * time.Hour, MaxNodes: 4},
				"debug": {},
			}
			if d := cmp.Diff(want, v.Partitions); d != "" {
				t.Errorf("partitions (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseLiveConfErrors(t *testing.T) {
	for _, tc := range []struct{ nodes, parts, want string }{
		{nodes: "Arch=x86_64 Gres=gpu:8", want: "without NodeName"},
		{nodes: "NodeName=a Gres=gpu:x:y", want: "node a"},
		{parts: "Nodes=a", want: "without PartitionName"},
		{parts: "PartitionName=p Nodes=a-[1-", want: "partition p"},
		{parts: "PartitionName=p MaxTime=soon", want: "partition p: MaxTime"},
		{parts: "PartitionName=p MaxNodes=-1", want: `partition p: MaxNodes "-1"`},
	} {
		_, err := ParseLiveConf([]byte(tc.nodes), []byte(tc.parts))
		if err == nil || !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseLiveConf(%q, %q) = %v, want an ErrParse naming %q", tc.nodes, tc.parts, err, tc.want)
		}
	}
}
