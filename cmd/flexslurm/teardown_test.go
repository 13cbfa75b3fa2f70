package main

import (
	"bytes"
	"context"
	"errors"
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
	"github.com/flexslurm/flexslurm/shared/teardown"
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

// fixedRecords is a teardown.Records with a fixed answer.
type fixedRecords []string

func (f fixedRecords) Clusters(context.Context) ([]string, error) { return f, nil }

// TestTeardownCommandUnknownCluster: `flexslurm teardown` of a cluster id
// with nothing in Compute and no record (a mistyped --cluster) says so and
// exits 4, dry run or not, and when the records cannot be read; a recorded
// cluster with nothing left exits 0; Firestore is not opened when Compute
// holds something of the cluster's.
func TestTeardownCommandUnknownCluster(t *testing.T) {
	t.Setenv(config.EnvProject, "")
	t.Setenv(config.EnvComputeEndpoint, "")
	sim := computesim.New(computesim.Options{Project: "p", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		clock.NewManual(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)))
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	if _, err := sim.AddInstance("p", "us-central1-a", "flexvm-a3-0-g1", naming.Labels("flexvm", "a3")); err != nil {
		t.Fatal(err)
	}
	opened := 0
	var answer teardown.Records = fixedRecords{"flexvm", "other"}
	var openErr error
	restore := openTeardownRecords
	t.Cleanup(func() { openTeardownRecords = restore })
	openTeardownRecords = func(_ context.Context, project, database string, _ ...option.ClientOption) (teardown.Records, func(), error) {
		opened++
		if project != "p" || database != "db1" {
			t.Errorf("records opened for project %q database %q, want p and db1", project, database)
		}
		return answer, func() {}, openErr
	}
	run := func(cluster string, args ...string) (int, string) {
		var out bytes.Buffer
		code := runTeardown(context.Background(), append([]string{"--project", "p", "--database", "db1", "--cluster", cluster}, args...), &out, io.Discard,
			option.WithEndpoint(srv.URL), option.WithoutAuthentication())
		return code, out.String()
	}
	for _, dry := range [][]string{{"--dry-run"}, nil} {
		code, out := run("flexvn", dry...)
		if code != teardownUnknown || !strings.Contains(out, "Cluster flexvn is unknown") || !strings.Contains(out, "clusters it holds: flexvm, other") ||
			strings.Contains(out, "Nothing of cluster flexvn") {
			t.Errorf("mistyped cluster %v: exit %d, want %d\n%s", dry, code, teardownUnknown, out)
		}
	}
	if opened != 2 {
		t.Errorf("records opened %d times, want 2", opened)
	}
	// A cluster with a VM: Firestore is not opened.
	opened = 0
	if code, out := run("flexvm", "--dry-run"); code != teardownClean || opened != 0 {
		t.Errorf("cluster with a VM: exit %d, records opened %d times\n%s", code, opened, out)
	}
	if code, out := run("flexvm"); code != teardownClean || !strings.Contains(out, "VM zones/us-central1-a/flexvm-a3-0-g1: deleted") {
		t.Errorf("teardown: exit %d\n%s", code, out)
	}
	// Torn down, its record kept: nothing is left, exit 0.
	if code, out := run("flexvm"); code != teardownClean || !strings.Contains(out, "Nothing of cluster flexvm is left in Compute Engine.") {
		t.Errorf("second teardown of a recorded cluster: exit %d\n%s", code, out)
	}
	// The records cannot be read: unknown too.
	answer, openErr = nil, errors.New("no such database")
	if code, out := run("flexvn", "--dry-run"); code != teardownUnknown || !strings.Contains(out, "could not be read") || !strings.Contains(out, "no such database") {
		t.Errorf("records unreadable: exit %d\n%s", code, out)
	}
}
