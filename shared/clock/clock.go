// Package clock owns flexslurm's notion of time. Production code reads the
// wall clock; the local system runs a scaled clock so that days of Flex-Start
// VM life fit in minutes; scenario runs and tests use a manual clock that only
// moves when told to. Decision code never reads time itself: it is handed
// `now` by its caller, which gets it from a Clock.
//
// This package imports nothing from flexslurm.
package clock

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Clock tells the current time.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Scaled runs Factor times faster than the wall clock from a fixed origin:
// Now() = Origin + (wall - WallOrigin) * Factor. A Factor of 1 is the wall
// clock shifted to Origin. Two processes built from the same Origin,
// WallOrigin and Factor agree on the time, which is how the local system's
// functions and Compute simulator share one clock.
type Scaled struct {
	Origin     time.Time // virtual time at WallOrigin
	WallOrigin time.Time // wall time at which the virtual clock read Origin
	Factor     float64   // speed-up, > 0
}

// NewScaled starts a scaled clock now, reading origin.
func NewScaled(origin time.Time, factor float64) *Scaled {
	return &Scaled{Origin: origin, WallOrigin: time.Now(), Factor: factor}
}

// Now returns the virtual time.
func (s *Scaled) Now() time.Time {
	wall := time.Since(s.WallOrigin)
	return s.Origin.Add(time.Duration(float64(wall) * s.Factor))
}

// WallDuration converts a virtual duration into the wall time it takes.
func (s *Scaled) WallDuration(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.Factor)
}

// String encodes the clock as "origin_unix_nanos,wall_origin_unix_nanos,factor",
// the form ParseScaled reads (used to hand the clock to child processes through
// the FLEXSLURM_CLOCK environment variable).
func (s *Scaled) String() string {
	return fmt.Sprintf("%d,%d,%g", s.Origin.UnixNano(), s.WallOrigin.UnixNano(), s.Factor)
}

// ParseScaled reads the form written by Scaled.String.
func ParseScaled(v string) (*Scaled, error) {
	parts := strings.Split(v, ",")
	if len(parts) != 3 {
		return nil, fmt.Errorf("scaled clock %q: want origin,wall_origin,factor", v)
	}
	o, err1 := strconv.ParseInt(parts[0], 10, 64)
	w, err2 := strconv.ParseInt(parts[1], 10, 64)
	f, err3 := strconv.ParseFloat(parts[2], 64)
	if err1 != nil || err2 != nil || err3 != nil || f <= 0 {
		return nil, fmt.Errorf("scaled clock %q: want two integer unix-nanosecond times and a positive factor", v)
	}
	return &Scaled{Origin: time.Unix(0, o).UTC(), WallOrigin: time.Unix(0, w), Factor: f}, nil
}

// Manual is a clock that moves only when Set or Advance is called. It is safe
// for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a manual clock reading t.
func NewManual(t time.Time) *Manual { return &Manual{now: t} }

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d (d < 0 is ignored: time never runs back).
func (m *Manual) Advance(d time.Duration) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d > 0 {
		m.now = m.now.Add(d)
	}
	return m.now
}

// Set moves the clock to t if t is later than the current reading.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.After(m.now) {
		m.now = t
	}
}
