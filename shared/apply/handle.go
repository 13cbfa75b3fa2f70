package apply

import (
	"context"
	"errors"
	"log/slog"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// Envelope decodes a Pub/Sub CloudEvent and returns the message and a
// logger carrying the event's id, flow and trace. A malformed envelope is
// logged; the caller returns nil so it is acknowledged.
func (r *Runner) Envelope(ctx context.Context, flow string, e cloudevents.Event) (*event.Message, *slog.Logger, error) {
	log := logx.Attrs(r.d.Log, "flow", flow, "event_id", e.ID())
	if tp, ok := e.Extensions()["traceparent"].(string); ok && !logx.Discards(log) {
		if a := logx.Trace(r.d.Project, tp); a.Key != "" {
			log = log.With(a)
		}
	}
	msg, err := event.FromCloudEvent(e)
	if err != nil {
		log.Error("malformed event acknowledged without action", "error", err.Error())
		return nil, log, err
	}
	log = logx.Attrs(log, "message_id", msg.ID)
	// The age is measured on the wall clock, as Pub/Sub stamps publish
	// times, whatever clock the decisions run on (a scaled clock locally).
	now := time.Now()
	if tooOld, maxAge := plan.EventTooOld(msg.PublishTime, now, r.d.Policy); tooOld {
		log.Warn("event older than the maximum age dropped: the reconciler converges what it asked for",
			"published", msg.PublishTime.Format(time.RFC3339), "age", now.Sub(msg.PublishTime).Round(time.Second).String(), "max_age", maxAge.String())
		return nil, log, ErrTooOld
	}
	return msg, log, nil
}

// MetricEventsRefused counts events refused for their origin (a type from
// the wrong topic, a topic the function does not read, a sender that did
// not prove its identity): one log line each, jsonPayload.metric.
const MetricEventsRefused = "events_refused"

// CheckOrigin refuses (event.ErrRefused) a message of payload type typ that
// entry point entry must not accept from the topic it came from
// (event.CheckOrigin, against this deployment's project).
func (r *Runner) CheckOrigin(msg *event.Message, entry, typ string) error {
	return event.CheckOrigin(msg, r.d.Project, entry, typ)
}

// ErrTooOld marks an event dropped for its age (acknowledged).
var ErrTooOld = errors.New("event older than the maximum age")

// Outcome turns a processing error into a function's return value:
// malformed and rejected events are logged and acknowledged (nil, so Pub/Sub
// does not redeliver what can never succeed); transient failures are
// returned so that the event is redelivered.
func Outcome(log *slog.Logger, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrTransient):
		// Checked first: a transient failure wraps its cause, which may
		// itself wrap a sentinel below; it is still retried.
		log.Error("event failed: will be redelivered", "error", err.Error())
		return err
	case errors.Is(err, identity.ErrRefused):
		// Counted: a log-based metric counts the lines with this metric.
		log.Warn("report refused: its sender is not proven", "reason", err.Error(), "metric", identity.MetricRefused)
		return nil
	case errors.Is(err, event.ErrRefused):
		// One line per refusal: a log-based metric counts lines with
		// jsonPayload.metric = events_refused.
		log.Warn("event refused: acknowledged without action", "reason", err.Error(), "metric", MetricEventsRefused)
		return nil
	case errors.Is(err, event.ErrMalformed):
		log.Error("malformed event acknowledged without action", "error", err.Error())
		return nil
	case errors.Is(err, plan.ErrRejected):
		log.Warn("event rejected", "reason", err.Error())
		return nil
	default:
		log.Error("event failed: will be redelivered", "error", err.Error())
		return err
	}
}
