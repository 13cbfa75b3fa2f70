// Package slurmmodel is a small model of Slurm for scenarios: it plays
// slurmctld, its power-saving hooks and the flexslurm agent. It applies the
// Slurm commands flexslurm publishes to node states, registers nodes whose
// VM runs, publishes snapshots, and — when a scenario asks for it
// (slurm.simulate) — schedules submitted jobs, reports their lifecycle and
// suspends idle dynamic nodes after SuspendTime. Its configuration follows
// the specs apply steps publish, as a slurm.conf regenerated from them
// would: nodes appear with a new pool or a raised max_node_count and leave,
// once powered down with no job, when the spec drops them.
//
// The model is driven by a scenario runner on a virtual clock: every method
// takes the simulated now, Update brings the model to it given the nodes'
// live VMs, and NextDue says when the passage of time alone would change
// something. It never reads the wall clock.
package slurmmodel
