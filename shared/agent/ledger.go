package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"
)

// Ledger bounds: Pub/Sub retains an unacknowledged message for at most 7
// days, so an id older than LedgerMaxAge can no longer be redelivered.
const (
	LedgerMaxAge     = 8 * 24 * time.Hour
	LedgerMaxEntries = 20000
)

// ErrLedgerLocked reports that another agent holds the ledger.
var ErrLedgerLocked = errors.New("the command ledger is locked by another flexslurm agent")

// LedgerEntry records one handled command.
type LedgerEntry struct {
	At      time.Time `json:"at"`
	Command string    `json:"command"`
	OK      bool      `json:"ok"`
	Detail  string    `json:"detail,omitempty"`
}

// Ledger is the agent's on-disk record of the command ids it has handled,
// so that a redelivered command is reported and skipped rather than applied
// again. It is one JSON file ({"version":1,"commands":{id: entry}}), rewritten
// atomically (temporary file, fsync, rename) after each command, and
// bounded to LedgerMaxEntries entries younger than LedgerMaxAge. An
// exclusive lock on <path>.lock keeps a second agent away.
type Ledger struct {
	path string
	lock *os.File

	mu      sync.Mutex
	entries map[string]LedgerEntry
}

type ledgerFile struct {
	Version  int                    `json:"version"`
	Commands map[string]LedgerEntry `json:"commands"`
}

// OpenLedger opens (or creates) the ledger at path and locks it. It fails
// with ErrLedgerLocked when another process holds it.
func OpenLedger(path string) (*Ledger, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("opening command ledger %s: %w", path, err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening command ledger %s: %w", path, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w (%s): %v", ErrLedgerLocked, path, err)
	}
	l := &Ledger{path: path, lock: lock, entries: map[string]LedgerEntry{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		l.Close()
		return nil, fmt.Errorf("reading command ledger %s: %w", path, err)
	default:
		var f ledgerFile
		if err := json.Unmarshal(b, &f); err != nil {
			l.Close()
			return nil, fmt.Errorf("command ledger %s is corrupt (move it aside to start afresh): %w", path, err)
		}
		if f.Commands != nil {
			l.entries = f.Commands
		}
	}
	return l, nil
}

// Close releases the lock.
func (l *Ledger) Close() error {
	if l.lock == nil {
		return nil
	}
	err := l.lock.Close()
	l.lock = nil
	return err
}

// Get returns the entry of command id, if it was handled.
func (l *Ledger) Get(id string) (LedgerEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[id]
	return e, ok
}

// Len returns the number of entries.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Record stores the entry of command id, prunes the ledger and writes it.
func (l *Ledger) Record(id string, e LedgerEntry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[id] = e
	l.prune(e.At)
	b, err := json.Marshal(ledgerFile{Version: 1, Commands: l.entries})
	if err != nil {
		return fmt.Errorf("encoding command ledger: %w", err)
	}
	if err := writeAtomic(l.path, b); err != nil {
		return fmt.Errorf("writing command ledger %s: %w", l.path, err)
	}
	return nil
}

// prune drops entries older than LedgerMaxAge before now, then the oldest
// beyond LedgerMaxEntries.
func (l *Ledger) prune(now time.Time) {
	for id, e := range l.entries {
		if now.Sub(e.At) > LedgerMaxAge {
			delete(l.entries, id)
		}
	}
	if len(l.entries) <= LedgerMaxEntries {
		return
	}
	ids := make([]string, 0, len(l.entries))
	for id := range l.entries {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return l.entries[ids[i]].At.Before(l.entries[ids[j]].At) })
	for _, id := range ids[:len(ids)-LedgerMaxEntries] {
		delete(l.entries, id)
	}
}

func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
