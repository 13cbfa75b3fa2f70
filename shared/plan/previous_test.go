package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// TestOneActiveRequestPerNode pins the rule of previous.go: a node whose
// generation ended before its VM ran gets its next generation only once its
// previous resize request is seen to end; meanwhile its job waits and the
// cancel is asked again with the release's request id. A node whose
// previous request is known to have ended, or whose VM ran, is requested at
// once.
//
// Every case starts from job 8's request rr-flexvm-a3u-j8-g1 for
// flexvm-a3u-2, released by a resume failure (its request cancelled, the
// node's generation ended as cancelled, no MIG deleted: a VM that comes may
// serve a job, adopt.go) at t0+1m; static node flexvm-a3u-0 runs.
func TestOneActiveRequestPerNode(t *testing.T) {
	c, _ := example(t)
	const prev = "rr-flexvm-a3u-j8-g1"
	vm0 := VM{Name: "flexvm-a3u-0-g1", ID: "42", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
	listing := func(rrs ...ObservedResizeRequest) Observed {
		return Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{vm0}, ResizeRequests: rrs}}}
	}
	withVM := func(o Observed, vm VM) Observed {
		p := o.Pools["a3u"]
		p.VMs = append(append([]VM(nil), p.VMs...), vm)
		o.Pools["a3u"] = p
		return o
	}
	rr := func(state string) ObservedResizeRequest {
		return ObservedResizeRequest{Name: prev, MIG: naming.RequestMIG("flexvm", "a3u", prev), State: state, VMs: []string{"flexvm-a3u-2-g1"}, Created: t0}
	}
	requeued := func(job string) *event.Job {
		e := jobEv(event.TypeJobPending, job, 1, "flexvm-a3u-2")
		e.Requeued = true
		return e
	}
	prepare := func(t *testing.T) *model.State {
		st, _ := applied(t)
		running(st, "flexvm-a3u-0", t0.Add(week))
		st.Nodes["flexvm-a3u-0"].RunningAt = t0
		Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2")))
		acts, err := NodePower(st, nodeEv(event.TypeResumeFailed, "flexvm-a3u-2"), t0.Add(time.Minute), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		Apply(st, acts)
		if n := st.Nodes["flexvm-a3u-2"]; n.Phase != model.PhaseReleased || n.LastEnd != model.EndCancelled || !n.RequestOpen || n.ResizeRequest != prev {
			t.Fatalf("after the resume failure flexvm-a3u-2 = %+v; want released (cancelled), its request %s open", *n, prev)
		}
		return st
	}
	job := func(ev *event.Job) func(*testing.T, *model.State, time.Time) []Action {
		return func(t *testing.T, st *model.State, now time.Time) []Action {
			a, err := Job(st, c, ev, now, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
	}
	reconcile := func(o Observed) func(*testing.T, *model.State, time.Time) []Action {
		return func(_ *testing.T, st *model.State, now time.Time) []Action { return Reconcile(st, o, now, Policy{}) }
	}
	cancelled := "CancelResizeRequest:" + prev
	for _, tc := range []struct {
		name   string
		before func(*testing.T, *model.State) // after prepare
		passes int                            // decisions applied before the one checked (reconcile passes with the same listing)
		decide func(*testing.T, *model.State, time.Time) []Action
		want   []string
		open   bool // flexvm-a3u-2's previous request still open after the decision
	}{
		{
			name:   "the job's next report before the cancel is seen to end: the job waits, the cancel is asked again",
			decide: job(requeued("8")),
			want:   []string{cancelled, "PutJob:8/pending", "Slurm:job_comment:8"}, // its comment (waiting for capacity) cleared
			open:   true,
		},
		{
			name: "the node released once its never-created VM was found gone, its request still queued: another job waits too",
			before: func(t *testing.T, st *model.State) {
				Apply(st, Reconcile(st, listing(rr("ACCEPTED")), t0.Add(5*time.Minute), Policy{}))
				if n := st.Nodes["flexvm-a3u-2"]; n.Phase != model.PhaseReleased || !n.RequestOpen {
					t.Fatalf("after the pass flexvm-a3u-2 = %+v; want released, its request open", *n)
				}
			},
			decide: job(jobEv(event.TypeJobPending, "9", 1, "flexvm-a3u-2")),
			want:   []string{cancelled, "PutJob:9/pending"},
			open:   true,
		},
		{
			name:   "a pass listing the request still ACCEPTED: no new request for the job, the old one cancelled",
			before: func(t *testing.T, st *model.State) { Apply(st, job(requeued("8"))(t, st, t0.Add(2*time.Minute))) },
			decide: reconcile(listing(rr("ACCEPTED"))),
			want:   []string{cancelled},
			open:   true,
		},
		{
			name:   "a pass listing it CANCELLED: the job is served in that pass, the old request deleted",
			before: func(t *testing.T, st *model.State) { Apply(st, job(requeued("8"))(t, st, t0.Add(2*time.Minute))) },
			decide: reconcile(listing(rr("CANCELLED"))),
			want: []string{"PutNode:flexvm-a3u-2/released",
				"PutNode:flexvm-a3u-2/requested", "PutJob:8/pending", "CreateResizeRequest:rr-flexvm-a3u-j8-g2=flexvm-a3u-2-g2", "Slurm:job_comment:8"},
		},
		{
			name:   "not listed once: one listing is not trusted, the job waits",
			before: func(t *testing.T, st *model.State) { Apply(st, job(requeued("8"))(t, st, t0.Add(2*time.Minute))) },
			decide: reconcile(listing()),
			want:   []string{"PutNode:flexvm-a3u-2/released", cancelled},
			open:   true,
		},
		{
			name:   "not listed in MissThreshold passes: gone, the job is served",
			before: func(t *testing.T, st *model.State) { Apply(st, job(requeued("8"))(t, st, t0.Add(2*time.Minute))) },
			passes: 1,
			decide: reconcile(listing()),
			want: []string{"PutNode:flexvm-a3u-2/released", "PutNode:flexvm-a3u-2/requested", "PutJob:8/pending",
				"CreateResizeRequest:rr-flexvm-a3u-j8-g2=flexvm-a3u-2-g2", "Slurm:job_comment:8"},
		},
		{
			name:   "the request succeeded after the release (its VM listed): the VM is kept for the job Slurm gave the node again, no new request",
			before: func(t *testing.T, st *model.State) { Apply(st, job(requeued("8"))(t, st, t0.Add(2*time.Minute))) },
			decide: reconcile(withVM(listing(rr("SUCCEEDED")), VM{Name: "flexvm-a3u-2-g1", Status: "RUNNING", Created: t0.Add(3 * time.Minute)})),
			want: []string{"PutNode:flexvm-a3u-2/requested", "PutNode:flexvm-a3u-2/running", "PutPool:a3u",
				"Slurm:reservation_create:flexvm-a3u-2", "PutJob:8/pending"},
		},
		{
			name: "a node whose previous request is known to have ended is requested at once by the job's report",
			before: func(t *testing.T, st *model.State) {
				Apply(st, Reconcile(st, listing(rr("CANCELLED")), t0.Add(5*time.Minute), Policy{}))
			},
			decide: job(requeued("8")),
			want: []string{"PutNode:flexvm-a3u-2/requested", "PutJob:8/pending",
				"CreateResizeRequest:rr-flexvm-a3u-j8-g2=flexvm-a3u-2-g2", "Slurm:job_comment:8"},
		},
		{
			name: "the release's cancel confirmed by Compute (RequestsEnded): the job's next report is served at once",
			before: func(t *testing.T, st *model.State) {
				if got := NodesAwaitingRequests(st, []string{prev}); !cmp.Equal(got, []string{"flexvm-a3u-2"}) {
					t.Errorf("nodes awaiting %s: %v", prev, got)
				}
				ended := RequestsEnded(st, []string{prev}, t0.Add(time.Minute), Policy{})
				// The request made no VM: its MIG, from which no node
				// serves, is deleted at once.
				if d := cmp.Diff([]string{"PutNode:flexvm-a3u-2/released", "DeleteMIG:" + naming.RequestMIG("flexvm", "a3u", prev)}, kinds(ended)); d != "" {
					t.Errorf("RequestsEnded (-want +got):\n%s", d)
				}
				Apply(st, ended)
			},
			decide: job(requeued("8")),
			// Compute confirmed the cancel: the request made no VM, and
			// its MIG is deleted as spent by the next pass.
			want: []string{"PutNode:flexvm-a3u-2/requested", "PutJob:8/pending",
				"CreateResizeRequest:rr-flexvm-a3u-j8-g2=flexvm-a3u-2-g2", "Slurm:job_comment:8"},
		},
		{
			name: "a static node whose VM expired is requested again at once (its old VM still going away)",
			decide: func(t *testing.T, st *model.State, now time.Time) []Action {
				a, err := Expiry(st, audit(event.AuditDeferredDelete, "flexvm-a3u-0-g1"), now, Policy{})
				if err != nil {
					t.Fatal(err)
				}
				return a
			},
			want: []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "Slurm:reservation_delete:flexvm-a3u-0",
				"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
			open: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := prepare(t)
			if tc.before != nil {
				tc.before(t, st)
			}
			now := t0.Add(10 * time.Minute)
			for range tc.passes {
				Apply(st, tc.decide(t, st, now))
				now = now.Add(5 * time.Minute)
			}
			got := tc.decide(t, st, now)
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			for _, a := range got {
				if cr, ok := a.(CancelResizeRequest); ok && cr.Name == prev && cr.RequestID != naming.CancelResizeRequestIDFor(st.Cluster.Incarnation(), naming.RequestMIG("flexvm", "a3u", prev), prev) {
					t.Errorf("cancel of %s with request id %s, not the release's", prev, cr.RequestID)
				}
			}
			Apply(st, got)
			if n := st.Nodes["flexvm-a3u-2"]; n.ResizeRequest == prev && n.RequestOpen != tc.open {
				t.Errorf("flexvm-a3u-2 = %+v; previous request open %v, want %v", *n, n.RequestOpen, tc.open)
			}
		})
	}
}
