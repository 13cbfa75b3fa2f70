// Package logx builds flexslurm's structured logger: log/slog JSON lines with
// the field names Cloud Logging reads from a function's stdout — "severity"
// (DEBUG, INFO, WARNING, ERROR), "message", "logging.googleapis.com/labels"
// and "logging.googleapis.com/trace" — so every line is queryable and can
// back a log-based metric.
//
// This package imports no other flexslurm package.
package logx

import (
	"context"
	"io"
	"log/slog"
	"strings"
)

// Cloud Logging special fields
// (https://cloud.google.com/logging/docs/structured-logging).
const (
	KeyLabels = "logging.googleapis.com/labels"
	KeyTrace  = "logging.googleapis.com/trace"
)

// New returns a JSON logger writing to w at the given minimum level.
func New(w io.Writer, level slog.Level) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.MessageKey:
				a.Key = "message"
			case slog.LevelKey:
				a.Key = "severity"
				lvl, _ := a.Value.Any().(slog.Level)
				a.Value = slog.StringValue(Severity(lvl))
			case slog.TimeKey:
				a.Key = "time"
			}
			return a
		},
	})
	return slog.New(h)
}

// Severity maps a slog level to a Cloud Logging severity.
func Severity(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARNING"
	case l >= slog.LevelInfo:
		return "INFO"
	default:
		return "DEBUG"
	}
}

// Labels is the Cloud Logging labels attribute (string values only).
func Labels(kv ...string) slog.Attr {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return slog.Any(KeyLabels, m)
}

// Trace turns a W3C traceparent ("00-TRACEID-SPANID-FLAGS") into the Cloud
// Logging trace attribute "projects/P/traces/TRACEID". It returns an empty
// attribute when the header is absent or malformed.
func Trace(project, traceparent string) slog.Attr {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 || project == "" {
		return slog.Attr{}
	}
	return slog.String(KeyTrace, "projects/"+project+"/traces/"+parts[1])
}

// Discards reports whether l writes nothing at all (its handler is
// slog.DiscardHandler), so that a caller can skip building attributes —
// Logger.With formats its arguments whatever the handler — for a logger
// that drops them. Any other handler may keep a line, so it is false.
func Discards(l *slog.Logger) bool { return l.Handler() == slog.DiscardHandler }

// Attrs is l.With(args...), except that a logger that Discards is
// returned as it is, without building the attributes.
func Attrs(l *slog.Logger, args ...any) *slog.Logger {
	if Discards(l) {
		return l
	}
	return l.With(args...)
}

type ctxKey struct{}

// With stores a logger in a context.
func With(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// From returns the context's logger, or slog.Default().
func From(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(ctxKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}
