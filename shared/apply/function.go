package apply

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// Function is one event-driven function's part of the skeleton every
// function (ScaleUp, Expiry, Repair, Reconcile) runs an event through
// (Handler.Handle), in this order:
//
//  1. decode the Pub/Sub CloudEvent (Envelope): a malformed or too old
//     one is acknowledged;
//  2. Peek at the payload and check that the topic it came from may carry
//     its type for Entry (CheckOrigin): a refused one is acknowledged;
//  3. Route: decode the payload, prove its sender and name the decisions it
//     asks for, each a Step that builds one Input (scope and decision);
//  4. run each step: Process decides and records in one transaction and
//     then acts; a decision that needs a wider scope (plan.ErrWiderScope)
//     is run again over the step's Wider input;
//  5. hand the outcome to Outcome: acknowledge what can never succeed,
//     return what is to be redelivered.
//
// The configuration and clients are the Runner's (Entry). P is what Peek
// reads of a payload for Route: a header, or the whole decoded payload
// when its type is known only once decoded.
type Function[P any] struct {
	// Flow names the function in logs and metrics ("flex.scaleup").
	Flow string
	// Entry is the entry point (config.EntryScaleUp, …) whose topics
	// CheckOrigin holds the payload's type to.
	Entry string
	// Peek reads what the origin check needs of a payload (PeekHeader, or
	// a fixed type for payloads without a header). An error is handed to
	// Outcome.
	Peek func(data []byte) (Peeked[P], error)
	// Route decodes the payload of an event whose origin was checked,
	// proves its sender and returns the steps it asks for (none: nothing
	// to do). It may add to ev.Log what every later line should carry.
	Route func(ctx context.Context, r *Runner, ev *Event, p P) ([]Step, error)
}

// Peeked is what Function.Peek read of a payload.
type Peeked[P any] struct {
	Payload P      // what Route reads further
	Type    string // the payload type the topic must allow (event.Type…)
	Attrs   []any  // log attributes of every later line (cluster, type)
}

// PeekHeader is the Peek of payloads that carry an event.Header: its type,
// and its cluster and type as log attributes.
func PeekHeader(data []byte) (Peeked[event.Header], error) {
	hdr, err := event.PeekHeader(data)
	if err != nil {
		return Peeked[event.Header]{}, err
	}
	return Peeked[event.Header]{Payload: hdr, Type: hdr.Type, Attrs: []any{"cluster", hdr.Cluster, "type", hdr.Type}}, nil
}

// Event is one message whose origin was checked, as Route sees it.
type Event struct {
	Msg *event.Message
	// Log carries the flow, the event and message ids and what Peek and
	// Route added; Outcome logs with it.
	Log *slog.Logger
	// Arrived is when the function received the event (wall clock): the
	// decision latency of its steps is measured from it.
	Arrived time.Time
}

// Step builds one decision an event asks for. It may read or observe
// first (a reconcile pass observes Compute); an error ends the step and
// is joined with those of the event's other steps, which still run.
type Step func(ctx context.Context) (Input, error)

// Steps returns a step for each input, which needs nothing read first.
func Steps(ins ...Input) []Step {
	out := make([]Step, len(ins))
	for i, in := range ins {
		out[i] = func(context.Context) (Input, error) { return in, nil }
	}
	return out
}

// EventHandler handles one CloudEvent: a Handler of any Function.
type EventHandler interface {
	Handle(ctx context.Context, e cloudevents.Event) error
}

// Handler runs a Function's events over a runner. It is safe for
// concurrent use.
type Handler[P any] struct {
	r *Runner
	f Function[P]
}

// NewHandler returns the handler of f over r.
func NewHandler[P any](r *Runner, f Function[P]) *Handler[P] {
	return &Handler[P]{r: r, f: f}
}

// Entry returns f's deployed entry point: for each event it gets the
// process's runner (shared/wire builds it from the configuration once per
// instance; a failed build is returned, so the event is redelivered) and
// handles the event over it.
func Entry[P any](runner func(context.Context) (*Runner, error), f Function[P]) func(context.Context, cloudevents.Event) error {
	return func(ctx context.Context, e cloudevents.Event) error {
		r, err := runner(ctx)
		if err != nil {
			return err
		}
		return NewHandler(r, f).Handle(ctx, e)
	}
}

// Handle processes one CloudEvent. It returns nil when the event is done
// or can never succeed (acknowledged), and an error when it is to be
// redelivered.
func (h *Handler[P]) Handle(ctx context.Context, e cloudevents.Event) error {
	arrived := time.Now()
	msg, log, err := h.r.Envelope(ctx, h.f.Flow, e)
	if err != nil {
		return nil
	}
	peek, err := h.f.Peek(msg.Data)
	if err != nil {
		return Outcome(log, err)
	}
	if len(peek.Attrs) > 0 {
		log = logx.Attrs(log, peek.Attrs...)
	}
	// A type is accepted only from the topics that may carry it to this
	// entry point (shared/event origin.go).
	if err := h.r.CheckOrigin(msg, h.f.Entry, peek.Type); err != nil {
		return Outcome(log, err)
	}
	ev := &Event{Msg: msg, Log: log, Arrived: arrived}
	steps, err := h.f.Route(ctx, h.r, ev, peek.Payload)
	if err != nil {
		return Outcome(ev.Log, err)
	}
	var errs []error
	for _, s := range steps {
		if err := h.run(ctx, ev, s); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 1 {
		return Outcome(ev.Log, errs[0])
	}
	return Outcome(ev.Log, errors.Join(errs...))
}

// run builds and processes one step, and its wider input when its
// decision asks for one. A failure to process names the step's cluster.
func (h *Handler[P]) run(ctx context.Context, ev *Event, s Step) error {
	in, err := s(ctx)
	if err != nil {
		return err
	}
	in = h.complete(ev, in)
	if in.Wider == nil {
		return h.process(ctx, in)
	}
	// The narrow decision writes nothing when it needs the wider scope:
	// only the last attempt of its transaction says whether it did.
	var wider error
	decide := in.Decide
	in.Decide = func(st *model.State, now time.Time) ([]plan.Action, error) {
		acts, err := decide(st, now)
		wider = nil
		if errors.Is(err, plan.ErrWiderScope) {
			wider = err
		}
		return acts, err
	}
	if err := h.process(ctx, in); wider == nil {
		return err
	}
	ev.Log.Info("event decided from a wider scope", "reason", wider.Error())
	wide, err := in.Wider(ctx)
	if err != nil {
		return err
	}
	return h.process(ctx, h.complete(ev, wide))
}

func (h *Handler[P]) process(ctx context.Context, in Input) error {
	if _, err := h.r.Process(ctx, in); err != nil {
		return fmt.Errorf("cluster %s: %w", in.Scope.Cluster, err)
	}
	return nil
}

// complete fills what a step left to the skeleton: the flow, the event
// id (the message's) and the event's arrival.
func (h *Handler[P]) complete(ev *Event, in Input) Input {
	if in.Flow == "" {
		in.Flow = h.f.Flow
	}
	if in.EventID == "" {
		in.EventID = ev.Msg.ID
	}
	if in.Arrived.IsZero() {
		in.Arrived = ev.Arrived
	}
	return in
}
