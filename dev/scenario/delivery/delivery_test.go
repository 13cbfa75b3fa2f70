package delivery

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/shared/plan"
)

var t0 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// run delivers everything due, in order, with handle, and returns each
// attempt as "offset id kind outcome".
func run(q *Queue, handle func(id string, attempt int) error) []string {
	var out []string
	attempts := map[string]int{}
	for {
		at, ok := q.Next()
		if !ok {
			return out
		}
		n := len(q.Records())
		q.DeliverNext(at, func(topic, id string, data []byte) error {
			attempts[id]++
			return handle(id, attempts[id])
		})
		if recs := q.Records(); len(recs) > n {
			r := recs[len(recs)-1]
			out = append(out, fmt.Sprintf("%s %s %s", lang.FormatDuration(r.At.Sub(t0)), r.Kind, r.Outcome))
		}
	}
}

func msg(id string) *Message {
	return &Message{ID: id, Topic: "job-pending", Type: "job.pending", Job: id, Ident: "job-pending|" + id}
}

func nop(string, ...any) {}

// TestRetriesWithBackoffThenDeadLetter: a message nacked every time is
// delivered again after 10 s, 20 s, 40 s and 80 s, and dead-lettered after
// its fifth attempt, as a push subscription with the default retry and
// dead-letter policies does.
func TestRetriesWithBackoffThenDeadLetter(t *testing.T) {
	q := New(lang.Delivery{}, nil, t0, nop)
	q.Publish(msg("7"), t0, nil, "j7")
	got := run(q, func(string, int) error { return errors.New("boom") })
	want := []string{"0s deliver nack", "10s redeliver nack", "30s redeliver nack", "1m10s redeliver nack", "2m30s redeliver nack"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("attempts (-want +got):\n%s", d)
	}
	wantDead := []DeadLetter{{At: 150 * time.Second, Topic: "job-pending", ID: "7", Type: "job.pending", Label: "j7", Attempts: 5, LastError: "boom"}}
	if d := cmp.Diff(wantDead, q.DeadLetters()); d != "" {
		t.Errorf("dead letters (-want +got):\n%s", d)
	}
	if c := q.Counts(); c.Deliveries != 5 || c.Nacks != 5 || c.Redeliveries != 4 || c.DeadLetters != 1 {
		t.Errorf("counts = %+v", c)
	}
	if u := q.Unsettled(); len(u) != 0 {
		t.Errorf("unsettled = %q, want none", u)
	}
}

// TestBackoffIsCapped: the delay doubles up to max_backoff.
func TestBackoffIsCapped(t *testing.T) {
	q := New(lang.Delivery{MinBackoff: lang.Duration(time.Minute), MaxBackoff: lang.Duration(3 * time.Minute), MaxAttempts: 6}, nil, t0, nop)
	var got []time.Duration
	for a := 1; a <= 5; a++ {
		got = append(got, q.backoff(a))
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 3 * time.Minute, 3 * time.Minute}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("backoff (-want +got):\n%s", d)
	}
}

// TestDuplicatesOfAnAckedMessage: a duplicate of a message already
// acknowledged is delivered, but its failure leads to no redelivery.
func TestDuplicatesOfAnAckedMessage(t *testing.T) {
	q := New(lang.Delivery{}, nil, t0, nop)
	q.Publish(msg("7"), t0, &lang.DeliveryFaults{Duplicates: []lang.Duration{lang.Duration(time.Minute)}}, "")
	got := run(q, func(_ string, attempt int) error {
		if attempt > 1 {
			return errors.New("already done")
		}
		return nil
	})
	if d := cmp.Diff([]string{"0s deliver ack", "1m duplicate nack"}, got); d != "" {
		t.Errorf("attempts (-want +got):\n%s", d)
	}
	if len(q.DeadLetters()) != 0 {
		t.Errorf("dead letters: %+v", q.DeadLetters())
	}
}

// TestHoldAndRelease: held messages wait for their release and come in the
// order it asks.
func TestHoldAndRelease(t *testing.T) {
	for _, tc := range []struct {
		order string
		want  []string
	}{
		{"", []string{"a", "b", "c"}},
		{"reverse", []string{"c", "b", "a"}},
	} {
		q := New(lang.Delivery{}, nil, t0, nop)
		q.AddRule(lang.DeliveryRule{Topic: "job-pending", DeliveryFaults: lang.DeliveryFaults{Hold: "h"}}, t0)
		for _, id := range []string{"a", "b", "c"} {
			q.Publish(msg(id), t0, nil, "")
		}
		if _, ok := q.Next(); ok {
			t.Fatal("a held message is due")
		}
		if d := cmp.Diff([]string{`job-pending a held in "h"`, `job-pending b held in "h"`, `job-pending c held in "h"`}, q.NotQuiet()); d != "" {
			t.Errorf("not quiet (-want +got):\n%s", d)
		}
		q.Release(lang.ReleaseStep{Hold: "h", Order: tc.order}, t0.Add(time.Hour))
		var got []string
		for {
			at, ok := q.Next()
			if !ok {
				break
			}
			q.DeliverNext(at, func(_, id string, _ []byte) error { got = append(got, id); return nil })
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("order %q (-want +got):\n%s", tc.order, d)
		}
	}
}

// TestCrashPoints: a crash step makes the handler fail at its boundary; an
// "after" point reached at the last side effect still fails the delivery,
// which is then delivered again.
func TestCrashPoints(t *testing.T) {
	action := plan.CreateResizeRequest{}
	for _, tc := range []struct {
		point string
		want  []string // the handler's progress per attempt
	}{
		{"before#1", []string{"1: crashed before the action", "2: action, commit"}},
		{"after#1", []string{"1: action, crashed at commit", "2: action, commit"}},
		{"commit", []string{"1: action, crashed at commit", "2: action, commit"}},
		{"after:create_resize_request", []string{"1: action, commit (crashed after)", "2: action, commit"}},
	} {
		t.Run(tc.point, func(t *testing.T) {
			q := New(lang.Delivery{}, nil, t0, nop)
			q.AddCrash(lang.CrashStep{Point: tc.point})
			q.Publish(msg("7"), t0, nil, "")
			var got []string
			attempt := 0
			handler := func(string, string, []byte) error {
				attempt++
				if err := q.Fault("action", action); err != nil {
					got = append(got, fmt.Sprintf("%d: crashed before the action", attempt))
					return err
				}
				if tc.point == "after:create_resize_request" {
					// The action was the handler's last boundary.
					got = append(got, fmt.Sprintf("%d: action, commit%s", attempt, map[bool]string{true: " (crashed after)"}[attempt == 1]))
					return nil
				}
				if err := q.Fault("commit", nil); err != nil {
					got = append(got, fmt.Sprintf("%d: action, crashed at commit", attempt))
					return err
				}
				got = append(got, fmt.Sprintf("%d: action, commit", attempt))
				return nil
			}
			for {
				at, ok := q.Next()
				if !ok {
					break
				}
				q.DeliverNext(at, handler)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("progress (-want +got):\n%s", d)
			}
			recs := q.Records()
			if len(recs) != 2 || recs[0].Outcome != "crash" || recs[1].Outcome != "ack" {
				t.Errorf("records = %+v, want a crash then an ack", recs)
			}
			if c := q.Counts(); c.Crashes != 1 {
				t.Errorf("crashes = %d, want 1", c.Crashes)
			}
		})
	}
}

// TestNestedDeliveryKeepsTheCrashPlan: a handler that delivers other
// messages before it returns (a late reconcile pass in the scenario runner)
// still crashes where its own delivery's plan says, and the messages
// delivered meanwhile do not inherit that plan.
func TestNestedDeliveryKeepsTheCrashPlan(t *testing.T) {
	q := New(lang.Delivery{}, nil, t0, nop)
	q.AddCrash(lang.CrashStep{Point: "commit", Label: "late", Times: 1})
	q.Publish(msg("late"), t0, nil, "late")
	q.Publish(msg("meanwhile"), t0.Add(time.Minute), nil, "")
	var got []string
	q.DeliverNext(t0, func(_, id string, _ []byte) error {
		at, ok := q.Next()
		if !ok {
			t.Fatal("nothing queued to deliver meanwhile")
		}
		q.DeliverNext(at, func(_, id string, _ []byte) error {
			got = append(got, fmt.Sprintf("%s: commit %v", id, q.Fault("commit", nil)))
			return nil
		})
		err := q.Fault("commit", nil)
		got = append(got, fmt.Sprintf("%s: commit crashed %t", id, errors.Is(err, ErrInjectedCrash)))
		return err
	})
	want := []string{"meanwhile: commit <nil>", "late: commit crashed true"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("progress (-want +got):\n%s", d)
	}
	if c := q.Counts(); c.Crashes != 1 || c.Acks != 1 {
		t.Errorf("counts = %+v, want 1 crash and 1 ack", c)
	}
}

// TestRandomFaultsFollowTheIdentity: random faults are a function of the
// seed and each message's identity, not of the order of publication.
func TestRandomFaultsFollowTheIdentity(t *testing.T) {
	rf := &lang.RandomFaults{Seed: 42, Duplicate: 0.5, Delay: 0.5, MaxDelay: lang.Duration(10 * time.Minute)}
	schedule := func(ids ...string) map[string][]string {
		q := New(lang.Delivery{}, rf, t0, nop)
		for _, id := range ids {
			q.Publish(msg(id), t0, nil, "")
		}
		out := map[string][]string{}
		for {
			at, ok := q.Next()
			if !ok {
				return out
			}
			q.DeliverNext(at, func(_, id string, _ []byte) error {
				out[id] = append(out[id], lang.FormatDuration(at.Sub(t0)))
				return nil
			})
		}
	}
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	forward := schedule(ids...)
	var backward []string
	for i := len(ids) - 1; i >= 0; i-- {
		backward = append(backward, ids[i])
	}
	if d := cmp.Diff(forward, schedule(backward...)); d != "" {
		t.Errorf("faults depend on the order of publication (-forward +backward):\n%s", d)
	}
	faulted := 0
	for _, times := range forward {
		if len(times) > 1 || times[0] != "0s" {
			faulted++
		}
	}
	if faulted == 0 || faulted == len(ids) {
		t.Errorf("%d of %d messages delayed or duplicated at rates of 0.5", faulted, len(ids))
	}
	if !strings.HasPrefix(fmt.Sprint(HashUnit(1, "a")), "0.") || HashUnit(1, "a") != HashUnit(1, "a") || HashUnit(1, "a") == HashUnit(2, "a") {
		t.Error("HashUnit is not a stable number in [0, 1) that depends on the seed")
	}
}
