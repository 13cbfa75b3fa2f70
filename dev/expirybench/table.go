package expirybench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Describe returns a one-paragraph description of a configuration.
func Describe(cfg Config) string {
	cfg = cfg.withDefaults()
	return fmt.Sprintf("static pool of %d nodes (min_node_count %d, max_node_count %d), flex_start_max_duration %s; "+
		"measured %s after a %s warm-up; capacity wait per resize request %s; reconcile tick %s; boot to registration %s; "+
		"single-node jobs offering %.0f%% of the static nodes, time limits log-uniform %s–%s, runtime 50–100%% of the limit; seed %d",
		cfg.Nodes, cfg.Nodes, cfg.MaxNodes, fmtDur(cfg.MaxRunDuration), fmtDur(cfg.Period), fmtDur(cfg.WarmUp), cfg.Wait,
		fmtDur(cfg.Tick), fmtDur(cfg.BootTime), 100*cfg.Load, fmtDur(cfg.MinLimit), fmtDur(cfg.MaxLimit), cfg.Seed)
}

// row is one metric of the table.
type row struct {
	name string
	cell func(*Result) string
}

var rows = []row{
	{"static availability (time at ≥ min)", func(r *Result) string { return pct(r.Availability) }},
	{"node-time availability", func(r *Result) string { return pct(r.NodeTimeAvailability) }},
	{"time below min", func(r *Result) string { return fmtDur(r.BelowMin) }},
	{"episodes below min (by cause)", episodeCell},
	{"fewest usable nodes", func(r *Result) string { return fmt.Sprint(r.FewestUsable) }},
	{"jobs killed by expiry", func(r *Result) string { return fmt.Sprint(r.JobsKilled) }},
	{"work lost to expiry (node-h)", func(r *Result) string { return fmt.Sprintf("%.1f", r.WorkLost.Hours()) }},
	{"overlap (node-h)", func(r *Result) string { return fmt.Sprintf("%.1f", r.Overlap.Hours()) }},
	{"overlap flexslurm recorded (node-h)", func(r *Result) string { return fmt.Sprintf("%.1f", r.RecordedOverlap.Hours()) }},
	{"VM time paid (node-h)", func(r *Result) string { return fmt.Sprintf("%.1f", r.VMTime.Hours()) }},
	{"VMs expired / released early", func(r *Result) string { return fmt.Sprintf("%d / %d", r.Expiries, r.Deletions) }},
	{"jobs started / completed", func(r *Result) string { return fmt.Sprintf("%d / %d", r.JobsStarted, r.JobsCompleted) }},
	{"mean wait to start", func(r *Result) string { return fmtDur(r.MeanJobWait) }},
	{"capacity requests in the run (mean / max wait)", func(r *Result) string {
		return fmt.Sprintf("%d (%s / %s)", len(r.CapacityWaits), fmtDur(meanDur(r.CapacityWaits)), fmtDur(slices.Max(append([]time.Duration{0}, r.CapacityWaits...))))
	}},
	{"jobs killed otherwise", func(r *Result) string { return fmt.Sprint(r.JobsKilledOther) }},
}

// WriteTable prints the results side by side, one table per configuration
// (results of the same configuration are adjacent, as RunAll returns them),
// as aligned text, or as Markdown when markdown is true.
func WriteTable(w io.Writer, results []*Result, markdown bool) error {
	for i := 0; i < len(results); {
		j := i + 1
		for j < len(results) && results[j].Config == results[i].Config {
			j++
		}
		group := results[i:j]
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := writeGroup(w, group, markdown); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func writeGroup(w io.Writer, group []*Result, markdown bool) error {
	cfg := group[0].Config
	head := []string{fmt.Sprintf("max run duration %s", fmtDur(cfg.MaxRunDuration))}
	for _, r := range group {
		head = append(head, r.Strategy.Name)
	}
	lines := [][]string{head}
	for _, rw := range rows {
		line := []string{rw.name}
		for _, r := range group {
			line = append(line, rw.cell(r))
		}
		lines = append(lines, line)
	}
	if markdown {
		fmt.Fprintf(w, "%s\n\n", Describe(cfg))
		for k, line := range lines {
			fmt.Fprintf(w, "| %s |\n", strings.Join(line, " | "))
			if k == 0 {
				fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(line)))
			}
		}
		return nil
	}
	fmt.Fprintf(w, "%s\n\n", Describe(cfg))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, line := range lines {
		fmt.Fprintf(tw, "%s\t%s\t\n", line[0], strings.Join(line[1:], "\t"))
	}
	return tw.Flush()
}

// WriteEpisodes lists each result's intervals below min_node_count.
func WriteEpisodes(w io.Writer, results []*Result) {
	for _, r := range results {
		fmt.Fprintf(w, "%s, max run duration %s: %d episodes below min\n", r.Strategy.Name, fmtDur(r.Config.MaxRunDuration), len(r.Episodes))
		for _, e := range r.Episodes {
			fmt.Fprintf(w, "  %s–%s (%s), fewest %d, %s: %s", fmtDur(e.Start), fmtDur(e.End), fmtDur(e.End-e.Start), e.Fewest, e.Kind, e.Cause)
			if e.Diagnosis != "" {
				fmt.Fprintf(w, "; %s", e.Diagnosis)
			}
			fmt.Fprintln(w)
		}
	}
}

// Findings lists the episodes of make-before-break runs that capacity
// arriving late does not explain: a node that expired without a successor
// (EpisodeNoSuccessor), a successor whose capacity came within
// the lead time but registered after the termination (EpisodeBooting) or
// was still drained for the node's previous VM (EpisodeStaleDrain), a node
// drained while another successor was missing (EpisodeDrainWhileShort), or
// no explanation at all (EpisodeUnexplained).
func Findings(results []*Result) []string {
	var out []string
	for _, r := range results {
		if r.Strategy.Policy.RecreateAfterTermination {
			continue
		}
		for _, e := range r.Episodes {
			switch e.Kind {
			case EpisodeNoSuccessor, EpisodeBooting, EpisodeStaleDrain, EpisodeDrainWhileShort, EpisodeUnexplained:
				out = append(out, fmt.Sprintf("seed %d, %s, max run duration %s: %s: below min for %s from %s (fewest %d): %s; %s",
					r.Config.Seed, r.Strategy.Name, fmtDur(r.Config.MaxRunDuration), e.Kind, fmtDur(e.End-e.Start), fmtDur(e.Start), e.Fewest, e.Cause, e.Diagnosis))
			}
		}
	}
	return out
}

// episodeKinds orders the episode kinds in the table.
var episodeKinds = []string{EpisodeRecreate, EpisodeCapacityLate, EpisodeNoSuccessor, EpisodeBooting, EpisodeStaleDrain, EpisodeDrainWhileShort, EpisodeUnexplained, EpisodeFill}

func episodeCell(r *Result) string {
	n := map[string]int{}
	for _, e := range r.Episodes {
		n[e.Kind]++
	}
	var parts []string
	for _, k := range episodeKinds {
		if n[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", len(r.Episodes), strings.Join(parts, ", "))
}

func meanDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}
