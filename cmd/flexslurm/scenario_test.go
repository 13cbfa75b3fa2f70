package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScenarioCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"scenario", "run", "-v", "../../scenarios/cancel-one-of-two-requests.yaml"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d for a passing scenario\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "PASS") || !strings.Contains(out.String(), "ok: ") {
		t.Errorf("output lacks the assertions and summary:\n%s", out.String())
	}

	failing := filepath.Join(t.TempDir(), "failing.yaml")
	spec, err := filepath.Abs("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	text := "name: wrong on purpose\ncluster: " + spec + "\ninitial: {apply: true}\nsteps:\n  - at: 1h\n    assert:\n      - vms: {pool: a3u, count: 7}\n"
	if err := os.WriteFile(failing, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"scenario", "run", failing}, &out, &errb); code != 1 {
		t.Errorf("exit %d for a failing scenario, want 1\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "FAIL") || !strings.Contains(out.String(), "expected: 7") {
		t.Errorf("output does not show the failed assertion:\n%s", out.String())
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\ncluster: "+spec+"\nstepz: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"scenario", "run", bad}, &out, &errb); code != 1 || !strings.Contains(out.String(), `unknown key "stepz"`) {
		t.Errorf("exit %d for an invalid file, want 1 and the unknown key:\n%s", code, out.String())
	}
	if code := run([]string{"scenario"}, &out, &errb); code != 2 {
		t.Errorf("exit %d without a subcommand, want 2", code)
	}
}

func TestChaosCommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"chaos", "--seeds", "2", "--seed", "3", "--horizon", "3h", "--policy", "recreate_after_termination=true"}, &out, &errb)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "chaos: 2 seeds from 3") || !strings.Contains(out.String(), "seeds/s") {
		t.Errorf("no summary line:\n%s", out.String())
	}
	if code := run([]string{"chaos", "--policy", "no_such_knob=1"}, &out, &errb); code != 2 {
		t.Errorf("exit %d for an unknown knob, want 2", code)
	}
}
