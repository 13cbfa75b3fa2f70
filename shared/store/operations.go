package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The REST API's own records (shared/api): its long-running operations and
// what it knows of each cluster beyond the functions' records (a cluster
// deleted through it). They live beside the clusters, under the same root:
//
//	api_operations/{operation id}   Operation
//	api_clusters/{cluster}          APICluster
//
// Operations carry expire_at (OperationTTL after they were created) for a
// Firestore TTL policy:
//
//	gcloud firestore fields ttls update expire_at --collection-group=api_operations --enable-ttl
const (
	operationsColl  = "api_operations"
	apiClustersColl = "api_clusters"
)

// OperationTTL is how long after its creation an operation's expire_at
// lies: 30 days.
const OperationTTL = 30 * 24 * time.Hour

// ErrNotFound is returned for an operation or API cluster record that does
// not exist.
var ErrNotFound = errors.New("not found")

// ErrExists is returned by CreateOperation for an id already taken.
var ErrExists = errors.New("already exists")

// Operation is one long-running operation of the REST API.
type Operation struct {
	// ID is the last segment of the operation's name.
	ID string `firestore:"id" json:"id"`
	// Name is projects/P/locations/L/operations/ID.
	Name string `firestore:"name" json:"name"`
	// Kind is the method that started it: create, update, delete,
	// reportFaultyNodes.
	Kind string `firestore:"kind" json:"kind"`
	// Cluster is the cluster id; Target the cluster's resource name.
	Cluster string `firestore:"cluster" json:"cluster"`
	Target  string `firestore:"target" json:"target"`
	// SpecSHA256 is, for create and update, the effective spec whose
	// application by ScaleUp completes the operation.
	SpecSHA256 string `firestore:"spec_sha256,omitempty" json:"spec_sha256,omitempty"`
	// Spec is that effective spec (shared/spec EffectiveJSON): what get
	// shows of a cluster created but not applied yet.
	Spec []byte `firestore:"spec,omitempty" json:"spec,omitempty"`
	// Nodes are the nodes a reportFaultyNodes names.
	Nodes []string `firestore:"nodes,omitempty" json:"nodes,omitempty"`
	// Done, and when it failed, the google.rpc.Code and message.
	Done         bool   `firestore:"done" json:"done"`
	ErrorCode    int32  `firestore:"error_code,omitempty" json:"error_code,omitempty"`
	ErrorMessage string `firestore:"error_message,omitempty" json:"error_message,omitempty"`
	// Progress is a one-line account of where it stands.
	Progress   string    `firestore:"progress,omitempty" json:"progress,omitempty"`
	CreateTime time.Time `firestore:"create_time" json:"create_time"`
	UpdateTime time.Time `firestore:"update_time" json:"update_time"`
	ExpireAt   time.Time `firestore:"expire_at" json:"expire_at"`
}

// API cluster states (APICluster.State).
const (
	APIClusterActive   = "ACTIVE"
	APIClusterDeleting = "DELETING"
	APIClusterDeleted  = "DELETED"
)

// APICluster is what the REST API keeps of a cluster beyond the functions'
// records: whether it was deleted through it.
type APICluster struct {
	ID         string    `firestore:"id" json:"id"`
	State      string    `firestore:"state" json:"state"`
	Operation  string    `firestore:"operation,omitempty" json:"operation,omitempty"` // the delete's
	UpdateTime time.Time `firestore:"update_time" json:"update_time"`
}

// APIState is the REST API's storage port. Firestore and Memory implement
// it.
type APIState interface {
	// CreateOperation stores a new operation; ErrExists when its id is taken.
	CreateOperation(ctx context.Context, op Operation) error
	// Operation reads one; ErrNotFound when there is none.
	Operation(ctx context.Context, id string) (Operation, error)
	// UpdateOperation reads, changes (fn) and writes one in a
	// transaction; fn may run more than once. ErrNotFound when there is
	// none.
	UpdateOperation(ctx context.Context, id string, fn func(op *Operation) error) (Operation, error)
	// APICluster reads a cluster's record; ok false when there is none.
	APICluster(ctx context.Context, id string) (c APICluster, ok bool, err error)
	// PutAPICluster writes a cluster's record.
	PutAPICluster(ctx context.Context, c APICluster) error
}

var (
	_ APIState = (*Firestore)(nil)
	_ APIState = (*MemoryAPIState)(nil)
)

func (f *Firestore) opRef(id string) *firestore.DocumentRef {
	return f.client.Collection(f.root + operationsColl).Doc(id)
}

// CreateOperation implements APIState.
func (f *Firestore) CreateOperation(ctx context.Context, op Operation) error {
	if err := checkID("operation", op.ID); err != nil {
		return err
	}
	op.CreateTime, op.UpdateTime, op.ExpireAt = storedTime(op.CreateTime), storedTime(op.UpdateTime), storedTime(op.ExpireAt)
	if _, err := f.opRef(op.ID).Create(ctx, &op); err != nil {
		if status.Code(err) == codes.AlreadyExists {
			return fmt.Errorf("operation %s: %w", op.ID, ErrExists)
		}
		return fmt.Errorf("creating operation %s: %w", op.ID, err)
	}
	f.writes.Add(1)
	return nil
}

// Operation implements APIState.
func (f *Firestore) Operation(ctx context.Context, id string) (Operation, error) {
	var op Operation
	if err := checkID("operation", id); err != nil {
		return op, fmt.Errorf("operation %q: %w", id, ErrNotFound)
	}
	s, err := f.opRef(id).Get(ctx)
	f.reads.Add(1)
	if status.Code(err) == codes.NotFound {
		return op, fmt.Errorf("operation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return op, fmt.Errorf("reading operation %s: %w", id, err)
	}
	if err := s.DataTo(&op); err != nil {
		return op, fmt.Errorf("decoding operation %s: %w", id, err)
	}
	return op, nil
}

// UpdateOperation implements APIState.
func (f *Firestore) UpdateOperation(ctx context.Context, id string, fn func(op *Operation) error) (Operation, error) {
	var out Operation
	if err := checkID("operation", id); err != nil {
		return out, fmt.Errorf("operation %q: %w", id, ErrNotFound)
	}
	ref := f.opRef(id)
	err := f.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		s, err := tx.Get(ref)
		f.reads.Add(1)
		if status.Code(err) == codes.NotFound {
			return fmt.Errorf("operation %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		var op Operation
		if err := s.DataTo(&op); err != nil {
			return fmt.Errorf("decoding operation %s: %w", id, err)
		}
		if err := fn(&op); err != nil {
			return err
		}
		op.UpdateTime = storedTime(op.UpdateTime)
		out = op
		return tx.Set(ref, &op)
	}, firestore.MaxAttempts(f.maxAttempts))
	if err != nil {
		return Operation{}, err
	}
	f.writes.Add(1)
	return out, nil
}

// APICluster implements APIState.
func (f *Firestore) APICluster(ctx context.Context, id string) (APICluster, bool, error) {
	var c APICluster
	if err := checkID("cluster", id); err != nil {
		return c, false, nil
	}
	s, err := f.client.Collection(f.root + apiClustersColl).Doc(id).Get(ctx)
	f.reads.Add(1)
	if status.Code(err) == codes.NotFound {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("reading API record of cluster %s: %w", id, err)
	}
	if err := s.DataTo(&c); err != nil {
		return c, false, fmt.Errorf("decoding API record of cluster %s: %w", id, err)
	}
	return c, true, nil
}

// PutAPICluster implements APIState.
func (f *Firestore) PutAPICluster(ctx context.Context, c APICluster) error {
	if err := checkID("cluster", c.ID); err != nil {
		return err
	}
	c.UpdateTime = storedTime(c.UpdateTime)
	if _, err := f.client.Collection(f.root+apiClustersColl).Doc(c.ID).Set(ctx, &c); err != nil {
		return fmt.Errorf("writing API record of cluster %s: %w", c.ID, err)
	}
	f.writes.Add(1)
	return nil
}

// MemoryAPIState is the in-memory APIState, for tests and the harness.
type MemoryAPIState struct {
	mu       sync.Mutex
	ops      map[string]Operation
	clusters map[string]APICluster
}

// NewMemoryAPIState returns an empty one.
func NewMemoryAPIState() *MemoryAPIState {
	return &MemoryAPIState{ops: map[string]Operation{}, clusters: map[string]APICluster{}}
}

func cloneOp(op Operation) Operation {
	op.Nodes = append([]string(nil), op.Nodes...)
	op.Spec = append([]byte(nil), op.Spec...)
	return op
}

// CreateOperation implements APIState.
func (m *MemoryAPIState) CreateOperation(_ context.Context, op Operation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if op.ID == "" {
		return errors.New("operation: empty id")
	}
	if _, ok := m.ops[op.ID]; ok {
		return fmt.Errorf("operation %s: %w", op.ID, ErrExists)
	}
	m.ops[op.ID] = cloneOp(op)
	return nil
}

// Operation implements APIState.
func (m *MemoryAPIState) Operation(_ context.Context, id string) (Operation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	op, ok := m.ops[id]
	if !ok {
		return Operation{}, fmt.Errorf("operation %s: %w", id, ErrNotFound)
	}
	return cloneOp(op), nil
}

// UpdateOperation implements APIState.
func (m *MemoryAPIState) UpdateOperation(_ context.Context, id string, fn func(op *Operation) error) (Operation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	op, ok := m.ops[id]
	if !ok {
		return Operation{}, fmt.Errorf("operation %s: %w", id, ErrNotFound)
	}
	op = cloneOp(op)
	if err := fn(&op); err != nil {
		return Operation{}, err
	}
	m.ops[id] = cloneOp(op)
	return op, nil
}

// APICluster implements APIState.
func (m *MemoryAPIState) APICluster(_ context.Context, id string) (APICluster, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.clusters[id]
	return c, ok, nil
}

// PutAPICluster implements APIState.
func (m *MemoryAPIState) PutAPICluster(_ context.Context, c APICluster) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clusters[c.ID] = c
	return nil
}

// Operations returns a copy of every stored operation, by id (tests).
func (m *MemoryAPIState) Operations() map[string]Operation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.ops)
}
