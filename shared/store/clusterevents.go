package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
)

// Cluster events (shared/plan Events, docs/events.md "Cluster events") live
// in one collection under the root, one document per event:
//
//	cluster_events/{id}   ClusterEvent
//
// with expire_at (ClusterEventTTL after the event) for a Firestore TTL
// policy. An id is the cluster, the event's time in nanoseconds (19 digits),
// its index in its decision (4 digits) and a digest, so a cluster's events
// sort by id in time order and an event stored twice (same source and
// index) is written once.
const clusterEventsColl = "cluster_events"

// ClusterEventTTL is how long an event is kept: 30 days.
const ClusterEventTTL = 30 * 24 * time.Hour

// MaxEventPage bounds one page of events.
const MaxEventPage = 1000

// ClusterEvent is one stored cluster event.
type ClusterEvent struct {
	ID         string    `firestore:"id" json:"id"`
	Cluster    string    `firestore:"cluster" json:"cluster"`
	Type       string    `firestore:"type" json:"type"`
	Time       time.Time `firestore:"time" json:"time"`
	Pool       string    `firestore:"pool" json:"pool,omitempty"`
	Node       string    `firestore:"node" json:"node,omitempty"`
	VM         string    `firestore:"vm" json:"vm,omitempty"`
	Generation int64     `firestore:"generation" json:"generation,omitempty"`
	Job        string    `firestore:"job" json:"job,omitempty"`
	Message    string    `firestore:"message" json:"message"`
	ExpireAt   time.Time `firestore:"expire_at" json:"expire_at"`
	// Check is a HEALTH_CHECK_FAILED's hook (prolog, epilog,
	// health_check; "" when not known).
	Check string `firestore:"check" json:"check,omitempty"`
}

// ClusterEventID is the id of the index-th event a decision of cluster
// derived for the event source (the processed event's id) at t.
func ClusterEventID(cluster string, t time.Time, source string, index int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", cluster, source, index)))
	return fmt.Sprintf("%s-%019d-%04d-%s", cluster, t.UnixNano(), index, hex.EncodeToString(sum[:6]))
}

// EventFilter selects a cluster's events: those after the id After (""
// from the first), whose node, job and type equal the fields set, at most
// Limit (1–MaxEventPage) of them, oldest first.
type EventFilter struct {
	Node, Job, Type string
	After           string
	Limit           int
}

func (f EventFilter) match(e ClusterEvent) bool {
	return (f.Node == "" || e.Node == f.Node) && (f.Job == "" || e.Job == f.Job) && (f.Type == "" || e.Type == f.Type)
}

func (f EventFilter) limit() int {
	if f.Limit <= 0 || f.Limit > MaxEventPage {
		return MaxEventPage
	}
	return f.Limit
}

// EventLog stores and lists cluster events. Firestore and Memory implement
// it.
type EventLog interface {
	// AddEvents stores events (their ID, Cluster and ExpireAt set).
	AddEvents(ctx context.Context, evs []ClusterEvent) error
	// Events lists one cluster's events that f selects.
	Events(ctx context.Context, cluster string, f EventFilter) ([]ClusterEvent, error)
}

var (
	_ EventLog = (*Firestore)(nil)
	_ EventLog = (*Memory)(nil)
)

func checkEvent(e ClusterEvent) error {
	if err := checkID("cluster event", e.ID); err != nil {
		return err
	}
	if e.Cluster == "" || !strings.HasPrefix(e.ID, e.Cluster+"-") {
		return fmt.Errorf("cluster event %s: id does not start with its cluster %q", e.ID, e.Cluster)
	}
	return nil
}

// AddEvents implements EventLog: one batch write (Set: storing an event
// again rewrites the same document).
func (f *Firestore) AddEvents(ctx context.Context, evs []ClusterEvent) error {
	for start := 0; start < len(evs); start += 500 { // a batch holds at most 500 writes
		end := min(start+500, len(evs))
		bw := f.client.BulkWriter(ctx)
		var jobs []*firestore.BulkWriterJob
		for _, e := range evs[start:end] {
			if err := checkEvent(e); err != nil {
				bw.End()
				return err
			}
			e.Time, e.ExpireAt = storedTime(e.Time), storedTime(e.ExpireAt)
			j, err := bw.Set(f.client.Collection(f.root+clusterEventsColl).Doc(e.ID), e)
			if err != nil {
				bw.End()
				return fmt.Errorf("storing cluster event %s: %w", e.ID, err)
			}
			jobs = append(jobs, j)
		}
		bw.End()
		for i, j := range jobs {
			if _, err := j.Results(); err != nil {
				return fmt.Errorf("storing cluster event %s: %w", evs[start+i].ID, err)
			}
			f.writes.Add(1)
		}
	}
	return nil
}

// Events implements EventLog: one query, equality filters ordered by
// document id (Firestore's single-field indexes serve it).
func (f *Firestore) Events(ctx context.Context, cluster string, fl EventFilter) ([]ClusterEvent, error) {
	q := f.client.Collection(f.root+clusterEventsColl).Where("cluster", "==", cluster)
	for _, w := range [][2]string{{"node", fl.Node}, {"job", fl.Job}, {"type", fl.Type}} {
		if w[1] != "" {
			q = q.Where(w[0], "==", w[1])
		}
	}
	q = q.OrderBy(firestore.DocumentID, firestore.Asc)
	if fl.After != "" {
		q = q.StartAfter(fl.After)
	}
	it := q.Limit(fl.limit()).Documents(ctx)
	defer it.Stop()
	var out []ClusterEvent
	for {
		s, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing events of cluster %s: %w", cluster, err)
		}
		f.reads.Add(1)
		var e ClusterEvent
		if err := s.DataTo(&e); err != nil {
			return nil, fmt.Errorf("decoding cluster event %s: %w", s.Ref.ID, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// memoryEvents is Memory's event log.
type memoryEvents struct {
	mu   sync.Mutex
	byID map[string]ClusterEvent
}

// AddEvents implements EventLog.
func (m *Memory) AddEvents(_ context.Context, evs []ClusterEvent) error {
	for _, e := range evs {
		if err := checkEvent(e); err != nil {
			return err
		}
	}
	m.log.mu.Lock()
	defer m.log.mu.Unlock()
	if m.log.byID == nil {
		m.log.byID = map[string]ClusterEvent{}
	}
	for _, e := range evs {
		m.log.byID[e.ID] = e
	}
	return nil
}

// Events implements EventLog. Events past their ExpireAt (by the store's
// clock) are not listed, as Firestore's TTL would have deleted them.
func (m *Memory) Events(_ context.Context, cluster string, f EventFilter) ([]ClusterEvent, error) {
	now := time.Now()
	if m.now != nil {
		now = m.now()
	}
	m.log.mu.Lock()
	defer m.log.mu.Unlock()
	var out []ClusterEvent
	for id, e := range m.log.byID {
		if e.Cluster == cluster && id > f.After && f.match(e) && (e.ExpireAt.IsZero() || now.Before(e.ExpireAt)) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b ClusterEvent) int { return strings.Compare(a.ID, b.ID) })
	if len(out) > f.limit() {
		out = out[:f.limit()]
	}
	return out, nil
}
