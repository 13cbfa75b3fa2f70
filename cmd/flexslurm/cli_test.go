package main

import (
	"bytes"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// usageExit is the exit status of a usage error, where it is not 2.
var usageExit = map[string]int{
	"health":       healthUsageExit, // 2 is the INCONCLUSIVE verdict
	"health check": healthUsageExit,
}

// wrongArgs gives, for the commands that take positional arguments, a
// wrong set of them (a usage error with no side effect). Every other
// command takes none, and a stray argument must be refused.
var wrongArgs = map[string]struct {
	args []string
}{
	"validate":      {args: []string{"a.json", "b.json"}},
	"apply":         {args: []string{"--node-settings", "n.json", "a.json", "b.json"}},
	"slurm-conf":    {args: []string{"a.json", "b.json"}},
	"scenario run":  {args: []string{}},
	"emulators run": {args: []string{"--project", "p"}},
	"bench trace":   {args: []string{"a.csv", "b.csv"}},
}

// hookTakesArgs: Slurm runs the hooks with arguments of its own (the
// power-saving hooks a HOSTLIST); the rest read only its environment.
const hookTakesArgs = "a hook's arguments are Slurm's and a refused one would fail the hook"

type invocation struct {
	name string   // "function serve"
	args []string // the words that name it: function, serve
}

// invocations lists every command of the command table and every
// sub-command of those that have some, so that a command added to either
// table is covered.
func invocations(t *testing.T) []invocation {
	t.Helper()
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []invocation
	for _, n := range names {
		out = append(out, invocation{n, []string{n}})
		for _, s := range subcommands[n] {
			out = append(out, invocation{n + " " + s, []string{n, s}})
		}
	}
	for n := range subcommands {
		if _, ok := commands[n]; !ok {
			t.Errorf("subcommands lists %q, which is not a command", n)
		}
	}
	return out
}

func runCapture(args []string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestEveryCommandUsage: for every command and sub-command, -h prints the
// usage on stdout and exits 0, an unknown flag is a usage error naming it,
// on stderr only, and an argument the command does not take is a usage
// error. None of these starts anything (the usage and flag paths return
// before any side effect).
func TestEveryCommandUsage(t *testing.T) {
	invs := invocations(t)
	for _, want := range []string{"function serve", "emulators run", "hook resume", "health check", "bench expiry", "bench trace", "install controller", "node boot", "scenario run", "compute-sim", "teardown"} {
		if !slices.ContainsFunc(invs, func(i invocation) bool { return i.name == want }) {
			t.Errorf("invocations lack %q", want)
		}
	}
	for n := range wrongArgs {
		if !slices.ContainsFunc(invs, func(i invocation) bool { return i.name == n }) {
			t.Errorf("wrongArgs lists %q, which is not a command", n)
		}
	}
	for _, inv := range invs {
		t.Run(inv.name, func(t *testing.T) {
			bad := 2
			if c, ok := usageExit[inv.name]; ok {
				bad = c
			}
			for _, h := range []string{"-h", "-help", "--help"} {
				code, stdout, stderr := runCapture(append(slices.Clone(inv.args), h))
				if code != 0 || !strings.HasPrefix(stdout, "usage:") || stderr != "" {
					t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want 0, the usage on stdout only", inv.name, h, code, head(stdout), stderr)
				}
			}
			code, stdout, stderr := runCapture(append(slices.Clone(inv.args), "--no-such-flag"))
			if code != bad || stdout != "" || !strings.Contains(stderr, "no-such-flag") {
				t.Errorf("%s --no-such-flag: exit %d, stdout %q, stderr %q; want %d, an error naming the flag on stderr only", inv.name, code, head(stdout), head(stderr), bad)
			}
			if len(subcommands[inv.name]) > 0 {
				code, stdout, stderr := runCapture(inv.args)
				if code != bad || stdout != "" || !strings.Contains(stderr, "usage:") {
					t.Errorf("%s with no sub-command: exit %d, stdout %q, stderr %q; want %d and the usage on stderr", inv.name, code, head(stdout), head(stderr), bad)
				}
				code, stdout, stderr = runCapture(append(slices.Clone(inv.args), "no-such-sub-command"))
				if code != bad || stdout != "" || !strings.Contains(stderr, `"no-such-sub-command"`) {
					t.Errorf("%s no-such-sub-command: exit %d, stdout %q, stderr %q; want %d naming it", inv.name, code, head(stdout), head(stderr), bad)
				}
				return
			}
			if inv.args[0] == "hook" {
				t.Logf("%s: its arguments not checked: %s", inv.name, hookTakesArgs)
				return
			}
			extra, stray := []string{"stray-argument"}, `"stray-argument"`
			if w, ok := wrongArgs[inv.name]; ok {
				extra, stray = w.args, ""
			}
			code, stdout, stderr = runCapture(append(slices.Clone(inv.args), extra...))
			if code != bad || stdout != "" || !strings.Contains(stderr, stray) {
				t.Errorf("%s %q: exit %d, stdout %q, stderr %q; want %d, an error (naming %s) on stderr only", inv.name, extra, code, head(stdout), head(stderr), bad, stray)
			}
		})
	}
}

// TestTopLevelUsage: flexslurm -h, --help and help print the usage on
// stdout; no command at all is a usage error.
func TestTopLevelUsage(t *testing.T) {
	for _, h := range []string{"-h", "-help", "--help", "help"} {
		code, stdout, stderr := runCapture([]string{h})
		if code != 0 || !strings.HasPrefix(stdout, "usage: flexslurm COMMAND") || stderr != "" {
			t.Errorf("flexslurm %s: exit %d, stdout %q, stderr %q", h, code, head(stdout), stderr)
		}
	}
	code, stdout, stderr := runCapture(nil)
	if diff := cmp.Diff([]any{2, ""}, []any{code, stdout}); diff != "" || !strings.HasPrefix(stderr, "usage:") {
		t.Errorf("flexslurm: (-want +got) %s; stderr %q", diff, head(stderr))
	}
	code, stdout, stderr = runCapture([]string{"no-such-command"})
	if code != 2 || stdout != "" || !strings.Contains(stderr, `"no-such-command"`) {
		t.Errorf("flexslurm no-such-command: exit %d, stdout %q, stderr %q", code, head(stdout), head(stderr))
	}
}

func head(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// TestFlagLinesAreNotGarbled: the flag package takes a back-quoted word of
// a flag's help as its value's name; every flag line of every -h names a
// plain word there (string, duration, DIR, …), never a path or a command.
func TestFlagLinesAreNotGarbled(t *testing.T) {
	flagLine := regexp.MustCompile(`^  -[A-Za-z0-9-]+( (.*))?$`)
	for _, inv := range invocations(t) {
		_, out, _ := runCapture(append(slices.Clone(inv.args), "-h"))
		for _, l := range strings.Split(out, "\n") {
			m := flagLine.FindStringSubmatch(l)
			if m == nil || m[2] == "" {
				continue
			}
			if !regexp.MustCompile(`^[A-Za-z_]+$`).MatchString(m[2]) {
				t.Errorf("%s -h: flag line %q names its value %q", inv.name, l, m[2])
			}
		}
	}
}
