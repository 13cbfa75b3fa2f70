package benchpool

import (
	"math"
	"testing"
	"time"
)

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{30 * time.Second, "30s"},
		{90 * time.Minute, "1h30m"},
		{26*time.Hour + 5*time.Minute, "1d2h5m"},
		{-2 * time.Hour, "-2h"},
		{math.MinInt64, "-106751d23h47m"},
	} {
		if got := FormatDuration(tc.d); got != tc.want {
			t.Errorf("FormatDuration(%d) = %q, want %q", int64(tc.d), got, tc.want)
		}
	}
}
