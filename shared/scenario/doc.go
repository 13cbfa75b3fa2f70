// Package scenario runs flexslurm scenario files: a YAML description of a
// cluster spec, simulator options, an optional initial state, a timed
// sequence of events and injected faults, and assertions on the resulting
// state (docs/scenarios.md is the format's reference).
//
// Run loads a file and plays it against shared/harness: the four real
// function handlers, the in-memory store, the Compute Engine simulator
// (shared/computesim) reached over HTTP through the real apiv1 adapter, and a
// recording publisher, on a manual clock. Time is virtual: the runner jumps
// from one due item to the next (a step, a simulator transition, a message
// delivery, a reconcile tick, a timer of the Slurm model) and never sleeps:
// wall time is what the functions and the simulator spend (a simulated week
// with a reconcile pass every 30 minutes takes about a third of a second).
//
// Messages are delivered the way Pub/Sub delivers them to a push
// subscription: a handler that returns an error nacks the message, which is
// delivered again with the same id after an exponential backoff, until it is
// acknowledged or reaches the maximum number of attempts and goes to the
// dead-letter list the report shows. Faults act on this delivery path
// (duplicates, delays, holds and reorders, crashes at a side-effect boundary
// of the handler) and on the HTTP path to the simulator (Compute errors by
// method, path and body pattern, for a number of calls or a time window;
// VM listings that succeed but omit a VM or one of its fields, list_omit).
//
// A small model of Slurm (slurm.go) plays slurmctld, its power-saving hooks
// and the flexslurm agent: it applies the Slurm commands flexslurm publishes
// to node states, registers nodes whose VM runs, publishes snapshots, and —
// when a scenario asks for it — schedules submitted jobs, reports their
// lifecycle and suspends idle dynamic nodes after SuspendTime. Its
// configuration follows the specs apply steps publish, as a slurm.conf
// regenerated from them would: nodes appear with a new pool or a raised
// max_node_count and leave, once powered down with no job, when the spec
// drops them.
//
// The package imports shared/harness and the flexslurm packages it drives;
// nothing imports it but tests, shared/chaos and the CLI.
package scenario
