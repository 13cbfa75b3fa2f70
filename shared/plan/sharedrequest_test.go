package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// staticNodeLost leaves the static node flexvm-a3u-0 without a VM and
// without a request that may still be active: its generation 1 ended (its
// VM lost while the pool was backed off, say) and nothing replaced it yet.
func staticNodeLost(st *model.State) {
	n := st.Nodes["flexvm-a3u-0"]
	n.Phase, n.LastEnd, n.VMID, n.RequestOpen = model.PhaseReleased, model.EndLost, "", false
}

// TestStaticNodeNeverSharesAJobsRequest: a job Slurm places on a static
// node without a VM and on dynamic nodes gets the static node's VM through
// the node's own resize request (its next generation, named after the
// node) and only the dynamic nodes' VMs through the job's request. A
// request for several nodes is cancelled as a whole, so a static node in
// a job's request would lose its capacity with the job: when the job ends
// (its dynamic nodes released), or when a lowered max_node_count releases
// a dynamic node beyond it. With its own request the static node keeps its
// place in the queue through both.
func TestStaticNodeNeverSharesAJobsRequest(t *testing.T) {
	provision := func(t *testing.T) (*model.State, *spec.Cluster) {
		t.Helper()
		st, c := applied(t)
		staticNodeLost(st)
		got := mustJob(t, st, jobEv(event.TypeJobPending, "7", 3, "flexvm-a3u-0", "flexvm-a3u-1", "flexvm-a3u-2"))
		want := []string{
			"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2",
			"PutNode:flexvm-a3u-1/requested", "PutNode:flexvm-a3u-2/requested", "PutJob:7/pending",
			"CreateResizeRequest:rr-flexvm-a3u-j7-g1=flexvm-a3u-1-g1,flexvm-a3u-2-g1",
			"Slurm:job_comment:7",
		}
		if d := cmp.Diff(want, kinds(got)); d != "" {
			t.Fatalf("job pending on a static node without a VM (-want +got):\n%s", d)
		}
		Apply(st, got)
		if n := st.Nodes["flexvm-a3u-0"]; n.Kind != model.NodeStatic || n.ResizeRequest != "rr-flexvm-a3u-0-g2" {
			t.Fatalf("static node: %s through %s, want static through rr-flexvm-a3u-0-g2", n.Kind, n.ResizeRequest)
		}
		return st, c
	}
	t.Run("job cancelled", func(t *testing.T) {
		st, c := provision(t)
		got, err := Job(st, c, jobEv(event.TypeJobCancelled, "7", 0), t0.Add(time.Minute), Policy{})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"PutJob:7/cancelled",
			"CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released", "PutNode:flexvm-a3u-2/released"}
		if d := cmp.Diff(want, kinds(got)); d != "" {
			t.Errorf("actions (-want +got):\n%s", d)
		}
		Apply(st, got)
		if n := st.Nodes["flexvm-a3u-0"]; n.Phase != model.PhaseRequested || n.ResizeRequest != "rr-flexvm-a3u-0-g2" {
			t.Errorf("static node after the job's end: %s through %s, want still requested through rr-flexvm-a3u-0-g2", n.Phase, n.ResizeRequest)
		}
	})
	t.Run("pool shrunk below the job's dynamic node", func(t *testing.T) {
		st, c := provision(t)
		c2, eff := withMax(t, c, 1, 2)
		got := ClusterApplied(st, c2, testNode, built(t, c2, testNode), eff, t0.Add(time.Minute), Policy{})
		for _, a := range got {
			if cr, ok := a.(CancelResizeRequest); ok && cr.Name != "rr-flexvm-a3u-j7-g1" {
				t.Errorf("cancelled %s, want only the job's request rr-flexvm-a3u-j7-g1", cr.Name)
			}
		}
		Apply(st, got)
		if n := st.Nodes["flexvm-a3u-0"]; n.Phase != model.PhaseRequested || n.ResizeRequest != "rr-flexvm-a3u-0-g2" {
			t.Errorf("static node after the shrink: %s through %s, want still requested through rr-flexvm-a3u-0-g2", n.Phase, n.ResizeRequest)
		}
		if n := st.Nodes["flexvm-a3u-2"]; n.Phase != model.PhaseReleased || n.LastEnd != model.EndCancelled {
			t.Errorf("node beyond the new maximum: %s (%s), want released as its request is cancelled", n.Phase, n.LastEnd)
		}
	})
	t.Run("only the static node missing: no job request", func(t *testing.T) {
		st, _ := applied(t)
		staticNodeLost(st)
		got := mustJob(t, st, jobEv(event.TypeJobPending, "7", 1, "flexvm-a3u-0"))
		want := []string{"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2", "PutJob:7/pending", "Slurm:job_comment:7"}
		if d := cmp.Diff(want, kinds(got)); d != "" {
			t.Errorf("actions (-want +got):\n%s", d)
		}
	})
}

// TestSharedRequestCancelledRequestsTheStaticNodeAgain: a resize request
// that names a static node and a dynamic node (one made before static
// nodes got their own requests) is cancelled as a whole when the job ends
// or the pool shrinks below the dynamic node: keeping it would create a VM
// nobody wants (or one beyond the new maximum), so the static node's
// generation ends with it. It is never lost: it stays static, and is
// requested again in its own request (next generation, named after the
// node) by the pass that sees the cancelled request end, or at once when
// Compute confirmed the cancellation — never while that request may still
// be active (one active request per node).
func TestSharedRequestCancelledRequestsTheStaticNodeAgain(t *testing.T) {
	shared := func(t *testing.T) (*model.State, *spec.Cluster) {
		t.Helper()
		st, c := applied(t)
		for i, name := range []string{"flexvm-a3u-0", "flexvm-a3u-2"} {
			n := st.Nodes[name]
			if n == nil {
				n = &model.Node{Name: name, Pool: "a3u", Index: 2, Kind: model.NodeDynamic}
				st.Nodes[name] = n
			}
			n.Generation = int64(2 - i)
			n.Phase, n.VMName, n.ResizeRequest, n.JobID = model.PhaseRequested, model.VMName(name, n.Generation), "rr-flexvm-a3u-j7-g1", "7"
			n.RequestedAt = t0
		}
		st.Jobs["7"] = &model.Job{ID: "7", Pool: "a3u", Partition: "a3u", State: model.JobPending, NodesWanted: 2,
			Nodes: []string{"flexvm-a3u-0", "flexvm-a3u-2"}, Generation: 1, ResizeRequest: "rr-flexvm-a3u-j7-g1", Stage: model.JobStageProvisioned}
		return st, c
	}
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, st *model.State, c *spec.Cluster) []Action
	}{
		{"job cancelled", func(t *testing.T, st *model.State, c *spec.Cluster) []Action {
			got, err := Job(st, c, jobEv(event.TypeJobCancelled, "7", 0), t0.Add(time.Minute), Policy{})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}},
		{"pool shrunk below the dynamic node", func(t *testing.T, st *model.State, c *spec.Cluster) []Action {
			c2, eff := withMax(t, c, 1, 2)
			return ClusterApplied(st, c2, testNode, built(t, c2, testNode), eff, t0.Add(time.Minute), Policy{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, confirmed := range []bool{false, true} {
				st, c := shared(t)
				got := tc.end(t, st, c)
				var cancelled []string
				for _, a := range got {
					if cr, ok := a.(CancelResizeRequest); ok {
						cancelled = append(cancelled, cr.Name)
					}
				}
				if d := cmp.Diff([]string{"rr-flexvm-a3u-j7-g1"}, cancelled); d != "" {
					t.Fatalf("cancelled requests (-want +got):\n%s", d)
				}
				Apply(st, got)
				n := st.Nodes["flexvm-a3u-0"]
				if n.Kind != model.NodeStatic || n.Phase != model.PhaseDeleting || !n.RequestOpen {
					t.Fatalf("static node after the cancel: %s %s request_open %v, want static, deleting, its request open", n.Kind, n.Phase, n.RequestOpen)
				}
				at := t0.Add(5 * time.Minute)
				rr := ObservedResizeRequest{Name: "rr-flexvm-a3u-j7-g1", State: "ACCEPTED", Created: t0}
				// While the cancelled request is listed queued, the node
				// gets no new request; the cancel is asked again.
				queued := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, ResizeRequests: []ObservedResizeRequest{rr}}}}, at, Policy{})
				for _, a := range queued {
					if cr, ok := a.(CreateResizeRequest); ok {
						t.Fatalf("requested %s while the cancelled request is still queued", cr.Name)
					}
				}
				rr.State = "CANCELLED"
				if confirmed {
					Apply(st, RequestsEnded(st, []string{"rr-flexvm-a3u-j7-g1"}, at, Policy{}))
				}
				got = Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, ResizeRequests: []ObservedResizeRequest{rr}}}}, at.Add(5*time.Minute), Policy{})
				var created []string
				for _, a := range got {
					if cr, ok := a.(CreateResizeRequest); ok {
						created = append(created, cr.Name+"="+cr.VMs[0])
					}
				}
				if d := cmp.Diff([]string{"rr-flexvm-a3u-0-g3=flexvm-a3u-0-g3"}, created); d != "" {
					t.Errorf("confirmed %v: requests the pass that sees the cancel end makes (-want +got):\n%s", confirmed, d)
				}
			}
		})
	}
}
