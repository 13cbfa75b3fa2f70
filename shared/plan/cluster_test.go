package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
)

// TestClusterAppliedRecordsTheBuiltTemplate: the templates the caller built
// for the event are recorded in the pool records, name and body, and the
// EnsurePool asking for them carries exactly them; nothing is built here. A
// pool for which no template was built keeps its record, loudly; a record
// stored before bodies were recorded gets its body from the next
// cluster.applied, without asking Compute again.
func TestClusterAppliedRecordsTheBuiltTemplate(t *testing.T) {
	c, eff := example(t)
	tmpls := built(t, c, testNode)
	newNode := testNode
	newNode.Image += "-2"
	newTmpls := built(t, c, newNode)
	if newTmpls["a3u"].Name == tmpls["a3u"].Name {
		t.Fatal("new settings did not make a new template")
	}
	tests := []struct {
		name    string
		prepare func(st *model.State) // nil: a new cluster
		node    func() (nodeconfig.Settings, map[string]instancetemplate.Template)
		want    []string
		// recorded is the template the pool records afterwards.
		recorded instancetemplate.Template
	}{
		{
			name: "a new cluster", node: func() (nodeconfig.Settings, map[string]instancetemplate.Template) { return testNode, tmpls },
			want:     []string{"PutCluster", "PutPool:a3u", "PutPool:a3u", "EnsurePool:a3u", "PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g1=flexvm-a3u-0-g1"},
			recorded: tmpls["a3u"],
		},
		{
			name: "new node settings: a new template asked for", prepare: func(st *model.State) {},
			node: func() (nodeconfig.Settings, map[string]instancetemplate.Template) { return newNode, newTmpls },
			want: []string{"PutCluster", "PutPool:a3u", "PutPool:a3u", "EnsurePool:a3u"}, recorded: newTmpls["a3u"],
		},
		{
			name:    "a record stored before bodies gets its body, and Compute is not asked again",
			prepare: func(st *model.State) { st.Pools["a3u"].TemplateBody = "" },
			node:    func() (nodeconfig.Settings, map[string]instancetemplate.Template) { return testNode, tmpls },
			want:    []string{"PutPool:a3u"}, recorded: tmpls["a3u"],
		},
		{
			name: "no template built for the pool: its record stays", prepare: func(st *model.State) {},
			node: func() (nodeconfig.Settings, map[string]instancetemplate.Template) {
				return newNode, map[string]instancetemplate.Template{}
			},
			want: []string{"PutCluster", "Alert:a3u"}, recorded: tmpls["a3u"],
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := model.NewState()
			if tc.prepare != nil {
				st, _ = applied(t)
				tc.prepare(st)
			}
			node, ts := tc.node()
			got := ClusterApplied(st, c, node, ts, eff, t0.Add(time.Minute), Policy{})
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Fatalf("actions (-want +got):\n%s", d)
			}
			for _, a := range got {
				if e, ok := a.(EnsurePool); ok {
					want := EnsurePool{Pool: "a3u", Template: tc.recorded.Name, TemplateBody: tc.recorded.Body(), Reason: e.Reason}
					if d := cmp.Diff(want, e); d != "" {
						t.Errorf("EnsurePool does not carry the template built for the event (-want +got):\n%s", d)
					}
				}
			}
			Apply(st, got)
			p := st.Pools["a3u"]
			if p.Template != tc.recorded.Name || p.TemplateBody != tc.recorded.Body() {
				t.Errorf("pool records template %s with a body of %d bytes, want %s with the built body", p.Template, len(p.TemplateBody), tc.recorded.Name)
			}
		})
	}
}

// TestEnsurePoolTakesTheRecordedBody: the reconciler, asking again for the
// template and MIG of a pool whose MIG vanished long after the spec was
// applied, sends the body the pool record holds; a record stored before
// bodies were recorded asks for nothing and stays not ready, with an alert
// saying to publish the spec again.
func TestEnsurePoolTakesTheRecordedBody(t *testing.T) {
	now := t0.Add(time.Hour)
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, ListedAt: now, MIGsListed: true}}}
	tests := []struct {
		name       string
		noBody     bool
		wantEnsure bool
		wantAlerts int // no body
	}{
		{"recorded body", false, true, 0},
		{"record without a body", true, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			// The static node's VM ended: it is requested again in this pass.
			n := st.Nodes["flexvm-a3u-0"]
			n.Phase, n.LastEnd = model.PhaseReleased, model.EndLost
			// Its template is not known to exist (a pool recorded before
			// its template was asked for).
			st.Pools["a3u"].Ready = false
			rec := *st.Pools["a3u"]
			if tc.noBody {
				st.Pools["a3u"].TemplateBody = ""
			}
			got := Reconcile(st, obs, now, Policy{})
			var ensures []EnsurePool
			alerts := 0
			for _, a := range got {
				switch a := a.(type) {
				case EnsurePool:
					a.Reason = ""
					ensures = append(ensures, a)
				case Alert:
					if a.Pool == "a3u" {
						alerts++
					}
				}
			}
			if alerts != tc.wantAlerts {
				t.Errorf("%d alerts for pool a3u, want %d: %v", alerts, tc.wantAlerts, kinds(got))
			}
			if !tc.wantEnsure {
				if len(ensures) != 0 {
					t.Errorf("asked for the pool's template and MIG without a body: %+v", ensures)
				}
				Apply(st, got)
				if st.Pools["a3u"].Ready {
					t.Error("a pool whose template cannot be created is recorded ready")
				}
				return
			}
			want := []EnsurePool{{Pool: "a3u", Template: rec.Template, TemplateBody: rec.TemplateBody}}
			if d := cmp.Diff(want, ensures); d != "" {
				t.Errorf("EnsurePool (-want +got):\n%s", d)
			}
		})
	}
}

// TestReplayEnsurePool: a redelivered event asks again for a pool's
// template and MIG only while the pool records that template, with the
// recorded body; a note stored before EnsurePool named its template asks
// for the pool's current one.
func TestReplayEnsurePool(t *testing.T) {
	st0, _ := applied(t)
	rec := *st0.Pools["a3u"]
	current := EnsurePool{Pool: "a3u", Template: rec.Template, TemplateBody: rec.TemplateBody, Reason: "r"}
	tests := []struct {
		name    string
		stored  EnsurePool
		prepare func(p *model.Pool)
		want    []Action
	}{
		{"the pool's template", current, nil, []Action{current}},
		{"a note without the template or body", EnsurePool{Pool: "a3u", Reason: "r"}, nil, []Action{current}},
		{"a template the pool no longer records", EnsurePool{Pool: "a3u", Template: "fs-flexvm-a3u-00000000", TemplateBody: "{}", Reason: "r"},
			nil, nil},
		{"the pool left the spec", current, func(p *model.Pool) { p.Removed = true }, nil},
		{"a record without a body", current, func(p *model.Pool) { p.TemplateBody = "" }, nil},
		{"the pool is gone", current, func(p *model.Pool) { p.ID = "" }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := model.NewState()
			p := rec
			if tc.prepare != nil {
				tc.prepare(&p)
			}
			if p.ID != "" {
				st.Pools[p.ID] = &p
			}
			if d := cmp.Diff(tc.want, Replay(st, []Action{tc.stored}, true)); d != "" {
				t.Errorf("replayed (-want +got):\n%s", d)
			}
		})
	}
}

// TestMIGMissingFromAnEarlyListIsNotTakenForDeleted: a pass lists Compute
// and decides later, and an action runs after its decision's commit,
// possibly much later (a crash, then a redelivery). A request's MIG that
// no listing has shown yet may still be on its way: once past RequestGrace
// the request is issued again, under the same names and request ids
// (nothing twice). A MIG a listing showed (model.Node.MIGSeen) that a later
// listing no longer shows was deleted out of band: the generation is lost
// and the node requested again in a MIG of its own. A listing older than
// the record that saw the MIG, or of unknown time, is not evidence.
func TestMIGMissingFromAnEarlyListIsNotTakenForDeleted(t *testing.T) {
	now := t0.Add(6 * time.Hour)
	for _, tc := range []struct {
		name     string
		seen     bool
		listedAt time.Time
		deleted  bool
	}{
		{"never seen, listed a minute after the request was recorded", false, t0.Add(time.Minute), false},
		{"never seen, listed long after", false, t0.Add(5 * time.Hour), false},
		{"never seen, listed at an unknown time", false, time.Time{}, false},
		{"seen, listed before the record that saw it", true, t0.Add(-time.Minute), false},
		{"seen, listed at an unknown time", true, time.Time{}, false},
		{"seen, then missing from a later listing", true, t0.Add(time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			n := st.Nodes["flexvm-a3u-0"]
			if n.Phase != model.PhaseRequested || !n.RequestedAt.Equal(t0) || n.MIG == "" {
				t.Fatalf("static node %s requested at %v in MIG %q, want requested at %v in a MIG of its own", n.Phase, n.RequestedAt, n.MIG, t0)
			}
			n.MIGSeen = tc.seen
			first := *n
			obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, ListedAt: tc.listedAt, MIGsListed: true}}}
			got := Reconcile(st, obs, now, Policy{})
			var creates []CreateResizeRequest
			var alerts, lost int
			for _, a := range got {
				switch a := a.(type) {
				case CreateResizeRequest:
					creates = append(creates, a)
				case Alert:
					alerts++
				case PutNode:
					if a.Node.Name == "flexvm-a3u-0" && a.Node.LastEnd == model.EndLost {
						lost++
					}
				}
			}
			if len(creates) != 1 {
				t.Fatalf("%d resize requests, want 1: %v", len(creates), kinds(got))
			}
			again := creates[0].Name == first.ResizeRequest && creates[0].MIG == first.MIG
			if tc.deleted != (alerts == 1 && lost == 1 && !again) || !tc.deleted && (!again || alerts != 0 || lost != 0) {
				t.Errorf("MIG deleted %v: %d alerts, %d lost generations, request issued again %v; actions %v", tc.deleted, alerts, lost, again, kinds(got))
			}
			if tc.deleted && creates[0].MIG == first.MIG {
				t.Errorf("the next generation is requested in the vanished MIG %s", first.MIG)
			}
		})
	}
}

// TestMIGSeenIsRecorded: a listing that shows a requested node's MIG
// records it as seen, once.
func TestMIGSeenIsRecorded(t *testing.T) {
	st, _ := applied(t)
	n := st.Nodes["flexvm-a3u-0"]
	obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, ListedAt: t0.Add(time.Minute), MIGsListed: true,
		MIGs:           []ObservedMIG{{Name: n.MIG, Request: n.ResizeRequest}},
		ResizeRequests: []ObservedResizeRequest{{Name: n.ResizeRequest, MIG: n.MIG, State: "ACCEPTED", Created: t0}}}}}
	got := Reconcile(st, obs, t0.Add(time.Minute), Policy{})
	if d := cmp.Diff([]string{"PutNode:flexvm-a3u-0/requested"}, kinds(got)); d != "" {
		t.Fatalf("actions (-want +got):\n%s", d)
	}
	Apply(st, got)
	if !st.Nodes["flexvm-a3u-0"].MIGSeen {
		t.Fatal("the listed MIG is not recorded as seen")
	}
	if got := Reconcile(st, obs, t0.Add(2*time.Minute), Policy{}); len(got) != 0 {
		t.Errorf("a second listing wrote again: %v", kinds(got))
	}
}
