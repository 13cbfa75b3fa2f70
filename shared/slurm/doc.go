// Package slurm is flexslurm's interface to Slurm (tested against Slurm
// 22.05 and 24.11, the Debian 12 and 13 packages: docs/slurm-versions.md):
//
//   - hostlists: ExpandHostlist and CompressHostlist, with Slurm's grammar;
//   - node names: ValidNodeName, and Topology, the nodes and partitions of a
//     cluster spec's Flex-Start pools ("<cluster>-<pool>-<index>"), which
//     every caller uses to act only on its own cluster's nodes;
//   - Runner: scontrol, squeue and sinfo run by absolute path with argument
//     lists (never a shell, never PATH), with the queries flexslurm needs
//     (ShowNodes, ShowJob, ShowReservation, Nodes, Jobs, JobsByID,
//     JobsOnNodes) and UpdateNodes; CommandError and IsTransient classify
//     failures;
//   - parsers of `scontrol show node|job|reservation -o`, of `squeue --json`
//     and `sinfo --json` (22.05 ignores their filters: callers filter) and
//     of `squeue --Format`;
//   - Generate: the one generator of the Slurm configuration of a cluster
//     spec's Flex-Start pools — the slurm.conf lines (power saving, hooks
//     as HookLines, NodeName lines with the machine type's CPUs, memory and
//     GPUs, PartitionName lines whose MaxTime and MaxNodes make Slurm
//     refuse at submission a job no pool can run) and gres.conf — for
//     `flexslurm slurm-conf`, `flexslurm install controller` and
//     LocalCluster; ParseConfView and Diverge compare an existing
//     slurm.conf with it and say what to change;
//   - BuildConfig: the slurm.conf of a local cluster (Generate's lines with
//     each node's address and port), with the hooks linked to the flexslurm
//     binary. dev/localslurm runs a whole Slurm cluster on one host with
//     it, for `flexslurm local` and the integration tests (slurmtest); this
//     package holds no such development tooling.
//
// docs/slurm.md describes the hooks, the agent and the local cluster.
package slurm
