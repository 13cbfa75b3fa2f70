package teardown_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/teardown"
)

// scripted is a Compute with one MIG of c1 whose only resize request goes
// through the states in states, one per look; it records the mutations.
type scripted struct {
	mu     sync.Mutex
	states []string
	looks  int
	gone   bool
	calls  []string

	migGone, tplGone bool
}

func (s *scripted) state() string {
	if s.gone {
		return ""
	}
	st := s.states[min(s.looks, len(s.states)-1)]
	s.looks++
	return st
}

func (s *scripted) ListInstanceTemplates(context.Context) ([]gce.InstanceTemplate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tplGone {
		return nil, nil
	}
	return []gce.InstanceTemplate{{Name: "fs-c1-a3-1", Path: "projects/p/global/instanceTemplates/fs-c1-a3-1", Labels: naming.Labels("c1", "a3")}}, nil
}

func (s *scripted) ListMIGsAllScopes(context.Context) ([]gce.MIGRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.migGone {
		return nil, nil
	}
	return []gce.MIGRef{{Zone: "z-a", Name: "fs-c1-a3", Templates: []string{"projects/p/global/instanceTemplates/fs-c1-a3-1"}}}, nil
}

func (s *scripted) ListInstancesAllZones(context.Context, map[string]string) ([]gce.Instance, error) {
	return nil, nil
}

func (s *scripted) ListResizeRequests(_ context.Context, zone, mig string) ([]gce.ResizeRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.state(); st != "" {
		return []gce.ResizeRequest{{Zone: zone, MIG: mig, Name: "rr-1", State: st}}, nil
	}
	return nil, nil
}

func (s *scripted) GetResizeRequest(_ context.Context, zone, mig, name string) (gce.ResizeRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "get")
	st := s.state()
	if st == "" {
		return gce.ResizeRequest{}, fmt.Errorf("getting %s: %w", name, gce.ErrNotFound)
	}
	return gce.ResizeRequest{Zone: zone, MIG: mig, Name: name, State: st}, nil
}

func (s *scripted) CancelResizeRequest(_ context.Context, _, _, _, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "cancel")
	s.states = []string{"CANCELLED"}
	s.looks = 0
	return nil
}

func (s *scripted) DeleteResizeRequest(context.Context, string, string, string, string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "delete-rr")
	s.gone = true
	return nil
}

func (s *scripted) DeleteMIG(context.Context, string, string, string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "delete-mig")
	s.migGone = true // with its resize requests
	return nil
}

func (s *scripted) DeleteInstance(context.Context, string, string, string) error {
	return fmt.Errorf("no VM to delete")
}

func (s *scripted) DeleteInstanceTemplate(context.Context, string, string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "delete-template")
	s.tplGone = true
	return nil
}

func (s *scripted) ListResourcePoliciesAllRegions(context.Context) ([]gce.PolicyRef, error) {
	return nil, nil
}

func (s *scripted) DeleteWorkloadPolicy(context.Context, string, string, string) error { return nil }

// TestTeardownWaitsForCreatingRequest: a request still CREATING is looked at
// again until it is ACCEPTED, then cancelled and deleted, before its MIG is.
func TestTeardownWaitsForCreatingRequest(t *testing.T) {
	c := &scripted{states: []string{"CREATING", "CREATING", "CREATING", "ACCEPTED"}}
	rep, err := teardown.Run(context.Background(), c, teardown.Options{
		Cluster: "c1", Poll: time.Millisecond, Wait: 5 * time.Second,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The listing saw CREATING; two more looks see CREATING, then ACCEPTED.
	want := []string{"get", "get", "get", "cancel", "get", "delete-rr", "delete-mig", "delete-template"}
	if diff := cmp.Diff(want, c.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if !rep.Clean() {
		t.Errorf("left: %v", rep.Remaining)
	}
}

// TestTeardownGivesUpOnStuckRequest: a request CREATING beyond Options.Wait
// is reported as not deleted; the MIG is deleted anyway (and the request
// with it, so nothing is left at the end).
func TestTeardownGivesUpOnStuckRequest(t *testing.T) {
	c := &scripted{states: []string{"CREATING"}}
	rep, err := teardown.Run(context.Background(), c, teardown.Options{
		Cluster: "c1", Poll: time.Millisecond, Wait: 30 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, a := range rep.Actions {
		if a.Err != nil {
			failed = append(failed, a.Item.Name+": "+a.Err.Error())
		}
	}
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "rr-1: still CREATING after 30ms") {
		t.Errorf("failed actions %q", failed)
	}
	if got := c.calls[len(c.calls)-2:]; !cmp.Equal(got, []string{"delete-mig", "delete-template"}) {
		t.Errorf("last calls %v, want the MIG and the template deleted", got)
	}
	if !rep.Clean() {
		t.Errorf("left: %v", rep.Remaining)
	}
}
