package expirybench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Spread is one strategy's results over several seeds of one configuration
// (everything but the seed alike).
type Spread struct {
	Config   Config // the first seed's configuration
	Strategy Strategy
	Seeds    []uint64
	Results  []*Result // in Seeds' order
	// ExtraVMTime is, per seed, the VM time paid relative to the same
	// seed's recreate-after-termination run (with end-of-life
	// reservations): VMTime / baseline − 1. Nil when the results hold no
	// such baseline.
	ExtraVMTime []float64
}

// isBaseline reports whether s is the baseline extra VM time is measured
// against: recreate-after-termination with flexslurm's end-of-life
// reservations.
func isBaseline(s Strategy) bool { return s.Policy.RecreateAfterTermination && !s.IgnoreReservations }

// Spreads groups results by configuration but the seed, then by strategy,
// both in the order they first appear.
func Spreads(results []*Result) []*Spread {
	type key struct {
		cfg      Config
		strategy string
	}
	base := map[key]*Result{} // by configuration with its seed
	for _, r := range results {
		if isBaseline(r.Strategy) {
			base[key{r.Config, ""}] = r
		}
	}
	var out []*Spread
	by := map[key]*Spread{}
	for _, r := range results {
		c := r.Config
		c.Seed = 0
		k := key{c, r.Strategy.Name}
		s := by[k]
		if s == nil {
			s = &Spread{Config: r.Config, Strategy: r.Strategy}
			by[k] = s
			out = append(out, s)
		}
		s.Seeds = append(s.Seeds, r.Config.Seed)
		s.Results = append(s.Results, r)
		if b := base[key{r.Config, ""}]; b != nil && b.VMTime > 0 {
			s.ExtraVMTime = append(s.ExtraVMTime, float64(r.VMTime)/float64(b.VMTime)-1)
		}
	}
	for _, s := range out {
		if len(s.ExtraVMTime) != len(s.Results) {
			s.ExtraVMTime = nil
		}
	}
	return out
}

// MinMedianMax returns the smallest, the median (the mean of the two middle
// values for an even count) and the largest of xs; zeros for none.
func MinMedianMax(xs []float64) (lo, med, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return s[0], med, s[n-1]
}

// spreadRow is one metric of the spread table.
type spreadRow struct {
	name   string
	value  func(s *Spread, r *Result, i int) float64
	format func(float64) string
}

func hours(v float64) string { return fmt.Sprintf("%.1f", v) }
func dur(v float64) string   { return fmtDur(time.Duration(v).Round(time.Minute)) }
func signedPct(v float64) string {
	return fmt.Sprintf("%+.1f%%", 100*v)
}

var spreadRows = []spreadRow{
	{"static availability (time at ≥ min)", func(_ *Spread, r *Result, _ int) float64 { return r.Availability }, pct},
	{"node-time availability", func(_ *Spread, r *Result, _ int) float64 { return r.NodeTimeAvailability }, pct},
	{"time below min", func(_ *Spread, r *Result, _ int) float64 { return float64(r.BelowMin) }, dur},
	{"episodes below min", func(_ *Spread, r *Result, _ int) float64 { return float64(len(r.Episodes)) }, func(v float64) string { return fmt.Sprintf("%g", v) }},
	{"VM time paid (node-h)", func(_ *Spread, r *Result, _ int) float64 { return r.VMTime.Hours() }, hours},
	{"extra VM time vs recreate-after-termination", func(s *Spread, _ *Result, i int) float64 { return s.ExtraVMTime[i] }, signedPct},
	{"overlap (node-h)", func(_ *Spread, r *Result, _ int) float64 { return r.Overlap.Hours() }, hours},
	{"jobs killed by expiry", func(_ *Spread, r *Result, _ int) float64 { return float64(r.JobsKilled) }, func(v float64) string { return fmt.Sprintf("%g", v) }},
	{"mean wait to start", func(_ *Spread, r *Result, _ int) float64 { return float64(r.MeanJobWait) }, dur},
}

// WriteSpread prints, for each configuration but the seed, each strategy's
// min / median / max over the seeds of the headline metrics, side by side,
// as aligned text or as Markdown.
func WriteSpread(w io.Writer, results []*Result, markdown bool) error {
	spreads := Spreads(results)
	for i := 0; i < len(spreads); {
		j := i + 1
		c := spreads[i].Config
		c.Seed = 0
		for j < len(spreads) {
			d := spreads[j].Config
			d.Seed = 0
			if d != c {
				break
			}
			j++
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := writeSpreadGroup(w, spreads[i:j], markdown); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func writeSpreadGroup(w io.Writer, group []*Spread, markdown bool) error {
	cfg := group[0].Config
	head := []string{fmt.Sprintf("max run duration %s, %d seeds (%s): min / median / max", fmtDur(cfg.MaxRunDuration), len(group[0].Seeds), seedsString(group[0].Seeds))}
	for _, s := range group {
		head = append(head, s.Strategy.Name)
	}
	lines := [][]string{head}
	for _, rw := range spreadRows {
		line := []string{rw.name}
		for _, s := range group {
			if rw.name == "extra VM time vs recreate-after-termination" && s.ExtraVMTime == nil {
				line = append(line, "–")
				continue
			}
			var xs []float64
			for i, r := range s.Results {
				xs = append(xs, rw.value(s, r, i))
			}
			lo, med, hi := MinMedianMax(xs)
			line = append(line, fmt.Sprintf("%s / %s / %s", rw.format(lo), rw.format(med), rw.format(hi)))
		}
		lines = append(lines, line)
	}
	desc := Describe(cfg)
	desc = desc[:strings.LastIndex(desc, "; seed ")] + "; seeds " + seedsString(group[0].Seeds)
	fmt.Fprintf(w, "%s\n\n", desc)
	if markdown {
		for k, line := range lines {
			fmt.Fprintf(w, "| %s |\n", strings.Join(line, " | "))
			if k == 0 {
				fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(line)))
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, line := range lines {
		fmt.Fprintf(tw, "%s\t%s\t\n", line[0], strings.Join(line[1:], "\t"))
	}
	return tw.Flush()
}

// seedsString spells seeds compactly: runs of consecutive seeds as a–b.
func seedsString(seeds []uint64) string {
	var parts []string
	for i := 0; i < len(seeds); {
		j := i
		for j+1 < len(seeds) && seeds[j+1] == seeds[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d–%d", seeds[i], seeds[j]))
		} else {
			parts = append(parts, fmt.Sprint(seeds[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// WriteSeeds prints, for each configuration but the seed, make-before-break's
// headline metrics seed by seed: static availability, time below min,
// extra VM time against the same seed's recreate-after-termination,
// overlap and mean wait to start.
func WriteSeeds(w io.Writer, results []*Result, markdown bool) error {
	for _, s := range Spreads(results) {
		if s.Strategy.Policy.RecreateAfterTermination || s.Strategy.IgnoreReservations {
			continue
		}
		head := []string{"seed", "static availability", "time below min", "extra VM time", "overlap (node-h)", "mean wait to start"}
		var rows [][]string
		for i, r := range s.Results {
			extra := "n/a"
			if s.ExtraVMTime != nil {
				extra = signedPct(s.ExtraVMTime[i])
			}
			rows = append(rows, []string{fmt.Sprintf("%d", s.Seeds[i]), pct(r.Availability), dur(float64(r.BelowMin)), extra, hours(r.Overlap.Hours()), dur(float64(r.MeanJobWait))})
		}
		fmt.Fprintf(w, "%s, max run duration %s, per seed:\n\n", s.Strategy.Name, fmtDur(s.Config.MaxRunDuration))
		if err := writeGrid(w, head, rows, markdown); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return nil
}

// writeGrid prints a header and rows as a Markdown table or aligned text.
func writeGrid(w io.Writer, head []string, rows [][]string, markdown bool) error {
	if markdown {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
		for _, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range append([][]string{head}, rows...) {
		fmt.Fprintf(tw, "%s\t\n", strings.Join(r, "\t"))
	}
	return tw.Flush()
}
