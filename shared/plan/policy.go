package plan

import "time"

// EventTooOld decides whether an event published at published is too old to
// act on at now: older than the Policy's MaxEventAge. Such an event is
// acknowledged and dropped without a decision, and the reconciler converges
// what it asked for; retrying it for Pub/Sub's whole retry window would only
// act on a world that has moved on. An event whose publish time is unknown
// (zero) or ahead of now (clock skew) is never too old. maxAge is the limit
// that applied, for the log line.
func EventTooOld(published, now time.Time, pol Policy) (tooOld bool, maxAge time.Duration) {
	maxAge = pol.withDefaults().MaxEventAge
	if published.IsZero() {
		return false, maxAge
	}
	return now.Sub(published) > maxAge, maxAge
}
