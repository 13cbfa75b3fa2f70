package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/google/go-cmp/cmp"
)

// TestJobFinishedOnNodesThatCameUp: EpilogSlurmctld's job.finished says
// nodes_up when Slurm showed every node of the job up: the job ran there,
// so its capacity came, even when the report overtakes job.started and the
// reconciler has not yet seen the VMs (the nodes are still requested).
// Those nodes, and every node of the same resize request (fulfilled all at
// once), are kept; the reconciler then finds their VMs running. Without
// nodes_up (the hook could not ask Slurm) the queued capacity is released,
// as for a cancelled job.
func TestJobFinishedOnNodesThatCameUp(t *testing.T) {
	finished := func(up bool, nodes ...string) *event.Job {
		ev := jobEv(event.TypeJobFinished, "7", 0, nodes...)
		ev.NodesUp = up
		return ev
	}
	tests := []struct {
		name string
		ev   *event.Job
		want []string
	}{
		{"nodes up: kept", finished(true, "flexvm-a3u-1", "flexvm-a3u-2"), []string{"PutJob:7/finished"}},
		{"one of the request's nodes up: the request came, all kept", finished(true, "flexvm-a3u-1"), []string{"PutJob:7/finished"}},
		{"not known to be up: released", finished(false, "flexvm-a3u-1", "flexvm-a3u-2"), []string{"PutJob:7/finished",
			"CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released", "PutNode:flexvm-a3u-2/released"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, c := applied(t)
			Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-1", "flexvm-a3u-2")))
			got, err := Job(st, c, tt.ev, t0.Add(20*time.Minute), Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, kinds(got)); d != "" {
				t.Fatalf("actions (-want +got):\n%s", d)
			}
			Apply(st, got)
			if len(tt.want) > 1 {
				return
			}
			// The next pass lists the request's VMs running and Slurm shows
			// the nodes idle: they are recorded running (with the maintenance
			// reservation every running VM gets), nothing deleted.
			vm := func(i string) VM {
				return VM{Name: "flexvm-a3u-" + i + "-g1", ID: "4" + i, Status: "RUNNING", Created: t0.Add(15 * time.Minute), TerminationTime: t0.Add(week)}
			}
			st.Slurm = slurmView(t0.Add(24*time.Minute), map[string]string{"flexvm-a3u-1": "IDLE+CLOUD", "flexvm-a3u-2": "IDLE+CLOUD"})
			obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, ListedAt: t0.Add(25 * time.Minute),
				VMs:            []VM{vm("1"), vm("2")},
				ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-j7-g1", State: "SUCCEEDED", VMs: []string{"flexvm-a3u-1-g1", "flexvm-a3u-2-g1"}, Created: t0}},
			}}}
			var acts []string
			for _, k := range kinds(Reconcile(st, obs, t0.Add(25*time.Minute), Policy{})) {
				if strings.Contains(k, "flexvm-a3u-1") || strings.Contains(k, "flexvm-a3u-2") || strings.HasPrefix(k, "DeleteVMs:") {
					acts = append(acts, k)
				}
			}
			want := []string{"PutNode:flexvm-a3u-1/running", "Slurm:reservation_create:flexvm-a3u-1",
				"PutNode:flexvm-a3u-2/running", "Slurm:reservation_create:flexvm-a3u-2"}
			if d := cmp.Diff(want, acts); d != "" {
				t.Errorf("next pass (-want +got):\n%s", d)
			}
			for _, name := range []string{"flexvm-a3u-1", "flexvm-a3u-2"} {
				if n := st.Nodes[name]; n.Phase != model.PhaseRequested {
					t.Errorf("%s is %s before the pass's actions are applied", name, n.Phase)
				}
			}
		})
	}
}

// TestQueuedRequestOfAnEndedJobIsReleased: a dynamic node kept requested
// after its job finished "on nodes up" whose request the reconciler finds
// still queued, or not at all, never served the job (Slurm saw the node up
// from an older VM): the request is cancelled, never issued again, so no
// capacity comes for a job that ended.
func TestQueuedRequestOfAnEndedJobIsReleased(t *testing.T) {
	st := finishedOnNodeUp(t, t0.Add(20*time.Minute))
	for _, tc := range []struct {
		state string
		want  []string
	}{
		{"ACCEPTED", []string{"CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released"}},
		{"CREATING", nil}, // not yet queued, and not cancellable yet: the next pass sees it ACCEPTED
		// Not listed: never issued (a crash before the call). It is not
		// issued again for a job that has ended.
		{"", []string{"CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released"}},
	} {
		var rrs []ObservedResizeRequest
		if tc.state != "" {
			rrs = []ObservedResizeRequest{{Name: "rr-flexvm-a3u-j7-g1", State: tc.state, VMs: []string{"flexvm-a3u-1-g1"}, Created: t0}}
		}
		obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, ListedAt: t0.Add(25 * time.Minute),
			ResizeRequests: rrs,
		}}}
		if d := cmp.Diff(tc.want, nodeOneActions(st, obs, t0.Add(25*time.Minute))); d != "" {
			t.Errorf("request %s (-want +got):\n%s", tc.state, d)
		}
	}
}

// TestEndedJobRuleActsOnlyOnWhatItKnows: the rule above acts on a listing
// taken after the job's end was recorded, never on an older one (a pass
// lists first and decides later: the request it shows queued may since
// have made the VM the job ran on); not on a node Slurm shows up (its VM
// serves); and not on a node an active job names (a job Slurm placed
// there waits on that request).
func TestEndedJobRuleActsOnlyOnWhatItKnows(t *testing.T) {
	ended := t0.Add(20 * time.Minute)
	prepare := func(t *testing.T) *model.State { return finishedOnNodeUp(t, ended) }
	pass := func(st *model.State, listed time.Time) []string {
		obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, ListedAt: listed,
			ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-j7-g1", State: "ACCEPTED", VMs: []string{"flexvm-a3u-1-g1"}, Created: t0}},
		}}}
		return nodeOneActions(st, obs, ended.Add(time.Minute))
	}
	t.Run("listing older than the job's end", func(t *testing.T) {
		if got := pass(prepare(t), ended.Add(-time.Minute)); len(got) != 0 {
			t.Errorf("acted on a listing taken before the job ended: %v", got)
		}
	})
	t.Run("Slurm shows the node allocated", func(t *testing.T) {
		st := prepare(t)
		st.Slurm = slurmView(ended.Add(30*time.Second), map[string]string{"flexvm-a3u-1": "ALLOCATED+CLOUD"})
		if got := pass(st, ended.Add(30*time.Second)); len(got) != 0 {
			t.Errorf("acted on a node Slurm shows busy: %v", got)
		}
	})
	t.Run("an active job names the node", func(t *testing.T) {
		st := prepare(t)
		st.Jobs["8"] = &model.Job{ID: "8", Partition: "a3u", Pool: "a3u", State: model.JobPending, Nodes: []string{"flexvm-a3u-1"}, UpdatedAt: ended}
		if got := pass(st, ended.Add(30*time.Second)); len(got) != 0 {
			t.Errorf("cancelled the request job 8 waits on: %v", got)
		}
	})
	t.Run("listing after the job's end, nothing else", func(t *testing.T) {
		want := []string{"CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released"}
		if d := cmp.Diff(want, pass(prepare(t), ended.Add(30*time.Second))); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
}

// finishedOnNodeUp is the state after job 7 was provisioned on
// flexvm-a3u-1 and reported finished there, nodes up, at the given time:
// the node is kept, still requested.
func finishedOnNodeUp(t *testing.T, at time.Time) *model.State {
	t.Helper()
	st, c := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-1")))
	ev := jobEv(event.TypeJobFinished, "7", 0, "flexvm-a3u-1")
	ev.NodesUp = true
	got, err := Job(st, c, ev, at, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, got)
	return st
}

// nodeOneActions is what a reconcile pass does to flexvm-a3u-1 and job
// 7's requests.
func nodeOneActions(st *model.State, obs Observed, now time.Time) []string {
	var acts []string
	for _, k := range kinds(Reconcile(st, obs, now, Policy{})) {
		if strings.Contains(k, "flexvm-a3u-1") || strings.Contains(k, "-j7-") {
			acts = append(acts, k)
		}
	}
	return acts
}
