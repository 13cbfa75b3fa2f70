package slurm

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/spec"
)

func TestDiverge(t *testing.T) {
	example := loadSpec(t, "../../examples/cluster_config.json")
	four := loadSpec(t, strings.Replace(mustRead(t, "../../examples/cluster_config.json"), `"max_node_count": 3`, `"max_node_count": 4`, 1))
	two := loadSpec(t, strings.Replace(mustRead(t, "../../examples/cluster_config.json"), `"max_node_count": 3`, `"max_node_count": 2`, 1))
	o := GenOptions{HookDir: "/h"}
	gen := func(c *spec.Cluster) *Generated {
		g, err := Generate(c, o)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	applied := string(gen(example).SlurmConf) // Slurm configured for max_node_count 3
	tests := []struct {
		name string
		conf string
		want *Generated
		// problems are the expected Problem texts, in order.
		problems []string
		fixes    []string // substrings of each Fix
	}{
		{name: "same spec", conf: applied, want: gen(example)},
		{name: "max 3 to 4", conf: applied, want: gen(four),
			problems: []string{
				"pool a3u has max_node_count 4 but Slurm has no node flexvm-a3u-3",
				"partition a3u lacks node flexvm-a3u-3",
			},
			fixes: []string{`"NodeName=flexvm-a3u-[0-3] CPUs=224 RealMemory=2871705 Gres=gpu:8 State=CLOUD Feature=a3u,cloud", then restart slurmctld`,
				`"PartitionName=a3u Nodes=flexvm-a3u-[0-3] MaxTime=7-00:00:00 DefaultTime=01:00:00 MaxNodes=4 SuspendTime=300 SuspendTimeout=30 ResumeTimeout=65535 State=UP", then run ` + "`scontrol reconfigure`"}},
		{name: "max 3 to 2", conf: applied, want: gen(two),
			problems: []string{
				"pool a3u has max_node_count 2 but Slurm still has node flexvm-a3u-2",
				"partition a3u accepts a job on 3 nodes, more than its largest pool has (MaxNodes=2)",
			},
			fixes: []string{"removing flexvm-a3u-2 from NodeName and PartitionName lines", "MaxNodes=2"}},
		{name: "hand-written, no limits, no GPUs", want: gen(example),
			conf: "NodeName=DEFAULT CPUs=2 State=CLOUD\nNodeName=flexvm-a3u-[0-2]\nPartitionName=a3u Nodes=flexvm-a3u-[0-2] Default=YES MaxTime=INFINITE\n",
			problems: []string{
				"pool a3u has 8 GPUs per node but Slurm gives flexvm-a3u-[0-2] fewer",
				"partition a3u lets a job run without limit, longer than its pools' max run duration (MaxTime=7-00:00:00); accepts a job on any number of nodes, more than its largest pool has (MaxNodes=3)",
			},
			fixes: []string{"gres.conf", "MaxTime=7-00:00:00"}},
		{name: "typed GRES on defaults, partition missing", want: gen(example),
			conf:     "NodeName=DEFAULT Gres=gpu:h200:8\nNodeName=flexvm-a3u-[0-2] # comment\nPartitionName=other Nodes=ALL\n",
			problems: []string{"Slurm has no partition a3u"}, fixes: []string{"add"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			have, err := ParseConfView([]byte(tc.conf))
			if err != nil {
				t.Fatal(err)
			}
			got := Diverge(tc.want, "flexvm", have)
			var problems []string
			for _, d := range got {
				problems = append(problems, d.Problem)
			}
			if diff := cmp.Diff(tc.problems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			for i, f := range tc.fixes {
				if i < len(got) && !strings.Contains(got[i].Fix, f) {
					t.Errorf("fix %d = %q, want it to hold %q", i, got[i].Fix, f)
				}
			}
		})
	}
}

func TestParseConfViewErrors(t *testing.T) {
	for _, conf := range []string{
		"NodeName=a-[0-",
		"NodeName=a Gres=gpu:h200:x8",
		"PartitionName=p Nodes=a MaxTime=forever",
		"PartitionName=p Nodes=a MaxNodes=-1",
	} {
		if _, err := ParseConfView([]byte("ClusterName=x\n" + conf + "\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("ParseConfView(%q) = %v, want an error naming line 2", conf, err)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
