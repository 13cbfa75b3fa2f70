package logx

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestDiscards: only a logger over slog.DiscardHandler discards
// everything; a logger that drops some levels, or writes to a buffer,
// does not.
func TestDiscards(t *testing.T) {
	var buf bytes.Buffer
	for _, c := range []struct {
		name string
		l    *slog.Logger
		want bool
	}{
		{"DiscardHandler", slog.New(slog.DiscardHandler), true},
		{"DiscardHandler with attributes", slog.New(slog.DiscardHandler).With("k", "v"), true},
		{"JSON", New(&buf, slog.LevelInfo), false},
		{"JSON above errors", New(&buf, slog.LevelError+4), false},
		{"default", slog.Default(), false},
	} {
		if got := Discards(c.l); got != c.want {
			t.Errorf("%s: Discards = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAttrs: a logger that writes gets the attributes on every line; one
// that discards is handed back as it is.
func TestAttrs(t *testing.T) {
	var buf bytes.Buffer
	l := Attrs(New(&buf, slog.LevelInfo), "cluster", "c1", "node", "n-0")
	l.Info("hello")
	for _, want := range []string{`"cluster":"c1"`, `"node":"n-0"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("line %s lacks %s", buf.String(), want)
		}
	}
	d := slog.New(slog.DiscardHandler)
	if got := Attrs(d, "cluster", "c1"); got != d {
		t.Errorf("Attrs of a discarding logger = %p, want the same logger %p", got, d)
	}
}
