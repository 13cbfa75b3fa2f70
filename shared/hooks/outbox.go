package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Publisher publishes one message and waits for the server's
// acknowledgement; *pubsub.Client (shared/pubsub) is one.
type Publisher interface {
	Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) (string, error)
}

// Outbox publishes messages through a Spool: every message is spooled
// first, then published within a deadline, and removed from the spool once
// Pub/Sub acknowledged it. What is not acknowledged in time stays spooled
// for a later Flush, by a later hook run or by the agent.
type Outbox struct {
	Spool *Spool
	// Pub publishes; nil leaves everything spooled (Pub/Sub client could
	// not be created).
	Pub Publisher
	// Timeout bounds each Send and Flush (on top of the caller's context);
	// DefaultPublishTimeout when zero.
	Timeout time.Duration
	// FlushLimit bounds how many old messages one Flush publishes; 0 is
	// 1000.
	FlushLimit int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Log receives failures; nil discards.
	Log *slog.Logger
}

// maxInFlight bounds concurrent publishes.
const maxInFlight = 64

func (o *Outbox) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultPublishTimeout
}

func (o *Outbox) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o *Outbox) log() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Result counts what a Send or Flush did.
type Result struct {
	Published int // acknowledged by Pub/Sub (and removed from the spool)
	Spooled   int // left in the spool for later
	Lost      int // neither published nor spooled (spool unwritable): logged at ERROR
}

// Send spools and publishes msgs within Timeout. Messages that cannot be
// spooled are still published; only a message that can be neither is lost,
// and Send then returns an error. Unpublished but spooled messages are not
// an error: Result.Spooled counts them.
func (o *Outbox) Send(ctx context.Context, msgs []Message) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	entries := make([]Entry, len(msgs))
	var spoolErrs []error
	for i, m := range msgs {
		e, err := o.Spool.Put(m, o.now())
		if err != nil {
			spoolErrs = append(spoolErrs, err)
			e = Entry{Msg: m}
		}
		entries[i] = e
	}
	res := o.publishAll(ctx, entries)
	if res.Lost > 0 {
		return res, fmt.Errorf("%d of %d messages lost: neither spooled nor published: %w", res.Lost, len(msgs), errors.Join(spoolErrs...))
	}
	if len(spoolErrs) > 0 {
		o.log().Warn("spool unwritable; messages were published directly", "error", errors.Join(spoolErrs...))
	}
	return res, nil
}

// Flush publishes spooled messages (at most FlushLimit, oldest first)
// within Timeout.
func (o *Outbox) Flush(ctx context.Context) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	limit := o.FlushLimit
	if limit <= 0 {
		limit = 1000
	}
	entries, err := o.Spool.Claim(limit)
	if len(entries) == 0 {
		return Result{}, err
	}
	res := o.publishAll(ctx, entries)
	o.log().Info("spool flushed", "published", res.Published, "still_spooled", res.Spooled)
	return res, err
}

// publishAll publishes entries concurrently; each published entry is
// removed from the spool and each failed one released to it.
func (o *Outbox) publishAll(ctx context.Context, entries []Entry) Result {
	var mu sync.Mutex
	var res Result
	var firstErr error
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := errors.New("no Pub/Sub client")
			if o.Pub != nil {
				_, err = o.Pub.Publish(ctx, e.Msg.Topic, e.Msg.Data, e.Msg.Attributes)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && e.Path != "":
				if derr := o.Spool.Done(e); derr != nil {
					o.log().Warn("published message left in the spool: it may be published again", "error", derr)
				}
				res.Published++
			case err == nil:
				res.Published++
			case e.Path != "":
				if rerr := o.Spool.Release(e); rerr != nil {
					o.log().Error("releasing a spooled message", "error", rerr)
				}
				res.Spooled++
				if firstErr == nil {
					firstErr = err
				}
			default:
				res.Lost++
				o.log().Error("message lost: not spooled and not published", "topic", e.Msg.Topic, "data", string(e.Msg.Data), "error", err)
			}
		}()
	}
	wg.Wait()
	if res.Spooled > 0 {
		o.log().Warn("Pub/Sub did not acknowledge every message in time; the rest stays spooled",
			"published", res.Published, "spooled", res.Spooled, "spool", o.Spool.Dir, "error", firstErr)
	}
	return res
}
