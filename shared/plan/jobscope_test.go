package plan

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func TestJobScope(t *testing.T) {
	tests := []struct {
		name string
		ev   *event.Job
		want NarrowJob
		ok   bool
	}{
		{"pending with its nodes", jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2"),
			NarrowJob{Pool: "a3u", Nodes: []string{"flexvm-a3u-1", "flexvm-a3u-2"}}, true},
		{"pending without nodes: slots chosen from the pool", jobEv(event.TypeJobPending, "7", 2), NarrowJob{}, false},
		{"started", jobEv(event.TypeJobStarted, "7", 1, "flexvm-a3u-1"), NarrowJob{}, false},
		{"finished", jobEv(event.TypeJobFinished, "7", 1, "flexvm-a3u-1"), NarrowJob{}, false},
		{"nodes of two pools", jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-b-1"), NarrowJob{}, false},
		{"a node named twice", jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-1"), NarrowJob{}, false},
		{"a node of another cluster", jobEv(event.TypeJobPending, "7", 1, "other-a3u-1"), NarrowJob{}, false},
		{"not a node name", jobEv(event.TypeJobPending, "7", 1, "login0"), NarrowJob{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := JobScope(tc.ev)
			if ok != tc.ok {
				t.Fatalf("JobScope ok = %v, want %v", ok, tc.ok)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("JobScope (-want +got):\n%s", d)
			}
		})
	}
}

// narrowOf is what the store loads for a narrow job scope: the cluster
// record, the pool record, the job and the named nodes that have records.
func narrowOf(full *model.State, ev *event.Job) *model.State {
	scope, ok := JobScope(ev)
	c := full.Clone()
	out := model.NewState()
	out.Cluster = c.Cluster
	if !ok {
		return out
	}
	if p, ok := c.Pools[scope.Pool]; ok {
		out.Pools[scope.Pool] = p
	}
	if j, ok := c.Jobs[ev.JobID]; ok {
		out.Jobs[ev.JobID] = j
	}
	for _, n := range scope.Nodes {
		if v, ok := c.Nodes[n]; ok {
			out.Nodes[n] = v
		}
	}
	return out
}

// shrunk returns the example spec with pool a3u's max_node_count set.
func shrunk(t *testing.T, c *spec.Cluster, max int) (*spec.Cluster, []byte) {
	t.Helper()
	c2 := *c
	c2.NodePools = append([]spec.NodePool(nil), c.NodePools...)
	for i := range c2.NodePools {
		if c2.NodePools[i].ID == "a3u" {
			c2.NodePools[i].MaxNodeCount = max
		}
	}
	eff, err := c2.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	return &c2, eff
}

// TestJobNarrowDecidesAsTheWholePool: from the narrow scope, JobNarrow
// decides exactly what Job decides from the whole pool, or refuses
// (ErrWiderScope) and decides nothing.
func TestJobNarrowDecidesAsTheWholePool(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster
		ev      *event.Job
		refused bool
		want    []string // Job's decision on the whole pool, for the record
	}{
		{
			name: "new job on a free slot",
			ev:   jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"),
			want: []string{"PutNode:flexvm-a3u-2/requested", "PutJob:8/pending", "CreateResizeRequest:rr-flexvm-a3u-j8-g1=flexvm-a3u-2-g1", "Slurm:job_comment:8"},
		},
		{
			name: "other jobs wait in the pool: they change nothing",
			prepare: func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")))
				for _, id := range []string{"20", "21", "22"} {
					Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, id, 3))) // waits for room
				}
				return c
			},
			ev:   jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"),
			want: []string{"PutNode:flexvm-a3u-2/requested", "PutJob:8/pending", "CreateResizeRequest:rr-flexvm-a3u-j8-g1=flexvm-a3u-2-g1", "Slurm:job_comment:8"},
		},
		{
			name: "a node whose capacity is in flight for another job",
			prepare: func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2")))
				return c
			},
			ev:   jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"),
			want: []string{"PutJob:8/pending", "Slurm:job_comment:8"},
		},
		{
			name: "redelivered pending for a job in flight",
			prepare: func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2")))
				return c
			},
			ev: jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"),
		},
		{
			name: "requeued after it ran: a new generation",
			prepare: func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2")))
				Apply(st, mustJob(t, st, jobEv(event.TypeJobStarted, "8", 1, "flexvm-a3u-2")))
				n := st.Nodes["flexvm-a3u-2"]
				n.Phase, n.LastEnd = model.PhaseReleased, model.EndExpired
				return c
			},
			ev:   &event.Job{Header: event.Header{Version: 1, Type: event.TypeJobPending, Cluster: "flexvm"}, JobID: "8", Partition: "a3u", NodeCount: 1, Nodes: []string{"flexvm-a3u-2"}, Requeued: true},
			want: []string{"PutNode:flexvm-a3u-2/requested", "PutJob:8/pending", "CreateResizeRequest:rr-flexvm-a3u-j8-g2=flexvm-a3u-2-g2", "Slurm:job_comment:8"},
		},
		{
			name: "a node whose previous request may still be active: the job waits, the cancel is asked again",
			prepare: func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-2")))
				Apply(st, mustJob(t, st, jobEv(event.TypeJobCancelled, "7", 0)))
				return c
			},
			ev:   jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"),
			want: []string{"CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutJob:8/pending"},
		},
		{
			name: "late pending for a finished job",
			prepare: func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobFinished, "8", 0)))
				return c
			},
			ev: jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"),
		},
		{
			name: "pool in capacity backoff: the job waits",
			prepare: func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster {
				p := st.Pools["a3u"]
				p.BackoffUntil, p.BackoffReason, p.BackoffAttempts = t0.Add(time.Hour), ClassCapacity, 1
				return c
			},
			ev:   jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"),
			want: []string{"PutJob:8/pending", "Slurm:job_comment:8"},
		},
		{
			name: "pool not confirmed ready: recorded ready once, with its template and MIG",
			prepare: func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster {
				st.Pools["a3u"].Ready = false
				return c
			},
			ev:   jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"),
			want: []string{"PutNode:flexvm-a3u-2/requested", "PutJob:8/pending", "PutPool:a3u", "EnsurePool:a3u", "CreateResizeRequest:rr-flexvm-a3u-j8-g1=flexvm-a3u-2-g1", "Slurm:job_comment:8"},
		},
		{
			name:    "a node beyond max_node_count: the whole pool powers it down",
			ev:      jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-3"),
			refused: true,
			want:    []string{"Slurm:power_down_force:flexvm-a3u-3", "PutJob:8/pending"},
		},
		{
			name:    "a job without nodes",
			ev:      jobEv(event.TypeJobPending, "8", 1),
			refused: true,
			want:    []string{"PutNode:flexvm-a3u-1/requested", "PutJob:8/pending", "CreateResizeRequest:rr-flexvm-a3u-j8-g1=flexvm-a3u-1-g1", "Slurm:job_comment:8"},
		},
		{
			name: "max_node_count lowered under a busy node: the whole pool counts it",
			prepare: func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-2")))
				running(st, "flexvm-a3u-2", t0.Add(time.Hour))
				Apply(st, mustJob(t, st, jobEv(event.TypeJobStarted, "7", 1, "flexvm-a3u-2")))
				running(st, "flexvm-a3u-0", t0.Add(time.Hour))
				c2, eff := shrunk(t, c, 2)
				Apply(st, ClusterApplied(st, c2, testNode, built(t, c2, testNode), eff, t0, Policy{}))
				if !st.Pools["a3u"].NodesBeyondMax {
					t.Fatal("pool a3u not marked with nodes beyond max_node_count after the shrink")
				}
				return c2
			},
			ev:      jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-1"),
			refused: true,
			want:    []string{"PutJob:8/pending"}, // 2 VMs serve: no room for a third
		},
		{
			name: "pool removed from the spec",
			prepare: func(t *testing.T, st *model.State, c *spec.Cluster) *spec.Cluster {
				st.Pools["a3u"].Removed = true
				return c
			},
			ev:      jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"),
			refused: true,
			want:    []string{"Slurm:power_down_force:flexvm-a3u-2", "PutJob:8/pending", "Alert:a3u", "Slurm:job_comment:8"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			full, c := applied(t)
			if tc.prepare != nil {
				c = tc.prepare(t, full, c)
			}
			narrow := narrowOf(full, tc.ev)
			before := narrow.Clone()
			got, err := JobNarrow(narrow, c, tc.ev, t0.Add(time.Minute), Policy{})
			if d := cmp.Diff(before, narrow); d != "" {
				t.Errorf("JobNarrow changed its input (-before +after):\n%s", d)
			}
			whole, wholeErr := Job(full, c, tc.ev, t0.Add(time.Minute), Policy{})
			if tc.refused {
				if !errors.Is(err, ErrWiderScope) || got != nil {
					t.Fatalf("JobNarrow = %v, %v; want ErrWiderScope and no action", kinds(got), err)
				}
				if wholeErr == nil {
					if d := cmp.Diff(tc.want, kinds(whole)); d != "" {
						t.Errorf("Job on the whole pool (-want +got):\n%s", d)
					}
				}
				return
			}
			if err != nil || wholeErr != nil {
				t.Fatalf("JobNarrow: %v; Job: %v", err, wholeErr)
			}
			if d := cmp.Diff(whole, got); d != "" {
				t.Errorf("JobNarrow differs from Job on the whole pool (-whole +narrow):\n%s", d)
			}
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			if !full.Pools["a3u"].Ready {
				return
			}
			for _, a := range got {
				if _, ok := a.(PutPool); ok {
					t.Errorf("a job event wrote the record of a ready pool: %v", a)
				}
			}
		})
	}
}

// TestNodesBeyondMax follows model.Pool.NodesBeyondMax: set when
// max_node_count is lowered under a node that keeps serving, and by any
// decision that provisions a node there; cleared once no such node serves.
func TestNodesBeyondMax(t *testing.T) {
	st, c := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-2")))
	running(st, "flexvm-a3u-2", t0.Add(time.Hour))
	Apply(st, mustJob(t, st, jobEv(event.TypeJobStarted, "7", 1, "flexvm-a3u-2")))
	c2, eff2 := shrunk(t, c, 2)
	got := ClusterApplied(st, c2, testNode, built(t, c2, testNode), eff2, t0, Policy{})
	want := []string{"PutCluster", "PutPool:a3u", "PutNode:flexvm-a3u-2/running", "PutPool:a3u"}
	if d := cmp.Diff(want, kinds(got)); d != "" {
		t.Fatalf("max lowered under a busy node (-want +got):\n%s", d)
	}
	Apply(st, got)
	if !st.Pools["a3u"].NodesBeyondMax {
		t.Fatal("NodesBeyondMax not set")
	}
	// A reconcile pass that still sees the node serve keeps it.
	if got := Reconcile(st, Observed{}, t0, Policy{}); len(got) != 0 {
		t.Errorf("reconcile with the node still serving: %v", kinds(got))
	}
	// The job ends, the node is released: the next pass clears it.
	Apply(st, mustJob(t, st, jobEv(event.TypeJobFinished, "7", 0)))
	n := st.Nodes["flexvm-a3u-2"]
	n.Phase = model.PhaseReleased
	got = Reconcile(st, Observed{}, t0, Policy{})
	if d := cmp.Diff([]string{"PutPool:a3u"}, kinds(got)); d != "" {
		t.Fatalf("reconcile after the node left (-want +got):\n%s", d)
	}
	Apply(st, got)
	if st.Pools["a3u"].NodesBeyondMax {
		t.Fatal("NodesBeyondMax not cleared")
	}
	// Any decision that makes such a node serve again marks the pool.
	b := newBuilder(st, t0, Policy{})
	node := *st.Nodes["flexvm-a3u-2"]
	b.nextGeneration(&node, "rr", "")
	b.putNode(node, "test")
	if d := cmp.Diff([]string{"PutNode:flexvm-a3u-2/requested", "PutPool:a3u"}, kinds(b.out)); d != "" {
		t.Fatalf("node beyond max provisioned (-want +got):\n%s", d)
	}
	if !b.st.Pools["a3u"].NodesBeyondMax {
		t.Error("NodesBeyondMax not set by the node's provisioning")
	}
}
