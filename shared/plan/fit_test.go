package plan

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/spec"
)

func TestJobFit(t *testing.T) {
	pool := &model.Pool{ID: "a3u", MinNodes: 1, MaxNodes: 3, MaxRunDuration: 2 * time.Hour}
	removed := *pool
	removed.Removed = true
	tests := []struct {
		name      string
		pool      *model.Pool
		job       model.Job
		fits      bool
		placement bool
		reason    string // a part of the reason
	}{
		{name: "a job within every limit fits", pool: pool, job: model.Job{ID: "1", NodesWanted: 2, TimeLimit: time.Hour}, fits: true},
		{name: "a time limit equal to the max run duration fits", pool: pool, job: model.Job{ID: "1", NodesWanted: 1, TimeLimit: 2 * time.Hour}, fits: true},
		{name: "an unknown time limit fits", pool: pool, job: model.Job{ID: "1", NodesWanted: 1}, fits: true},
		{name: "a time limit beyond the max run duration does not fit", pool: pool,
			job: model.Job{ID: "1", NodesWanted: 1, TimeLimit: 48 * time.Hour}, reason: "time limit 2-00:00:00 exceeds pool a3u's max run duration 02:00:00"},
		{name: "more nodes than max_node_count do not fit", pool: pool,
			job: model.Job{ID: "1", NodesWanted: 4}, reason: "asks for 4 nodes, pool a3u has max_node_count 3"},
		{name: "exactly max_node_count nodes fit", pool: pool, job: model.Job{ID: "1", NodesWanted: 3}, fits: true},
		{name: "a node allocated beyond max_node_count is a placement misfit", pool: pool,
			job: model.Job{ID: "1", NodesWanted: 2, Nodes: []string{"flexvm-a3u-2", "flexvm-a3u-3"}}, placement: true, reason: "allocated flexvm-a3u-3, beyond pool a3u's max_node_count 3"},
		{name: "a removed pool serves nothing", pool: &removed, job: model.Job{ID: "1", NodesWanted: 1}, reason: "pool a3u was removed"},
		{name: "no pool record serves nothing", job: model.Job{ID: "1", Pool: "gone", NodesWanted: 1}, reason: `pool "gone" has no record`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, fits := JobFit(tc.pool, tc.job)
			if fits != tc.fits || m.Placement != tc.placement || !strings.Contains(m.Reason, tc.reason) || (fits && m.Reason != "") {
				t.Errorf("JobFit = %+v, %v; want fits %v, placement %v, reason containing %q", m, fits, tc.fits, tc.placement, tc.reason)
			}
		})
	}
}

// shortPool sets pool a3u's max run duration (the example's is 7 days).
func shortPool(st *model.State, d time.Duration) {
	st.Pools["a3u"].MaxRunDuration = d
	st.Pools["a3u"].RunDuration = d
}

func comments(actions []Action) []string {
	var out []string
	for _, a := range actions {
		if c, ok := a.(SlurmCommand); ok && c.Command == event.SlurmJobComment {
			out = append(out, c.JobID+": "+event.RenderReason(c.Command, c.Reason)) // as the user sees it
		}
	}
	return out
}

func hasResizeRequest(actions []Action) bool {
	return slices.ContainsFunc(actions, func(a Action) bool { _, ok := a.(CreateResizeRequest); return ok })
}

// A job whose time limit exceeds the pool's max run duration is provisioned
// by no path: not by ScaleUp, not by any later reconcile pass; its user is
// told once in Slurm, and the nodes Slurm powers up for it are powered
// down. Once Slurm shows a time limit that fits, the next pass provisions
// it and clears the comment.
func TestJobLongerThanThePoolIsNeverProvisioned(t *testing.T) {
	st, c := applied(t)
	shortPool(st, 2*time.Hour)
	ev := jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")
	ev.TimeLimitSeconds = 48 * 3600
	ev.ReportedAt = t0
	got, err := Job(st, c, ev, t0, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Slurm:power_down_force:flexvm-a3u-1", "PutJob:7/pending", "Alert:a3u", "Slurm:job_comment:7"}
	if d := cmp.Diff(want, kinds(got)); d != "" {
		t.Fatalf("ScaleUp (-want +got):\n%s", d)
	}
	wantComment := []string{"7: flexslurm: refused: fits no node of partition a3u (time limit 2-00:00:00 exceeds pool a3u's max run duration 02:00:00 (flex_start_max_duration): no node lives long enough; lower the time limit)"}
	if d := cmp.Diff(wantComment, comments(got)); d != "" {
		t.Errorf("comment (-want +got):\n%s", d)
	}
	Apply(st, got)
	if j := st.Jobs["7"]; j.TimeLimit != 48*time.Hour || j.Unfit == "" {
		t.Errorf("job record: time limit %s, unfit %q", j.TimeLimit, j.Unfit)
	}
	// The same report again (a redelivery or Slurm's next resume) repeats
	// only the power-down; a new report time makes it a new command.
	again, _ := Job(st, c, ev, t0.Add(time.Minute), Policy{})
	if d := cmp.Diff([]string{"Slurm:power_down_force:flexvm-a3u-1"}, kinds(again)); d != "" {
		t.Errorf("second report (-want +got):\n%s", d)
	}
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
		VMs:            []VM{{Name: "flexvm-a3u-0-g1", ID: "1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(2 * time.Hour)}},
		ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-0-g1", State: "SUCCEEDED", Created: t0}}}}}
	for i, now := range []time.Time{t0.Add(5 * time.Minute), t0.Add(10 * time.Minute)} {
		rec := Reconcile(st, obs, now, Policy{})
		if hasResizeRequest(rec) || len(comments(rec)) > 0 || slices.Contains(kinds(rec), "PutJob:7/pending") {
			t.Fatalf("reconcile pass %d acted on the job that fits no node: %v", i, kinds(rec))
		}
		Apply(st, rec)
	}
	// The user lowers the time limit; the snapshot shows it.
	now := t0.Add(15 * time.Minute)
	st.Slurm = &model.SlurmView{TakenAt: now, Nodes: map[string]model.SlurmNode{},
		Jobs: []model.SlurmJob{{ID: "7", State: "PENDING", Partition: "a3u", NodeCount: 1, TimeLimitSeconds: 3600}}}
	rec := Reconcile(st, obs, now, Policy{})
	if !hasResizeRequest(rec) {
		t.Errorf("a job whose time limit now fits is not provisioned: %v", kinds(rec))
	}
	if d := cmp.Diff([]string{"7: flexslurm: waiting for Flex-Start capacity in zone us-central1-a since 2026-11-30T12:15:00Z (request rr-flexvm-a3u-j7-g1)"}, comments(rec)); d != "" {
		t.Errorf("comment once it fits: the refusal is replaced by the wait (-want +got):\n%s", d)
	}
}

// A job Slurm shows pending on powering-up nodes, never reported, whose
// time limit fits no node: the reconciler does not provision it either.
func TestLostReportOfAJobLongerThanThePool(t *testing.T) {
	st, _ := applied(t)
	shortPool(st, 2*time.Hour)
	now := t0.Add(5 * time.Minute)
	st.Slurm = &model.SlurmView{TakenAt: now, Nodes: map[string]model.SlurmNode{
		"flexvm-a3u-1": slurmNode("flexvm-a3u-1", "", "allocated", "CLOUD", "NOT_RESPONDING", "POWERING_UP")},
		Jobs: []model.SlurmJob{{ID: "9", State: "PENDING", Partition: "a3u", Nodes: []string{"flexvm-a3u-1"}, NodeCount: 1, TimeLimitSeconds: 3 * 3600}}}
	rec := Reconcile(st, Observed{JobRecordsFor: now, Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
		ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-0-g1", State: "ACCEPTED", Created: t0}}}}}, now, Policy{})
	if hasResizeRequest(rec) {
		t.Fatalf("provisioned: %v", kinds(rec))
	}
	for _, w := range []string{"Slurm:power_down_force:flexvm-a3u-1", "PutJob:9/pending", "Slurm:job_comment:9"} {
		if !slices.Contains(kinds(rec), w) {
			t.Errorf("missing %s in %v", w, kinds(rec))
		}
	}
}

// withMax returns the example spec with pool a3u's max_node_count (and
// min_node_count) changed, or a3u dropped when max < 0.
func withMax(t *testing.T, c *spec.Cluster, minN, maxN int) (*spec.Cluster, []byte) {
	t.Helper()
	c2 := *c
	c2.NodePools = nil
	for _, p := range c.NodePools {
		if p.ID == "a3u" {
			if maxN < 0 {
				continue
			}
			p.MinNodeCount, p.MaxNodeCount = minN, maxN
		}
		c2.NodePools = append(c2.NodePools, p)
	}
	if maxN < 0 {
		c2.Slurm.Partitions = nil
	}
	eff, err := c2.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	return &c2, eff
}

// A pool shrunk while a job's nodes power up: in the apply's own pass the
// job's queued request is cancelled, every node it named is powered down
// in Slurm, and no later pass asks for a VM beyond the new maximum.
func TestPoolShrunkWhileNodesPowerUp(t *testing.T) {
	tests := []struct {
		name       string
		min, max   int
		want       []string
		afterwards []string // node names the reconciler must never request
	}{
		{
			name: "max lowered below the job's nodes", min: 1, max: 2,
			want: []string{"PutCluster", "PutPool:a3u",
				"CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released", "PutNode:flexvm-a3u-2/released",
				"Slurm:power_down_force:flexvm-a3u-1,flexvm-a3u-2"},
			afterwards: []string{"flexvm-a3u-2"},
		},
		{
			name: "pool removed", min: 0, max: -1,
			want: []string{"PutCluster", "PutPool:a3u", "Alert:a3u",
				"DeleteVMs:flexvm-a3u-0-g1", "Slurm:power_down:flexvm-a3u-0", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/deleting",
				"CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-2/deleting",
				"DeleteVMs:flexvm-a3u-1-g1,flexvm-a3u-2-g1", "PutNode:flexvm-a3u-1/deleting",
				"Slurm:power_down_force:flexvm-a3u-1,flexvm-a3u-2"},
			afterwards: []string{"flexvm-a3u-0", "flexvm-a3u-1", "flexvm-a3u-2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, c := applied(t)
			running(st, "flexvm-a3u-0", t0.Add(week))
			Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2")))
			c2, eff := withMax(t, c, tc.min, tc.max)
			got := ClusterApplied(st, c2, testNode, built(t, c2, testNode), eff, t0.Add(time.Minute), Policy{})
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Fatalf("apply (-want +got):\n%s", d)
			}
			Apply(st, got)
			// Compute shows the cancelled request; Slurm has not placed
			// the job again yet (its record still names its old nodes).
			obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true,
				VMs:            []VM{{Name: "flexvm-a3u-0-g1", ID: "1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}},
				ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-j7-g1", State: "CANCELLED", Created: t0}}}}}
			for i := 1; i <= 3; i++ {
				rec := Reconcile(st, obs, t0.Add(time.Duration(i)*5*time.Minute), Policy{})
				for _, a := range rec {
					if cr, ok := a.(CreateResizeRequest); ok {
						for _, n := range tc.afterwards {
							for _, vm := range cr.VMs {
								if strings.HasPrefix(vm, n+"-g") {
									t.Fatalf("pass %d requests %s beyond the new maximum: %v", i, vm, kinds(rec))
								}
							}
						}
					}
				}
				Apply(st, rec)
			}
		})
	}
}

// A job running on a node beyond the new maximum keeps it; once the job
// has ended, the next reconcile pass releases the node.
func TestNodeBeyondMaxKeptWhileItsJobRuns(t *testing.T) {
	st, c := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-2")))
	running(st, "flexvm-a3u-2", t0.Add(week))
	Apply(st, mustJob(t, st, jobEv(event.TypeJobStarted, "7", 1, "flexvm-a3u-2")))
	c2, eff := withMax(t, c, 1, 2)
	got := ClusterApplied(st, c2, testNode, built(t, c2, testNode), eff, t0.Add(time.Minute), Policy{})
	if slices.ContainsFunc(got, func(a Action) bool { _, ok := a.(DeleteVMs); return ok }) {
		t.Fatalf("a node under a running job was released: %v", kinds(got))
	}
	Apply(st, got)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobFinished, "7", 0)))
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{
		{Name: "flexvm-a3u-2-g1", ID: "2", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}}}}}
	rec := Reconcile(st, obs, t0.Add(5*time.Minute), Policy{})
	for _, w := range []string{"DeleteVMs:flexvm-a3u-2-g1", "Slurm:power_down:flexvm-a3u-2", "PutNode:flexvm-a3u-2/deleting"} {
		if !slices.Contains(kinds(rec), w) {
			t.Errorf("missing %s in %v", w, kinds(rec))
		}
	}
}

// A node beyond a shrunk pool's maximum under a job flexslurm still holds
// running, while a Slurm snapshot newer than the job's record shows the job
// requeued and pending: the newest source decides, the job runs nowhere,
// and the node is released.
func TestNodeBeyondMaxReleasedWhenANewerSnapshotShowsItsJobPending(t *testing.T) {
	for _, tc := range []struct {
		state   slurmstate.JobState
		release bool
	}{{"PENDING", true}, {"RUNNING", false}} {
		t.Run(string(tc.state), func(t *testing.T) {
			st, c := applied(t)
			Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-2")))
			running(st, "flexvm-a3u-2", t0.Add(week))
			Apply(st, mustJob(t, st, jobEv(event.TypeJobStarted, "7", 1, "flexvm-a3u-2")))
			c2, eff := withMax(t, c, 1, 2)
			Apply(st, ClusterApplied(st, c2, testNode, built(t, c2, testNode), eff, t0.Add(time.Minute), Policy{}))
			now := t0.Add(5 * time.Minute)
			st.Slurm = &model.SlurmView{TakenAt: now, Nodes: map[string]model.SlurmNode{},
				Jobs: []model.SlurmJob{{ID: "7", State: tc.state, Partition: "a3u", Nodes: []string{"flexvm-a3u-2"}, NodeCount: 1}}}
			obs := Observed{JobRecordsFor: now, Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{
				{Name: "flexvm-a3u-2-g1", ID: "2", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}}}}}
			rec := Reconcile(st, obs, now, Policy{})
			if got := slices.Contains(kinds(rec), "DeleteVMs:flexvm-a3u-2-g1"); got != tc.release {
				t.Errorf("job %s in Slurm: released = %v, want %v: %v", tc.state, got, tc.release, kinds(rec))
			}
		})
	}
}
