// Command benchreport writes BENCHMARKS.md from the outputs of one `make
// bench` run: every part's output file in one directory (the Makefile's
// BENCHDIR), each part's wall time and exit status, and the machine. Each
// section is its tool's own output, unchanged, so that a change to a tool's
// report flows into BENCHMARKS.md at the next run.
//
//	go run ./dev/benchreport -dir bin/bench -trace-readme ../shared/traces/README.md > BENCHMARKS.md
package main

import (
	"bufio"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

//go:embed measured.md
var measured string

// hand is what was measured outside a make bench run, each part with its
// own command, date and commit; it is written after the run's sections.
//
//go:embed hand.md
var hand string

func main() {
	dir := flag.String("dir", "bin/bench", "directory of the run's outputs")
	traceReadme := flag.String("trace-readme", "", "the trace's README (its first paragraph is cited as the trace's source)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./dev/benchreport [-dir DIR] [-trace-readme FILE] > BENCHMARKS.md")
		flag.PrintDefaults()
	}
	flag.CommandLine.SetOutput(os.Stdout)
	flag.Parse()
	if err := write(os.Stdout, *dir, *traceReadme); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// step is one part of the run, from DIR/steps.txt: "NAME RC SECONDS".
type step struct{ name, rc, secs string }

func readSteps(dir string) ([]step, error) {
	f, err := os.Open(filepath.Join(dir, "steps.txt"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []step
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) == 3 {
			out = append(out, step{fs[0], fs[1], fs[2]})
		}
	}
	return out, sc.Err()
}

// part returns DIR/name, trimmed, or a line saying it is missing.
func part(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return fmt.Sprintf("(no output: %s is missing from this run)", name)
	}
	return strings.TrimSpace(string(b))
}

func line(dir, name string) string {
	s := part(dir, name)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func write(w io.Writer, dir, traceReadme string) error {
	steps, err := readSteps(dir)
	if err != nil {
		return fmt.Errorf("the run's steps: %w", err)
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	total := 0.0
	for _, s := range steps {
		var v float64
		fmt.Sscanf(s.secs, "%g", &v)
		total += v
	}
	p("# Benchmarks\n\n")
	p("What flexslurm costs per event, how fast it reacts on its real event path, how it\n")
	p("holds up under bursts, how the reconciler scales, how expiry keeps static nodes\n")
	p("available, what a production GPU trace costs, and how fast chaos runs. This file is\n")
	p("written by `make bench` (`dev/benchreport`) from ONE run: every section below is\n")
	p("the output of that run's tool, unchanged. Nothing here is edited by hand; analyses of\n")
	p("the numbers are in the docs each section links.\n\n")
	p("## This run\n\n")
	p("- Command: `%s`\n", line(dir, "command.txt"))
	p("- Started %s, ended %s; %.0f s (%.1f min) of wall time for the parts below.\n", line(dir, "start.txt"), line(dir, "end.txt"), total, total/60)
	p("- Machine: %s\n", line(dir, "machine.txt"))
	p("- Load average (1, 5, 15 min) at the start: %s; at the end: %s. Other work ran on the machine at the same time: timings depend on the load, counts do not.\n", line(dir, "load-start.txt"), line(dir, "load-end.txt"))
	p("- Go: %s\n\n", line(dir, "go-version.txt"))
	p("| part | command | wall time | exit status |\n|---|---|---|---|\n")
	cmds := map[string]string{}
	for _, l := range strings.Split(part(dir, "commands.txt"), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			cmds[k] = v
		}
	}
	for _, s := range steps {
		p("| %s | `%s` | %s s | %s |\n", s.name, cmds[s.name], s.secs, s.rc)
	}
	p("\nTo run one part alone, run its command (after `make build`; the emulator parts under\n`bin/flexslurm emulators run -- …`). `make bench` variables: `TRACE` (the trace file,\ndefault `../shared/traces/alibaba-openb-2023-default.csv`; the trace part is skipped\nwhen it is absent), `REACT_EVENTS` and `REACT_BURST` (reaction time), `CHAOSBENCH` (chaos seeds).\n\n")

	p("## Reaction time, end to end (`flexslurm bench react`)\n\n")
	p("The real local path (`make demo`'s system): Firestore and Pub/Sub emulators, push\nsubscriptions into the four functions over HTTP, the Compute simulator, real Slurm\n22.05 with the hooks and the agent. `docs/reaction-time.md` says what is measured,\nwhere each end is read and why a reaction takes what it takes.\n\n")
	p("%s\n\n", part(dir, "react.md"))

	p("## Cost per event, burst, reconcile at scale, ResumeProgram, chaos (`dev/bench`)\n\n")
	p("### How it is measured\n\n%s\n\n", strings.TrimSpace(measured))
	p("### Results\n\n%s\n\n", demote(devbenchTable(dir)))

	p("## Expiry: static availability at 7 days and 1 day (`flexslurm bench expiry`)\n\n")
	p("Seeds 1–10, each max run duration, three strategies side by side; `docs/expiry-bench.md`\nsays what is measured.\n\n")
	p("%s\n\n", demote(part(dir, "expiry.md")))

	p("## GPU trace replay (`flexslurm bench trace`)\n\n")
	if cite := citation(traceReadme); cite != "" {
		p("The trace, as its README gives its source (the trace itself is not in this repository):\n\n> %s\n\n", strings.ReplaceAll(cite, "\n", "\n> "))
	}
	p("`docs/trace-bench.md` says how the replay derives what the trace lacks and what each\nrow measures.\n\n")
	p("%s\n\n", demote(part(dir, "trace.md")))

	p("## Go benchmarks\n\n")
	p("`go test -run '^$' -bench . -benchmem` of the packages whose benchmarks the parts above do not run.\n\n")
	p("```\n%s\n```\n", part(dir, "gobench.txt"))
	p("\n%s", strings.TrimSpace(hand)+"\n")
	return nil
}

// devbenchTable is the table dev/bench wrote (table.md) or, when it could
// not write it, the table it printed (devbench.log, from its "Machine:"
// line), followed by the raw results of the ResumeProgram and chaos
// benchmarks it could not read.
func devbenchTable(dir string) string {
	if b, err := os.ReadFile(filepath.Join(dir, "table.md")); err == nil {
		return strings.TrimSpace(string(b))
	}
	log, err := os.ReadFile(filepath.Join(dir, "devbench.log"))
	if err != nil {
		return "(no output: neither table.md nor devbench.log is in this run)"
	}
	var keep []string
	on := false
	for _, l := range strings.Split(string(log), "\n") {
		if strings.HasPrefix(l, "Machine:") {
			on = true
		}
		if strings.HasPrefix(l, "writing the table to") || strings.HasPrefix(l, "exit status") || strings.HasPrefix(l, "FAIL") || strings.HasPrefix(l, "time=") {
			on = false
		}
		if on {
			keep = append(keep, l)
		}
	}
	var b strings.Builder
	b.WriteString("dev/bench could not write its table file nor read the ResumeProgram and chaos outputs in this run (`make bench` handed it paths relative to the repository, and `go test` runs in the package's directory; fixed in `dev/benchreport/run.sh` after the run): the table below is the one it printed, whose ResumeProgram and chaos rows read \"pending\"; those two benchmarks' own results, from the same run, follow it.\n\n")
	b.WriteString(strings.TrimSpace(strings.Join(keep, "\n")))
	for _, f := range []string{"bench-hooks.log", "bench-chaos.log"} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		var lines []string
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(l, "Benchmark") || strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "cpu:") {
				lines = append(lines, l)
			}
		}
		fmt.Fprintf(&b, "\n\n%s (go test output):\n\n```\n%s\n```", f, strings.Join(lines, "\n"))
	}
	return b.String()
}

// demote turns a part's own "#"/"##" headings into "###" and deeper, so
// that they nest under this file's section.
func demote(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		if strings.HasPrefix(l, "#") {
			n := len(l) - len(strings.TrimLeft(l, "#"))
			if n < 3 {
				l = strings.Repeat("#", 3-n) + l
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// citation returns the README's first paragraph after its title.
func citation(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var para []string
	for _, l := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "#"):
			continue
		case t == "":
			if len(para) > 0 {
				return strings.Join(para, "\n")
			}
		default:
			para = append(para, t)
		}
	}
	return strings.Join(para, "\n")
}
