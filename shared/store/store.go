// Package store is flexslurm's durable state: the port every function uses to
// read and change cluster, pool, node and job records, and the processed-event
// ledger that makes each event apply at most once. Firestore (firestore.go)
// is the production adapter; Memory is an in-memory implementation held to
// the same contract by the conformance suite in shared/store/storetest.
//
// Every read-modify-write goes through Update, which runs as one transaction.
//
// This package imports shared/model and, for the adapter, the Firestore
// client; nothing else from flexslurm.
package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
)

// ErrDuplicateEvent is returned by Update when Scope.EventID was already
// applied: fn was not called and nothing was written. Callers treat the event
// as done (and may re-drive in-flight intents idempotently).
var ErrDuplicateEvent = errors.New("event already applied")

// DuplicateError is the error Update returns for an event already applied.
// It matches ErrDuplicateEvent (errors.Is) and carries the EventNote the
// first application stored.
type DuplicateError struct {
	EventID string
	Note    []byte
}

func (e *DuplicateError) Error() string { return "event " + e.EventID + " already applied" }

// Is makes errors.Is(err, ErrDuplicateEvent) true.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicateEvent }

// MaxEventNoteBytes bounds model.State.EventNote (Firestore documents are at
// most 1 MiB).
const MaxEventNoteBytes = 256 << 10

// ErrConflict is returned when a transaction could not commit because of
// concurrent writers after the adapter's retries. It is transient.
var ErrConflict = errors.New("concurrent update conflict")

// Scope selects what Update and Read load.
type Scope struct {
	// Cluster is the cluster id. Required.
	Cluster string
	// AllPools loads every pool of the cluster with its nodes and active jobs.
	AllPools bool
	// Pools lists the pools whose records, nodes and active (pending or
	// running) jobs are loaded when AllPools is false.
	Pools []string
	// PoolRecords lists pools whose records alone are loaded, without
	// their nodes or jobs (a pool also in Pools, or under AllPools, is
	// loaded whole). An unknown id loads nothing.
	PoolRecords []string
	// AllPoolRecords loads the record of every pool of the cluster,
	// without their nodes or jobs (a pool also in Pools, or under
	// AllPools, is loaded whole): what a reader that needs the pools but
	// none of their nodes, such as the reconciler listing Compute, reads.
	AllPoolRecords bool
	// Jobs lists job ids loaded in addition, whatever their state or pool
	// (a job seen for the first time has no pool yet).
	Jobs []string
	// Nodes lists node names loaded in addition, by name, whatever their
	// pool; a name without a record loads nothing. With PoolRecords and
	// Jobs it lets an event read exactly the records it concerns, not
	// every node and active job of their pools.
	Nodes []string
	// JobsOfRequested loads, in addition, the record of the job every
	// loaded node still waiting on capacity (phase requested) was
	// provisioned for (model.Node.JobID), whatever the job's state: a
	// reconcile pass must know a job has ended to stop buying capacity
	// for it, and it loads active jobs only.
	JobsOfRequested bool
	// Slurm loads the latest Slurm snapshot (model.State.Slurm); an Update
	// that sets it writes it back when changed.
	Slurm bool
	// EventID, when set, makes Update apply at most once per id: a second
	// Update with the same id returns a *DuplicateError (matching
	// ErrDuplicateEvent) carrying the stored EventNote, without calling fn.
	EventID string
	// EventKind is stored with the event marker, for operators.
	EventKind string
}

// Store is the state port.
type Store interface {
	// Update loads the scoped state in a transaction, calls fn with it, and
	// atomically writes every record fn added or changed and deletes every
	// record fn removed from the maps, together with the event marker when
	// Scope.EventID is set. fn may be called more than once (transaction
	// retries) and must not have side effects beyond editing st. An error
	// from fn aborts the transaction and is returned unchanged.
	//
	// st is fn's to edit, during and after the transaction, and nothing
	// of it reaches the store but through the writes above, except what
	// is replaced, never edited in place (model.State.CloneEditable): the
	// Slurm view and the cluster record's Spec and Node.PoolImages that st
	// holds, as loaded or as fn put them, may be the store's own.
	Update(ctx context.Context, scope Scope, fn func(st *model.State) error) error
	// Read loads the scoped state without a transaction. The state is the
	// caller's, under the same terms as Update's st: its Slurm view and
	// the cluster record's Spec and Node.PoolImages are replaced, never
	// edited in place.
	Read(ctx context.Context, scope Scope) (*model.State, error)
	// Clusters lists the ids of every stored cluster.
	Clusters(ctx context.Context) ([]string, error)
	// ForgetEvents deletes processed-event markers older than the cutoff and
	// returns how many it deleted (the ledger only has to outlive redelivery:
	// Pub/Sub's retry window is 24 h for gen2 functions, https://cloud.google.com/functions/docs/bestpractices/retries).
	ForgetEvents(ctx context.Context, cluster string, before time.Time) (int, error)
}

// jobsOfRequested returns, sorted and each once, the jobs that st's nodes
// waiting on capacity were provisioned for and that st does not hold.
func jobsOfRequested(st *model.State) []string {
	var ids []string
	for _, n := range st.Nodes {
		if n.Phase == model.PhaseRequested && n.JobID != "" {
			if _, ok := st.Jobs[n.JobID]; !ok {
				ids = append(ids, n.JobID)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}
