// Package delivery simulates how Pub/Sub delivers messages to a push
// subscription, with the faults a scenario injects. A handler that returns
// an error nacks the message, which is delivered again with the same id
// after an exponential backoff, until it is acknowledged or reaches the
// maximum number of attempts and goes to the dead-letter list. Faults act
// on this path: delivery rules and a step's own delivery faults (duplicates,
// delays, holds released later in order, reversed or shuffled), crash steps
// and crash lists that make the handler fail at one of its side-effect
// boundaries (apply.Deps.Fault), and random faults decided by a hash of the
// seed and each message's identity.
//
// A Queue runs on the scenario's virtual clock: the caller passes the
// simulated now, asks Next when the next delivery is due and calls
// DeliverNext at that instant.
package delivery

import (
	"container/heap"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// Delivery defaults (a push subscription's retry policy: 10 s to 600 s; the
// dead-letter policy's default of 5 attempts;
// https://cloud.google.com/pubsub/docs/handling-failures).
const (
	DefaultMinBackoff  = 10 * time.Second
	DefaultMaxBackoff  = 10 * time.Minute
	DefaultMaxAttempts = 5
)

// Message is one Pub/Sub message. The publisher fills the exported fields.
type Message struct {
	ID    string
	Topic string
	Data  []byte
	// Type is the payload type, or "audit" for Compute audit entries.
	Type string
	// VM is the instance of an audit entry.
	VM    string
	Nodes []string
	Job   string
	// Ident is the message's stable identity for random faults (topic,
	// type and subject); the queue numbers the messages of one identity.
	Ident string

	seq       int
	label     string
	crash     []string // crash points by attempt
	dups      []lang.Duration
	attempts  int
	acked     bool
	dead      bool
	lastErr   string
	published time.Time
}

// Describe is the message's type and subject, for the trace.
func (m *Message) Describe() string {
	d := m.Type
	if m.Job != "" {
		d += " job " + m.Job
	}
	if m.VM != "" {
		d += " " + m.VM
	}
	if len(m.Nodes) > 0 {
		d += " " + strings.Join(m.Nodes, ",")
	}
	return d
}

// Kind is the kind of a delivery attempt.
type Kind int

// Delivery kinds.
const (
	First Kind = iota
	Retry
	Duplicate
)

func (k Kind) String() string {
	switch k {
	case Retry:
		return "redeliver"
	case Duplicate:
		return "duplicate"
	}
	return "deliver"
}

type delivery struct {
	due  time.Time
	seq  int
	msg  *Message
	kind Kind
}

type deliveryHeap []*delivery

func (h deliveryHeap) Len() int { return len(h) }
func (h deliveryHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h deliveryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *deliveryHeap) Push(x any)   { *h = append(*h, x.(*delivery)) }
func (h *deliveryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Record is one delivery attempt, for counters.
type Record struct {
	At    time.Time
	Topic string
	Type  string
	Label string
	Kind  Kind
	// Outcome is ack, nack or crash.
	Outcome string
}

// DeadLetter is a message that reached the maximum number of delivery
// attempts without being acknowledged.
type DeadLetter struct {
	At        time.Duration
	Topic     string
	ID        string
	Type      string
	Label     string
	Attempts  int
	LastError string
}

// Counts counts delivery attempts: Acks and Nacks are their outcomes
// (crashes count as nacks); Redeliveries the attempts after a nack;
// Duplicates the injected extra deliveries; DeadLetters the messages that
// ran out of attempts; Crashes the attempts stopped by an injected crash.
type Counts struct {
	Deliveries, Acks, Nacks, Redeliveries, Duplicates, DeadLetters, Crashes int
}

type ruleState struct {
	lang.DeliveryRule
	vm        *regexp.Regexp
	remaining int // < 0: unlimited
	until     time.Time
}

type crashState struct {
	lang.CrashStep
	point     lang.CrashPoint
	remaining int
}

// Queue is the subscription's pending deliveries with the faults in force.
type Queue struct {
	cfg    lang.Delivery
	random *lang.RandomFaults
	start  time.Time
	trace  func(format string, args ...any)

	queue   deliveryHeap
	seq     int
	msgs    []*Message
	holds   map[string][]*Message
	idents  map[string]int
	rules   []*ruleState
	crashes []*crashState
	// crash is the crash planned for the delivery in progress.
	crash  *crashPlan
	log    []Record
	dead   []DeadLetter
	counts Counts
}

// New is an empty queue with a scenario's delivery settings and random
// faults (nil for none); start is the scenario's start, trace receives the
// timeline.
func New(cfg lang.Delivery, random *lang.RandomFaults, start time.Time, trace func(format string, args ...any)) *Queue {
	return &Queue{cfg: cfg, random: random, start: start, trace: trace, holds: map[string][]*Message{}, idents: map[string]int{}}
}

// Publish applies delivery rules, a step's faults and random faults to a
// new message and schedules its first delivery (or holds it).
func (q *Queue) Publish(m *Message, now time.Time, faults *lang.DeliveryFaults, label string) {
	q.seq++
	m.seq = q.seq
	m.published = now
	q.idents[m.Ident]++
	m.Ident = fmt.Sprintf("%s#%d", m.Ident, q.idents[m.Ident])
	q.msgs = append(q.msgs, m)
	var f lang.DeliveryFaults
	for _, rule := range q.rules {
		if !rule.matches(m, now) {
			continue
		}
		if rule.remaining > 0 {
			rule.remaining--
		}
		merge(&f, rule.DeliveryFaults)
		if rule.Label != "" && m.label == "" {
			m.label = rule.Label
		}
	}
	if faults != nil {
		merge(&f, *faults)
	}
	if label != "" {
		m.label = label
	}
	if rf := q.random; rf != nil && q.randomFaultsOn(m) {
		randomFaults(rf, m, &f)
	}
	m.crash = f.Crash
	m.dups = append(m.dups, f.Duplicates...)
	if f.RedeliverEvery > 0 {
		for t := f.RedeliverEvery; t <= f.RedeliverFor; t += f.RedeliverEvery {
			m.dups = append(m.dups, t)
		}
	}
	if f.Hold != "" {
		q.holds[f.Hold] = append(q.holds[f.Hold], m)
		q.trace("publish %s %s (%s)%s: held in %q", m.Topic, m.ID, m.Describe(), labelSuffix(m.label), f.Hold)
		return
	}
	q.trace("publish %s %s (%s)%s%s", m.Topic, m.ID, m.Describe(), labelSuffix(m.label), delaySuffix(f.Delay.D()))
	q.scheduleFirst(m, now.Add(f.Delay.D()))
}

func labelSuffix(l string) string {
	if l == "" {
		return ""
	}
	return ", label " + l
}

func delaySuffix(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return ", delayed " + lang.FormatDuration(d)
}

// merge adds b's faults to a.
func merge(a *lang.DeliveryFaults, b lang.DeliveryFaults) {
	a.Delay = max(a.Delay, b.Delay)
	a.Duplicates = append(a.Duplicates, b.Duplicates...)
	if b.RedeliverEvery > 0 && a.RedeliverEvery == 0 {
		a.RedeliverEvery, a.RedeliverFor = b.RedeliverEvery, b.RedeliverFor
	}
	if a.Hold == "" {
		a.Hold = b.Hold
	}
	if len(a.Crash) == 0 {
		a.Crash = b.Crash
	}
}

func (rule *ruleState) matches(m *Message, now time.Time) bool {
	if rule.remaining == 0 || (!rule.until.IsZero() && !now.Before(rule.until)) {
		return false
	}
	if rule.Topic != "" && rule.Topic != m.Topic {
		return false
	}
	if rule.Type != "" && rule.Type != m.Type {
		return false
	}
	if rule.vm != nil && !rule.vm.MatchString(m.VM) {
		return false
	}
	if rule.Node != "" && !slices.Contains(m.Nodes, rule.Node) {
		return false
	}
	if rule.Job != "" && rule.Job != m.Job {
		return false
	}
	return true
}

// randomFaults decides a message's random duplicates and delay from its
// identity.
func randomFaults(rf *lang.RandomFaults, m *Message, f *lang.DeliveryFaults) {
	within := rf.DuplicateWithin.D()
	if within == 0 {
		within = 15 * time.Minute
	}
	if rf.Duplicate > 0 && HashUnit(rf.Seed, m.Ident, "dup") < rf.Duplicate {
		n := 1 + int(HashUnit(rf.Seed, m.Ident, "dups")*2)
		for k := 0; k < n; k++ {
			off := time.Duration(HashUnit(rf.Seed, m.Ident, "dup", strconv.Itoa(k)) * float64(within)).Round(time.Second)
			f.Duplicates = append(f.Duplicates, lang.Duration(off))
		}
	}
	topics := rf.DelayTopics
	if len(topics) == 0 {
		topics = []string{config.TopicJobs, config.TopicHealthFailure, config.TopicExpiry, config.TopicSlurmSnapshot}
	}
	maxDelay := rf.MaxDelay.D()
	if maxDelay == 0 {
		maxDelay = 10 * time.Minute
	}
	if rf.Delay > 0 && slices.Contains(topics, m.Topic) && HashUnit(rf.Seed, m.Ident, "delay") < rf.Delay {
		d := time.Duration(HashUnit(rf.Seed, m.Ident, "delay-by") * float64(maxDelay)).Round(time.Second)
		f.Delay = max(f.Delay, lang.Duration(d))
	}
}

// randomFaultsOn reports whether random faults apply to a message: one
// published before random_faults.until.
func (q *Queue) randomFaultsOn(m *Message) bool {
	u := q.random.Until.D()
	return u == 0 || m.published.Before(q.start.Add(u))
}

func (q *Queue) scheduleFirst(m *Message, at time.Time) {
	q.push(at, m, First)
	for _, off := range m.dups {
		q.push(at.Add(off.D()), m, Duplicate)
	}
}

func (q *Queue) push(at time.Time, m *Message, kind Kind) {
	q.seq++
	heap.Push(&q.queue, &delivery{due: at, seq: q.seq, msg: m, kind: kind})
}

// AddRule puts a deliveries step in force from now: the faults of every
// message it matches, Times messages (0: any number) or for For.
func (q *Queue) AddRule(r lang.DeliveryRule, now time.Time) {
	rule := &ruleState{DeliveryRule: r, remaining: -1}
	if rule.Times > 0 {
		rule.remaining = rule.Times
	}
	if rule.For > 0 {
		rule.until = now.Add(rule.For.D())
	}
	if rule.DeliveryRule.VM != "" {
		rule.vm = regexp.MustCompile(rule.DeliveryRule.VM)
	}
	q.rules = append(q.rules, rule)
}

// AddCrash puts a crash step in force: the next Times matching delivery
// attempts crash at its point.
func (q *Queue) AddCrash(c lang.CrashStep) {
	p, _ := lang.ParseCrashPoint(c.Point)
	q.crashes = append(q.crashes, &crashState{CrashStep: c, point: p, remaining: max(c.Times, 1)})
}

// Duplicate delivers every message with the step's label again, Times
// times, After from now.
func (q *Queue) Duplicate(d lang.DuplicateStep, now time.Time) error {
	n := max(d.Times, 1)
	found := false
	for _, m := range q.msgs {
		if m.label != d.Label {
			continue
		}
		found = true
		for k := 0; k < n; k++ {
			q.push(now.Add(d.After.D()), m, Duplicate)
		}
	}
	if !found {
		return fmt.Errorf("duplicate: no message labelled %q was published", d.Label)
	}
	return nil
}

// Release delivers the messages held under a name now, in the order the
// step asks (as published, reversed, or shuffled by its seed).
func (q *Queue) Release(s lang.ReleaseStep, now time.Time) {
	held := q.holds[s.Hold]
	delete(q.holds, s.Hold)
	switch s.Order {
	case "reverse":
		for i, j := 0, len(held)-1; i < j; i, j = i+1, j-1 {
			held[i], held[j] = held[j], held[i]
		}
	case "shuffle":
		sort.SliceStable(held, func(i, j int) bool {
			return HashUnit(s.Seed, held[i].ID) < HashUnit(s.Seed, held[j].ID)
		})
	}
	for _, m := range held {
		q.trace("release %s %s (%s) from %q", m.Topic, m.ID, m.Describe(), s.Hold)
		q.scheduleFirst(m, now)
	}
}

// Next is when the next delivery is due.
func (q *Queue) Next() (time.Time, bool) {
	if len(q.queue) == 0 {
		return time.Time{}, false
	}
	return q.queue[0].due, true
}

// crashPlanFor picks the crash for a delivery attempt: the message's own
// list, then crash steps, then random faults.
func (q *Queue) crashPlanFor(m *Message) *crashPlan {
	if k := m.attempts - 1; k < len(m.crash) && m.crash[k] != "" && m.crash[k] != "none" {
		if p, err := lang.ParseCrashPoint(m.crash[k]); err == nil {
			return &crashPlan{point: p, source: fmt.Sprintf("delivery crash list, attempt %d", m.attempts)}
		}
	}
	for _, c := range q.crashes {
		if c.remaining == 0 || (c.Topic != "" && c.Topic != m.Topic) || (c.Type != "" && c.Type != m.Type) || (c.Label != "" && c.Label != m.label) {
			continue
		}
		c.remaining--
		return &crashPlan{point: c.point, source: "crash step"}
	}
	if rf := q.random; rf != nil && rf.Crash > 0 && q.randomFaultsOn(m) {
		limit := rf.CrashAttempts
		if limit == 0 {
			limit = 2
		}
		a := strconv.Itoa(m.attempts)
		if m.attempts <= limit && HashUnit(rf.Seed, m.Ident, "crash", a) < rf.Crash {
			pt := randomCrashPoints[int(HashUnit(rf.Seed, m.Ident, "crash-at", a)*float64(len(randomCrashPoints)))]
			p, _ := lang.ParseCrashPoint(pt)
			return &crashPlan{point: p, source: "random faults"}
		}
	}
	return nil
}

// Fault is apply.Deps.Fault: the handler of the delivery in progress
// reached a side-effect boundary.
func (q *Queue) Fault(point string, a plan.Action) error {
	if q.crash == nil {
		return nil
	}
	return q.crash.boundary(point, a)
}

// DeliverNext pops the next due delivery, hands its message to handle (the
// topic's function) at now and applies Pub/Sub's rules to the result: an
// ack settles the message, a nack (an error, or an injected crash) is
// delivered again after a backoff or dead-lettered after the last attempt.
func (q *Queue) DeliverNext(now time.Time, handle func(topic, id string, data []byte) error) {
	d := heap.Pop(&q.queue).(*delivery)
	m := d.msg
	if m.dead {
		return
	}
	m.attempts++
	q.counts.Deliveries++
	switch d.kind {
	case Retry:
		q.counts.Redeliveries++
	case Duplicate:
		q.counts.Duplicates++
	}
	// handle may deliver others before it returns (a late reconcile
	// pass, in the scenario runner): each delivery has its own crash plan,
	// and the one in progress gets its own back.
	outer := q.crash
	q.crash = q.crashPlanFor(m)
	err := handle(m.Topic, m.ID, m.Data)
	cp := q.crash
	q.crash = outer
	outcome := "ack"
	crashed := cp != nil && (cp.fired || cp.armed)
	if crashed && err == nil {
		err = fmt.Errorf("%w %s after its last side effect (%s)", ErrInjectedCrash, cp.point, cp.source)
	}
	kind := d.kind.String()
	rec := Record{At: now, Topic: m.Topic, Type: m.Type, Label: m.label, Kind: d.kind}
	switch {
	case err == nil:
		m.acked = true
		q.counts.Acks++
		q.trace("%s %s %s (%s), attempt %d: ack", kind, m.Topic, m.ID, m.Describe(), m.attempts)
	default:
		outcome = "nack"
		if crashed {
			outcome = "crash"
			q.counts.Crashes++
		}
		q.counts.Nacks++
		m.lastErr = err.Error()
		q.trace("%s %s %s (%s), attempt %d: %s: %v", kind, m.Topic, m.ID, m.Describe(), m.attempts, outcome, err)
		switch {
		case m.acked:
			// Acknowledged by an earlier delivery: Pub/Sub has no more to
			// deliver.
		case m.attempts >= q.maxAttempts():
			m.dead = true
			q.dead = append(q.dead, DeadLetter{At: now.Sub(q.start), Topic: m.Topic, ID: m.ID, Type: m.Type, Label: m.label, Attempts: m.attempts, LastError: m.lastErr})
			q.counts.DeadLetters++
			q.trace("dead letter %s %s after %d attempts", m.Topic, m.ID, m.attempts)
		default:
			q.push(now.Add(q.backoff(m.attempts)), m, Retry)
		}
	}
	rec.Outcome = outcome
	q.log = append(q.log, rec)
}

func (q *Queue) maxAttempts() int {
	if n := q.cfg.MaxAttempts; n > 0 {
		return n
	}
	return DefaultMaxAttempts
}

// backoff is the redelivery delay after the given number of attempts.
func (q *Queue) backoff(attempts int) time.Duration {
	lo, hi := q.cfg.MinBackoff.D(), q.cfg.MaxBackoff.D()
	if lo == 0 {
		lo = DefaultMinBackoff
	}
	if hi == 0 {
		hi = DefaultMaxBackoff
	}
	d := lo
	for i := 1; i < attempts && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// Unsettled lists the messages still queued for a delivery that counts (a
// first delivery, or any of a message not yet acknowledged), sorted, then
// the held messages by hold name.
func (q *Queue) Unsettled() []string {
	var out []string
	for _, d := range q.queue {
		if !d.msg.dead && !(d.kind != First && d.msg.acked) {
			out = append(out, fmt.Sprintf("%s %s (%s) due at %s", d.msg.Topic, d.msg.ID, d.msg.Describe(), lang.FormatDuration(d.due.Sub(q.start))))
		}
	}
	sort.Strings(out)
	for _, h := range sortedKeys(q.holds) {
		for _, m := range q.holds[h] {
			out = append(out, fmt.Sprintf("%s %s (%s) held in %q", m.Topic, m.ID, m.Describe(), h))
		}
	}
	return out
}

// NotQuiet lists, in queue order, the deliveries still to come that count
// and the held messages: the violations of the quiet invariant.
func (q *Queue) NotQuiet() []string {
	var out []string
	for _, d := range q.queue {
		if !d.msg.dead && !(d.kind != First && d.msg.acked) {
			out = append(out, fmt.Sprintf("%s %s (%s) queued for %s", d.msg.Topic, d.msg.ID, d.msg.Describe(), lang.FormatDuration(d.due.Sub(q.start))))
		}
	}
	for _, h := range sortedKeys(q.holds) {
		for _, m := range q.holds[h] {
			out = append(out, fmt.Sprintf("%s %s held in %q", m.Topic, m.ID, h))
		}
	}
	return out
}

// DeadLetters are the messages dead-lettered so far.
func (q *Queue) DeadLetters() []DeadLetter { return q.dead }

// Records are the delivery attempts so far.
func (q *Queue) Records() []Record { return q.log }

// Counts counts the delivery attempts so far.
func (q *Queue) Counts() Counts { return q.counts }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
