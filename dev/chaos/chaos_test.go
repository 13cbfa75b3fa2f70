package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/scenario"
)

// testSeeds is how many seeds TestSeeds runs; CI runs thousands with
// `flexslurm chaos --seeds 2000`.
const testSeeds = 12

// testOptions keep the test's seeds short: 12 h of events and 4 h of tail.
var testOptions = Options{Horizon: 12 * time.Hour, Tail: 4 * time.Hour}

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestSeeds runs seeds 1…testSeeds and fails on any invariant violation,
// printing the seed's scenario (replay it with `flexslurm scenario run`).
func TestSeeds(t *testing.T) {
	ctx := testContext(t)
	var mu sync.Mutex
	var failed []Outcome
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for seed := uint64(1); seed <= testSeeds; seed++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o := RunSeed(ctx, seed, RunOptions{Options: testOptions})
			if o.Failed() {
				mu.Lock()
				failed = append(failed, o)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, o := range failed {
		data, _ := scenario.Marshal(o.File)
		var b strings.Builder
		o.Report.Write(&b, false)
		t.Errorf("seed %d: %s\n%s\nscenario:\n%s", o.Seed, o.Signature(), b.String(), data)
	}
}

// TestSeedsUnnamedVMs runs seeds of every class where Compute names no VM
// of a resize request on either API version (the scenario runner then sets
// flexslurm up as its probe says: one request per node, resizeBy 1): the
// invariants hold with VMs named by their MIGs. .ci/run runs many more.
func TestSeedsUnnamedVMs(t *testing.T) {
	ctx := testContext(t)
	opts := testOptions
	opts.Classes = Classes
	opts.ComputeReadings = "strict,RefuseNamedRequestsOnBeta"
	for seed := uint64(4000001); seed <= 4000000+testSeeds/2; seed++ {
		o := RunSeed(ctx, seed, RunOptions{Options: opts})
		if o.Failed() {
			var b strings.Builder
			o.Report.Write(&b, false)
			t.Errorf("seed %d: %s\n%s", o.Seed, o.Signature(), b.String())
		}
	}
}

// TestGeneratedScenariosAreValid: every generated scenario round-trips
// through the file format and the parser accepts it.
func TestGeneratedScenariosAreValid(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		f := Generate(seed, Options{})
		data, err := scenario.Marshal(f)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		g, err := scenario.Parse(data)
		if err != nil {
			t.Fatalf("seed %d: the generated scenario does not parse: %v\n%s", seed, err, data)
		}
		again, err := scenario.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(string(data), string(again)); d != "" {
			t.Fatalf("seed %d: printing the parsed scenario differs (-first +second):\n%s", seed, d)
		}
		if len(f.Steps) == 0 || f.Invariants.StaticAtMin == nil || f.RandomFaults == nil {
			t.Errorf("seed %d: generated scenario lacks steps, invariants or faults", seed)
		}
	}
	a, b := Generate(7, Options{}), Generate(7, Options{})
	da, _ := scenario.Marshal(a)
	db, _ := scenario.Marshal(b)
	if string(da) != string(db) {
		t.Error("the same seed generated two different scenarios")
	}
	dc, _ := scenario.Marshal(Generate(8, Options{}))
	if string(da) == string(dc) {
		t.Error("seeds 7 and 8 generated the same scenario")
	}
}

// TestGeneratorsProduceEachClass: among the first seeds, some shrink a
// pool while its nodes power up, some submit a job whose time limit
// exceeds the pools' max run duration, and some make Compute listings omit
// a VM or a field; every seed checks within_max.
func TestGeneratorsProduceEachClass(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(1); seed <= 50; seed++ {
		f := Generate(seed, Options{})
		if f.Invariants.WithinMax == nil {
			t.Errorf("seed %d does not check within_max", seed)
		}
		for _, s := range f.Steps {
			switch {
			case s.Apply != nil && s.Apply.Cluster != nil:
				seen["apply"]++
			case s.Submit != nil && s.Submit.TimeLimit > 0:
				seen["time_limit"]++
			case s.ListOmit != nil && s.ListOmit.Field == "":
				seen["omit_vm"]++
			case s.ListOmit != nil:
				seen["omit_field"]++
			}
		}
	}
	for _, class := range []string{"apply", "time_limit", "omit_vm", "omit_field"} {
		if seen[class] == 0 {
			t.Errorf("no seed of 1…50 generates %s (seen %v)", class, seen)
		}
	}
}

// TestSeedIsReproducible: a seed's report is the same on every run, so a
// printed failing scenario reproduces.
func TestSeedIsReproducible(t *testing.T) {
	ctx := testContext(t)
	f := Generate(3, Options{Horizon: 6 * time.Hour, Tail: time.Hour})
	run := func() scenario.Report {
		rep, err := scenario.RunFile(ctx, f, scenario.RunOptions{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	a, b := run(), run()
	if d := cmp.Diff(a.Trace, b.Trace); d != "" {
		t.Errorf("two runs of seed 3 differ (-first +second):\n%s", d)
	}
	if a.Stats.Crashes == 0 || a.Stats.Duplicates == 0 {
		t.Errorf("seed 3 injected no crash or duplicate: %+v", a.Stats)
	}
}

// TestShrink: delta debugging keeps exactly the steps a failure needs.
func TestShrink(t *testing.T) {
	f := &scenario.File{Name: "s", RandomFaults: &scenario.RandomFaults{Seed: 1, Crash: 0.5},
		Initial: scenario.Initial{ForeignVMs: []scenario.ForeignVM{{Name: "x"}}}}
	for i := 0; i < 40; i++ {
		f.Steps = append(f.Steps, scenario.Step{At: &scenario.At{Offset: time.Duration(i) * time.Minute},
			Cancel: &scenario.CancelStep{ID: fmt.Sprint(i)}})
	}
	needs := map[string]bool{"7": true, "23": true, "31": true}
	runs := 0
	fails := func(g *scenario.File) bool {
		runs++
		found := 0
		for _, s := range g.Steps {
			if needs[s.Cancel.ID] {
				found++
			}
		}
		// The failure also needs crashes, but not the foreign VMs.
		return found == len(needs) && g.RandomFaults != nil && g.RandomFaults.Crash > 0
	}
	got := Shrink(f, 35*time.Minute, fails)
	var ids []string
	for _, s := range got.Steps {
		ids = append(ids, s.Cancel.ID)
	}
	if d := cmp.Diff([]string{"7", "23", "31"}, ids); d != "" {
		t.Errorf("shrunk steps (-want +got):\n%s", d)
	}
	if got.RandomFaults == nil || got.RandomFaults.Crash == 0 || got.Initial.ForeignVMs != nil {
		t.Errorf("shrunk options: random faults %+v, foreign VMs %v", got.RandomFaults, got.Initial.ForeignVMs)
	}
	if got.End == nil || got.End.D() != 36*time.Minute {
		t.Errorf("end = %v, want 36m (a minute after the failure)", got.End)
	}
	if len(f.Steps) != 40 || f.RandomFaults.Crash != 0.5 {
		t.Error("Shrink modified its input")
	}
	t.Logf("%d runs", runs)
}

// TestShrinkRealFailure plants a violation the runner must find (a VM
// labelled as the cluster's, unknown to it, in a MIG flexslurm cannot
// delete from) among generated steps, and checks that the minimal scenario
// keeps the failure and drops the workload.
func TestShrinkRealFailure(t *testing.T) {
	ctx := testContext(t)
	f := Generate(5, Options{Horizon: 4 * time.Hour, Tail: time.Hour})
	f.Initial.ForeignVMs = append(f.Initial.ForeignVMs, scenario.ForeignVM{Name: "flexvm-a3u-7-g9",
		Labels: map[string]string{"managed-by": "flexslurm", "flexslurm-cluster": "flexvm", "flexslurm-pool": "a3u"}})
	f.Invariants.ForeignUntouched = false // flexslurm may try to delete a VM labelled as its own
	rep, err := scenario.RunFile(ctx, f, scenario.RunOptions{StopOnFailure: true})
	if err != nil {
		t.Fatal(err)
	}
	o := Outcome{Report: rep}
	if o.Signature() != "invariant no_unrecorded_vm" {
		t.Fatalf("first failure %q, want the planted unrecorded VM", o.Signature())
	}
	fails := func(g *scenario.File) bool {
		r, err := scenario.RunFile(ctx, g, scenario.RunOptions{StopOnFailure: true})
		return err == nil && (Outcome{Report: r}).Signature() == "invariant no_unrecorded_vm"
	}
	min := Shrink(f, failAt(o), fails)
	if len(min.Steps) != 0 {
		t.Errorf("minimal scenario keeps %d steps; the planted VM alone fails", len(min.Steps))
	}
	if !fails(min) {
		t.Error("the minimal scenario does not fail")
	}
}

// BenchmarkSeeds reports seeds per second for the default workload
// (30 h of events and 6 h of tail per seed).
func BenchmarkSeeds(b *testing.B) {
	ctx := testContext(b)
	start := time.Now()
	for i := 0; i < b.N; i++ {
		o := RunSeed(ctx, uint64(i+1), RunOptions{})
		if o.Err != nil {
			b.Fatalf("seed %d: %v", i+1, o.Err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "seeds/s")
}
