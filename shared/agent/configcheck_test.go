package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func exampleSpec(t *testing.T, max int) *spec.Cluster {
	t.Helper()
	b, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), `"max_node_count": 3`, fmt.Sprintf(`"max_node_count": %d`, max), 1)
	c, err := spec.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConfigCheckerCompare: a spec applied with a pool grown beyond
// slurm.conf's NodeName lines is a divergence naming the exact generated
// line to set; the spec slurm.conf was generated from is none.
func TestConfigCheckerCompare(t *testing.T) {
	three, four := exampleSpec(t, 3), exampleSpec(t, 4)
	g3, err := slurm.Generate(three, slurm.GenOptions{HookDir: DefaultConfigHookDir, DefaultTime: time.Hour, Configless: true})
	if err != nil {
		t.Fatal(err)
	}
	have, err := slurm.ParseConfView(g3.SlurmConf)
	if err != nil {
		t.Fatal(err)
	}
	k3, err := NewConfigChecker(three, slurm.GenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cc := k3.Compare(have); len(cc.Divergences) != 0 || len(cc.SpecSHA256) != 64 {
		t.Errorf("the spec slurm.conf was generated from: %+v, want no divergence and a SHA-256", cc)
	}
	k4, err := NewConfigChecker(four, slurm.GenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc := k4.Compare(have)
	g4, err := slurm.Generate(four, slurm.GenOptions{HookDir: DefaultConfigHookDir, DefaultTime: time.Hour, Configless: true})
	if err != nil {
		t.Fatal(err)
	}
	var nodeLine, partLine string
	for _, l := range g4.NodeLines {
		if strings.HasPrefix(l, "NodeName=flexvm-a3u-[0-3] ") {
			nodeLine = l
		}
	}
	for _, l := range g4.PartitionLines {
		if strings.HasPrefix(l, "PartitionName=a3u ") {
			partLine = l
		}
	}
	if nodeLine == "" || partLine == "" {
		t.Fatalf("no NodeName=flexvm-a3u-[0-3] or PartitionName=a3u line in %q %q", g4.NodeLines, g4.PartitionLines)
	}
	want := []event.ConfigDivergence{
		{Problem: "pool a3u has max_node_count 4 but Slurm has no node flexvm-a3u-3", Fix: fmt.Sprintf("set %q, then restart slurmctld (new nodes need it)", nodeLine)},
		{Problem: "partition a3u lacks node flexvm-a3u-3", Fix: fmt.Sprintf("set %q, then run `scontrol reconfigure`", partLine)},
	}
	if d := cmp.Diff(want, cc.Divergences); d != "" {
		t.Errorf("divergences (-want +got):\n%s", d)
	}
	if cc.SpecSHA256 == k3.sha {
		t.Error("two different specs have the same SHA-256")
	}
}

// TestConfigCheckerReport: divergences are logged at error level when they
// change and again after an hour, and a return to a served spec once at
// info level.
func TestConfigCheckerReport(t *testing.T) {
	k, err := NewConfigChecker(exampleSpec(t, 3), slurm.GenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	bad := &event.ConfigCheck{Divergences: []event.ConfigDivergence{{Problem: "p", Fix: "f"}}}
	good := &event.ConfigCheck{}
	steps := []struct {
		cc   *event.ConfigCheck
		at   time.Duration
		want []string // "LEVEL problem"
	}{
		{good, 0, []string{"INFO "}},
		{good, time.Minute, nil},
		{bad, 2 * time.Minute, []string{"ERROR p"}},
		{bad, 3 * time.Minute, nil},
		{bad, 2*time.Minute + time.Hour, []string{"ERROR p"}},
		{good, 2 * time.Hour, []string{"INFO "}},
		{good, 5 * time.Hour, nil},
	}
	for i, s := range steps {
		buf.Reset()
		k.report(s.cc, t0.Add(s.at), log)
		var got []string
		dec := json.NewDecoder(&buf)
		for dec.More() {
			var rec struct{ Level, Problem string }
			if err := dec.Decode(&rec); err != nil {
				t.Fatal(err)
			}
			got = append(got, rec.Level+" "+rec.Problem)
		}
		if d := cmp.Diff(s.want, got); d != "" {
			t.Errorf("step %d: log (-want +got):\n%s", i, d)
		}
	}
}
