package logx

import (
	"bytes"
	"log/slog"
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
