package apply_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
)

// skeleton is a Function over job.pending headers whose Route records
// what it was given and returns the steps steps builds.
type skeleton struct {
	routed []string // event ids Route saw
	steps  func(ev *apply.Event) []apply.Step
}

func (s *skeleton) function() apply.Function[event.Header] {
	return apply.Function[event.Header]{
		Flow: "flex.test", Entry: config.EntryScaleUp, Peek: apply.PeekHeader,
		Route: func(_ context.Context, _ *apply.Runner, ev *apply.Event, hdr event.Header) ([]apply.Step, error) {
			s.routed = append(s.routed, ev.Msg.ID)
			if hdr.Type != event.TypeJobPending {
				return nil, fmt.Errorf("%w: Route given type %q", event.ErrMalformed, hdr.Type)
			}
			return s.steps(ev), nil
		},
	}
}

func jobPending(t *testing.T, cluster string) []byte {
	t.Helper()
	b, err := json.Marshal(event.Header{Version: event.SchemaVersion, Type: event.TypeJobPending, Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHandlerChecksOriginBeforeRoute: a payload type is routed only when
// it came from a topic that may carry it to the entry point: a job report
// on the health-failure topic is acknowledged (nil) without reaching
// Route, the same report on job-pending reaches it.
func TestHandlerChecksOriginBeforeRoute(t *testing.T) {
	h, _, c, ctx := setup(t)
	s := &skeleton{steps: func(*apply.Event) []apply.Step { return nil }}
	hd := apply.NewHandler(h.Runner, s.function())
	wrong := functest.Eventarc(t, config.TopicHealthFailure, "m-wrong", jobPending(t, c.ID), nil, time.Now())
	if err := hd.Handle(ctx, wrong); err != nil {
		t.Fatalf("refused event: Handle = %v, want nil (acknowledged)", err)
	}
	right := functest.Eventarc(t, config.TopicJobs, "m-right", jobPending(t, c.ID), nil, time.Now())
	if err := hd.Handle(ctx, right); err != nil {
		t.Fatalf("Handle = %v", err)
	}
	if !slices.Equal(s.routed, []string{"m-right"}) {
		t.Errorf("Route saw %v, want only m-right", s.routed)
	}
}

// TestHandlerRunsEveryStep: one step's failure does not stop the others;
// the event is then redelivered (the transient error is returned), and
// each step's input is processed with the flow and the message's id
// filled in.
func TestHandlerRunsEveryStep(t *testing.T) {
	h, _, c, ctx := setup(t)
	var decided []string
	step := func(name string, fail bool) apply.Step {
		return func(context.Context) (apply.Input, error) {
			if fail {
				return apply.Input{}, fmt.Errorf("%w: step %s could not read", apply.ErrTransient, name)
			}
			return apply.Input{Scope: store.Scope{Cluster: c.ID, PoolRecords: []string{"a3u"}},
				Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
					decided = append(decided, name)
					return nil, nil
				}}, nil
		}
	}
	s := &skeleton{steps: func(ev *apply.Event) []apply.Step {
		// Two steps of one event need ids of their own.
		return []apply.Step{
			func(ctx context.Context) (apply.Input, error) {
				in, err := step("first", false)(ctx)
				in.EventID = ev.Msg.ID + "/first"
				return in, err
			},
			step("second", true),
			step("third", false),
		}
	}}
	e := functest.Eventarc(t, config.TopicJobs, "m-steps", jobPending(t, c.ID), nil, time.Now())
	err := apply.NewHandler(h.Runner, s.function()).Handle(ctx, e)
	if !errors.Is(err, apply.ErrTransient) {
		t.Fatalf("Handle = %v, want the failed step's transient error (redelivery)", err)
	}
	if !slices.Equal(decided, []string{"first", "third"}) {
		t.Errorf("decided %v, want first and third (the second failed to build)", decided)
	}
}

// TestHandlerWiderScope: a step whose narrow decision returns
// plan.ErrWiderScope writes nothing, and its Wider input is processed
// under the same event id (not taken for a redelivery): its action is
// recorded. A narrow decision that succeeds never builds the wider input.
func TestHandlerWiderScope(t *testing.T) {
	h, _, c, ctx := setup(t)
	var calls []string
	put := func(st *model.State, phase model.Phase) []plan.Action {
		n := *st.Nodes["flexvm-a3u-0"]
		n.Phase = phase
		return []plan.Action{plan.PutNode{Node: n, Reason: "test"}}
	}
	input := func(needWider bool) apply.Input {
		return apply.Input{
			Scope: store.Scope{Cluster: c.ID, Nodes: []string{"flexvm-a3u-0"}},
			Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
				calls = append(calls, "narrow")
				if needWider {
					return put(st, model.PhaseDeleting), fmt.Errorf("%w: test", plan.ErrWiderScope)
				}
				return nil, nil
			},
			Wider: func(context.Context) (apply.Input, error) {
				calls = append(calls, "wider built")
				return apply.Input{Scope: store.Scope{Cluster: c.ID, AllPools: true},
					Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
						calls = append(calls, "wide")
						return put(st, model.PhaseRunning), nil
					}}, nil
			},
		}
	}
	for _, tc := range []struct {
		id        string
		needWider bool
		want      []string
		phase     model.Phase
	}{
		{"m-narrow", false, []string{"narrow"}, model.PhaseRequested},
		{"m-wide", true, []string{"narrow", "wider built", "wide"}, model.PhaseRunning},
	} {
		calls = nil
		s := &skeleton{steps: func(*apply.Event) []apply.Step { return apply.Steps(input(tc.needWider)) }}
		e := functest.Eventarc(t, config.TopicJobs, tc.id, jobPending(t, c.ID), nil, time.Now())
		if err := apply.NewHandler(h.Runner, s.function()).Handle(ctx, e); err != nil {
			t.Fatalf("%s: Handle = %v", tc.id, err)
		}
		if !slices.Equal(calls, tc.want) {
			t.Errorf("%s: calls %v, want %v", tc.id, calls, tc.want)
		}
		st, err := h.Store.Read(ctx, store.Scope{Cluster: c.ID, AllPools: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Nodes["flexvm-a3u-0"].Phase; got != tc.phase {
			t.Errorf("%s: node is %s, want %s (the narrow decision must write nothing)", tc.id, got, tc.phase)
		}
	}
}

// TestHandlerDecisionLatencyFromArrival: the decision latency logged for
// an event's step is measured from the event's arrival at the function
// (Input.Arrived), and names the flow and the cluster (the labels of the
// log-based metric flexslurm_decision_latency_seconds).
func TestHandlerDecisionLatencyFromArrival(t *testing.T) {
	h, _, c, ctx := setup(t)
	var buf bytes.Buffer
	d := h.Runner.Deps()
	d.Log = logx.New(&buf, slog.LevelInfo)
	r := apply.New(d)
	arrived := time.Now().Add(-time.Hour)
	if _, err := r.Process(ctx, apply.Input{Flow: "flex.test", EventID: "m-late", Arrived: arrived,
		Scope: store.Scope{Cluster: c.ID, PoolRecords: []string{"a3u"}}, Decide: decide()}); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	for _, line := range bytes.Split(buf.Bytes(), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["sample"] == apply.SampleDecisionLatency {
			got = m
		}
	}
	if got == nil {
		t.Fatalf("no %s line in:\n%s", apply.SampleDecisionLatency, buf.String())
	}
	if v, _ := got["value"].(float64); v < 3600 || got["flow"] != "flex.test" || got["cluster"] != c.ID {
		t.Errorf("logged %v, want at least 3600 s from the arrival an hour ago, flow flex.test, cluster %s", got, c.ID)
	}
}
