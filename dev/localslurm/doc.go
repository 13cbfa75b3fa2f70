// Package localslurm runs a whole Slurm cluster on one host for
// `flexslurm local` and the integration tests (dev/slurmtest):
// munged, slurmctld and one slurmd per node, each started and stopped by
// PID, with slurm.conf built from a cluster spec (slurm.BuildConfig) and the
// hooks linked to the flexslurm binary. It is development tooling: it
// installs packages, kills processes and mounts file systems, so production
// code (the agent, the hooks, the node bootstrap) never imports it.
//
// A LocalCluster runs one Installation: the host's Slurm (Debian 12's
// 22.05, installed with apt-get when missing) or a chroot holding another
// release (Debian 13's 24.11 at DefaultChroot2411, built by
// .ci/slurm-chroot.sh), whose daemons run chrooted with /proc, /dev, /sys
// and the cluster's directories bound at the same paths, and whose client
// commands run through scripts (BinDir). One cluster runs per host, of
// either release: HostLockPath. docs/slurm-versions.md describes the
// releases and their differences.
package localslurm
