package local

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// The timeline prints each Slurm decision once per node and VM, whatever
// its command id (a new attempt's, or delivered at least once),
// and every time in its one format.
func TestTimelineOnceAndOneTimeFormat(t *testing.T) {
	var out bytes.Buffer
	tl := NewTimeline(&out)
	origin := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tl.Origin = origin
	tl.Clock = clock.NewScaled(origin, 1e-9) // stays at the origin
	down := func(id, vm string) event.SlurmCommand {
		return event.SlurmCommand{ID: id, Command: event.SlurmPowerDownForce, Nodes: []string{"c-a3u-1"},
			Reason: "flexslurm: Slurm thinks the node is up but it has no VM " + vm}
	}
	for _, c := range []event.SlurmCommand{down("a", "c-a3u-1-g1"), down("b", "c-a3u-1-g1"), down("a", "c-a3u-1-g1"),
		down("c", "c-a3u-1-g1"), down("d", "c-a3u-1-g2")} {
		tl.command(c)
	}
	tl.Say("VM c-a3u-0-g1 is running until 2026-12-08T03:15:00Z, created 2026-11-30T23:00:00.5Z")
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"+0d 00:00:00  slurm: power_down_force c-a3u-1 (flexslurm: Slurm thinks the node is up but it has no VM c-a3u-1-g1)",
		"+0d 00:00:00  slurm: power_down_force c-a3u-1 (flexslurm: Slurm thinks the node is up but it has no VM c-a3u-1-g2)",
		"+0d 00:00:00  VM c-a3u-0-g1 is running until +7d 03:15:00, created -0d 00:59:59",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	if n := len(tl.Commands()); n != 5 {
		t.Errorf("Commands() holds %d commands, want every one received (5)", n)
	}
	// Two decisions (one per VM); "b" and "c" repeat the first under new
	// ids, the second "a" is a redelivery.
	if d, r := tl.CommandCounts(); d != 2 || r != 2 {
		t.Errorf("CommandCounts() = %d decisions, %d resent; want 2, 2", d, r)
	}
}

// TestTimelineWatchStatePrintsJobEndsInOrder: a job's completion is
// printed (the pool's read holds active jobs only), and the changes of one
// read are printed in the order their records were written, stamped to the
// second with the time each was written.
func TestTimelineWatchStatePrintsJobEndsInOrder(t *testing.T) {
	origin := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	st := store.NewMemory(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	write := func(f func(*model.State)) {
		t.Helper()
		if err := st.Update(ctx, store.Scope{Cluster: "c", AllPools: true, Jobs: []string{"7", "8"}}, func(s *model.State) error {
			if s.Cluster == nil {
				s.Cluster = &model.Cluster{ID: "c", Spec: []byte(`{}`), SpecSHA256: "x", Project: "p"}
				s.Pools["a3u"] = &model.Pool{ID: "a3u", MaxNodes: 2}
			}
			f(s)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	write(func(s *model.State) {
		s.Jobs["7"] = &model.Job{ID: "7", Pool: "a3u", State: model.JobRunning, UpdatedAt: origin.Add(90 * time.Second)}
		s.Jobs["8"] = &model.Job{ID: "8", Pool: "a3u", State: model.JobPending, UpdatedAt: origin.Add(30 * time.Second)}
	})
	var out syncBuffer
	tl := NewTimeline(&out)
	tl.Origin, tl.Clock = origin, clock.NewScaled(origin, 1e-9)
	done := make(chan struct{})
	go func() { defer close(done); tl.WatchState(ctx, st, "c", time.Millisecond) }()
	waitFor := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), what); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the timeline never printed %q:\n%s", what, out.String())
			}
		}
	}
	waitFor("job  7")
	write(func(s *model.State) {
		s.Jobs["7"].State, s.Jobs["7"].UpdatedAt = model.JobFinished, origin.Add(125*time.Second)
	})
	waitFor("finished")
	cancel()
	<-done
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(got) != 3 || !strings.HasPrefix(got[0], "+0d 00:00:30  job  8") || !strings.HasPrefix(got[1], "+0d 00:01:30  job  7") ||
		!strings.HasPrefix(got[2], "+0d 00:02:05  job  7") || !strings.Contains(got[2], string(model.JobFinished)) {
		t.Errorf("timeline:\n%s", out.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestTimelineHoldPrintsInEventOrder: with Hold, lines seen out of order
// (a watcher that polls later sees an older event) are printed in the
// order their events happened, arrival order breaking ties; a step
// prints everything held first. Without Hold, lines print at once.
func TestTimelineHoldPrintsInEventOrder(t *testing.T) {
	var out bytes.Buffer
	tl := NewTimeline(&out)
	origin := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tl.Origin, tl.Clock = origin, clock.NewScaled(origin.Add(time.Hour), 1e-9)
	tl.Hold = time.Hour
	tl.printAt(origin.Add(20*time.Minute), "VM b RUNNING")
	tl.printAt(origin.Add(5*time.Minute), "request a ACCEPTED")
	tl.printAt(origin.Add(20*time.Minute), "node b running")
	if out.Len() != 0 {
		t.Fatalf("printed before the hold: %q", out.String())
	}
	tl.Step(2, "next")
	want := "+0d 00:05:00  request a ACCEPTED\n+0d 00:20:00  VM b RUNNING\n+0d 00:20:00  node b running\n\n── 2. next\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	tl.Hold = 0
	tl.printAt(origin.Add(30*time.Minute), "at once")
	if out.String() != "+0d 00:30:00  at once\n" {
		t.Errorf("without a hold: %q", out.String())
	}
}
