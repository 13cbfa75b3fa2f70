package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/scenario"
)

// Adding a class adds its workload and leaves the seed's base workload as
// it was (each class draws from a stream of its own).
func TestClassesKeepTheBaseWorkload(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		base := Generate(seed, Options{})
		for _, c := range Classes {
			g := Generate(seed, Options{Classes: []Class{c}})
			if len(g.Steps) <= len(base.Steps) {
				t.Fatalf("seed %d, class %s: %d steps, no more than the base's %d", seed, c, len(g.Steps), len(base.Steps))
			}
			if missing := notASubsequence(t, base.Steps, g.Steps); missing != "" {
				t.Errorf("seed %d, class %s: a base step is missing or moved: %s", seed, c, missing)
			}
			data, err := scenario.Marshal(g)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := scenario.Parse(data); err != nil {
				t.Fatalf("seed %d, class %s: the generated scenario does not parse: %v", seed, c, err)
			}
		}
	}
	g := Generate(7, Options{Classes: []Class{ClassGoingVM, ClassResumeTimeout}})
	if d := g.Simulator.DeleteDelay.D(); d < 15*60e9 {
		t.Errorf("going-vm: delete delay %s, want at least 15m", d)
	}
	if d := g.Slurm.ResumeTimeout.D(); d < 15*60e9 || d > 40*60e9 {
		t.Errorf("resume-timeout: ResumeTimeout %s, want 15m–40m", d)
	}
	// late-decision: reconcile passes decide 3–30 minutes late for a
	// while, and the time-bounded invariants allow the longest lag.
	base, late := Generate(7, Options{}), Generate(7, Options{Classes: []Class{ClassLateDecision}})
	lag := time.Duration(0)
	for _, s := range late.Steps {
		if s.LateDecision != nil {
			if d := s.LateDecision.Lag.D(); d < 3*time.Minute || d > 30*time.Minute || s.LateDecision.For.D() < time.Hour {
				t.Errorf("late-decision: lag %s for %s, want a 3m–30m lag for at least 1h", d, s.LateDecision.For.D())
			}
			lag = max(lag, s.LateDecision.Lag.D())
		}
	}
	if lag == 0 {
		t.Fatal("late-decision: no late_decision step")
	}
	if got, want := late.Invariants.NoUnrecordedVM.Within.D(), base.Invariants.NoUnrecordedVM.Within.D()+lag; got != want {
		t.Errorf("late-decision: no_unrecorded_vm within %s, want %s (the base's and the longest lag)", got, want)
	}
}

// notASubsequence returns the first step of base (printed) that does not
// appear, in order, among all; "" when base is a subsequence of all.
func notASubsequence(t *testing.T, base, all []scenario.Step) string {
	t.Helper()
	print := func(s scenario.Step) string {
		data, err := scenario.Marshal(&scenario.File{Steps: []scenario.Step{s}})
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	i := 0
	for _, s := range all {
		if i < len(base) && print(s) == print(base[i]) {
			i++
		}
	}
	if i < len(base) {
		return print(base[i])
	}
	return ""
}

func TestParseClass(t *testing.T) {
	for _, c := range Classes {
		if got, err := ParseClass(string(c)); err != nil || got != c {
			t.Errorf("ParseClass(%q) = %q, %v", c, got, err)
		}
	}
	if _, err := ParseClass("stale"); err == nil || !strings.Contains(err.Error(), "stale-snapshot") {
		t.Errorf("ParseClass(stale): error %v, want one listing the known classes", err)
	}
}

// TestClassSeeds runs short seeds of every class; `flexslurm chaos --class
// all --seeds N` runs many.
func TestClassSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: run `flexslurm chaos --class all` instead")
	}
	o := testOptions
	o.Classes = Classes
	for seed := uint64(1); seed <= 3; seed++ {
		out := RunSeed(testContext(t), seed, RunOptions{Options: o})
		if out.Failed() {
			var b strings.Builder
			out.Report.Write(&b, false)
			data, _ := scenario.Marshal(out.File)
			t.Errorf("seed %d with every class: %s\n%s\nscenario:\n%s", seed, out.Signature(), b.String(), data)
		}
	}
}

// TestLateDecisionClassDecidesLate: in the late-decision class's seeds,
// reconcile passes do decide late, and the runner sees every late pass's
// lists end (no pass decides while the runner still waits for its lists).
func TestLateDecisionClassDecidesLate(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: run `flexslurm chaos --class late-decision` instead")
	}
	o := testOptions
	o.Classes = []Class{ClassLateDecision}
	for seed := uint64(1); seed <= 2; seed++ {
		out := RunSeed(testContext(t), seed, RunOptions{Options: o})
		if out.Failed() {
			t.Errorf("seed %d: %s", seed, out.Signature())
		}
		if n := out.Report.Stats.LateDecisions; n == 0 {
			t.Errorf("seed %d: no reconcile pass decided late", seed)
		}
		for _, n := range out.Report.Notes {
			if strings.Contains(n, "late_decision") {
				t.Errorf("seed %d: %s", seed, n)
			}
		}
	}
}
