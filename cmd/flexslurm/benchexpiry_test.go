package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBenchExpiryCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"bench", "expiry", "--seed", "4", "--nodes", "2", "--warmup", "3h", "--week", "9h", "--durations", "3h", "--lead", "45m", "--out", dir, "-v"}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"static availability", "jobs killed by expiry", "overlap (node-h)", "make-before-break (lead 45m)",
		"recreate-after-termination", "recreate, no EOL reservation", "episodes below min", "3 runs in"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "expiry-timeline-3h.svg"))
	if err != nil || !bytes.HasPrefix(svg, []byte("<?xml")) {
		t.Errorf("timeline: %v (%d bytes)", err, len(svg))
	}

	out.Reset()
	if code := run([]string{"bench", "expiry", "--nodes", "2", "--warmup", "1h", "--week", "2h", "--durations", "1h", "--markdown", "--format", "png", "--out", dir}, &out, &errb); code != 0 {
		t.Fatalf("markdown/png: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "| static availability") {
		t.Errorf("--markdown did not print a Markdown table:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "expiry-timeline-1h.png")); err != nil {
		t.Error(err)
	}

	for _, bad := range [][]string{
		{"bench"},
		{"bench", "nope"},
		{"bench", "expiry", "--format", "gif"},
		{"bench", "expiry", "--durations", "5m"},
		{"bench", "expiry", "extra"},
		{"bench", "expiry", "--lead", "-1m"},
		{"bench", "expiry", "--seeds", "3-1"},
		{"bench", "expiry", "--seeds", "1,x"},
		{"bench", "expiry", "--seeds", "1-3,2"},
		{"bench", "expiry", "--seeds", "1-2", "--seed", "4"},
	} {
		if code := run(bad, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

// --seeds prints the first seed's table, then the spread over the seeds.
func TestBenchExpirySeeds(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"bench", "expiry", "--seeds", "4-5", "--nodes", "2", "--warmup", "3h", "--week", "6h", "--durations", "3h", "--out", dir}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	text := out.String()
	for _, want := range []string{"; seed 4\n", "max run duration 3h, 2 seeds (4–5): min / median / max", "extra VM time vs recreate-after-termination", "; seeds 4–5\n", "6 runs in"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "; seed 5\n") {
		t.Errorf("output has a table of the second seed:\n%s", text)
	}
}

func TestSeedList(t *testing.T) {
	var l seedList
	if err := l.Set("1-3, 7,9-10"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(seedList{1, 2, 3, 7, 9, 10}, l); diff != "" {
		t.Errorf("seeds (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "a", "3-1", "1-", "1,1", "0-5000"} {
		if err := l.Set(bad); err == nil {
			t.Errorf("Set(%q): no error", bad)
		}
	}
}

func TestDurationName(t *testing.T) {
	for d, want := range map[string]string{"168h": "7d", "24h": "1d", "12h": "12h", "90m": "90m", "601s": "601s"} {
		if got := durationName(mustDuration(t, d)); got != want {
			t.Errorf("durationName(%s) = %s, want %s", d, got, want)
		}
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBenchExpirySeedsVerbose: with -v and --seeds, make-before-break's
// metrics are printed seed by seed as well; without -v they are not.
func TestBenchExpirySeedsVerbose(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		var out, errb bytes.Buffer
		args := []string{"bench", "expiry", "--seeds", "4-5", "--nodes", "2", "--warmup", "3h", "--week", "6h", "--durations", "3h", "--out", t.TempDir()}
		if verbose {
			args = append(args, "-v")
		}
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
		}
		text := out.String()
		const head = "make-before-break, max run duration 3h, per seed:"
		if got := strings.Contains(text, head); got != verbose {
			t.Errorf("-v %v: output has the per-seed table: %v, want %v:\n%s", verbose, got, verbose, text)
		}
		if verbose && !regexp.MustCompile(`(?m)^ *5 +\d+\.\d\d% `).MatchString(text) {
			t.Errorf("per-seed table lacks seed 5's row:\n%s", text)
		}
	}
}
