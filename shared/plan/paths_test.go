package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// pathKinds is kinds with the pool-level actions these tables pin.
func pathKinds(actions []Action) []string {
	var out []string
	for _, a := range actions {
		switch a := a.(type) {
		case DeleteMIG:
			out = append(out, "DeleteMIG:"+a.Pool+"#"+a.RequestID)
		case PutPool:
			out = append(out, "PutPool:"+a.Pool.ID+":"+a.Pool.Condition)
		default:
			out = append(out, kinds([]Action{a})...)
		}
	}
	return out
}

// runningVM is node flexvm-a3u-<i>'s first-generation VM, running until end.
func runningVM(i string, end time.Time) VM {
	return VM{Name: "flexvm-a3u-" + i + "-g1", ID: "4" + i, Status: "RUNNING", Created: t0, TerminationTime: end}
}

// TestMakeBeforeBreak pins when a static node's successor is requested
// ahead of its termination, and when it is not.
func TestMakeBeforeBreak(t *testing.T) {
	end := t0.Add(7 * 24 * time.Hour)
	lead := Policy{LeadTime: 30 * time.Minute}
	tests := []struct {
		name    string
		prepare func(st *model.State)
		rrs     []ObservedResizeRequest
		pol     Policy
		now     time.Time
		want    []string
	}{
		{
			name: "before the lead time nothing is requested",
			pol:  lead, now: end.Add(-31 * time.Minute),
			want: nil,
		},
		{
			name: "within the lead time a successor is requested in the first free slot",
			pol:  lead, now: end.Add(-20 * time.Minute),
			want: []string{"PutNode:flexvm-a3u-0/running", "PutNode:flexvm-a3u-1/requested", "CreateResizeRequest:rr-flexvm-a3u-1-g1=flexvm-a3u-1-g1"},
		},
		{
			name: "a successor already requested is not requested again",
			prepare: func(st *model.State) {
				st.Nodes["flexvm-a3u-0"].Successor = "flexvm-a3u-1"
				n := *st.Nodes["flexvm-a3u-0"]
				n.Name, n.VMName, n.Phase, n.Successor, n.Predecessor, n.ResizeRequest = "flexvm-a3u-1", "flexvm-a3u-1-g1", model.PhaseRequested, "", "flexvm-a3u-0", "rr-flexvm-a3u-1-g1"
				n.Registered, n.VMID, n.TerminationTime = false, "", time.Time{}
				st.Nodes[n.Name] = &n
				st.Pools["a3u"].MaxNodes = 2 // no room for a hedge (TestHedge)
			},
			rrs: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-1-g1", State: "ACCEPTED", VMs: []string{"flexvm-a3u-1-g1"}, Created: end.Add(-20 * time.Minute)}},
			pol: lead, now: end.Add(-10 * time.Minute),
			want: nil,
		},
		{
			name:    "with make-before-break off the node is recreated after its termination instead",
			pol:     Policy{LeadTime: 30 * time.Minute, RecreateAfterTermination: true},
			now:     end.Add(-20 * time.Minute),
			want:    nil,
			prepare: nil,
		},
		{
			name:    "a pool at max_node_count has no free slot: no successor",
			prepare: func(st *model.State) { st.Pools["a3u"].MaxNodes = 1 },
			pol:     lead, now: end.Add(-20 * time.Minute),
			want: nil,
		},
		{
			name: "a dynamic node gets no successor",
			prepare: func(st *model.State) {
				st.Nodes["flexvm-a3u-0"].Kind = model.NodeDynamic
				st.Pools["a3u"].MinNodes = 0
			},
			pol: lead, now: end.Add(-20 * time.Minute),
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			running(st, "flexvm-a3u-0", end)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			vms := []VM{runningVM("0", end)}
			got := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: vms, ResizeRequests: tc.rrs}}}, tc.now, tc.pol)
			if d := cmp.Diff(tc.want, pathKinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			for _, a := range got {
				if c, ok := a.(CreateResizeRequest); ok && (c.MIG != naming.RequestMIG("flexvm", "a3u", c.Name) || c.RequestID != naming.CreateResizeRequestIDFor(st.Cluster.Incarnation(), c.MIG, c.Name)) {
					t.Errorf("%s: request id %s is not the deterministic one", c.Name, c.RequestID)
				}
			}
		})
	}
}

// TestQueueTimeout pins what happens to a resize request queued (ACCEPTED)
// past Policy.QueueTimeout: cancelled and resubmitted as a new generation up
// to MaxResubmits times, then the pool is flagged once and the request left
// queued.
func TestQueueTimeout(t *testing.T) {
	queuedRR := ObservedResizeRequest{Name: "rr-flexvm-a3u-0-g1", State: "ACCEPTED", VMs: []string{"flexvm-a3u-0-g1"}, Created: t0}
	pol := Policy{QueueTimeout: 6 * time.Hour, MaxResubmits: 2}
	tests := []struct {
		name      string
		prepare   func(st *model.State)
		cancelled bool // the request is listed CANCELLED
		now       time.Time
		want      []string
	}{
		{
			name: "queued within the timeout: left queued",
			now:  t0.Add(5 * time.Hour),
			want: nil,
		},
		{
			name: "queued past the timeout: cancelled; resubmitted once the cancel is seen (one active request per node)",
			now:  t0.Add(6*time.Hour + time.Minute),
			// The generation ends (released); the next one waits for the
			// old request to end (TestOneActiveRequestPerNode), which is
			// cancelled once in the pass.
			want: []string{"CancelResizeRequest:rr-flexvm-a3u-0-g1", "Metric:" + MetricResubmits, "PutNode:flexvm-a3u-0/released", "PutNode:flexvm-a3u-0/released"},
		},
		{
			name: "the next pass lists it CANCELLED: resubmitted as the next generation",
			prepare: func(st *model.State) {
				got := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, ResizeRequests: []ObservedResizeRequest{queuedRR}}}}, t0.Add(6*time.Hour+time.Minute), pol)
				Apply(st, got)
			},
			cancelled: true,
			now:       t0.Add(6*time.Hour + 6*time.Minute),
			want: []string{"PutNode:flexvm-a3u-0/released", "PutNode:flexvm-a3u-0/requested",
				"CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name:    "after MaxResubmits the pool is flagged and alerted once; the request stays queued",
			prepare: func(st *model.State) { st.Nodes["flexvm-a3u-0"].Resubmits = 2 },
			now:     t0.Add(7 * time.Hour),
			want:    []string{"PutPool:a3u:QueueTimeouts: node flexvm-a3u-0 resubmitted 2 times without capacity", "Alert:a3u"},
		},
		{
			name: "a pool already flagged is not alerted again",
			prepare: func(st *model.State) {
				st.Nodes["flexvm-a3u-0"].Resubmits = 2
				st.Pools["a3u"].Condition = "QueueTimeouts: node flexvm-a3u-0 resubmitted 2 times without capacity"
				st.Pools["a3u"].ConditionSince = t0.Add(6 * time.Hour)
			},
			now:  t0.Add(8 * time.Hour),
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			rr := queuedRR
			if tc.cancelled {
				rr.State = "CANCELLED"
			}
			obs := ObservedPool{Listed: true, MIGExists: true, ResizeRequests: []ObservedResizeRequest{rr}}
			got := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": obs}}, tc.now, pol)
			if d := cmp.Diff(tc.want, pathKinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
}

// TestRemovedPool pins the clean-up of a pool removed from the spec: its
// MIG is deleted only once nothing is in it or queued for it, and the pool
// is forgotten once the MIG is gone.
func TestRemovedPool(t *testing.T) {
	deleteMIG := "DeleteMIG:a3u#" + naming.DeleteMIGRequestID("us-central1-a", "fs-flexvm-a3u", 0)
	tests := []struct {
		name      string
		obs       ObservedPool
		forgotten bool
		want      []string
	}{
		{
			name: "an empty MIG is deleted",
			obs:  ObservedPool{Listed: true, MIGsListed: true, MIGExists: true},
			want: []string{deleteMIG},
		},
		{
			name:      "with the MIG gone the pool is forgotten",
			obs:       ObservedPool{Listed: true, MIGsListed: true},
			forgotten: true,
			want:      []string{"ForgetPool:a3u"},
		},
		{
			name: "a queued request keeps the MIG (it is cancelled first)",
			obs: ObservedPool{Listed: true, MIGExists: true, ResizeRequests: []ObservedResizeRequest{
				{Name: "rr-flexvm-a3u-j9-g1", State: "ACCEPTED", Created: t0}}},
			want: []string{"CancelResizeRequest:rr-flexvm-a3u-j9-g1"},
		},
		{
			name: "a listed VM keeps the MIG (no record names it: deleted as an orphan first)",
			obs: ObservedPool{Listed: true, MIGsListed: true, MIGExists: true, VMs: []VM{
				{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0.Add(time.Hour), MIG: "fs-flexvm-a3u"}}},
			want: []string{"DeleteVMs:flexvm-a3u-0-g1"},
		},
		{
			name: "a failed listing decides nothing",
			obs:  ObservedPool{Listed: false},
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			p := st.Pools["a3u"]
			p.Removed, p.MinNodes = true, 0
			if p.Zone != "us-central1-a" || p.MIG != "fs-flexvm-a3u" {
				t.Fatalf("example pool is %s in %s; the expected request id assumes fs-flexvm-a3u in us-central1-a", p.MIG, p.Zone)
			}
			// Its nodes are gone (released and forgotten as their jobs ended).
			for _, n := range st.PoolNodes("a3u") {
				delete(st.Nodes, n.Name)
			}
			now := t0.Add(2 * time.Hour)
			got := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": tc.obs}}, now, Policy{})
			if d := cmp.Diff(tc.want, pathKinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			after := st.Clone()
			Apply(after, got)
			if _, kept := after.Pools["a3u"]; kept == tc.forgotten {
				t.Errorf("pool record kept = %v after applying the actions, want %v", kept, !tc.forgotten)
			}
		})
	}
}
