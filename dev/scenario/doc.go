// Package scenario runs flexslurm scenario files: a YAML description of a
// cluster spec, simulator options, an optional initial state, a timed
// sequence of events and injected faults, and assertions on the resulting
// state (docs/scenarios.md is the format's reference).
//
// Run loads a file and plays it against dev/harness: the four real
// function handlers, the in-memory store, the Compute Engine simulator
// (dev/computesim) reached through the real apiv1 adapter, and a
// recording publisher, on a manual clock. Time is virtual: the runner jumps
// from one due item to the next (a step, a simulator transition, a message
// delivery, a reconcile tick, a timer of the Slurm model) and never sleeps:
// wall time is what the functions and the simulator spend (a simulated week
// with a reconcile pass every 30 minutes takes about a third of a second).
//
// The runner composes parts that each own one concern:
//
//   - lang: the scenario language — the file format, its loading and
//     validation with errors naming the key path and line, durations and
//     times, the Slurm state notation and crash points. This package
//     re-exports its types and functions, so a caller loads, builds and
//     runs a scenario with one import;
//   - delivery: Pub/Sub's push delivery with its faults — nacks redelivered
//     with backoff until acknowledged or dead-lettered, duplicates, delays,
//     holds and reorders, crashes at a side-effect boundary of the handler,
//     random faults from a seed;
//   - computefault: the layer between flexslurm's Compute client and the
//     simulator — Compute errors by method, path and body pattern, for a
//     number of calls or a time window; listings that omit a VM or one of
//     its fields (list_omit); the call log;
//   - slurmmodel: a small model of Slurm playing slurmctld, its
//     power-saving hooks and the flexslurm agent;
//   - check: assertions, always watches and continuous invariants.
//
// The runner itself plays late decisions (late_decision steps, late.go):
// a reconcile pass that lists Compute, then waits while what is due
// happens, and decides with the later time against its earlier lists.
//
// The package and its parts are development tooling: nothing imports them
// but tests, dev/chaos and the CLI (deploy/production_imports_test.go).
package scenario
