package chaos

import (
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/scenario"
)

// A class's jobs have ids of their own: none is the base workload's, nor
// another class's (a class's job 900 once met the base workload's unfit
// job 900). A class may submit one of its own ids twice on purpose.
func TestClassJobIDsAreTheirOwn(t *testing.T) {
	submitted := func(g *scenario.File) map[string]int {
		ids := map[string]int{}
		for _, s := range g.Steps {
			if s.Submit != nil {
				ids[s.Submit.ID]++
			}
		}
		return ids
	}
	for seed := uint64(1); seed <= 200; seed++ {
		base := submitted(Generate(seed, Options{}))
		owner := map[string]Class{}
		for _, c := range Classes {
			for id, n := range submitted(Generate(seed, Options{Classes: []Class{c}})) {
				if n == base[id] {
					continue // the base workload's own
				}
				if base[id] > 0 {
					t.Fatalf("seed %d: class %s submits job %s, one of the base workload's", seed, c, id)
				}
				if o, ok := owner[id]; ok && o != c {
					t.Fatalf("seed %d: classes %s and %s both submit job %s", seed, o, c, id)
				}
				owner[id] = c
			}
		}
	}
}

func TestStartAtIdleTimeoutClass(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		g := Generate(seed, Options{Classes: []Class{ClassStartAtIdleTimeout}})
		base := Generate(seed, Options{})
		late, jobs := false, 0
		for _, s := range g.Steps {
			if s.Deliveries != nil && s.Deliveries.Topic == "slurm-snapshot" {
				d := s.Deliveries.Delay.D()
				late = late || (d >= 2*time.Minute && d <= 5*time.Minute)
			}
			if s.Submit != nil && s.Submit.Nodes == 1 && s.Submit.Runtime.D() <= 5*time.Minute {
				jobs++
			}
		}
		for _, s := range base.Steps {
			if s.Submit != nil && s.Submit.Nodes == 1 && s.Submit.Runtime.D() <= 5*time.Minute {
				jobs--
			}
		}
		if !late || jobs < 5 {
			t.Errorf("seed %d: snapshots late %v, %d short one-node jobs; want late snapshots and at least 5 jobs", seed, late, jobs)
		}
	}
}

func TestPrologReplacedClass(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		g := Generate(seed, Options{Classes: []Class{ClassPrologReplaced}})
		var submitted, slowed time.Duration
		failed := false
		for _, s := range g.Steps {
			switch {
			case s.Submit != nil && s.Submit.Nodes == 2 && len(s.Submit.ID) == 4:
				submitted = s.At.Offset
			case s.Capacity != nil && submitted > 0 && s.Capacity.Delay.D() >= 30*time.Minute && slowed == 0:
				slowed = s.At.Offset
			case s.Health != nil && slowed > 0 && s.At.Offset > slowed:
				failed = true
			}
		}
		if submitted == 0 || slowed == 0 || !failed {
			t.Errorf("seed %d: two-node job at %s, capacity slowed at %s, health failure after it %v", seed, submitted, slowed, failed)
		}
	}
}

func TestFulfilledAsCancelledClass(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		g := Generate(seed, Options{Classes: []Class{ClassFulfilledAsCancelled}})
		qt, err := time.ParseDuration(g.Policy["queue_timeout"])
		if err != nil || qt < 70*time.Minute || qt > 100*time.Minute {
			t.Fatalf("seed %d: queue_timeout %q, want 70m–100m", seed, g.Policy["queue_timeout"])
		}
		near := false
		for _, s := range g.Steps {
			if s.Capacity != nil && s.Capacity.Zone == pools[1].zone {
				d := s.Capacity.Delay.D()
				near = near || (d >= qt-2*time.Minute && d <= qt+8*time.Minute)
			}
		}
		if !near {
			t.Errorf("seed %d: no a3h capacity delay near the queue timeout %s", seed, qt)
		}
	}
	if p := Generate(1, Options{}).Policy; p["queue_timeout"] != "" {
		t.Errorf("the base workload got a queue timeout %q: a class must not change another seed's options", p["queue_timeout"])
	}
}
