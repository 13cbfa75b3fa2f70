package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// memoryOpener returns an opener over an in-memory store holding cluster
// c1 with one pool, and records the flags it was given.
func memoryOpener(t *testing.T, got *statusFlags) statusOpener {
	t.Helper()
	s := store.NewMemory(nil)
	err := s.Update(context.Background(), store.Scope{Cluster: "c1", AllPools: true}, func(st *model.State) error {
		st.Cluster = &model.Cluster{ID: "c1", SpecVersion: 2}
		st.Pools["gpu"] = &model.Pool{ID: "gpu", Zone: "z", MinNodes: 1, MaxNodes: 2}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, f statusFlags) (*statusBackends, error) {
		*got = f
		return &statusBackends{Source: s, Close: func() {}}, nil
	}
}

func TestStatusCommand(t *testing.T) {
	t.Setenv(config.EnvProject, "")
	t.Setenv(config.EnvClock, "")
	t.Setenv(config.EnvFirestoreDatabase, "")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "no project", code: 2, stderr: "no project"},
		{name: "bad clock", args: []string{"--project", "p", "--clock", "x"}, code: 2, stderr: "--clock"},
		{name: "bad period", args: []string{"--project", "p", "--watch", "--every", "0s"}, code: 2, stderr: "--every"},
		{name: "once", args: []string{"--project", "p"}, code: 0, stdout: "pool gpu · zone z · static minimum 1 · maximum 2 (up to 1 dynamic)"},
		{name: "one cluster", args: []string{"--project", "p", "--cluster", "c9"}, code: 0, stdout: "cluster c9 · no spec applied"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f statusFlags
			var stdout, stderr strings.Builder
			code := runStatus(context.Background(), tc.args, &stdout, &stderr, memoryOpener(t, &f))
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("exit %d (want %d)\nstdout (want %q):\n%s\nstderr (want %q):\n%s",
					code, tc.code, tc.stdout, stdout.String(), tc.stderr, stderr.String())
			}
		})
	}
}

// TestStatusClock: --clock makes times relative to the scaled clock, as the
// local system writes them.
func TestStatusClock(t *testing.T) {
	t.Setenv(config.EnvProject, "p")
	sc := clock.NewScaled(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), 1)
	var f statusFlags
	var stdout, stderr strings.Builder
	if code := runStatus(context.Background(), []string{"--clock", sc.String()}, &stdout, &stderr, memoryOpener(t, &f)); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "flexslurm status at 2030-01-02T03:04:0") {
		t.Errorf("not on the scaled clock:\n%s", stdout.String())
	}
	if f.project != "p" {
		t.Errorf("project = %q, want p from $%s", f.project, config.EnvProject)
	}
}

// TestStatusWatch: --watch redraws until the context ends, then exits 0.
func TestStatusWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var f statusFlags
	var stdout, stderr strings.Builder
	code := runStatus(ctx, []string{"--project", "p", "--watch", "--every", "20ms"}, &stdout, &stderr, memoryOpener(t, &f))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if n := strings.Count(stdout.String(), "flexslurm status at"); n < 3 {
		t.Errorf("%d frames in 300ms at 20ms, want several", n)
	}
	if strings.Contains(stdout.String(), "\x1b[") {
		t.Error("clears the screen on a non-terminal")
	}
}

func TestStatusOpenError(t *testing.T) {
	var stdout, stderr strings.Builder
	open := func(context.Context, statusFlags) (*statusBackends, error) { return nil, errors.New("no database") }
	if code := runStatus(context.Background(), []string{"--project", "p"}, &stdout, &stderr, open); code != 1 || !strings.Contains(stderr.String(), "no database") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
