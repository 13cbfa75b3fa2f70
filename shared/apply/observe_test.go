package apply_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/model"
)

// slowLists is a Compute whose every list call takes an hour of the clock.
type slowLists struct {
	apply.Compute
	clk *clock.Manual
	mig string
}

func (c slowLists) ListResizeRequests(context.Context, string, string) ([]gce.ResizeRequest, error) {
	c.clk.Advance(time.Hour)
	return nil, nil
}

func (c slowLists) ListInstances(context.Context, string, map[string]string) ([]gce.Instance, error) {
	c.clk.Advance(time.Hour)
	return nil, nil
}

func (c slowLists) ListMIGs(_ context.Context, zone, _ string) ([]gce.MIG, error) {
	c.clk.Advance(time.Hour)
	return []gce.MIG{{Zone: zone, Name: c.mig}}, nil
}

// TestObserveStampsEachPoolBeforeItsLists: what a pool's lists show is
// true as of the time before its first list call, not after the last.
func TestObserveStampsEachPoolBeforeItsLists(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewManual(start)
	r := apply.New(apply.Deps{Clock: clk, Compute: slowLists{clk: clk, mig: "fs-flexvm-a3u"},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	st := model.NewState()
	st.Pools["a3u"] = &model.Pool{ID: "a3u", Zone: "us-central1-a", MIG: "fs-flexvm-a3u", Ready: true}
	st.Pools["b"] = &model.Pool{ID: "b", Zone: "us-central1-b", MIG: "fs-flexvm-b", Ready: true}
	obs := r.Observe(context.Background(), "flexvm", st)
	a, b := obs.Pools["a3u"], obs.Pools["b"]
	if !a.Listed || !a.MIGExists || !a.ListedAt.Equal(start) {
		t.Errorf("pool a3u: listed %v, MIG found %v, at %v; want listed, found, at %v", a.Listed, a.MIGExists, a.ListedAt, start)
	}
	if want := start.Add(3 * time.Hour); !b.Listed || b.MIGExists || !b.ListedAt.Equal(want) {
		t.Errorf("pool b: listed %v, MIG found %v, at %v; want listed, not found, at %v", b.Listed, b.MIGExists, b.ListedAt, want)
	}
}
