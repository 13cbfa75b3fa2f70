package emulator

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"
)

// Environment variables that point clients at the emulators.
const (
	EnvFirestoreHost = "FIRESTORE_EMULATOR_HOST"
	EnvPubSubHost    = "PUBSUB_EMULATOR_HOST"
	EnvProject       = "GOOGLE_CLOUD_PROJECT"
)

// EnvOptions configures Start.
type EnvOptions struct {
	// Project is exported as GOOGLE_CLOUD_PROJECT. Default DefaultProject.
	Project string
	// Host is the address both emulators listen on. Default "127.0.0.1".
	Host string
	// FirestorePort and PubSubPort are the TCP ports; 0 picks free ones.
	FirestorePort, PubSubPort int
	// LogDir, when set, receives firestore.log and pubsub.log, which
	// outlive Stop. When empty the logs are removed by Stop.
	LogDir string
	// StartTimeout bounds each emulator's readiness wait. Default
	// DefaultStartTimeout.
	StartTimeout time.Duration
}

// Env is a running pair of Firestore and Pub/Sub emulators.
type Env struct {
	Project   string
	Firestore *Process
	PubSub    *Process
}

// Start starts the Firestore and Pub/Sub emulators concurrently and waits
// until both answer. If either fails, the other is stopped and the errors of
// both are returned joined.
func Start(ctx context.Context, opts EnvOptions) (*Env, error) {
	if opts.Project == "" {
		opts.Project = DefaultProject
	}
	base := Options{Host: opts.Host, Project: opts.Project, StartTimeout: opts.StartTimeout}
	fsOpts, psOpts := base, base
	fsOpts.Port, psOpts.Port = opts.FirestorePort, opts.PubSubPort
	if opts.LogDir != "" {
		fsOpts.LogPath = filepath.Join(opts.LogDir, "firestore.log")
		psOpts.LogPath = filepath.Join(opts.LogDir, "pubsub.log")
	}

	e := &Env{Project: opts.Project}
	var fsErr, psErr error
	var wg sync.WaitGroup
	wg.Go(func() { e.Firestore, fsErr = StartFirestore(ctx, fsOpts) })
	wg.Go(func() { e.PubSub, psErr = StartPubSub(ctx, psOpts) })
	wg.Wait()
	if err := errors.Join(fsErr, psErr); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("starting emulators: %w", err)
	}
	return e, nil
}

// Vars returns the environment variables that point clients at the
// emulators, in NAME=VALUE form: FIRESTORE_EMULATOR_HOST,
// PUBSUB_EMULATOR_HOST and GOOGLE_CLOUD_PROJECT.
func (e *Env) Vars() []string {
	var vars []string
	if e.Firestore != nil {
		vars = append(vars, EnvFirestoreHost+"="+e.Firestore.Addr())
	}
	if e.PubSub != nil {
		vars = append(vars, EnvPubSubHost+"="+e.PubSub.Addr())
	}
	return append(vars, EnvProject+"="+e.Project)
}

// Stop stops both emulators concurrently (see Process.Stop) and returns
// their errors joined. It is idempotent and safe on a partly started Env.
func (e *Env) Stop() error {
	var fsErr, psErr error
	var wg sync.WaitGroup
	if e.Firestore != nil {
		wg.Go(func() { fsErr = e.Firestore.Stop() })
	}
	if e.PubSub != nil {
		wg.Go(func() { psErr = e.PubSub.Stop() })
	}
	wg.Wait()
	return errors.Join(fsErr, psErr)
}

// processes returns the started emulators in a fixed order.
func (e *Env) processes() []*Process {
	var ps []*Process
	for _, p := range []*Process{e.Firestore, e.PubSub} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}
