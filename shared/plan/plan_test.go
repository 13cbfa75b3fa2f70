package plan

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// example loads the shipped example spec (pool a3u: min 1, max 3, 7 days).
func example(t *testing.T) (*spec.Cluster, []byte) {
	t.Helper()
	data, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	eff, err := c.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	return c, eff
}

// testNode are the node settings the plan tests apply with the spec.
var testNode = nodeconfig.Settings{
	Image:          "projects/schedmd-slurm-public/global/images/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570-v20251112",
	ServiceAccount: "flexslurm-node@p.iam.gserviceaccount.com",
	ConfServer:     "flexvm-controller",
	MungeKeySecret: "projects/p/secrets/flexvm-munge-key/versions/latest",
	Home:           nodeconfig.Mount{Type: nodeconfig.MountNFS, Source: "10.0.0.2:/home", Dir: "/home"},
	Topics:         nodeconfig.Topics{Jobs: "job-pending", Health: "health-failure"},
}

// built builds every pool's instance template of c with node settings
// node, as the cluster.applied handler does before it decides.
func built(t *testing.T, c *spec.Cluster, node nodeconfig.Settings) map[string]instancetemplate.Template {
	t.Helper()
	ts, err := instancetemplate.BuildPools(c, node)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// applied returns the state after the example cluster was applied and its
// pool confirmed ready.
func applied(t *testing.T) (*model.State, *spec.Cluster) {
	t.Helper()
	c, eff := example(t)
	st := model.NewState()
	Apply(st, ClusterApplied(st, c, testNode, built(t, c, testNode), eff, t0, Policy{}))
	st.Pools["a3u"].Ready = true
	return st, c
}

// kinds summarises actions as "Type:detail" strings, for compact tables:
// every plan test's summariser (rkinds and pathKinds add detail to a few
// types and hand it every other). An action type it does not know panics,
// so that no test silently loses sight of a new kind of action.
func kinds(actions []Action) []string {
	var out []string
	for _, a := range actions {
		switch a := a.(type) {
		case PutNode:
			out = append(out, "PutNode:"+a.Node.Name+"/"+string(a.Node.Phase))
		case PutJob:
			out = append(out, "PutJob:"+a.Job.ID+"/"+string(a.Job.State))
		case PutPool:
			out = append(out, "PutPool:"+a.Pool.ID)
		case PutCluster:
			out = append(out, "PutCluster")
		case EnsurePool:
			out = append(out, "EnsurePool:"+a.Pool)
		case CreateResizeRequest:
			out = append(out, "CreateResizeRequest:"+a.Name+"="+strings.Join(a.VMs, ","))
		case CancelResizeRequest:
			out = append(out, "CancelResizeRequest:"+a.Name)
		case DeleteResizeRequest:
			out = append(out, "DeleteResizeRequest:"+a.Name+"/"+a.State)
		case DeleteVMs:
			out = append(out, "DeleteVMs:"+strings.Join(a.VMs, ","))
		case DeleteMIG:
			// A VM released with its request's MIG (one MIG per request)
			// reads as its deletion; the way (MIG or deleteInstances) is
			// checked in topology_test.go.
			if len(a.VMs) > 0 {
				out = append(out, "DeleteVMs:"+strings.Join(a.VMs, ","))
			} else {
				out = append(out, "DeleteMIG:"+a.MIG)
			}
		case SlurmCommand:
			out = append(out, "Slurm:"+string(a.Command)+":"+strings.Join(a.Nodes, ",")+a.JobID)
		case Alert:
			out = append(out, "Alert:"+a.Pool)
		case ReportHostAsFaulty:
			out = append(out, "ReportHost:"+a.VM)
		case StartVM:
			out = append(out, "StartVM:"+a.VM)
		case Metric:
			out = append(out, "Metric:"+a.Name)
		case ForgetPool:
			out = append(out, "ForgetPool:"+a.Pool)
		default:
			panic(fmt.Sprintf("kinds: action type %T is not summarised: add it here", a))
		}
		if a.Why() == "" {
			out = append(out, "MISSING REASON")
		}
	}
	return out
}

func TestClusterAppliedCreatesStaticNodes(t *testing.T) {
	c, eff := example(t)
	st := model.NewState()
	got := ClusterApplied(st, c, testNode, built(t, c, testNode), eff, t0, Policy{})
	want := []string{
		"PutCluster",
		"PutPool:a3u",
		"PutPool:a3u", // recorded ready with the request for its template and MIG
		"EnsurePool:a3u",
		"PutNode:flexvm-a3u-0/requested",
		"CreateResizeRequest:rr-flexvm-a3u-0-g1=flexvm-a3u-0-g1",
	}
	if d := cmp.Diff(want, kinds(got)); d != "" {
		t.Fatalf("actions (-want +got):\n%s", d)
	}
	rr := got[5].(CreateResizeRequest)
	if rr.RunDuration != 604800*time.Second {
		t.Errorf("run duration %s, want 604800s", rr.RunDuration)
	}
	// In a MIG of its own, named from the request; the request id names
	// the cluster's incarnation (its record's creation time).
	if rr.MIG != naming.RequestMIG("flexvm", "a3u", "rr-flexvm-a3u-0-g1") || !strings.HasPrefix(rr.MIG, "fs-flexvm-a3u-r") {
		t.Errorf("MIG %s is not the request's own", rr.MIG)
	}
	if rr.RequestID != naming.RequestID("create-resize-request", rr.MIG+"/rr-flexvm-a3u-0-g1@"+strconv.FormatInt(t0.UnixNano(), 10)) {
		t.Errorf("request id %s is not the deterministic one", rr.RequestID)
	}
	// Applying the same spec again (a redelivered cluster event) asks for nothing.
	Apply(st, got)
	if !st.Pools["a3u"].Ready {
		t.Fatal("the pool is not recorded ready with the request for its template and MIG")
	}
	if again := ClusterApplied(st, c, testNode, built(t, c, testNode), eff, t0.Add(time.Minute), Policy{}); len(again) != 0 {
		t.Errorf("re-apply: %v", kinds(again))
	}
	// A pool not ready (its MIG found missing) is asked for again.
	st.Pools["a3u"].Ready = false
	if d := cmp.Diff([]string{"PutPool:a3u", "EnsurePool:a3u"}, kinds(ClusterApplied(st, c, testNode, built(t, c, testNode), eff, t0.Add(time.Minute), Policy{}))); d != "" {
		t.Errorf("re-apply with a pool not ready (-want +got):\n%s", d)
	}
}

// New node settings are a new template for every pool: the pool is asked
// for again under the new name, and the cluster record keeps the settings.
func TestClusterAppliedNodeSettingsChangeTemplate(t *testing.T) {
	st, c := applied(t)
	eff, _ := c.EffectiveJSON()
	old := st.Pools["a3u"].Template
	node := testNode
	node.Image = "projects/schedmd-slurm-public/global/images/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570-v20260101"
	got := ClusterApplied(st, c, node, built(t, c, node), eff, t0.Add(time.Minute), Policy{})
	if d := cmp.Diff([]string{"PutCluster", "PutPool:a3u", "PutPool:a3u", "EnsurePool:a3u"}, kinds(got)); d != "" {
		t.Fatalf("new image (-want +got):\n%s", d)
	}
	Apply(st, got)
	if st.Pools["a3u"].Template == old {
		t.Errorf("template %s kept its name with a new image", old)
	}
	if d := cmp.Diff(node, st.Cluster.Node); d != "" {
		t.Errorf("stored node settings (-want +got):\n%s", d)
	}
	if st.Cluster.SpecVersion != 1 {
		t.Errorf("spec version %d: new node settings are not a new spec", st.Cluster.SpecVersion)
	}
}

func TestClusterResize(t *testing.T) {
	st, c := applied(t)
	// Raise min to 2: one more static node.
	c2 := *c
	c2.NodePools = append([]spec.NodePool(nil), c.NodePools...)
	for i := range c2.NodePools {
		if c2.NodePools[i].ID == "a3u" {
			c2.NodePools[i].MinNodeCount = 2
		}
	}
	eff2, _ := c2.EffectiveJSON()
	got := ClusterApplied(st, &c2, testNode, built(t, &c2, testNode), eff2, t0, Policy{})
	want := []string{"PutCluster", "PutPool:a3u", "PutNode:flexvm-a3u-1/requested", "CreateResizeRequest:rr-flexvm-a3u-1-g1=flexvm-a3u-1-g1"}
	if d := cmp.Diff(want, kinds(got)); d != "" {
		t.Fatalf("raise min (-want +got):\n%s", d)
	}
	Apply(st, got)
	st.Nodes["flexvm-a3u-1"].Phase = model.PhaseRunning
	// Lower min back to 1: the surplus static node is released.
	eff1, _ := c.EffectiveJSON()
	got = ClusterApplied(st, c, testNode, built(t, c, testNode), eff1, t0, Policy{})
	want = []string{"PutCluster", "PutPool:a3u", "DeleteVMs:flexvm-a3u-1-g1", "Slurm:power_down:flexvm-a3u-1", "PutNode:flexvm-a3u-1/deleting"}
	if d := cmp.Diff(want, kinds(got)); d != "" {
		t.Fatalf("lower min (-want +got):\n%s", d)
	}
	if n := got[4].(PutNode).Node; n.Kind != model.NodeDynamic || n.LastEnd != model.EndReleased {
		t.Errorf("released node: kind %s last end %s", n.Kind, n.LastEnd)
	}
}

func jobEv(typ, id string, count int, nodes ...string) *event.Job {
	return &event.Job{Header: event.Header{Version: 1, Type: typ, Cluster: "flexvm"}, JobID: id, Partition: "a3u", NodeCount: count, Nodes: nodes}
}

func TestJobPending(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(st *model.State)
		ev      *event.Job
		want    []string
		wantErr bool
	}{
		{
			name: "new job gets one resize request for all its nodes",
			ev:   jobEv(event.TypeJobPending, "7", 2),
			want: []string{
				"PutNode:flexvm-a3u-1/requested", "PutNode:flexvm-a3u-2/requested",
				"PutJob:7/pending",
				"CreateResizeRequest:rr-flexvm-a3u-j7-g1=flexvm-a3u-1-g1,flexvm-a3u-2-g1",
				"Slurm:job_comment:7",
			},
		},
		{
			name: "nodes named by Slurm are the ones provisioned",
			ev:   jobEv(event.TypeJobPending, "8", 1, "flexvm-a3u-2"),
			want: []string{"PutNode:flexvm-a3u-2/requested", "PutJob:8/pending", "CreateResizeRequest:rr-flexvm-a3u-j8-g1=flexvm-a3u-2-g1", "Slurm:job_comment:8"},
		},
		{
			name: "beyond max_node_count the job waits, nothing is requested",
			ev:   jobEv(event.TypeJobPending, "9", 3),
			want: []string{"PutJob:9/pending", "Slurm:job_comment:9"},
		},
		{
			name: "a job whose capacity is in flight gets nothing new",
			prepare: func(st *model.State) {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
			},
			ev:   jobEv(event.TypeJobPending, "7", 1),
			want: nil,
		},
		{
			name:    "a node of another cluster is rejected",
			ev:      jobEv(event.TypeJobPending, "10", 1, "other-a3u-1"),
			wantErr: true,
		},
		{
			name: "a node beyond max_node_count is not provisioned but powered down, so Slurm places the job again",
			ev:   jobEv(event.TypeJobPending, "10", 1, "flexvm-a3u-3"),
			want: []string{"Slurm:power_down_force:flexvm-a3u-3", "PutJob:10/pending"},
		},
		{
			name:    "a node index beyond any pool's size is rejected",
			ev:      jobEv(event.TypeJobPending, "10", 1, "flexvm-a3u-1000"),
			wantErr: true,
		},
		{
			name:    "an unknown partition is rejected",
			ev:      &event.Job{Header: event.Header{Version: 1, Type: event.TypeJobPending, Cluster: "flexvm"}, JobID: "11", Partition: "nope", NodeCount: 1},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, c := applied(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			got, err := Job(st, c, tc.ev, t0, Policy{})
			if tc.wantErr {
				if !errors.Is(err, ErrRejected) {
					t.Fatalf("err = %v, want ErrRejected", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
}

// TestJobPendingOneNodePerRequest: where Compute names no VM of a resize
// request (Policy.OneNodePerRequest), each of a job's nodes is requested
// through a request of its own, named for the node's generation, in a MIG
// of its own; the job's nodes, records and releases are otherwise as with
// one request for the job.
func TestJobPendingOneNodePerRequest(t *testing.T) {
	st, c := applied(t)
	pol := Policy{OneNodePerRequest: true}
	got, err := Job(st, c, jobEv(event.TypeJobPending, "7", 2), t0, pol)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"PutNode:flexvm-a3u-1/requested", "PutNode:flexvm-a3u-2/requested",
		"PutJob:7/pending",
		"CreateResizeRequest:rr-flexvm-a3u-1-g1=flexvm-a3u-1-g1",
		"CreateResizeRequest:rr-flexvm-a3u-2-g1=flexvm-a3u-2-g1",
		"Slurm:job_comment:7",
	}
	if d := cmp.Diff(want, kinds(got)); d != "" {
		t.Fatalf("actions (-want +got):\n%s", d)
	}
	migs := map[string]bool{}
	for _, a := range got {
		if cr, ok := a.(CreateResizeRequest); ok {
			if cr.JobID != "7" || cr.MIG != naming.RequestMIG("flexvm", "a3u", cr.Name) {
				t.Errorf("request %+v: want job 7 in the request's own MIG", cr)
			}
			migs[cr.MIG] = true
		}
	}
	if len(migs) != 2 {
		t.Errorf("MIGs %v: want one per node", migs)
	}
	Apply(st, got)
	for _, n := range []string{"flexvm-a3u-1", "flexvm-a3u-2"} {
		if rec := st.Nodes[n]; rec.JobID != "7" || rec.ResizeRequest != naming.NodeResizeRequest(n, 1) || rec.MIG != naming.RequestMIG("flexvm", "a3u", rec.ResizeRequest) {
			t.Errorf("node %s: job %q request %q MIG %q", n, rec.JobID, rec.ResizeRequest, rec.MIG)
		}
	}
	// The same event again asks for nothing more.
	again, err := Job(st, c, jobEv(event.TypeJobPending, "7", 2), t0.Add(time.Minute), pol)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Errorf("redelivery: %v", kinds(again))
	}
	// Every release is of a whole MIG: a VM made without a name is never
	// named in a deleteInstances.
	{
		rel := st.Clone()
		for _, n := range []string{"flexvm-a3u-1", "flexvm-a3u-2"} {
			running(rel, n, t0.Add(time.Hour))
		}
		b := newBuilder(rel, t0, pol)
		for _, n := range []string{"flexvm-a3u-1", "flexvm-a3u-2"} {
			b.releaseVM(rel.Pools["a3u"], *rel.Nodes[n], "released")
		}
		for _, a := range b.out {
			if _, ok := a.(DeleteVMs); ok {
				t.Errorf("release by deleteInstances in one-node requests: %+v", a)
			}
		}
		if len(b.out) != 2 {
			t.Errorf("releases %v: want one DeleteMIG per node", kinds(b.out))
		}
	}
	// The job ends before capacity came: each node's own request is
	// cancelled, and nothing else is touched.
	end, err := Job(st, c, jobEv(event.TypeJobCancelled, "7", 2), t0.Add(2*time.Minute), pol)
	if err != nil {
		t.Fatal(err)
	}
	var cancels []string
	for _, a := range end {
		if cr, ok := a.(CancelResizeRequest); ok {
			cancels = append(cancels, cr.Name+"@"+cr.MIG)
		}
	}
	wantCancels := []string{
		"rr-flexvm-a3u-1-g1@" + naming.RequestMIG("flexvm", "a3u", "rr-flexvm-a3u-1-g1"),
		"rr-flexvm-a3u-2-g1@" + naming.RequestMIG("flexvm", "a3u", "rr-flexvm-a3u-2-g1"),
	}
	if d := cmp.Diff(wantCancels, cancels); d != "" {
		t.Errorf("cancels (-want +got):\n%s\nall: %v", d, kinds(end))
	}
}

func mustJob(t *testing.T, st *model.State, ev *event.Job) []Action {
	t.Helper()
	c, _ := example(t)
	a, err := Job(st, c, ev, t0, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestJobCancelledCancelsOnlyItsRequest(t *testing.T) {
	st, c := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "8", 1)))
	got, err := Job(st, c, jobEv(event.TypeJobCancelled, "7", 0), t0, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	// The request's MIG is left to the reconciler: a VM the request made
	// meanwhile may serve another job (adopt.go).
	want := []string{"PutJob:7/cancelled", "CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released"}
	if d := cmp.Diff(want, kinds(got)); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	// A late pending report for the cancelled job changes nothing.
	Apply(st, got)
	if late, _ := Job(st, c, jobEv(event.TypeJobPending, "7", 1), t0.Add(time.Second), Policy{}); len(late) != 0 {
		t.Errorf("late pending report: %v", kinds(late))
	}
}

// TestJobEndKeepsAStaticNodesReplacement: a static node whose VM failed
// under a job is replaced at once through its own request, made for that
// job (chaos seed 1042). When the job ends, the job's own request is
// cancelled, but the static node's replacement stays queued: the node must
// serve whether or not the job does, and cancelling would only queue it
// again, at the back, past static_at_min's deadline.
func TestJobEndKeepsAStaticNodesReplacement(t *testing.T) {
	pending7 := event.SnapshotJob{ID: "7", State: "PENDING", Partition: "a3u", NodeCount: 2}
	for _, typ := range []string{event.TypeJobCancelled, event.TypeJobFinished} {
		t.Run(typ, func(t *testing.T) {
			st, c := applied(t)
			running(st, "flexvm-a3u-0", t0.Add(week))
			Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-0", "flexvm-a3u-1")))
			failAndConfirm(t, st, fail("flexvm-a3u-0", 1, "7", "pending", true), t0, Policy{}, pending7)
			if n := st.Nodes["flexvm-a3u-0"]; n.Phase != model.PhaseRequested || n.ResizeRequest != "rr-flexvm-a3u-0-g2" || n.JobID != "7" {
				t.Fatalf("static node after its repair: %s %s for job %q, want requested through rr-flexvm-a3u-0-g2 for job 7", n.Phase, n.ResizeRequest, n.JobID)
			}
			got, err := Job(st, c, jobEv(typ, "7", 0), t0.Add(time.Minute), Policy{})
			if err != nil {
				t.Fatal(err)
			}
			state := map[string]string{event.TypeJobCancelled: "cancelled", event.TypeJobFinished: "finished"}[typ]
			want := []string{"PutJob:7/" + state, "CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released"}
			if d := cmp.Diff(want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
	// The reconciler ending a job whose end report was lost (a newer
	// snapshot no longer shows it) keeps the static node's request too.
	t.Run("end report lost", func(t *testing.T) {
		st, _ := applied(t)
		running(st, "flexvm-a3u-0", t0.Add(week))
		Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 2, "flexvm-a3u-0", "flexvm-a3u-1")))
		failAndConfirm(t, st, fail("flexvm-a3u-0", 1, "7", "pending", true), t0, Policy{}, pending7)
		st.Slurm = slurmView(t0.Add(2*time.Minute), map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN", "flexvm-a3u-1": "IDLE+CLOUD+POWERED_DOWN"})
		obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, ResizeRequests: []ObservedResizeRequest{
			{Name: "rr-flexvm-a3u-j7-g1", State: "ACCEPTED", VMs: []string{"flexvm-a3u-1-g1"}, Created: t0},
			{Name: "rr-flexvm-a3u-0-g2", State: "ACCEPTED", VMs: []string{"flexvm-a3u-0-g2"}, Created: t0},
		}}}}
		var got []string
		for _, k := range kinds(Reconcile(st, obs, t0.Add(3*time.Minute), Policy{})) {
			if strings.HasPrefix(k, "CancelResizeRequest:") || strings.HasPrefix(k, "PutNode:") || strings.HasPrefix(k, "PutJob:") {
				got = append(got, k)
			}
		}
		want := []string{"PutJob:7/finished", "CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("reconcile actions on requests and records (-want +got):\n%s", d)
		}
	})
}

// running puts a node's current generation in phase Running with a termination time.
func running(st *model.State, node string, until time.Time) {
	n := st.Nodes[node]
	n.Phase = model.PhaseRunning
	n.VMID = "42"
	n.TerminationTime = until
	n.Registered = true
}

func audit(kind event.AuditKind, vm string) *event.Audit {
	a := &event.Audit{Kind: kind, Instance: vm, Zone: "us-central1-a", First: true, Last: true, Timestamp: t0}
	switch kind {
	case event.AuditDeferredDelete:
		a.Method, a.SystemEvent, a.Principal = "compute.instances.deferredDelete", true, "system@google.com"
	case event.AuditDelete:
		a.Method, a.Principal = "v1.compute.instances.delete", "123456789012@cloudservices.gserviceaccount.com"
	}
	return a
}

func TestExpiry(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(st *model.State)
		audit   *event.Audit
		want    []string
		wantErr bool
	}{
		{
			name:    "static node expired is recreated, whether or not a job waits",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0) },
			audit:   audit(event.AuditDeferredDelete, "flexvm-a3u-0-g1"),
			want: []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/requested",
				"CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name: "MIG service agent delete at termination time counts as expiry",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0)
			},
			audit: audit(event.AuditDelete, "flexvm-a3u-0-g1"),
			want: []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/requested",
				"CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name: "dynamic node expired with no pending job is not recreated",
			prepare: func(st *model.State) {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
				running(st, "flexvm-a3u-1", t0)
				st.Jobs["7"].State = model.JobFinished
			},
			audit: audit(event.AuditDeferredDelete, "flexvm-a3u-1-g1"),
			want:  []string{"Slurm:power_down_force:flexvm-a3u-1", "DeleteMIG:fs-flexvm-a3u-r13f0b2250b", "Slurm:reservation_delete:flexvm-a3u-1", "PutNode:flexvm-a3u-1/released"},
		},
		{
			name: "dynamic node expired while its job is pending is recreated for it",
			prepare: func(st *model.State) {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
				running(st, "flexvm-a3u-1", t0)
			},
			audit: audit(event.AuditDeferredDelete, "flexvm-a3u-1-g1"),
			want: []string{"Slurm:power_down_force:flexvm-a3u-1", "DeleteMIG:fs-flexvm-a3u-r13f0b2250b", "Slurm:reservation_delete:flexvm-a3u-1", "PutNode:flexvm-a3u-1/released",
				"PutNode:flexvm-a3u-1/requested", "PutJob:7/pending",
				"CreateResizeRequest:rr-flexvm-a3u-j7-g2=flexvm-a3u-1-g2"},
		},
		{
			name: "an old generation's deletion is ignored",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0)
				st.Nodes["flexvm-a3u-0"].Generation = 2
				st.Nodes["flexvm-a3u-0"].VMName = "flexvm-a3u-0-g2"
			},
			audit:   audit(event.AuditDeferredDelete, "flexvm-a3u-0-g1"),
			wantErr: true,
		},
		{
			name: "the deletion flexslurm asked for completes the node's release",
			prepare: func(st *model.State) {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
				st.Nodes["flexvm-a3u-1"].Phase = model.PhaseDeleting
			},
			audit: audit(event.AuditDelete, "flexvm-a3u-1-g1"),
			want:  []string{"PutNode:flexvm-a3u-1/released"},
		},
		{
			name:    "a VM not named like the cluster's is rejected",
			audit:   audit(event.AuditDeferredDelete, "someone-elses-vm"),
			wantErr: true,
		},
		{
			name: "the first entry of a deletion flexslurm did not ask for replaces the static node at once",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(72*time.Hour))
			},
			audit: func() *event.Audit {
				a := audit(event.AuditDelete, "flexvm-a3u-0-g1")
				a.First, a.Last, a.Principal = true, false, "someone@example.com"
				return a
			}(),
			want: []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/requested",
				"CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name: "the first entry of a deletion flexslurm asked for waits for the last",
			prepare: func(st *model.State) {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
				st.Nodes["flexvm-a3u-1"].Phase = model.PhaseDeleting
			},
			audit: func() *event.Audit {
				a := audit(event.AuditDelete, "flexvm-a3u-1-g1")
				a.First, a.Last = true, false
				return a
			}(),
			wantErr: true,
		},
		{
			name: "an entry that is neither first nor last is ignored",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0)
			},
			audit: func() *event.Audit {
				a := audit(event.AuditDelete, "flexvm-a3u-0-g1")
				a.First, a.Last = false, false
				return a
			}(),
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			got, err := Expiry(st, tc.audit, t0, Policy{})
			if tc.wantErr {
				if !errors.Is(err, ErrRejected) {
					t.Fatalf("err = %v, want ErrRejected", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
}

func TestExpiryUserDeletionIsALossNotAnExpiry(t *testing.T) {
	st, _ := applied(t)
	running(st, "flexvm-a3u-0", t0.Add(72*time.Hour))
	a := audit(event.AuditDelete, "flexvm-a3u-0-g1")
	a.Principal = "alice@example.com"
	got, err := Expiry(st, a, t0, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	var n model.Node
	for _, x := range got {
		if p, ok := x.(PutNode); ok {
			n = p.Node
		}
	}
	if n.LastEnd != model.EndLost || n.Generation != 2 {
		t.Errorf("node after a user's deletion: last end %q gen %d, want lost, 2", n.LastEnd, n.Generation)
	}
}

func health(node string, gen int64, job, jobState string) *event.Health {
	return &event.Health{Header: event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: "flexvm"},
		Node: node, Generation: gen, JobID: job, JobState: jobState, Verdict: "FAIL", Reasons: []string{"GPU 3: 2 uncorrectable ECC errors"}}
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(st *model.State)
		obs     ObservedPool
		now     time.Time
		want    []string
	}{
		{
			name: "a requested VM that came up is recorded running",
			obs: ObservedPool{Listed: true, MIGExists: true, VMs: []VM{{Name: "flexvm-a3u-0-g1", ID: "9", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(7 * 24 * time.Hour)}},
				ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-0-g1", State: "SUCCEEDED", Created: t0}}},
			now: t0.Add(time.Minute),
			// Its request's MIG stays while the VM serves (one MIG per
			// request): the request is not deleted on its own.
			want: []string{"PutNode:flexvm-a3u-0/running", "PutPool:a3u", "Slurm:reservation_create:flexvm-a3u-0"},
		},
		{
			name: "a request lost in a crash is issued again after the grace period, same name",
			obs:  ObservedPool{Listed: true, MIGExists: true},
			now:  t0.Add(3 * time.Minute),
			want: []string{"CreateResizeRequest:rr-flexvm-a3u-0-g1=flexvm-a3u-0-g1"},
		},
		{
			name: "within the grace period a missing request is left alone",
			obs:  ObservedPool{Listed: true, MIGExists: true},
			now:  t0.Add(30 * time.Second),
			want: nil,
		},
		{
			name:    "a failed listing decides nothing",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(time.Hour)) },
			obs:     ObservedPool{Listed: false},
			now:     t0.Add(2 * time.Hour),
			want:    nil,
		},
		{
			name:    "a running VM gone at its termination time is an expiry: static recreated",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(time.Hour)) },
			obs:     ObservedPool{Listed: true, MIGExists: true},
			now:     t0.Add(time.Hour),
			want: []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/requested",
				"CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name:    "an orphan labelled as ours is deleted once past the grace period",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(time.Hour)) },
			obs: ObservedPool{Listed: true, MIGExists: true, VMs: []VM{
				{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(time.Hour)},
				{Name: "flexvm-a3u-2-g4", Status: "RUNNING", Created: t0, MIG: "fs-flexvm-a3u"},
			}},
			now:  t0.Add(10 * time.Minute),
			want: []string{"DeleteVMs:flexvm-a3u-2-g4"},
		},
		{
			name: "a queued request nobody waits for is cancelled",
			obs: ObservedPool{Listed: true, MIGExists: true, VMs: []VM{{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(time.Hour)}},
				ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-j99-g1", State: "ACCEPTED", Created: t0}}},
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(time.Hour)) },
			now:     t0.Add(10 * time.Minute),
			want:    []string{"CancelResizeRequest:rr-flexvm-a3u-j99-g1"},
		},
		{
			name: "a request that SUCCEEDED but whose VM is not listed yet gets another pass (eventual consistency)",
			obs:  ObservedPool{Listed: true, MIGExists: true, ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-0-g1", State: "SUCCEEDED", Created: t0}}},
			now:  t0.Add(10 * time.Minute),
			want: []string{"PutNode:flexvm-a3u-0/requested"},
		},
		{
			name: "a failed request ends the generation: the static node is asked for again",
			obs:  ObservedPool{Listed: true, MIGExists: true, ResizeRequests: []ObservedResizeRequest{{Name: "rr-flexvm-a3u-0-g1", State: "FAILED", Created: t0}}},
			now:  t0.Add(10 * time.Minute),
			want: []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "PutNode:flexvm-a3u-0/requested",
				"CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			// Requests of the pool's MIG, in the layout before one MIG per
			// request (a request's own MIG is deleted whole: topology_test.go).
			name: "finished requests no node waits on are deleted; queued and still-awaited ones are not",
			obs: ObservedPool{Listed: true, MIGExists: true, VMs: []VM{{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(time.Hour)}},
				ResizeRequests: []ObservedResizeRequest{
					{Name: "rr-flexvm-a3u-0-g1", State: "SUCCEEDED", Created: t0, MIG: "fs-flexvm-a3u", Legacy: true},
					{Name: "rr-flexvm-a3u-j5-g1", State: "CANCELLED", Created: t0, MIG: "fs-flexvm-a3u", Legacy: true},
					{Name: "rr-flexvm-a3u-j6-g1", State: "FAILED", Created: t0, MIG: "fs-flexvm-a3u", Legacy: true},
					{Name: "rr-flexvm-a3u-j7-g1", State: "ACCEPTED", Created: t0.Add(9 * time.Minute), MIG: "fs-flexvm-a3u", Legacy: true},
					{Name: "rr-flexvm-a3u-j8-g1", State: "CREATING", Created: t0.Add(9 * time.Minute), MIG: "fs-flexvm-a3u", Legacy: true},
				}},
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(time.Hour)) },
			now:     t0.Add(10 * time.Minute),
			want: []string{"DeleteResizeRequest:rr-flexvm-a3u-0-g1/SUCCEEDED", "DeleteResizeRequest:rr-flexvm-a3u-j5-g1/CANCELLED",
				"DeleteResizeRequest:rr-flexvm-a3u-j6-g1/FAILED"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			got := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": tc.obs}}, tc.now, Policy{})
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
}

// TestDecisionsDoNotMutateTheirInput guards purity: a decision must leave the
// snapshot it was given untouched (the caller applies the record actions).
func TestDecisionsDoNotMutateTheirInput(t *testing.T) {
	st, c := applied(t)
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
	running(st, "flexvm-a3u-1", t0)
	before := st.Clone()
	if _, err := Job(st, c, jobEv(event.TypeJobPending, "8", 1), t0, Policy{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Expiry(st, audit(event.AuditDeferredDelete, "flexvm-a3u-1-g1"), t0, Policy{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Repair(st, health("flexvm-a3u-1", 1, "7", "requeued"), t0, Policy{}); err != nil {
		t.Fatal(err)
	}
	Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true}}}, t0.Add(time.Hour), Policy{})
	if d := cmp.Diff(before, st); d != "" {
		t.Errorf("input state changed (-before +after):\n%s", d)
	}
}

func TestEncodeExternalRoundTrip(t *testing.T) {
	st, c := applied(t)
	acts, err := Job(st, c, jobEv(event.TypeJobPending, "7", 2), t0, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	acts = append(acts, SlurmCommand{ID: "x", Command: event.SlurmDrain, Nodes: []string{"flexvm-a3u-1"}, Reason: "r"},
		DeleteVMs{Pool: "a3u", VMs: []string{"flexvm-a3u-1-g1"}, RequestID: "id", Reason: "r"},
		CancelResizeRequest{Pool: "a3u", Name: "rr", RequestID: "id", Reason: "r"},
		DeleteResizeRequest{Pool: "a3u", Name: "rr", State: "CANCELLED", RequestID: "id", Reason: "r"},
		EnsurePool{Pool: "a3u", Template: st.Pools["a3u"].Template, TemplateBody: st.Pools["a3u"].TemplateBody, Reason: "r"},
		ReportHostAsFaulty{Pool: "a3u", Node: "flexvm-a3u-1", Generation: 3, VM: "flexvm-a3u-1-g3", Behavior: FaultBehavior,
			Description: "health check failed: Xid 79", JobID: "7", RequestID: "id", Reason: "r"},
		StartVM{Pool: "a3u", Node: "flexvm-a3u-1", Generation: 3, VM: "flexvm-a3u-1-g3", RequestID: "id", Reason: "r"})
	data, err := EncodeExternal(acts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeExternal(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(External(acts), got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if _, err := DecodeExternal([]byte(`[{"kind":"launch_missiles","data":{}}]`)); err == nil {
		t.Error("an unknown kind decoded")
	}
}

func nodeEv(typ string, nodes ...string) *event.Node {
	return &event.Node{Header: event.Header{Version: 1, Type: typ, Cluster: "flexvm"}, Nodes: nodes}
}

func TestNodePower(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(st *model.State)
		ev      *event.Node
		want    []string
		wantErr bool
	}{
		{
			name: "suspended idle dynamic node: VM released, nothing sent back to Slurm",
			prepare: func(st *model.State) {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
				running(st, "flexvm-a3u-1", t0.Add(time.Hour))
				st.Jobs["7"].State = model.JobFinished
			},
			ev:   nodeEv(event.TypeNodeSuspend, "flexvm-a3u-1"),
			want: []string{"DeleteVMs:flexvm-a3u-1-g1", "Slurm:reservation_delete:flexvm-a3u-1", "PutNode:flexvm-a3u-1/deleting"},
		},
		{
			name:    "suspended static node is kept, with an alert",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(time.Hour)) },
			ev:      nodeEv(event.TypeNodeSuspend, "flexvm-a3u-0"),
			want:    []string{"Alert:a3u"},
		},
		{
			name: "resume failed on a dynamic node still waiting for capacity: its request is cancelled (its MIG kept for a VM that may come), the node resumed, its job awaits Slurm",
			prepare: func(st *model.State) {
				Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
			},
			ev: nodeEv(event.TypeResumeFailed, "flexvm-a3u-1"),
			want: []string{"CancelResizeRequest:rr-flexvm-a3u-j7-g1", "PutNode:flexvm-a3u-1/released",
				"Slurm:resume:flexvm-a3u-1", "PutJob:7/pending"},
		},
		{
			name: "resume failed on a static node waiting for capacity: resumed in Slurm, its request kept",
			ev:   nodeEv(event.TypeResumeFailed, "flexvm-a3u-0"),
			want: []string{"Slurm:resume:flexvm-a3u-0"},
		},
		{
			name:    "resume failed on a static node whose VM runs (its node never came up): resumed, a new generation at once",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(time.Hour)) },
			ev:      nodeEv(event.TypeResumeFailed, "flexvm-a3u-0"),
			want: []string{"DeleteVMs:flexvm-a3u-0-g1", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/deleting",
				"Slurm:resume:flexvm-a3u-0", "PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name:    "a node of another cluster rejects the report",
			ev:      nodeEv(event.TypeNodeSuspend, "flexvm-a3u-1", "other-a3u-1"),
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			got, err := NodePower(st, tc.ev, t0, Policy{})
			if tc.wantErr {
				if !errors.Is(err, ErrRejected) {
					t.Fatalf("err = %v, want ErrRejected", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
}

func slurmView(at time.Time, nodes map[string]string) *model.SlurmView {
	v := &model.SlurmView{TakenAt: at, Nodes: map[string]model.SlurmNode{}}
	for name, s := range nodes {
		parts := strings.Split(s, "+")
		v.Nodes[name] = slurmNode(name, "", parts...)
	}
	return v
}

func TestReconcileWithSlurmAndMisses(t *testing.T) {
	vm0 := VM{Name: "flexvm-a3u-0-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
	vm1 := VM{Name: "flexvm-a3u-1-g1", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
	dyn := func(st *model.State) {
		Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
		running(st, "flexvm-a3u-0", t0.Add(week))
		running(st, "flexvm-a3u-1", t0.Add(week))
		st.Jobs["7"].State = model.JobFinished
	}
	tests := []struct {
		name    string
		prepare func(st *model.State)
		vms     []VM
		slurm   map[string]string
		want    []string
	}{
		{
			name:    "a running VM missing once is not given up (eventual consistency)",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(week)) },
			want:    []string{"PutNode:flexvm-a3u-0/running"},
		},
		{
			name: "missing for the second pass of the same generation: the node is lost and, static, recreated",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(week))
				st.Nodes["flexvm-a3u-0"].MissCount, st.Nodes["flexvm-a3u-0"].MissGeneration = 1, 1
			},
			want: []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name: "a miss counted for an older generation does not count",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(week))
				st.Nodes["flexvm-a3u-0"].MissCount, st.Nodes["flexvm-a3u-0"].MissGeneration = 1, 0
			},
			want: []string{"PutNode:flexvm-a3u-0/running"},
		},
		{
			name:    "Slurm powered down a dynamic node whose VM runs: the VM is released",
			prepare: dyn,
			vms:     []VM{vm0, vm1},
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD", "flexvm-a3u-1": "IDLE+CLOUD+POWERED_DOWN"},
			want:    []string{"DeleteVMs:flexvm-a3u-1-g1", "Slurm:reservation_delete:flexvm-a3u-1", "PutNode:flexvm-a3u-1/deleting"},
		},
		{
			name:    "DOWN after ResumeTimeout with no VM: Slurm is told to resume the node",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(week)) },
			vms:     []VM{vm0},
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD", "flexvm-a3u-2": "DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING"},
			want:    []string{"Slurm:resume:flexvm-a3u-2", "PutNode:flexvm-a3u-2/released"},
		},
		{
			name:    "Slurm thinks a dynamic node without a VM is up: powered down in Slurm",
			prepare: dyn,
			vms:     []VM{vm0, vm1},
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD", "flexvm-a3u-1": "ALLOCATED+CLOUD", "flexvm-a3u-2": "IDLE+CLOUD+NOT_RESPONDING"},
			want:    []string{"Slurm:power_down_force:flexvm-a3u-2", "PutNode:flexvm-a3u-2/released"},
		},
		{
			name:    "IDLE+CLOUD+POWERED_DOWN+NOT_RESPONDING without a VM is already serviceable",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(week)) },
			vms:     []VM{vm0},
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD", "flexvm-a3u-1": "IDLE+CLOUD+POWERED_DOWN+NOT_RESPONDING"},
			want:    nil,
		},
		{
			name:    "a VM that runs while Slurm says its node is down is observed first",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(week)) },
			vms:     []VM{vm0},
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+NOT_RESPONDING"},
			want:    []string{"PutNode:flexvm-a3u-0/running"},
		},
		{
			name: "observed past the grace period: acted on, with an alert",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(week))
				st.Nodes["flexvm-a3u-0"].Observed = Combo{Slurm: SlurmDown, VM: VMRunning, Phase: model.PhaseRunning, Kind: model.NodeStatic}.String()
				st.Nodes["flexvm-a3u-0"].ObservedSince = t0.Add(-time.Hour)
			},
			vms:   []VM{vm0},
			slurm: map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+NOT_RESPONDING"},
			want: []string{"Alert:a3u", "DeleteVMs:flexvm-a3u-0-g1", "Slurm:power_down_force:flexvm-a3u-0", "Slurm:reservation_delete:flexvm-a3u-0",
				"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name:    "a job Slurm shows pending on powering-up nodes, never reported, is provisioned",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(week)) },
			vms:     []VM{vm0},
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD", "flexvm-a3u-2": "ALLOCATED+CLOUD+NOT_RESPONDING+POWERING_UP"},
			want:    []string{"PutNode:flexvm-a3u-2/requested", "PutJob:55/pending", "CreateResizeRequest:rr-flexvm-a3u-j55-g1=flexvm-a3u-2-g1", "Slurm:job_comment:55"},
		},
		{
			name: "a stale snapshot is ignored",
			prepare: func(st *model.State) {
				dyn(st)
				st.Slurm = slurmView(t0.Add(-time.Hour), map[string]string{"flexvm-a3u-1": "IDLE+CLOUD+POWERED_DOWN"})
			},
			vms:  []VM{vm0, vm1},
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			if tc.slurm != nil {
				st.Slurm = slurmView(t0.Add(time.Second), tc.slurm)
				if strings.Contains(tc.name, "never reported") {
					st.Slurm.Jobs = []model.SlurmJob{{ID: "55", State: "CONFIGURING", Partition: "a3u", Nodes: []string{"flexvm-a3u-2"}}}
				}
			}
			obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: tc.vms}}}
			if st.Slurm != nil {
				obs.JobRecordsFor = st.Slurm.TakenAt
			}
			got := Reconcile(st, obs, t0.Add(time.Minute), Policy{})
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
		})
	}
}

const week = 7 * 24 * time.Hour

func TestBreakerOpensAfterBootstrapFailuresAndASuccessClosesIt(t *testing.T) {
	st, _ := applied(t)
	pol := Policy{BreakerThreshold: 2}
	down := map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+NOT_RESPONDING"}
	// Two VMs in a row that never register.
	for gen := int64(1); gen <= 2; gen++ {
		n := st.Nodes["flexvm-a3u-0"]
		n.Phase, n.TerminationTime, n.Registered = model.PhaseRunning, t0.Add(week), false
		n.Observed = Combo{Slurm: SlurmDown, VM: VMRunning, Phase: model.PhaseRunning, Kind: model.NodeStatic}.String()
		n.ObservedSince = t0.Add(-time.Hour)
		st.Slurm = slurmView(t0.Add(time.Second), down)
		vm := VM{Name: n.VMName, Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
		acts := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{vm}}}}, t0, pol)
		Apply(st, acts)
	}
	p := st.Pools["a3u"]
	if p.BootstrapFailures != 2 || p.BreakerOpenedAt.IsZero() || !strings.HasPrefix(p.Condition, "BootstrapFailures") {
		t.Fatalf("pool after 2 bootstrap failures: %d failures, opened at %v, condition %q", p.BootstrapFailures, p.BreakerOpenedAt, p.Condition)
	}
	// The breaker holds provisioning back during the cool-down.
	if n := st.Nodes["flexvm-a3u-0"]; n.Phase.Serving() {
		t.Fatalf("node was provisioned again while the breaker is open: %s", n.Phase)
	}
	acts := Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true}}}, t0.Add(10*time.Minute), pol)
	for _, a := range acts {
		if _, ok := a.(CreateResizeRequest); ok {
			t.Fatalf("capacity requested while the breaker is open: %v", a)
		}
	}
	// After the cool-down one attempt goes through; its registration closes the breaker.
	acts = Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true}}}, t0.Add(31*time.Minute), pol)
	Apply(st, acts)
	n := st.Nodes["flexvm-a3u-0"]
	if n.Phase != model.PhaseRequested {
		t.Fatalf("no attempt after the cool-down: %s", n.Phase)
	}
	vm := VM{Name: n.VMName, Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{vm}}}}
	Apply(st, Reconcile(st, obs, t0.Add(32*time.Minute), pol))
	st.Slurm = slurmView(t0.Add(33*time.Minute), map[string]string{"flexvm-a3u-0": "IDLE+CLOUD"})
	Apply(st, Reconcile(st, obs, t0.Add(33*time.Minute), pol))
	if p := st.Pools["a3u"]; p.BootstrapFailures != 0 || !p.BreakerOpenedAt.IsZero() || p.Condition != "" {
		t.Errorf("pool after a registration: %d failures, opened at %v, condition %q", p.BootstrapFailures, p.BreakerOpenedAt, p.Condition)
	}
}

func TestCapacityBackoff(t *testing.T) {
	st, _ := applied(t)
	pol := Policy{}
	// The static node's request fails with a stock-out.
	acts, err := ProvisioningFailed(st, "a3u", "rr-flexvm-a3u-0-g1", ClassCapacity, "ZONE_RESOURCE_POOL_EXHAUSTED", t0, pol)
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, acts)
	p := st.Pools["a3u"]
	if p.BackoffAttempts != 1 || !p.BackoffUntil.Equal(t0.Add(2*time.Minute)) || p.Condition != "" {
		t.Fatalf("after one stock-out: attempts %d until %v condition %q", p.BackoffAttempts, p.BackoffUntil, p.Condition)
	}
	if n := st.Nodes["flexvm-a3u-0"]; n.Phase != model.PhaseReleased || n.LastEnd != model.EndFailed {
		t.Fatalf("node after a refused request: %s %s", n.Phase, n.LastEnd)
	}
	for _, a := range acts {
		if _, ok := a.(DeleteVMs); ok {
			t.Fatal("a delete was issued for a VM that was never created")
		}
	}
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true}}}
	// Within the backoff: nothing is requested (the node only records why).
	within := Reconcile(st, obs, t0.Add(time.Minute), pol)
	for _, a := range External(within) {
		t.Fatalf("within the backoff: %v", a)
	}
	Apply(st, within)
	if r := st.Nodes["flexvm-a3u-0"].Reason; !strings.Contains(r, "backoff") {
		t.Errorf("node reason %q does not say it waits for the backoff", r)
	}
	// After it: the static node is requested again (new generation).
	got := kinds(Reconcile(st, obs, t0.Add(3*time.Minute), pol))
	if d := cmp.Diff([]string{"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"}, got); d != "" {
		t.Fatalf("after the backoff (-want +got):\n%s", d)
	}
	// Quota errors back off longer and raise a condition; doubling, capped.
	for i, want := range []time.Duration{10 * time.Minute, 20 * time.Minute, 40 * time.Minute, 80 * time.Minute, 2 * time.Hour, 2 * time.Hour} {
		st.Pools["a3u"].BackoffAttempts = i
		acts, _ := ProvisioningFailed(st, "a3u", "rr-x", ClassQuota, "QUOTA_EXCEEDED", t0, pol)
		Apply(st, acts)
		if d := st.Pools["a3u"].BackoffUntil.Sub(t0); d != want {
			t.Errorf("quota failure %d: backoff %s, want %s", i+1, d, want)
		}
	}
	if c := st.Pools["a3u"].Condition; !strings.HasPrefix(c, "QuotaExceeded") {
		t.Errorf("condition %q, want QuotaExceeded", c)
	}
}

func TestLiftOwnDrainOnly(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   []string
	}{
		{"flexslurm: health check failed: GPU 3 (flexvm-a3u-0-g1)", []string{"Slurm:resume:flexvm-a3u-0"}},
		{"admin: DIMM replacement", nil},
		{"flexslurm: end of life at …, replaced by flexvm-a3u-1 (flexvm-a3u-0-g2)", nil},
	} {
		st, _ := applied(t)
		n := st.Nodes["flexvm-a3u-0"]
		n.Generation, n.VMName = 2, "flexvm-a3u-0-g2"
		running(st, "flexvm-a3u-0", t0.Add(week))
		st.Slurm = &model.SlurmView{TakenAt: t0.Add(time.Second), Nodes: map[string]model.SlurmNode{"flexvm-a3u-0": slurmNode("flexvm-a3u-0", tc.reason, "idle", "CLOUD", "DRAIN")}}
		vm := VM{Name: "flexvm-a3u-0-g2", Status: "RUNNING", Created: t0, TerminationTime: t0.Add(week)}
		got := kinds(Reconcile(st, Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{vm}}}}, t0.Add(time.Minute), Policy{}))
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("drain reason %q (-want +got):\n%s", tc.reason, d)
		}
	}
}

func TestVMStuckProvisioningIsReplacedAfterTheGrace(t *testing.T) {
	st, _ := applied(t)
	vm := VM{Name: "flexvm-a3u-0-g1", Status: "STAGING", Created: t0}
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true, VMs: []VM{vm}}}}
	first := Reconcile(st, obs, t0.Add(time.Minute), Policy{})
	if d := cmp.Diff([]string{"PutNode:flexvm-a3u-0/requested"}, kinds(first)); d != "" {
		t.Fatalf("first pass: observe only (-want +got):\n%s", d)
	}
	Apply(st, first)
	later := Reconcile(st, obs, t0.Add(30*time.Minute), Policy{})
	want := []string{"Alert:a3u", "DeleteVMs:flexvm-a3u-0-g1", "Slurm:power_down_force:flexvm-a3u-0", "PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"}
	if d := cmp.Diff(want, kinds(later)); d != "" {
		t.Errorf("past the grace (-want +got):\n%s", d)
	}
}

// TestKindsKnowsEveryAction: the summariser names every action type the
// decisions return (one value of each), and panics on one it does not know.
func TestKindsKnowsEveryAction(t *testing.T) {
	all := []Action{PutNode{}, PutJob{}, PutPool{}, PutCluster{}, EnsurePool{}, CreateResizeRequest{},
		CancelResizeRequest{}, DeleteResizeRequest{}, DeleteVMs{}, DeleteMIG{}, SlurmCommand{}, Alert{}, ReportHostAsFaulty{},
		StartVM{}, Metric{}, ForgetPool{}}
	for _, a := range all {
		if got := kinds([]Action{a}); len(got) == 0 {
			t.Errorf("%T: summarised as nothing", a)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("an unknown action type was summarised silently")
		}
	}()
	kinds([]Action{unknownAction{}})
}

type unknownAction struct{}

func (unknownAction) Why() string    { return "test" }
func (unknownAction) String() string { return "unknown" }
