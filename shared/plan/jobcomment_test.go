package plan

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// TestJobWaitKinds: each reason a pending job waits becomes one line in
// Slurm's words, built from the records' typed facts; a job with nothing
// to tell gets no comment.
func TestJobWaitKinds(t *testing.T) {
	now := t0.Add(20 * time.Minute)
	tests := []struct {
		name    string
		prepare func(t *testing.T, st *model.State) model.Job
		kind    WaitKind
		comment string
	}{
		{
			name: "its resize request is queued for capacity",
			prepare: func(t *testing.T, st *model.State) model.Job {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2)))
				return *st.Jobs["7"]
			},
			kind:    WaitCapacity,
			comment: "waiting for Flex-Start capacity in zone us-central1-a since 2026-11-30T12:00:00Z (request rr-flexvm-a3u-j7-g1)",
		},
		{
			name: "one node requested, one running: still waiting for capacity",
			prepare: func(t *testing.T, st *model.State) model.Job {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2)))
				running(st, "flexvm-a3u-1", t0.Add(week))
				return *st.Jobs["7"]
			},
			kind:    WaitCapacity,
			comment: "waiting for Flex-Start capacity in zone us-central1-a since 2026-11-30T12:00:00Z (request rr-flexvm-a3u-j7-g1)",
		},
		{
			name: "its queued request reports a stockout",
			prepare: func(t *testing.T, st *model.State) model.Job {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
				st.Pools["a3u"].Shortage = &model.Shortage{Class: ClassCapacity, Code: "ZONE_RESOURCE_POOL_EXHAUSTED", Request: "rr-flexvm-a3u-j7-g1", Since: t0.Add(5 * time.Minute)}
				return *st.Jobs["7"]
			},
			kind:    WaitCapacity,
			comment: "waiting for Flex-Start capacity in zone us-central1-a since 2026-11-30T12:00:00Z (request rr-flexvm-a3u-j7-g1; Compute reports ZONE_RESOURCE_POOL_EXHAUSTED)",
		},
		{
			name: "a multi-zone pool: any of its zones",
			prepare: func(t *testing.T, st *model.State) model.Job {
				st.Pools["a3u"].Zones = []string{"us-central1-a", "us-central1-b"}
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
				return *st.Jobs["7"]
			},
			kind:    WaitCapacity,
			comment: "waiting for Flex-Start capacity in any of zones us-central1-a, us-central1-b since 2026-11-30T12:00:00Z (request rr-flexvm-a3u-j7-g1)",
		},
		{
			name: "another request's shortage is not this job's",
			prepare: func(t *testing.T, st *model.State) model.Job {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
				st.Pools["a3u"].Shortage = &model.Shortage{Class: ClassQuota, Code: "QUOTA_EXCEEDED", Request: "rr-flexvm-a3u-j6-g1", Since: t0}
				return *st.Jobs["7"]
			},
			kind:    WaitCapacity,
			comment: "waiting for Flex-Start capacity in zone us-central1-a since 2026-11-30T12:00:00Z (request rr-flexvm-a3u-j7-g1)",
		},
		{
			name: "every VM runs: Slurm boots the nodes, nothing to tell",
			prepare: func(t *testing.T, st *model.State) model.Job {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2)))
				running(st, "flexvm-a3u-1", t0.Add(week))
				running(st, "flexvm-a3u-2", t0.Add(week))
				return *st.Jobs["7"]
			},
		},
		{
			name: "the pool backs off after a stockout",
			prepare: func(t *testing.T, st *model.State) model.Job {
				p := st.Pools["a3u"]
				p.BackoffUntil, p.BackoffReason, p.BackoffAttempts = t0.Add(time.Hour), ClassCapacity, 2
				return model.Job{ID: "7", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 1}
			},
			kind:    WaitBackoff,
			comment: "backing off after a stockout until 2026-11-30T13:00:00Z (pool a3u)",
		},
		{
			name: "the pool backs off after a quota error",
			prepare: func(t *testing.T, st *model.State) model.Job {
				p := st.Pools["a3u"]
				p.BackoffUntil, p.BackoffReason, p.BackoffAttempts = t0.Add(time.Hour), ClassQuota, 1
				return model.Job{ID: "7", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 1}
			},
			kind:    WaitBackoff,
			comment: "backing off after a quota error until 2026-11-30T13:00:00Z (pool a3u)",
		},
		{
			name: "a backoff that ended tells nothing",
			prepare: func(t *testing.T, st *model.State) model.Job {
				p := st.Pools["a3u"]
				p.BackoffUntil, p.BackoffReason, p.BackoffAttempts = t0.Add(10*time.Minute), ClassCapacity, 1
				return model.Job{ID: "7", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 1}
			},
		},
		{
			name: "the pool's circuit breaker is open",
			prepare: func(t *testing.T, st *model.State) model.Job {
				p := st.Pools["a3u"]
				p.BreakerOpenedAt, p.BootstrapFailures = t0.Add(5*time.Minute), 3
				return model.Job{ID: "7", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 1}
			},
			kind:    WaitBreaker,
			comment: "pool a3u circuit breaker open until 2026-11-30T12:35:00Z (3 VMs in a row never registered in Slurm)",
		},
		{
			name: "a queued request wins over the pool's backoff: its capacity keeps its place",
			prepare: func(t *testing.T, st *model.State) model.Job {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
				p := st.Pools["a3u"]
				p.BackoffUntil, p.BackoffReason, p.BackoffAttempts = t0.Add(time.Hour), ClassCapacity, 1
				return *st.Jobs["7"]
			},
			kind:    WaitCapacity,
			comment: "waiting for Flex-Start capacity in zone us-central1-a since 2026-11-30T12:00:00Z (request rr-flexvm-a3u-j7-g1)",
		},
		{
			name: "no free node: another job holds the pool's dynamic nodes",
			prepare: func(t *testing.T, st *model.State) model.Job {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2)))
				return model.Job{ID: "8", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 2}
			},
			kind:    WaitRoom,
			comment: "waiting for free nodes in pool a3u (needs 2, 0 free of max_node_count 3)",
		},
		{
			name: "refused: more nodes than the pool has",
			prepare: func(t *testing.T, st *model.State) model.Job {
				return model.Job{ID: "7", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 5}
			},
			kind:    WaitRefused,
			comment: "refused: fits no node of partition a3u (asks for 5 nodes, pool a3u has max_node_count 3)",
		},
		{
			name: "refused: a time limit no VM of the pool lives",
			prepare: func(t *testing.T, st *model.State) model.Job {
				st.Pools["a3u"].MaxRunDuration = 2 * time.Hour
				return model.Job{ID: "7", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 1, TimeLimit: 3 * time.Hour}
			},
			kind:    WaitRefused,
			comment: "refused: fits no node of partition a3u (time limit 03:00:00 exceeds pool a3u's max run duration 02:00:00 (flex_start_max_duration): no node lives long enough; lower the time limit)",
		},
		{
			name: "only Slurm's placement is at fault: Slurm places it again, the user is not told",
			prepare: func(t *testing.T, st *model.State) model.Job {
				return model.Job{ID: "7", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 1, Nodes: []string{"flexvm-a3u-5"}}
			},
		},
		{
			name: "awaiting Slurm's next allocation after a resume failure: nothing to tell",
			prepare: func(t *testing.T, st *model.State) model.Job {
				return model.Job{ID: "7", Partition: "a3u", Pool: "a3u", State: model.JobPending, NodesWanted: 1, AwaitingSlurm: true}
			},
		},
		{
			name: "a running job: nothing to tell",
			prepare: func(t *testing.T, st *model.State) model.Job {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
				j := *st.Jobs["7"]
				j.State = model.JobRunning
				return j
			},
		},
		{
			name: "a partition flexslurm has no pool record of: nothing to tell",
			prepare: func(t *testing.T, st *model.State) model.Job {
				return model.Job{ID: "7", Partition: "cpu", Pool: "cpu", State: model.JobPending, NodesWanted: 1}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			j := tc.prepare(t, st)
			b := newBuilder(st, now, Policy{}.withDefaults())
			w := b.jobWait(j, nil)
			if w.Kind != tc.kind {
				t.Errorf("kind = %q, want %q (%+v)", w.Kind, tc.kind, w)
			}
			if got := w.Comment(); got != tc.comment {
				t.Errorf("comment:\n got %q\nwant %q", got, tc.comment)
			}
		})
	}
}

// TestJobCommentOncePerChange: the comment is sent when the reason
// changes, not on every decision; it is cleared when the job runs; a
// comment set again after another is a new command the agent applies.
func TestJobCommentOncePerChange(t *testing.T) {
	st, c := applied(t)
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
		ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-j7-g1", State: "ACCEPTED", Created: t0}}}}}
	got := mustJob(t, st, jobEv(event.TypeJobPending, "7", 1))
	want := []string{"7: flexslurm: waiting for Flex-Start capacity in zone us-central1-a since 2026-11-30T12:00:00Z (request rr-flexvm-a3u-j7-g1)"}
	if d := cmp.Diff(want, comments(got)); d != "" {
		t.Fatalf("first report (-want +got):\n%s", d)
	}
	Apply(st, got)
	if st.Jobs["7"].Comment != strings.TrimPrefix(want[0], "7: flexslurm: ") {
		t.Fatalf("recorded comment %q", st.Jobs["7"].Comment)
	}
	// Passes and redelivered reports while nothing changes: no command.
	for i, now := range []time.Time{t0.Add(5 * time.Minute), t0.Add(10 * time.Minute)} {
		rec := Reconcile(st, obs, now, Policy{})
		if c := comments(rec); len(c) > 0 {
			t.Fatalf("pass %d sent the same comment again: %v", i, c)
		}
		Apply(st, rec)
	}
	again, err := Job(st, c, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1"), t0.Add(11*time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if c := comments(again); len(c) > 0 {
		t.Fatalf("a redelivered report sent the comment again: %v", c)
	}
	// The job runs: cleared once.
	started := jobEv(event.TypeJobStarted, "7", 1, "flexvm-a3u-1")
	started.ReportedAt = t0.Add(12 * time.Minute)
	run, err := Job(st, c, started, t0.Add(12*time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"7: "}, comments(run)); d != "" {
		t.Fatalf("job started (-want +got):\n%s", d)
	}
	Apply(st, run)
	if st.Jobs["7"].Comment != "" {
		t.Fatalf("recorded comment after the start %q", st.Jobs["7"].Comment)
	}
	if c := comments(Reconcile(st, obs, t0.Add(15*time.Minute), Policy{})); len(c) > 0 {
		t.Fatalf("a pass after the start sent %v", c)
	}
	// A comment set again after another (A, B, A) is a new command: the
	// agent applies each id once.
	st.Jobs["7"].State, st.Jobs["7"].Comment = model.JobPending, ""
	st.Pools["a3u"].BackoffUntil, st.Pools["a3u"].BackoffReason = t0.Add(time.Hour), ClassCapacity
	st.Nodes["flexvm-a3u-1"].Phase = model.PhaseReleased
	var ids []string
	for i, prev := range []string{"", "something else"} {
		st.Jobs["7"].Comment = prev
		b := newBuilder(st, t0.Add(time.Duration(20+i)*time.Minute), Policy{}.withDefaults())
		b.tellJobs("7")
		if d := cmp.Diff([]string{"7: flexslurm: backing off after a stockout until 2026-11-30T13:00:00Z (pool a3u)"}, comments(b.out)); d != "" {
			t.Fatalf("comment %d (-want +got):\n%s", i, d)
		}
		ids = append(ids, commandIDs(b.out)...)
	}
	if ids[0] == ids[1] {
		t.Errorf("the same comment set twice has one command id %s: the agent would skip the second", ids[0])
	}
}

func commandIDs(acts []Action) []string {
	var ids []string
	for _, a := range acts {
		if c, ok := a.(SlurmCommand); ok && c.Command == event.SlurmJobComment {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// TestJobCommentBounded: however long the facts, the comment with
// flexslurm's prefix fits event.MaxJobComment, is one line, and is a
// command the agent's decoder accepts.
func TestJobCommentBounded(t *testing.T) {
	w := JobWait{Kind: WaitRefused, Partition: "a3u", Misfit: strings.Repeat("much too long ", 100)}
	c := w.Comment()
	r := event.RenderReason(event.SlurmJobComment, c)
	if r != "flexslurm: "+c {
		t.Errorf("RenderReason cut the comment again: %q", r)
	}
	if len(r) > event.MaxJobComment || strings.ContainsAny(r, "\n\r") {
		t.Fatalf("rendered comment of %d bytes, want at most %d on one line", len(r), event.MaxJobComment)
	}
	data, _ := json.Marshal(event.SlurmCommand{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeSlurmCommand, Cluster: "flexvm"},
		ID: "x", Command: event.SlurmJobComment, JobID: "7", Reason: r})
	if _, err := event.DecodeSlurmCommand(data); err != nil {
		t.Errorf("decoder refuses the comment: %v", err)
	}
}
