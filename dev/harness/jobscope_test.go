package harness

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// scopeStore records the scope of every Update.
type scopeStore struct {
	store.Store
	mu     sync.Mutex
	scopes []store.Scope
}

func (s *scopeStore) Update(ctx context.Context, scope store.Scope, fn func(st *model.State) error) error {
	s.mu.Lock()
	s.scopes = append(s.scopes, scope)
	s.mu.Unlock()
	return s.Store.Update(ctx, scope, fn)
}

// take returns the scopes recorded since the last call.
func (s *scopeStore) take() []store.Scope {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.scopes
	s.scopes = nil
	return out
}

// TestJobPendingWithNodesReadsOnlyItsRecords: a job.pending naming its
// nodes (ResumeProgram's) is decided in a transaction over its pool's
// record, its own record and its nodes' — not the pool's other nodes and
// jobs — and provisions exactly those nodes; once max_node_count is
// lowered under a busy node, the same event is decided from the whole pool.
func TestJobPendingWithNodesReadsOnlyItsRecords(t *testing.T) {
	ss := &scopeStore{Store: store.NewMemory(nil)}
	h, ctx := newHarness(t, Options{Store: ss})
	c := exampleSpec(t)
	must(t, h.Apply(ctx, c))
	settle(t, h, ctx)
	deliver := func(id string, ev event.Job) []store.Scope {
		t.Helper()
		data, err := json.Marshal(ev)
		must(t, err)
		ss.take()
		must(t, h.Deliver(ctx, config.TopicJobs, id, data))
		return ss.take()
	}
	narrow := func(job string, nodes ...string) store.Scope {
		return store.Scope{Cluster: "flexvm", PoolRecords: []string{"a3u"}, Jobs: []string{job}, Nodes: nodes,
			EventID: "job-" + job, EventKind: "flex.scaleup"}
	}
	// Another job waits in the pool: it is not read.
	deliver("job-5", jobPending("5", 3))

	got := deliver("job-7", jobPending("7", 1, "flexvm-a3u-2"))
	if d := cmp.Diff([]store.Scope{narrow("7", "flexvm-a3u-2")}, got); d != "" {
		t.Errorf("scopes of job 7's pending (-want +got):\n%s", d)
	}
	if n := node(t, h, "flexvm-a3u-2"); n.Phase != model.PhaseRequested || n.JobID != "7" || n.Generation != 1 {
		t.Errorf("node 2 = %s generation %d job %q, want requested generation 1 for job 7", n.Phase, n.Generation, n.JobID)
	}
	// A redelivery reads the same records and creates nothing.
	before := resizeRequestsCreated(h)
	if got := deliver("job-7", jobPending("7", 1, "flexvm-a3u-2")); len(got) != 1 || !cmp.Equal(got[0], narrow("7", "flexvm-a3u-2")) {
		t.Errorf("scopes of the redelivery: %+v", got)
	}
	if n := resizeRequestsCreated(h); n != before {
		t.Errorf("redelivery created %d resize requests", n-before)
	}
	settle(t, h, ctx)
	started := jobReport(event.TypeJobStarted, "7")
	started.Nodes = []string{"flexvm-a3u-2"}
	deliver("job-7-started", started)
	if n := node(t, h, "flexvm-a3u-2"); n.Phase != model.PhaseRunning {
		t.Fatalf("node 2 is %s, want running", n.Phase)
	}

	// max_node_count 3 → 2 under job 7's node: the pool is marked, and a
	// job event of the pool is decided from the whole pool, which counts
	// node 2's VM: no room for node 1.
	for i := range c.NodePools {
		if c.NodePools[i].ID == "a3u" {
			c.NodePools[i].MaxNodeCount = 2
		}
	}
	must(t, h.Apply(ctx, c))
	got = deliver("job-8", jobPending("8", 1, "flexvm-a3u-1"))
	if len(got) != 2 || !cmp.Equal(got[0], narrow("8", "flexvm-a3u-1")) || !slices.Contains(got[1].Pools, "a3u") {
		t.Fatalf("scopes of job 8's pending after the shrink: %+v, want the narrow one, then the whole pool", got)
	}
	st, err := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true, Jobs: []string{"8"}})
	must(t, err)
	if n, ok := st.Nodes["flexvm-a3u-1"]; ok && n.Phase.Serving() {
		t.Errorf("node 1 is %s: provisioned beyond max_node_count 2 (node 2 still serves)", n.Phase)
	}
	if j := st.Jobs["8"]; j == nil || j.State != model.JobPending {
		t.Errorf("job 8 = %+v, want pending, waiting for room", j)
	}
}
