package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/naming"
)

func TestTeardownCommandUsage(t *testing.T) {
	t.Setenv(config.EnvProject, "")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{name: "help", args: []string{"-h"}, code: teardownClean, stdout: "usage: flexslurm teardown --project P --cluster C"},
		{name: "no project", args: []string{"--cluster", "c1"}, code: teardownUsage, stderr: "no project: pass --project or set GOOGLE_CLOUD_PROJECT"},
		{name: "no cluster", args: []string{"--project", "p"}, code: teardownUsage, stderr: "no cluster: pass --cluster"},
		{name: "bad cluster", args: []string{"--project", "p", "--cluster", "C-1"}, code: teardownUsage, stderr: `--cluster: cluster "C-1": want a cluster id`},
		{name: "stray argument", args: []string{"--project", "p", "--cluster", "c1", "now"}, code: teardownUsage, stderr: `unexpected argument "now"`},
		{name: "bad wait", args: []string{"--project", "p", "--cluster", "c1", "--wait", "0s"}, code: teardownUsage, stderr: "--wait 0s: want a positive duration"},
		{name: "unknown flag", args: []string{"--force"}, code: teardownUsage, stderr: "flag provided but not defined: -force"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runTeardown(context.Background(), tc.args, &out, &errb)
			if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("code %d, stdout %q, stderr %q; want code %d, stdout ∋ %q, stderr ∋ %q",
					code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
	if code := run([]string{"teardown", "--help"}, io.Discard, io.Discard); code != 0 {
		t.Errorf("flexslurm teardown --help: exit %d", code)
	}
}

func TestTeardownCommandAgainstSimulator(t *testing.T) {
	t.Setenv(config.EnvProject, "")
	t.Setenv(config.EnvComputeEndpoint, "")
	sim := computesim.New(computesim.Options{Project: "p", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		clock.NewManual(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)))
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	if _, err := sim.AddInstance("p", "us-central1-a", "c1-a3-0-g1", naming.Labels("c1", "a3")); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.AddInstance("p", "us-central1-a", "c2-a3-0-g1", naming.Labels("c2", "a3")); err != nil {
		t.Fatal(err)
	}
	sim1 := []option.ClientOption{option.WithEndpoint(srv.URL), option.WithoutAuthentication()}
	teardownRun := func(args ...string) (int, string) {
		var out bytes.Buffer
		code := runTeardown(context.Background(), append([]string{"--project", "p", "--cluster", "c1"}, args...), &out, io.Discard, sim1...)
		return code, out.String()
	}
	code, out := teardownRun("--dry-run")
	if code != teardownClean || !strings.Contains(out, "VM zones/us-central1-a/c1-a3-0-g1 (RUNNING): delete") || len(sim.Instances()) != 2 {
		t.Errorf("dry run: exit %d, %d VMs left\n%s", code, len(sim.Instances()), out)
	}
	code, out = teardownRun()
	if code != teardownClean || !strings.Contains(out, "VM zones/us-central1-a/c1-a3-0-g1: deleted") {
		t.Errorf("teardown: exit %d\n%s", code, out)
	}
	if in := sim.Instances(); len(in) != 1 || in[0].Name != "c2-a3-0-g1" {
		t.Errorf("VMs left: %+v", in)
	}

	// Compute unreachable: exit 3.
	srv.Close()
	if code, _ := teardownRun("--dry-run"); code != teardownFailed {
		t.Errorf("Compute unreachable: exit %d, want %d", code, teardownFailed)
	}
}
