package plan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// minutes turns wait minutes into the seconds a pool record keeps.
func minutes(m ...float64) []int64 {
	out := make([]int64, len(m))
	for i, v := range m {
		out[i] = int64(v * 60)
	}
	return out
}

// lognormalWaits draws n waits (seconds) with median med and log spread
// sigma, from a fixed seed.
func lognormalWaits(n int, med time.Duration, sigma float64, seed uint64) []int64 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(med.Seconds() * math.Exp(sigma*r.NormFloat64()))
	}
	return out
}

// evenWaits are n waits (seconds) at the normal quantiles (i + ½)/n of a
// log-normal with median med and log spread sigma: their log mean is
// exactly ln med.
func evenWaits(n int, med time.Duration, sigma float64) []int64 {
	out := make([]int64, n)
	for i := range out {
		z := math.Sqrt2 * math.Erfinv(2*(float64(i)+0.5)/float64(n)-1)
		out[i] = int64(med.Seconds() * math.Exp(sigma*z))
	}
	return out
}

func TestLognormalExcess(t *testing.T) {
	// E[(W − l)⁺] for ln W ~ N(0, 1) at l = 1: e^½ Φ(1) − Φ(0).
	if got, want := lognormalExcess(0, 1, 1), math.Exp(0.5)*0.841344746-0.5; math.Abs(got-want) > 1e-6 {
		t.Errorf("lognormalExcess(0, 1, 1) = %v, want %v", got, want)
	}
	// Far below every wait, the excess is the mean e^(μ+σ²/2).
	if got, want := lognormalExcess(math.Log(1200), 0.5, 1e-9), 1200*math.Exp(0.125); math.Abs(got-want) > 1e-6*want {
		t.Errorf("lognormalExcess at 0 = %v, want the mean %v", got, want)
	}
	// Against a sample mean of (W − l)⁺.
	r := rand.New(rand.NewPCG(1, 2))
	mu, sigma, l := math.Log(1200), 1.0, 3600.0
	var sum float64
	const n = 400000
	for range n {
		sum += max(0, math.Exp(mu+sigma*r.NormFloat64())-l)
	}
	if got, want := lognormalExcess(mu, sigma, l), sum/n; math.Abs(got-want) > 0.02*want {
		t.Errorf("lognormalExcess(ln 1200, 1, 3600) = %v, sample mean %v", got, want)
	}
}

func TestLearnLead(t *testing.T) {
	const floor = 30 * time.Minute
	day, week := 24*time.Hour, 7*24*time.Hour
	heavy := lognormalWaits(32, 25*time.Minute, 1, 1)
	tests := []struct {
		name           string
		waits          []int64
		maxRun         time.Duration
		nodes          int
		target         float64
		ceiling        time.Duration
		atLeast, below time.Duration // the lead is in [atLeast, below)
	}{
		{name: "no wait yet: the floor", maxRun: week, nodes: 8, target: 0.999, ceiling: week / 8, atLeast: floor, below: floor + 1},
		{name: "waits of a minute, a modest target: the floor", waits: minutes(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
			maxRun: week, nodes: 8, target: 0.99, ceiling: week / 8, atLeast: floor, below: floor + 1},
		// The 90th percentile of these (the 7th of 8: 52 min) would lead
		// by less than waits of the same distribution reach: 1h39m in the
		// expiry bench's seed 1.
		{name: "eight waits of a pool's first fill, 7-day VMs: hours, not the 90th percentile", waits: minutes(12, 17, 19, 25, 31, 38, 52, 66),
			maxRun: week, nodes: 8, target: 0.999, ceiling: week / 8, atLeast: 2 * time.Hour, below: 8 * time.Hour},
		{name: "waits of hours, 1-day VMs: bounded by the ceiling, a share of the max run duration", waits: minutes(180, 240, 300, 200, 260, 320, 190, 210),
			maxRun: day, nodes: 8, target: 0.999, ceiling: day / 8, atLeast: 3 * time.Hour, below: 3*time.Hour + 1},
		{name: "32 heavy-tailed waits, 7-day VMs", waits: heavy, maxRun: week, nodes: 8, target: 0.999, ceiling: week / 8, atLeast: 2 * time.Hour, below: 8 * time.Hour},
		{name: "a ceiling below the floor: the floor", waits: minutes(20, 30), maxRun: time.Hour, nodes: 1, target: 0.999, ceiling: 7 * time.Minute, atLeast: floor, below: floor + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := learnLead(tt.waits, tt.maxRun, tt.nodes, tt.target, floor, tt.ceiling)
			if got < tt.atLeast || got >= tt.below {
				t.Fatalf("learnLead = %s, want in [%s, %s)", got, tt.atLeast, tt.below)
			}
			if got%time.Minute != 0 {
				t.Errorf("learnLead = %s, want whole minutes", got)
			}
		})
	}

	// Between floor and ceiling the lead is the shortest whole minute whose
	// expected lateness, under the fitted log-normal, is within the budget.
	t.Run("the shortest lead within the budget", func(t *testing.T) {
		waits := minutes(12, 17, 19, 25, 31, 38, 52, 66)
		got := learnLead(waits, week, 8, 0.999, floor, week/8)
		var mu, ss float64
		for _, w := range waits {
			mu += math.Log(float64(w)) / 8
		}
		for _, w := range waits {
			ss += (math.Log(float64(w)) - mu) * (math.Log(float64(w)) - mu)
		}
		sigma := max(1, math.Sqrt((4+ss)/(4+7))) * math.Sqrt(1+1.0/8)
		budget := 0.001 * week.Seconds() / 8
		if e := lognormalExcess(mu, sigma, got.Seconds()); e > budget {
			t.Errorf("lead %s: expected lateness %.1fs over the budget %.1fs", got, e, budget)
		}
		if e := lognormalExcess(mu, sigma, (got - time.Minute).Seconds()); e <= budget {
			t.Errorf("lead %s − 1m: expected lateness %.1fs already within the budget %.1fs", got, e, budget)
		}
	})

	// The lead grows with what the waits leave unknown and with what a late
	// hand-over costs.
	lead := func(w []int64, maxRun time.Duration, nodes int, target float64) time.Duration {
		return learnLead(w, maxRun, nodes, target, floor, 100*time.Hour)
	}
	same := lognormalWaits(32, 25*time.Minute, 0.6, 3)
	orders := []struct {
		name          string
		shorter, more time.Duration
	}{
		{"few waits give a longer lead than many of the same spread", lead(same, week, 8, 0.999), lead(same[:5], week, 8, 0.999)},
		{"a heavier tail gives a longer lead", lead(evenWaits(32, 25*time.Minute, 1), week, 8, 0.999), lead(evenWaits(32, 25*time.Minute, 1.5), week, 8, 0.999)},
		{"a spread below the prior's counts as the prior's", lead(evenWaits(32, 25*time.Minute, 1), week, 8, 0.999) - time.Minute, lead(evenWaits(32, 25*time.Minute, 0.3), week, 8, 0.999)},
		{"a longer median gives a longer lead", lead(evenWaits(32, 25*time.Minute, 1), week, 8, 0.999), lead(evenWaits(32, 50*time.Minute, 1), week, 8, 0.999)},
		{"shorter runs (more hand-overs) give a longer lead", lead(same, week, 8, 0.999), lead(same, day, 8, 0.999)},
		{"more static nodes give a longer lead", lead(same, week, 8, 0.999), lead(same, week, 64, 0.999)},
		{"a higher target gives a longer lead", lead(same, week, 8, 0.99), lead(same, week, 8, 0.999)},
	}
	for _, o := range orders {
		if o.shorter >= o.more {
			t.Errorf("%s: %s, then %s", o.name, o.shorter, o.more)
		}
	}
}

func TestLeadTimePolicy(t *testing.T) {
	st, _ := applied(t)
	pool := *st.Pools["a3u"] // 7 days
	pool.CapacityWaits = minutes(12, 17, 19, 25, 31, 38, 52, 66)
	pool.MinNodes, pool.MaxNodes = 8, 16
	tests := []struct {
		name string
		pol  Policy
		run  time.Duration
		want time.Duration
	}{
		{"a fixed lead", Policy{LeadTime: 2 * time.Hour}, 7 * 24 * time.Hour, 2 * time.Hour},
		{"a fixed lead, at most half the run", Policy{LeadTime: 2 * time.Hour}, 3 * time.Hour, 90 * time.Minute},
		{"learnt, at most LeadMaxShare of the run", Policy{LeadMaxShare: 0.01}, 7 * 24 * time.Hour, 100*time.Minute + 48*time.Second},
		{"learnt, never more than half a short run", Policy{}, 40 * time.Minute, 20 * time.Minute},
		{"learnt", Policy{}, 7 * 24 * time.Hour, learnLead(pool.CapacityWaits, 7*24*time.Hour, pool.MinNodes, DefaultPolicy().TargetAvailability, 30*time.Minute, 21*time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder(st, t0, Policy{})
			b.pol = tt.pol.withDefaults()
			p := pool
			p.MaxRunDuration = tt.run
			if got := b.leadTime(&p); got != tt.want {
				t.Errorf("leadTime = %s, want %s", got, tt.want)
			}
		})
	}
}

// The hand-over: an old static node whose successor is usable in Slurm is
// drained (it stops counting as static) only when no other static node of
// the pool is still on its way that it may have to cover for (lateStatic)
// and the pool keeps min_node_count usable static nodes without it;
// drained and idle, its VM is released.
func TestHandOver(t *testing.T) {
	end := t0.Add(2 * time.Hour)
	setup := func(t *testing.T) (*model.State, *model.Pool, map[string]string) {
		st, _ := applied(t)
		p := st.Pools["a3u"]
		p.MinNodes, p.MaxNodes = 3, 6
		b := newBuilder(st, t0, Policy{})
		names := map[string]string{}
		for i, role := range []string{"old", "succ", "b", "c"} {
			n := b.node(p, i)
			n.Kind, n.Phase, n.Generation = model.NodeStatic, model.PhaseRunning, 1
			n.VMName, n.TerminationTime, n.Registered, n.RunningAt = n.Name+"-g1", t0.Add(7*24*time.Hour), true, t0.Add(-time.Hour)
			n.RequestedAt = t0.Add(-2 * time.Hour) // before the snapshot (t0), which then speaks of the VM
			st.Nodes[n.Name] = &n
			names[role] = n.Name
		}
		old, succ := st.Nodes[names["old"]], st.Nodes[names["succ"]]
		old.Successor, old.TerminationTime = succ.Name, end
		succ.Predecessor = old.Name
		return st, p, names
	}
	idle := func(names map[string]string, override map[string]string) *model.SlurmView {
		nodes := map[string]string{}
		for _, n := range names {
			nodes[n] = "idle"
		}
		for role, s := range override {
			nodes[names[role]] = s
		}
		return slurmView(t0, nodes)
	}
	// Idle in Slurm, the old node is drained and released in the same pass.
	drainedReleased := []string{"PutNode:flexvm-a3u-0/running", "Slurm:drain:flexvm-a3u-0",
		"DeleteVMs:flexvm-a3u-0-g1", "Slurm:power_down:flexvm-a3u-0", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/deleting"}
	tests := []struct {
		name    string
		prepare func(st *model.State, names map[string]string)
		slurm   map[string]string // role → Slurm state; nil: no Slurm view
		noSlurm bool
		want    []string
	}{
		{name: "successor usable, the pool full without the old node: drained", want: drainedReleased},
		{name: "successor usable, the old node busy: drained, released once its job ends", slurm: map[string]string{"old": "allocated"}, want: []string{"PutNode:flexvm-a3u-0/running", "Slurm:drain:flexvm-a3u-0"}},
		{name: "successor usable, the old node idle in a snapshot no newer than a job.started naming it: drained, not released",
			prepare: func(st *model.State, names map[string]string) {
				o := st.Nodes[names["old"]]
				o.StartedJob, o.StartedAt = "42", t0
			},
			want: []string{"PutNode:flexvm-a3u-0/running", "Slurm:drain:flexvm-a3u-0"}},
		{name: "successor still booting in Slurm: kept", slurm: map[string]string{"succ": "idle+POWERING_UP"}},
		{name: "successor up but still under an old drain: kept", slurm: map[string]string{"succ": "idle+DRAIN"}},
		{name: "another static node drained: the pool would be short, kept", slurm: map[string]string{"b": "idle+DRAIN"}},
		{name: "another static node down: kept", slurm: map[string]string{"c": "down"}},
		{name: "busy nodes count as usable: drained", slurm: map[string]string{"b": "allocated", "c": "mixed"}, want: drainedReleased},
		{
			name: "a successor whose predecessor already ended, still waiting for capacity: kept",
			prepare: func(st *model.State, names map[string]string) {
				d := *st.Nodes[names["c"]]
				d.Name, d.Index, d.Phase, d.Registered, d.VMName = "flexvm-a3u-4", 4, model.PhaseRequested, false, "flexvm-a3u-4-g1"
				st.Nodes[d.Name] = &d
			},
		},
		{
			name: "another successor still waiting, its predecessor ends after the old node: drained",
			prepare: func(st *model.State, names map[string]string) {
				pendingSuccessor(st, names["c"], end.Add(time.Hour))
			},
			want: drainedReleased,
		},
		{
			// The pool has no waits recorded: the lead is the 30 min floor.
			name: "another successor still waiting, its predecessor ends before the old node and within half a lead: kept",
			prepare: func(st *model.State, names map[string]string) {
				pendingSuccessor(st, names["c"], t0.Add(10*time.Minute))
			},
		},
		{
			name: "another successor still waiting, its predecessor ends before the old node but after half a lead: drained",
			prepare: func(st *model.State, names map[string]string) {
				pendingSuccessor(st, names["c"], end.Add(-30*time.Minute))
			},
			want: drainedReleased,
		},
		{
			name: "a late successor, another old node kept beside its registered successor ends later and covers it: drained",
			prepare: func(st *model.State, names map[string]string) {
				lateNode(st)
				keptOld(st, names["b"], end.Add(time.Hour))
			},
			want: drainedReleased,
		},
		{
			name: "a late successor, the other old node kept ends earlier: kept",
			prepare: func(st *model.State, names map[string]string) {
				lateNode(st)
				keptOld(st, names["b"], end.Add(-time.Hour))
			},
		},
		{
			name: "two late successors, one other old node kept: kept",
			prepare: func(st *model.State, names map[string]string) {
				lateNode(st)
				d := *st.Nodes["flexvm-a3u-4"]
				d.Name, d.Index, d.VMName = "flexvm-a3u-6", 6, "flexvm-a3u-6-g1"
				st.Nodes[d.Name] = &d
				keptOld(st, names["b"], end.Add(time.Hour))
			},
		},
		{
			name: "a static node recreated after its termination, running, not registered yet: kept",
			prepare: func(st *model.State, names map[string]string) {
				st.Nodes[names["c"]].Registered = false
			},
			slurm: map[string]string{"c": "idle+POWERING_UP"},
		},
		{
			name: "without a Slurm view a running VM counts: drained",
			prepare: func(st *model.State, names map[string]string) {
				st.Nodes[names["c"]].Registered = false
			},
			noSlurm: true, want: []string{"PutNode:flexvm-a3u-0/running", "Slurm:drain:flexvm-a3u-0"},
		},
		{
			name: "handed over, drained and idle: released",
			prepare: func(st *model.State, names map[string]string) {
				st.Nodes[names["old"]].Kind = model.NodeDynamic
			},
			slurm: map[string]string{"old": "idle+DRAIN"},
			want:  []string{"DeleteVMs:flexvm-a3u-0-g1", "Slurm:power_down:flexvm-a3u-0", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/deleting"},
		},
		{
			name: "handed over, drained and DOWN (drained again after its VM was replaced): released",
			prepare: func(st *model.State, names map[string]string) {
				st.Nodes[names["old"]].Kind = model.NodeDynamic
			},
			slurm: map[string]string{"old": "down+DRAIN"},
			want:  []string{"DeleteVMs:flexvm-a3u-0-g1", "Slurm:power_down:flexvm-a3u-0", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-0/deleting"},
		},
		{
			name: "handed over, drained, its job still running: kept",
			prepare: func(st *model.State, names map[string]string) {
				st.Nodes[names["old"]].Kind = model.NodeDynamic
			},
			slurm: map[string]string{"old": "allocated+DRAIN"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, p, names := setup(t)
			if tt.prepare != nil {
				tt.prepare(st, names)
			}
			var view *model.SlurmView
			if !tt.noSlurm {
				view = idle(names, tt.slurm)
				for name, n := range st.Nodes {
					if _, ok := view.Nodes[name]; !ok && n.Phase == model.PhaseRunning && n.Registered {
						view.Nodes[name] = slurmNode(name, "", "idle")
					}
				}
			}
			b := newBuilder(st, t0, Policy{})
			b.followSuccessor(p, *b.st.Nodes[names["old"]], view)
			if diff := cmp.Diff(tt.want, kinds(b.out)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

// pendingSuccessor gives the running static node pred a successor
// (flexvm-a3u-4) still waiting for capacity, and pred the termination end.
func pendingSuccessor(st *model.State, pred string, end time.Time) {
	p := st.Nodes[pred]
	p.TerminationTime, p.Successor = end, "flexvm-a3u-4"
	st.Nodes["flexvm-a3u-4"] = &model.Node{Name: "flexvm-a3u-4", Pool: "a3u", Index: 4, Kind: model.NodeStatic, Phase: model.PhaseRequested,
		Generation: 1, VMName: "flexvm-a3u-4-g1", Predecessor: pred, RequestedAt: t0.Add(-time.Hour)}
}

// lateNode adds a static node (flexvm-a3u-4) still waiting for capacity
// whose predecessor already ended (no link left).
func lateNode(st *model.State) {
	st.Nodes["flexvm-a3u-4"] = &model.Node{Name: "flexvm-a3u-4", Pool: "a3u", Index: 4, Kind: model.NodeStatic, Phase: model.PhaseRequested,
		Generation: 1, VMName: "flexvm-a3u-4-g1", RequestedAt: t0.Add(-4 * time.Hour)}
}

// keptOld makes the static node old one kept serving beside its registered
// successor (flexvm-a3u-5), ending at end.
func keptOld(st *model.State, old string, end time.Time) {
	o := st.Nodes[old]
	o.TerminationTime, o.Successor = end, "flexvm-a3u-5"
	st.Nodes["flexvm-a3u-5"] = &model.Node{Name: "flexvm-a3u-5", Pool: "a3u", Index: 5, Kind: model.NodeStatic, Phase: model.PhaseRunning,
		Generation: 1, VMName: "flexvm-a3u-5-g1", Predecessor: old, Registered: true, RunningAt: t0.Add(-time.Hour), TerminationTime: t0.Add(24 * time.Hour)}
}

// TestHandOverUndone: a static node handed over to a make-before-break
// successor (drained in Slurm, no longer counted as static) whose
// successor then does not take its place — released or made dynamic
// because its slot is beyond a lowered max_node_count (chaos seed 2296),
// or its capacity never came — takes the static role back when the pool
// is short without it: it is static again, flexslurm's own hand-over drain
// is lifted, and its expiry recreates it. A pool that has its static nodes
// without it (min_node_count lowered too) keeps it dynamic.
func TestHandOverUndone(t *testing.T) {
	const (
		old  = "flexvm-a3u-0"
		succ = "flexvm-a3u-2"
	)
	ownDrain := "flexslurm: end of life at 2026-11-30T14:00:00Z, replaced by flexvm-a3u-2 (flexvm-a3u-0-g1)"
	setup := func(t *testing.T) (*model.State, *model.Pool) {
		st, _ := applied(t)
		p := st.Pools["a3u"]
		p.MinNodes, p.MaxNodes = 1, 2 // lowered from 3: the successor's slot is beyond it
		o := st.Nodes[old]
		o.Kind, o.Phase, o.Generation, o.VMName = model.NodeDynamic, model.PhaseRunning, 1, old+"-g1"
		o.TerminationTime, o.Registered, o.RunningAt, o.Successor = t0.Add(2*time.Hour), true, t0.Add(-10*time.Hour), succ
		st.Nodes[succ] = &model.Node{Name: succ, Pool: "a3u", Index: 2, Kind: model.NodeStatic, Phase: model.PhaseDeleting,
			Generation: 1, VMName: succ + "-g1", Predecessor: old, Registered: true, RunningAt: t0.Add(-time.Hour), LastEnd: model.EndReleased, Reason: "released"}
		return st, p
	}
	tests := []struct {
		name     string
		prepare  func(st *model.State, p *model.Pool)
		reason   string   // old's drain reason in Slurm
		state    []string // old's Slurm state words
		want     []string
		wantKind model.NodeKind
	}{
		{
			name:   "successor released beyond the new maximum: static again, own drain lifted",
			reason: ownDrain, state: []string{"allocated", "DRAIN"},
			want:     []string{"PutNode:flexvm-a3u-0/running", "PutNode:flexvm-a3u-2/deleting", "Slurm:resume:flexvm-a3u-0"},
			wantKind: model.NodeStatic,
		},
		{
			name: "successor kept beyond the new maximum for its job, made dynamic: static again",
			prepare: func(st *model.State, _ *model.Pool) {
				s := st.Nodes[succ]
				s.Kind, s.Phase, s.LastEnd = model.NodeDynamic, model.PhaseRunning, ""
			},
			reason: ownDrain, state: []string{"idle", "DRAIN"},
			want:     []string{"PutNode:flexvm-a3u-0/running", "PutNode:flexvm-a3u-2/running", "PutPool:a3u", "Slurm:resume:flexvm-a3u-0"},
			wantKind: model.NodeStatic,
		},
		{
			name:   "an administrator's drain is left alone",
			reason: "admin: DIMM replacement", state: []string{"idle", "DRAIN"},
			want:     []string{"PutNode:flexvm-a3u-0/running", "PutNode:flexvm-a3u-2/deleting"},
			wantKind: model.NodeStatic,
		},
		{
			name: "a drain for a health repair is left to the repair",
			prepare: func(st *model.State, _ *model.Pool) {
				st.Nodes[old].Repair = model.RepairAwaitDrain
			},
			reason: "flexslurm: health check failed: GPU 3 (flexvm-a3u-0-g1)", state: []string{"idle", "DRAIN"},
			want:     []string{"PutNode:flexvm-a3u-0/running", "PutNode:flexvm-a3u-2/deleting"},
			wantKind: model.NodeStatic,
		},
		{
			name: "the pool has its static nodes without it (min_node_count lowered too): stays dynamic",
			prepare: func(st *model.State, p *model.Pool) {
				p.MinNodes = 1
				st.Nodes["flexvm-a3u-1"] = &model.Node{Name: "flexvm-a3u-1", Pool: "a3u", Index: 1, Kind: model.NodeStatic, Phase: model.PhaseRunning,
					Generation: 1, VMName: "flexvm-a3u-1-g1", Registered: true}
			},
			reason: ownDrain, state: []string{"idle", "DRAIN"},
			want:     []string{"PutNode:flexvm-a3u-0/running", "PutNode:flexvm-a3u-2/deleting"},
			wantKind: model.NodeDynamic,
		},
		{
			name: "not yet handed over, the successor made dynamic by a lowered min_node_count, the pool has its static nodes: dynamic",
			prepare: func(st *model.State, p *model.Pool) {
				st.Nodes[old].Kind = model.NodeStatic
				s := st.Nodes[succ]
				s.Kind, s.Phase, s.LastEnd = model.NodeDynamic, model.PhaseRunning, ""
				st.Nodes["flexvm-a3u-1"] = &model.Node{Name: "flexvm-a3u-1", Pool: "a3u", Index: 1, Kind: model.NodeStatic, Phase: model.PhaseRunning,
					Generation: 1, VMName: "flexvm-a3u-1-g1", Registered: true}
			},
			reason: "", state: []string{"idle"},
			want:     []string{"PutNode:flexvm-a3u-0/running", "PutNode:flexvm-a3u-2/running", "PutPool:a3u"},
			wantKind: model.NodeDynamic,
		},
		{
			name: "not yet handed over, the successor's capacity never came: still static",
			prepare: func(st *model.State, _ *model.Pool) {
				st.Nodes[old].Kind = model.NodeStatic
				s := st.Nodes[succ]
				s.Phase, s.Registered, s.RunningAt = model.PhaseReleased, false, time.Time{}
			},
			reason: "", state: []string{"idle"},
			want:     []string{"PutNode:flexvm-a3u-0/running", "PutNode:flexvm-a3u-2/released"},
			wantKind: model.NodeStatic,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, p := setup(t)
			if tt.prepare != nil {
				tt.prepare(st, p)
			}
			view := &model.SlurmView{TakenAt: t0, Nodes: map[string]model.SlurmNode{old: slurmNode(old, tt.reason, tt.state...)}}
			b := newBuilder(st, t0, Policy{})
			b.followSuccessor(p, *b.st.Nodes[old], view)
			if diff := cmp.Diff(tt.want, kinds(b.out)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			o, s := b.st.Nodes[old], b.st.Nodes[succ]
			if o.Kind != tt.wantKind || o.Successor != "" || s.Predecessor != "" {
				t.Errorf("after: %s kind %s successor %q, %s predecessor %q; want kind %s and both links cleared", old, o.Kind, o.Successor, succ, s.Predecessor, tt.wantKind)
			}
		})
	}
}

// TestHandOverUndoneAtExpiry: the old node's VM ends before a reconcile
// pass saw that its successor does not take its place (chaos seed 2296:
// the successor released by a lowered max_node_count minutes before the
// old node's expiry). The node is recreated as a static node at once
// (its own request, next generation), not left dynamic with the pool
// below min_node_count; with the successor serving it is not.
func TestHandOverUndoneAtExpiry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		succPhase model.Phase
		want      []string
		wantKind  model.NodeKind
	}{
		{
			name: "successor released", succPhase: model.PhaseDeleting,
			want: []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "Slurm:reservation_delete:flexvm-a3u-0", "PutNode:flexvm-a3u-2/deleting",
				"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
			wantKind: model.NodeStatic,
		},
		{
			name: "successor serving", succPhase: model.PhaseRunning,
			want: []string{"Slurm:power_down_force:flexvm-a3u-0", "DeleteMIG:fs-flexvm-a3u-r332fb60ad1", "Slurm:reservation_delete:flexvm-a3u-0", "PutPool:a3u",
				"Metric:make_before_break_overlap_seconds", "PutNode:flexvm-a3u-2/running", "PutNode:flexvm-a3u-0/released"},
			wantKind: model.NodeDynamic,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := applied(t)
			running(st, "flexvm-a3u-0", t0)
			o := st.Nodes["flexvm-a3u-0"]
			o.Kind, o.Successor = model.NodeDynamic, "flexvm-a3u-2"
			st.Nodes["flexvm-a3u-2"] = &model.Node{Name: "flexvm-a3u-2", Pool: "a3u", Index: 2, Kind: model.NodeStatic, Phase: tc.succPhase,
				Generation: 1, VMName: "flexvm-a3u-2-g1", Predecessor: "flexvm-a3u-0", Registered: true, RunningAt: t0.Add(-time.Hour), Reason: "successor"}
			got, err := Expiry(st, audit(event.AuditDeferredDelete, "flexvm-a3u-0-g1"), t0, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, kinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			Apply(st, got)
			if k := st.Nodes["flexvm-a3u-0"].Kind; k != tc.wantKind {
				t.Errorf("flexvm-a3u-0 is %s, want %s", k, tc.wantKind)
			}
		})
	}
}

// TestAdvanceHandOver: while a static node of the pool may arrive after
// the node it replaces (its predecessor ends within half the lead time,
// or it has none and has waited that long) and no other hand-over in
// flight covers it, the successor of the static node that ends first is
// requested ahead of its lead time, so that that node can be kept serving
// as a cover once its successor registers.
func TestAdvanceHandOver(t *testing.T) {
	const lead = 3 * time.Hour
	type node struct {
		kind        model.NodeKind
		phase       model.Phase
		end         time.Time
		requested   time.Time
		predecessor string
	}
	base := func() map[string]node {
		return map[string]node{
			"flexvm-a3u-0": {kind: model.NodeStatic, phase: model.PhaseRunning, end: t0.Add(4 * time.Hour)},
			"flexvm-a3u-1": {kind: model.NodeStatic, phase: model.PhaseRunning, end: t0.Add(30 * time.Minute)},
			"flexvm-a3u-2": {kind: model.NodeStatic, phase: model.PhaseRunning, end: t0.Add(20 * time.Hour)},
			"flexvm-a3u-3": {kind: model.NodeStatic, phase: model.PhaseRequested, requested: t0.Add(-2 * time.Hour), predecessor: "flexvm-a3u-1"},
		}
	}
	tests := []struct {
		name   string
		change func(nodes map[string]node)
		want   string // the node given a successor ahead; "" none
	}{
		{name: "successor waiting, its predecessor ends within half the lead: the first node to end gets its successor now", want: "flexvm-a3u-0"},
		{name: "its predecessor ends later than half the lead: nothing ahead", change: func(n map[string]node) {
			p := n["flexvm-a3u-1"]
			p.end = t0.Add(2 * time.Hour)
			n["flexvm-a3u-1"] = p
		}},
		{name: "another hand-over in flight ends after half the lead and covers it: nothing ahead", change: func(n map[string]node) {
			n["flexvm-a3u-4"] = node{kind: model.NodeStatic, phase: model.PhaseRequested, requested: t0, predecessor: "flexvm-a3u-2"}
		}},
		{name: "the first node to end is more than two leads away: nothing ahead, the waiting successor is hedged", change: func(n map[string]node) {
			p := n["flexvm-a3u-0"]
			p.end = t0.Add(7 * time.Hour)
			n["flexvm-a3u-0"] = p
		}, want: "flexvm-a3u-3"},
		{name: "nothing to bring forward and the pool at max_node_count: no hedge", change: func(n map[string]node) {
			p := n["flexvm-a3u-0"]
			p.end = t0.Add(7 * time.Hour)
			n["flexvm-a3u-0"] = p
			for _, name := range []string{"flexvm-a3u-4", "flexvm-a3u-5", "flexvm-a3u-6", "flexvm-a3u-7"} {
				n[name] = node{kind: model.NodeDynamic, phase: model.PhaseRunning}
			}
		}},
		{name: "a successor whose predecessor ended, waiting more than half the lead: ahead", change: func(n map[string]node) {
			delete(n, "flexvm-a3u-1")
			s := n["flexvm-a3u-3"]
			s.predecessor = ""
			n["flexvm-a3u-3"] = s
		}, want: "flexvm-a3u-0"},
		{name: "a static node requested less than half the lead ago without a predecessor (a pool filling): nothing ahead", change: func(n map[string]node) {
			delete(n, "flexvm-a3u-1")
			s := n["flexvm-a3u-3"]
			s.predecessor, s.requested = "", t0.Add(-time.Hour)
			n["flexvm-a3u-3"] = s
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := applied(t)
			p := st.Pools["a3u"]
			p.MinNodes, p.MaxNodes = 3, 8
			nodes := base()
			if tt.change != nil {
				tt.change(nodes)
			}
			b := newBuilder(st, t0, Policy{LeadTime: lead})
			for name, spec := range nodes {
				var idx int
				fmt.Sscanf(name, "flexvm-a3u-%d", &idx)
				n := b.node(p, idx)
				n.Kind, n.Phase, n.Generation, n.VMName = spec.kind, spec.phase, 1, name+"-g1"
				n.TerminationTime, n.RequestedAt, n.Predecessor = spec.end, spec.requested, spec.predecessor
				if spec.phase == model.PhaseRunning {
					n.Registered, n.RunningAt = true, t0.Add(-time.Hour)
				}
				st.Nodes[name] = &n
			}
			for name, spec := range nodes {
				if spec.predecessor != "" {
					if pred, ok := st.Nodes[spec.predecessor]; ok {
						pred.Successor = name
					}
				}
			}
			b = newBuilder(st, t0, Policy{LeadTime: lead})
			b.advanceHandOver(p, nil)
			got := ""
			for name := range nodes {
				if o := b.st.Nodes[name]; o.Successor != "" && st.Nodes[name].Successor == "" {
					if got != "" {
						t.Fatalf("successors ahead for %s and %s", got, name)
					}
					got = name
					if s := b.st.Nodes[o.Successor]; s == nil || s.Predecessor != name || s.Kind != model.NodeStatic || s.Phase != model.PhaseRequested {
						t.Errorf("%s's successor %s: %+v, want a static node requested with %s as predecessor", name, o.Successor, s, name)
					}
				}
			}
			if got != tt.want {
				t.Errorf("successor requested ahead for %q, want %q (actions %v)", got, tt.want, kinds(b.out))
			}
		})
	}
}

// TestHedge: a hedge and the late successor it hedges — the first whose VM
// runs keeps the place, the other is released, and the pool's static count
// never changes.
func TestHedge(t *testing.T) {
	const (
		old   = "flexvm-a3u-0"
		late  = "flexvm-a3u-1"
		hedge = "flexvm-a3u-2"
	)
	tests := []struct {
		name       string
		lateRuns   bool
		hedgeRuns  bool
		lateEnds   bool
		perRequest bool   // one MIG per request (else the earlier layout)
		wantHolder string // the node that keeps the place: old's successor
		wantGone   string // the node released
	}{
		{name: "both still waiting: nothing settled", wantHolder: late},
		{name: "the hedge runs first: it takes the place in old's hand-over, the late request is cancelled", hedgeRuns: true, wantHolder: hedge, wantGone: late},
		{name: "the late node runs first: the hedge is cancelled", lateRuns: true, wantHolder: late, wantGone: hedge},
		{name: "both run: the hedge is released", lateRuns: true, hedgeRuns: true, wantHolder: late, wantGone: hedge},
		{name: "the late node's request ends: the hedge takes its place", lateEnds: true, wantHolder: hedge},
		// In one MIG per request a released request is cancelled and its
		// MIG left to the next pass (adopt.go): the node released is
		// recorded as the rule left it, dynamic and unlinked.
		{name: "one MIG per request, the late node runs first: the hedge is cancelled", perRequest: true, lateRuns: true, wantHolder: late, wantGone: hedge},
		{name: "one MIG per request, the hedge runs first: the late request is cancelled", perRequest: true, hedgeRuns: true, wantHolder: hedge, wantGone: late},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := applied(t)
			p := st.Pools["a3u"]
			p.MinNodes, p.MaxNodes = 1, 4
			b := newBuilder(st, t0, Policy{LeadTime: 3 * time.Hour})
			o := b.node(p, 0)
			o.Kind, o.Phase, o.Generation, o.VMName, o.Registered = model.NodeStatic, model.PhaseRunning, 1, old+"-g1", true
			o.RunningAt, o.TerminationTime, o.Successor = t0.Add(-23*time.Hour), t0.Add(30*time.Minute), late
			l := b.node(p, 1)
			l.Kind, l.Phase, l.Generation, l.VMName, l.ResizeRequest = model.NodeStatic, model.PhaseRequested, 1, late+"-g1", "rr-"+late+"-g1"
			l.RequestedAt, l.Predecessor, l.Successor = t0.Add(-3*time.Hour), old, hedge
			h := b.node(p, 2)
			h.Kind, h.Phase, h.Generation, h.VMName, h.ResizeRequest = model.NodeStatic, model.PhaseRequested, 1, hedge+"-g1", "rr-"+hedge+"-g1"
			h.RequestedAt, h.Predecessor, h.Hedge = t0.Add(-time.Hour), late, true
			if tt.perRequest {
				l.MIG, h.MIG = naming.RequestMIG("flexvm", "a3u", l.ResizeRequest), naming.RequestMIG("flexvm", "a3u", h.ResizeRequest)
			}
			if tt.lateRuns {
				l.Phase, l.RunningAt, l.VMID = model.PhaseRunning, t0.Add(-5*time.Minute), "1"
			}
			if tt.hedgeRuns {
				h.Phase, h.RunningAt, h.VMID = model.PhaseRunning, t0.Add(-5*time.Minute), "2"
			}
			for _, n := range []model.Node{o, l, h} {
				st.Nodes[n.Name] = &n
			}
			b = newBuilder(st, t0, Policy{LeadTime: 3 * time.Hour})
			before := b.staticServing(p.ID)
			if tt.lateEnds {
				n := *b.st.Nodes[late]
				n.Phase = model.PhaseReleased
				if !b.endHandover(p, &n) {
					t.Fatalf("endHandover: the hedge does not take the late node's place")
				}
				b.putNode(n, "request timed out")
			} else {
				b.makeBeforeBreak(p, nil)
			}
			if got := b.st.Nodes[old].Successor; got != tt.wantHolder {
				t.Errorf("%s's successor %q, want %q (actions %v)", old, got, tt.wantHolder, kinds(b.out))
			}
			holder := b.st.Nodes[tt.wantHolder]
			if holder.Predecessor != old || holder.Kind != model.NodeStatic || !holder.Phase.Serving() {
				t.Errorf("%s: %+v, want static, serving, with predecessor %s", holder.Name, holder, old)
			}
			if tt.wantHolder == hedge && (holder.Hedge || b.st.Nodes[late].Successor != "") {
				t.Errorf("the hedge still marked (%v) or still linked from %s (%q)", holder.Hedge, late, b.st.Nodes[late].Successor)
			}
			if tt.wantGone != "" {
				g := b.st.Nodes[tt.wantGone]
				phase := model.PhaseDeleting
				if tt.perRequest && g.RunningAt.IsZero() {
					phase = model.PhaseReleased
				}
				if g.Phase != phase || g.Kind != model.NodeDynamic || g.Predecessor != "" || g.Successor != "" || g.Hedge {
					t.Errorf("%s: %+v, want dynamic, %s, unlinked", g.Name, g, phase)
				}
			}
			if after := b.staticServing(p.ID); after != before {
				t.Errorf("static nodes serving %d, were %d", after, before)
			}
		})
	}
}
