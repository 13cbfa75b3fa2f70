package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flexslurm/flexslurm/shared/model"
)

// EventMarkerTTL is how long after it was applied an event marker's
// expire_at lies: 7 days, well beyond Pub/Sub's 24 h redelivery window.
const EventMarkerTTL = 7 * 24 * time.Hour

// DefaultMaxAttempts is the default number of attempts of an Update
// transaction. Both Firestore and its emulator abort contended
// transactions; the client library's default of 5 attempts loses updates
// under moderate contention.
const DefaultMaxAttempts = 20

// Firestore limits: values in one `in` filter, and disjunctions of a query in
// disjunctive normal form (`pool in [p…]` and `state in [2 states]` is
// len(p)×2 disjunctions). deleteBatch bounds one round of ForgetEvents,
// maxGetAll one batch get of nodes by name.
const (
	maxInValues      = 30
	maxDisjunctions  = 30
	deleteBatch      = 500
	maxGetAll        = 500
	clustersColl     = "clusters"
	poolsColl        = "pools"
	nodesColl        = "nodes"
	jobsColl         = "jobs"
	eventsColl       = "events"
	appliedAtField   = "applied_at"
	slurmColl        = "slurm"
	slurmDoc         = "latest"
	defaultFirestore = "(default)"
)

// activeStates are the job states Update and Read load for scoped pools.
var activeStates = []string{string(model.JobPending), string(model.JobRunning)}

// Stats counts the adapter's work since it was created. Reads are billed
// document reads (a document fetched by id counts whether or not it exists;
// a query counts its result documents, or 1 when it returns none). Writes are
// documents set, created or deleted by committed transactions and by
// ForgetEvents.
type Stats struct {
	Transactions int64 // Update transactions committed
	Attempts     int64 // Update transaction attempts, committed or not
	Reads        int64
	Writes       int64
}

// FirestoreOption configures a Firestore adapter.
type FirestoreOption func(*Firestore)

// WithRoot prefixes the top-level collection: the clusters live in
// prefix+"clusters". A prefix without "/" keeps them at the top level
// ("t42_" → "t42_clusters"); a prefix naming a document ("envs/dev/") nests
// them under it. Tests use a unique prefix to isolate their data. The adapter
// panics if the result is not a valid collection path.
func WithRoot(prefix string) FirestoreOption {
	return func(f *Firestore) { f.root = prefix }
}

// WithMaxAttempts sets how many times Update attempts its transaction before
// it gives up with ErrConflict (DefaultMaxAttempts when n < 1).
func WithMaxAttempts(n int) FirestoreOption {
	return func(f *Firestore) {
		if n < 1 {
			n = DefaultMaxAttempts
		}
		f.maxAttempts = n
	}
}

// WithClock sets the clock that stamps event markers (time.Now by default).
func WithClock(now func() time.Time) FirestoreOption {
	return func(f *Firestore) {
		if now != nil {
			f.now = now
		}
	}
}

// Firestore is the production Store, backed by Cloud Firestore in Native
// mode (or its emulator). It is safe for concurrent use.
//
// # Layout
//
// All documents live under one top-level collection, "clusters" by default
// (WithRoot prefixes it, so "t42_" gives "t42_clusters" and "envs/dev/"
// gives "envs/dev/clusters"):
//
//	clusters/{cluster}                   model.Cluster
//	clusters/{cluster}/pools/{pool}      model.Pool
//	clusters/{cluster}/nodes/{node}      model.Node
//	clusters/{cluster}/jobs/{job}        model.Job
//	clusters/{cluster}/events/{sha256}   event marker {id, kind, applied_at, expire_at}
//
// Document ids are the keys of model.State's maps (pool id, node name, job
// id); an event marker's id is the lowercase hex SHA-256 of the event id, so
// any event id is a valid document id. Field names are the records'
// `firestore` struct tags.
//
// # Indexes and TTL
//
// The queries are nodes by pool (`pool in [...]`), event markers by
// applied_at (`applied_at < t`), both served by the automatic single-field
// indexes, and active jobs by pool and state (`pool in [...]` and
// `state in [...]`, equality filters, which Firestore can serve by merging
// the two single-field indexes; should a database answer FailedPrecondition
// asking for a composite index on jobs (pool, state), its error links to
// creating it). An index exemption on clusters.spec is advisable: the spec is
// never queried.
// Event markers carry expire_at = applied_at + EventMarkerTTL so that a TTL
// policy can clean the ledger without ForgetEvents:
//
//	gcloud firestore fields ttls update expire_at --collection-group=events --enable-ttl
//
// # Precision
//
// Firestore keeps timestamps to the microsecond. The adapter truncates every
// time.Time field to the microsecond and converts it to UTC before it
// compares or writes a record, so what Read returns is the written instant
// truncated to the microsecond, in UTC. Zero times are stored as
// 0001-01-01T00:00:00Z and read back as the zero time.Time. time.Duration
// fields are stored as integer nanoseconds and round-trip exactly; []byte
// fields are stored as bytes.
//
// # Cost
//
// One Update costs, in billed operations:
//
//	reads  = 1 event marker (when Scope.EventID is set; a missing marker is a read)
//	       + 1 cluster document
//	       + the scoped pool documents (one per listed id, existing or not; or every pool when AllPools)
//	       + the scoped pools' nodes (at least 1 per query; one query per 30 pools, or one when AllPools)
//	       + their active jobs (at least 1 per query; one query per 15 pools, or one when AllPools)
//	       + one per id in Scope.PoolRecords not already counted above
//	       + one per id in Scope.Jobs
//	       + one per name in Scope.Nodes (existing or not)
//	writes = records fn added, changed or removed + 1 event marker
//
// An Update that changes nothing and has no EventID commits no write. Each
// retried attempt pays the reads again.
type Firestore struct {
	client      *firestore.Client
	owned       bool
	root        string
	clusters    *firestore.CollectionRef
	maxAttempts int
	now         func() time.Time

	transactions, attempts, reads, writes atomic.Int64
}

var _ Store = (*Firestore)(nil)

// NewFirestore opens a Firestore client for project and database ("" means
// "(default)"; project "" means detect it from the environment, e.g.
// GOOGLE_CLOUD_PROJECT) and returns an adapter that owns it, with the default
// root and attempts (see With). When FIRESTORE_EMULATOR_HOST is set the client
// talks to that emulator without credentials, as the client library does.
func NewFirestore(ctx context.Context, project, database string, opts ...option.ClientOption) (*Firestore, error) {
	if project == "" {
		project = firestore.DetectProjectID
	}
	if database == "" {
		database = defaultFirestore
	}
	c, err := firestore.NewClientWithDatabase(ctx, project, database, opts...)
	if err != nil {
		return nil, fmt.Errorf("opening firestore database %s: %w", database, err)
	}
	f := NewFirestoreFromClient(c)
	f.owned = true
	return f, nil
}

// NewFirestoreFromClient returns an adapter over an open client. The caller
// keeps ownership of the client: Close leaves it open.
func NewFirestoreFromClient(c *firestore.Client, opts ...FirestoreOption) *Firestore {
	f := &Firestore{client: c, root: "", maxAttempts: DefaultMaxAttempts, now: time.Now}
	for _, o := range opts {
		o(f)
	}
	f.clusters = c.Collection(f.root + clustersColl)
	if f.clusters == nil {
		panic(fmt.Sprintf("store: root %q does not make a valid Firestore collection path", f.root))
	}
	return f
}

// With returns a new adapter over the same client with opts applied on top
// of f's settings. The new adapter has its own Stats and does not own the
// client: keep f open while it is used.
func (f *Firestore) With(opts ...FirestoreOption) *Firestore {
	base := []FirestoreOption{WithRoot(f.root), WithMaxAttempts(f.maxAttempts), WithClock(f.now)}
	return NewFirestoreFromClient(f.client, append(base, opts...)...)
}

// Close closes the client if NewFirestore opened it; otherwise it does nothing.
func (f *Firestore) Close() error {
	if !f.owned {
		return nil
	}
	return f.client.Close()
}

// Stats returns the adapter's counters.
func (f *Firestore) Stats() Stats {
	return Stats{
		Transactions: f.transactions.Load(),
		Attempts:     f.attempts.Load(),
		Reads:        f.reads.Load(),
		Writes:       f.writes.Load(),
	}
}

func (f *Firestore) clusterRef(cluster string) *firestore.DocumentRef {
	return f.clusters.Doc(cluster)
}

// eventMarker is the document that records an applied event.
type eventMarker struct {
	ID        string    `firestore:"id"`
	Kind      string    `firestore:"kind"`
	AppliedAt time.Time `firestore:"applied_at"`
	// ExpireAt is AppliedAt + EventMarkerTTL, for a Firestore TTL policy.
	ExpireAt time.Time `firestore:"expire_at"`
	// Note is the decision's EventNote (model.State), returned on redelivery.
	Note []byte `firestore:"note,omitempty"`
}

func eventDocID(eventID string) string {
	sum := sha256.Sum256([]byte(eventID))
	return hex.EncodeToString(sum[:])
}

// checkID reports whether id can be a Firestore document id.
func checkID(kind, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty %s id", kind)
	case strings.Contains(id, "/"), id == ".", id == "..",
		len(id) > 1500,
		len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"):
		return fmt.Errorf("%s id %q is not a valid Firestore document id", kind, id)
	}
	return nil
}

// reader is what loading needs from a transaction or from the client.
type reader interface {
	getAll(ctx context.Context, refs []*firestore.DocumentRef) ([]*firestore.DocumentSnapshot, error)
	documents(ctx context.Context, q firestore.Query) *firestore.DocumentIterator
}

type txReader struct{ tx *firestore.Transaction }

func (r txReader) getAll(_ context.Context, refs []*firestore.DocumentRef) ([]*firestore.DocumentSnapshot, error) {
	return r.tx.GetAll(refs)
}

func (r txReader) documents(_ context.Context, q firestore.Query) *firestore.DocumentIterator {
	return r.tx.Documents(q)
}

type clientReader struct{ c *firestore.Client }

func (r clientReader) getAll(ctx context.Context, refs []*firestore.DocumentRef) ([]*firestore.DocumentSnapshot, error) {
	return r.c.GetAll(ctx, refs)
}

func (r clientReader) documents(ctx context.Context, q firestore.Query) *firestore.DocumentIterator {
	return q.Documents(ctx)
}

// Update implements Store. It runs one Firestore transaction of at most
// WithMaxAttempts attempts; see the type's doc for its cost. All reads happen
// before any write. A transaction still aborted after the last attempt yields
// an error wrapping ErrConflict (and the last Aborted status).
func (f *Firestore) Update(ctx context.Context, scope Scope, fn func(st *model.State) error) error {
	if scope.Cluster == "" {
		return fmt.Errorf("store update: scope has no cluster")
	}
	if err := checkID("cluster", scope.Cluster); err != nil {
		return fmt.Errorf("store update: %w", err)
	}
	cref := f.clusterRef(scope.Cluster)
	var marker *firestore.DocumentRef
	if scope.EventID != "" {
		marker = cref.Collection(eventsColl).Doc(eventDocID(scope.EventID))
	}
	var (
		fnErr  error
		writes int64
		dup    *DuplicateError
	)
	err := f.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		f.attempts.Add(1)
		fnErr, writes = nil, 0
		r := txReader{tx}
		if marker != nil {
			snaps, err := r.getAll(ctx, []*firestore.DocumentRef{marker})
			f.reads.Add(1)
			if err != nil {
				return fmt.Errorf("reading event marker %s: %w", marker.ID, err)
			}
			if snaps[0].Exists() {
				var m eventMarker
				if err := snaps[0].DataTo(&m); err != nil {
					return fmt.Errorf("decoding event marker %s: %w", marker.ID, err)
				}
				dup = &DuplicateError{EventID: scope.EventID, Note: m.Note}
				return ErrDuplicateEvent
			}
		}
		before, err := f.load(ctx, r, scope)
		if err != nil {
			return err
		}
		st := before.Clone()
		if err := fn(st); err != nil {
			fnErr = err
			return err
		}
		if len(st.EventNote) > MaxEventNoteBytes {
			fnErr = fmt.Errorf("store update: event note of %d bytes is above %d", len(st.EventNote), MaxEventNoteBytes)
			return fnErr
		}
		n, err := f.writeDiff(tx, cref, before, st)
		if err != nil {
			return err
		}
		if marker != nil {
			at := storedTime(f.now())
			m := eventMarker{ID: scope.EventID, Kind: scope.EventKind, AppliedAt: at, ExpireAt: at.Add(EventMarkerTTL), Note: st.EventNote}
			if err := tx.Create(marker, m); err != nil {
				return fmt.Errorf("writing event marker %s: %w", marker.ID, err)
			}
			n++
		}
		writes = n
		return nil
	}, firestore.MaxAttempts(f.maxAttempts))
	switch {
	case err == nil:
		f.transactions.Add(1)
		f.writes.Add(writes)
		return nil
	case fnErr != nil && err == fnErr:
		return err
	case errors.Is(err, ErrDuplicateEvent) && dup != nil:
		return dup
	case errors.Is(err, ErrDuplicateEvent):
		return ErrDuplicateEvent
	case marker != nil && status.Code(err) == codes.AlreadyExists:
		// Only the marker is created; everything else is set or deleted.
		// A concurrent delivery won the race: its note is read on the
		// next delivery.
		return &DuplicateError{EventID: scope.EventID}
	case status.Code(err) == codes.Aborted:
		return fmt.Errorf("store update of cluster %s: %w (%d attempts): %w", scope.Cluster, ErrConflict, f.maxAttempts, err)
	default:
		return fmt.Errorf("store update of cluster %s: %w", scope.Cluster, err)
	}
}

// Read implements Store. It reads without a transaction, so the records it
// returns are each current but not one consistent snapshot. Its reads are
// those of Update minus the event marker.
func (f *Firestore) Read(ctx context.Context, scope Scope) (*model.State, error) {
	if err := checkID("cluster", scope.Cluster); err != nil {
		return nil, fmt.Errorf("store read: %w", err)
	}
	st, err := f.load(ctx, clientReader{f.client}, scope)
	if err != nil {
		return nil, fmt.Errorf("store read of cluster %s: %w", scope.Cluster, err)
	}
	return st, nil
}

// load reads the scoped state of scope.Cluster.
func (f *Firestore) load(ctx context.Context, r reader, scope Scope) (*model.State, error) {
	cref := f.clusterRef(scope.Cluster)
	st := model.NewState()

	// One batch get: the cluster, the listed pools (whole or records
	// only) and the listed jobs.
	refs := []*firestore.DocumentRef{cref}
	var pools, records []string
	if !scope.AllPools {
		pools = uniq(scope.Pools)
		for _, id := range uniq(scope.PoolRecords) {
			if !slices.Contains(pools, id) {
				records = append(records, id)
			}
		}
		for _, id := range slices.Concat(pools, records) {
			if err := checkID("pool", id); err != nil {
				return nil, err
			}
		}
		if scope.AllPoolRecords {
			records = nil // the query of every pool below reads them
		}
		for _, id := range slices.Concat(pools, records) {
			refs = append(refs, cref.Collection(poolsColl).Doc(id))
		}
	}
	jobs := uniq(scope.Jobs)
	for _, id := range jobs {
		if err := checkID("job", id); err != nil {
			return nil, err
		}
		refs = append(refs, cref.Collection(jobsColl).Doc(id))
	}
	if scope.Slurm {
		refs = append(refs, cref.Collection(slurmColl).Doc(slurmDoc))
	}
	snaps, err := r.getAll(ctx, refs)
	f.reads.Add(int64(len(refs)))
	if err != nil {
		return nil, fmt.Errorf("reading cluster %s: %w", scope.Cluster, err)
	}
	for i, s := range snaps {
		if !s.Exists() {
			continue
		}
		switch {
		case scope.Slurm && i == len(refs)-1:
			v := new(model.SlurmView)
			if err := s.DataTo(v); err != nil {
				return nil, fmt.Errorf("decoding Slurm snapshot of %s: %w", scope.Cluster, err)
			}
			v.Upgrade() // one stored by an older version
			st.Slurm = v
		case i == 0:
			c := new(model.Cluster)
			if err := s.DataTo(c); err != nil {
				return nil, fmt.Errorf("decoding cluster %s: %w", scope.Cluster, err)
			}
			st.Cluster = c
		case i <= len(pools)+len(records):
			if err := decodeInto(s, "pool", st.Pools); err != nil {
				return nil, err
			}
		default:
			if err := decodeInto(s, "job", st.Jobs); err != nil {
				return nil, err
			}
		}
	}

	// The listed nodes, by name, in batches.
	nodeRefs := make([]*firestore.DocumentRef, 0, len(scope.Nodes))
	for _, name := range uniq(scope.Nodes) {
		if err := checkID("node", name); err != nil {
			return nil, err
		}
		nodeRefs = append(nodeRefs, cref.Collection(nodesColl).Doc(name))
	}
	if err := getAllInto(ctx, f, r, nodeRefs, "node", st.Nodes); err != nil {
		return nil, fmt.Errorf("reading nodes of cluster %s: %w", scope.Cluster, err)
	}

	nodes := cref.Collection(nodesColl).Query
	active := cref.Collection(jobsColl).Where("state", "in", activeStates)
	if scope.AllPools || scope.AllPoolRecords {
		if err := queryInto(ctx, f, r, cref.Collection(poolsColl).Query, "pool", st.Pools); err != nil {
			return nil, err
		}
	}
	if scope.AllPools {
		if err := queryInto(ctx, f, r, nodes, "node", st.Nodes); err != nil {
			return nil, err
		}
		if err := queryInto(ctx, f, r, active, "job", st.Jobs); err != nil {
			return nil, err
		}
		return st, f.readJobsOfRequested(ctx, r, cref, scope, st)
	}
	for chunk := range slices.Chunk(pools, maxInValues) {
		if err := queryInto(ctx, f, r, nodes.Where("pool", "in", chunk), "node", st.Nodes); err != nil {
			return nil, err
		}
	}
	for chunk := range slices.Chunk(pools, maxDisjunctions/len(activeStates)) {
		if err := queryInto(ctx, f, r, active.Where("pool", "in", chunk), "job", st.Jobs); err != nil {
			return nil, err
		}
	}
	return st, f.readJobsOfRequested(ctx, r, cref, scope, st)
}

// readJobsOfRequested loads, under Scope.JobsOfRequested, the jobs st's
// requested nodes were provisioned for that st does not hold yet (ended
// jobs: the queries above load active ones), by id, in batches.
func (f *Firestore) readJobsOfRequested(ctx context.Context, r reader, cref *firestore.DocumentRef, scope Scope, st *model.State) error {
	if !scope.JobsOfRequested {
		return nil
	}
	var refs []*firestore.DocumentRef
	for _, id := range jobsOfRequested(st) {
		if err := checkID("job", id); err != nil {
			return err
		}
		refs = append(refs, cref.Collection(jobsColl).Doc(id))
	}
	if err := getAllInto(ctx, f, r, refs, "job", st.Jobs); err != nil {
		return fmt.Errorf("reading jobs of requested nodes of cluster %s: %w", scope.Cluster, err)
	}
	return nil
}

// getAllInto reads refs in batches of maxGetAll and decodes every document
// that exists into m, keyed by document id.
func getAllInto[T any](ctx context.Context, f *Firestore, r reader, refs []*firestore.DocumentRef, kind string, m map[string]*T) error {
	for chunk := range slices.Chunk(refs, maxGetAll) {
		snaps, err := r.getAll(ctx, chunk)
		f.reads.Add(int64(len(chunk)))
		if err != nil {
			return err
		}
		for _, s := range snaps {
			if s.Exists() {
				if err := decodeInto(s, kind, m); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// query runs q and decodes every result into m, keyed by document id.
func queryInto[T any](ctx context.Context, f *Firestore, r reader, q firestore.Query, kind string, m map[string]*T) error {
	it := r.documents(ctx, q)
	defer it.Stop()
	n := int64(0)
	defer func() { f.reads.Add(max(n, 1)) }()
	for {
		s, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("querying %ss: %w", kind, err)
		}
		n++
		if err := decodeInto(s, kind, m); err != nil {
			return err
		}
	}
}

func decodeInto[T any](s *firestore.DocumentSnapshot, kind string, m map[string]*T) error {
	v := new(T)
	if err := s.DataTo(v); err != nil {
		return fmt.Errorf("decoding %s %s: %w", kind, s.Ref.ID, err)
	}
	m[s.Ref.ID] = v
	return nil
}

// writeDiff adds to tx a Set for every record of after that is new or
// differs from before (after normalisation), and a Delete for every record of
// before missing from after. It returns the number of writes.
func (f *Firestore) writeDiff(tx *firestore.Transaction, cref *firestore.DocumentRef, before, after *model.State) (int64, error) {
	var n int64
	if after.Cluster != nil {
		c := normalized(after.Cluster)
		if before.Cluster == nil || !reflect.DeepEqual(before.Cluster, c) {
			if err := tx.Set(cref, c); err != nil {
				return 0, fmt.Errorf("writing cluster %s: %w", cref.ID, err)
			}
			n++
		}
	}
	if after.Slurm != nil {
		v := normalized(after.Slurm)
		if before.Slurm == nil || !reflect.DeepEqual(before.Slurm, v) {
			if err := tx.Set(cref.Collection(slurmColl).Doc(slurmDoc), v); err != nil {
				return 0, fmt.Errorf("writing Slurm snapshot of %s: %w", cref.ID, err)
			}
			n++
		}
	}
	for _, d := range []func() (int64, error){
		func() (int64, error) {
			return diffDocs(tx, cref.Collection(poolsColl), "pool", before.Pools, after.Pools)
		},
		func() (int64, error) {
			return diffDocs(tx, cref.Collection(nodesColl), "node", before.Nodes, after.Nodes)
		},
		func() (int64, error) { return diffDocs(tx, cref.Collection(jobsColl), "job", before.Jobs, after.Jobs) },
	} {
		k, err := d()
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}

func diffDocs[T any](tx *firestore.Transaction, coll *firestore.CollectionRef, kind string, before, after map[string]*T) (int64, error) {
	var n int64
	for _, id := range sortedKeys(after) {
		v := after[id]
		if v == nil {
			return 0, fmt.Errorf("writing %s %s: nil record", kind, id)
		}
		nv := normalized(v)
		if old, ok := before[id]; ok && reflect.DeepEqual(old, nv) {
			continue
		}
		if err := checkID(kind, id); err != nil {
			return 0, err
		}
		if err := tx.Set(coll.Doc(id), nv); err != nil {
			return 0, fmt.Errorf("writing %s %s: %w", kind, id, err)
		}
		n++
	}
	for _, id := range sortedKeys(before) {
		if _, ok := after[id]; ok {
			continue
		}
		if err := tx.Delete(coll.Doc(id)); err != nil {
			return 0, fmt.Errorf("deleting %s %s: %w", kind, id, err)
		}
		n++
	}
	return n, nil
}

var timeType = reflect.TypeFor[time.Time]()

// normalized returns a copy of the record with every time.Time field as
// Firestore stores it (see storedTime).
func normalized[T any](v *T) *T {
	c := *v
	rv := reflect.ValueOf(&c).Elem()
	for i := range rv.NumField() {
		if fv := rv.Field(i); fv.Type() == timeType && fv.CanSet() {
			fv.Set(reflect.ValueOf(storedTime(fv.Interface().(time.Time))))
		}
	}
	return &c
}

// storedTime is t as Firestore returns it: truncated to the microsecond, in
// UTC, without monotonic reading.
func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Truncate(time.Microsecond).UTC()
}

// Clusters implements Store: the ids of every cluster document, sorted. One
// query; reads one document per cluster (at least 1).
func (f *Firestore) Clusters(ctx context.Context) ([]string, error) {
	it := f.clusters.Select().Documents(ctx)
	defer it.Stop()
	var ids []string
	for {
		s, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing clusters: %w", err)
		}
		ids = append(ids, s.Ref.ID)
	}
	f.reads.Add(max(int64(len(ids)), 1))
	sort.Strings(ids)
	return ids, nil
}

// ForgetEvents implements Store. It queries the cluster's markers with
// applied_at before the cutoff, 500 at a time, and deletes each batch with a
// BulkWriter: one read and one write per marker deleted. A concurrent run may
// make both count the same marker.
func (f *Firestore) ForgetEvents(ctx context.Context, cluster string, before time.Time) (int, error) {
	if err := checkID("cluster", cluster); err != nil {
		return 0, fmt.Errorf("forgetting events: %w", err)
	}
	q := f.clusterRef(cluster).Collection(eventsColl).
		Where(appliedAtField, "<", before).Select().Limit(deleteBatch)
	total := 0
	for {
		refs, err := f.pageRefs(ctx, q)
		if err != nil {
			return total, fmt.Errorf("listing events of cluster %s: %w", cluster, err)
		}
		if len(refs) == 0 {
			return total, nil
		}
		bw := f.client.BulkWriter(ctx)
		jobs := make([]*firestore.BulkWriterJob, 0, len(refs))
		for _, ref := range refs {
			j, err := bw.Delete(ref)
			if err != nil {
				bw.End()
				return total, fmt.Errorf("deleting event marker %s: %w", ref.ID, err)
			}
			jobs = append(jobs, j)
		}
		bw.End()
		for i, j := range jobs {
			if _, err := j.Results(); err != nil {
				return total, fmt.Errorf("deleting event marker %s: %w", refs[i].ID, err)
			}
			total++
			f.writes.Add(1)
		}
		if len(refs) < deleteBatch {
			return total, nil
		}
	}
}

func (f *Firestore) pageRefs(ctx context.Context, q firestore.Query) ([]*firestore.DocumentRef, error) {
	it := q.Documents(ctx)
	defer it.Stop()
	var refs []*firestore.DocumentRef
	for {
		s, err := it.Next()
		if errors.Is(err, iterator.Done) {
			f.reads.Add(max(int64(len(refs)), 1))
			return refs, nil
		}
		if err != nil {
			return nil, err
		}
		refs = append(refs, s.Ref)
	}
}

func uniq(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func sortedKeys[T any](m map[string]*T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
