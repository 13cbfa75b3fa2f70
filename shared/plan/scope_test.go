package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func TestJobPools(t *testing.T) {
	c := &spec.Cluster{ID: "flexvm", Slurm: spec.SlurmSpec{Partitions: []spec.Partition{
		{ID: "gpu", NodePoolIDs: []string{"a3u", "a4"}},
		{ID: "small", NodePoolIDs: []string{"b"}},
	}}}
	for _, tc := range []struct {
		name      string
		partition string
		nodes     []string
		want      []string
		all       bool
	}{
		{"the partition's pools", "gpu", nil, []string{"a3u", "a4"}, false},
		{"the nodes' pools first, each once", "gpu", []string{"flexvm-a4-0", "flexvm-a4-1", "flexvm-c-2"}, []string{"a4", "c", "a3u"}, false},
		{"nodes only", "", []string{"flexvm-b-3"}, []string{"b"}, false},
		{"an unknown partition, no nodes: every pool", "cpu", nil, nil, true},
		{"neither: every pool", "", nil, nil, true},
		{"names that are not nodes are ignored", "", []string{"login-0"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &event.Job{Header: event.Header{Cluster: "flexvm"}, JobID: "7", Partition: tc.partition, Nodes: tc.nodes}
			got, all := JobPools(c, ev)
			if d := cmp.Diff(tc.want, got); d != "" || all != tc.all {
				t.Errorf("JobPools = %v, all %v; want %v, all %v (-want +got):\n%s", got, all, tc.want, tc.all, d)
			}
		})
	}
}

func TestReconcileJobs(t *testing.T) {
	if got := ReconcileJobs(nil); got != nil {
		t.Errorf("no snapshot: %v, want none", got)
	}
	v := &model.SlurmView{Jobs: []model.SlurmJob{
		{ID: "1", State: "PENDING", Nodes: []string{"flexvm-a3u-1"}},
		{ID: "2", State: "PENDING"}, // no nodes allocated yet
		{ID: "3", State: "CONFIGURING", Nodes: []string{"flexvm-a3u-2"}},
		{ID: "4", State: "RUNNING", Nodes: []string{"flexvm-a3u-3"}},
		{ID: "5", State: "COMPLETING", Nodes: []string{"flexvm-a3u-4"}},
	}}
	if d := cmp.Diff([]string{"1", "3"}, ReconcileJobs(v)); d != "" {
		t.Errorf("ReconcileJobs (-want +got):\n%s", d)
	}
}
