#!/usr/bin/env bash
# slurm-chroot.sh — the Slurm 24.11 root file system beside the host's
# Slurm 22.05: a Debian 13 (trixie) chroot holding slurmctld, slurmd,
# slurm-client and munge, in which dev/localslurm runs a second local
# cluster (docs/slurm-versions.md). Root only.
#
#   .ci/slurm-chroot.sh build [DIR]   build DIR unless it is already good (a few minutes)
#   .ci/slurm-chroot.sh check [DIR]   exit 0 when DIR is good, else say why and exit 1
#
# DIR defaults to $FLEXSLURM_SLURM2411_ROOT or /var/lib/flexslurm/slurm-24.11,
# where the tests look for it. The Debian mirror is the one of this
# machine's apt sources ($FLEXSLURM_DEBIAN_MIRROR overrides it). A broken or
# partial DIR is rebuilt; a build runs in DIR.new and replaces DIR only
# once it is good.
set -euo pipefail
cmd=${1:-}
DIR=${2:-${FLEXSLURM_SLURM2411_ROOT:-/var/lib/flexslurm/slurm-24.11}}
STAMP=.flexslurm-slurm-chroot
SUITE=trixie
WANT=24.11

die() { echo "slurm-chroot: $*" >&2; exit 1; }

check() {  # $1: the directory; prints why it is not good
  local d=$1 v
  [ -f "$d/$STAMP" ] || { echo "$d is missing or was not built to the end (no $d/$STAMP)"; return 1; }
  for f in usr/sbin/slurmctld usr/sbin/slurmd usr/sbin/munged usr/bin/scontrol usr/bin/sbatch etc/munge/munge.key etc/hosts; do
    [ -e "$d/$f" ] || { echo "$d/$f is missing"; return 1; }
  done
  v=$(chroot "$d" /usr/sbin/slurmctld -V 2>&1) || { echo "chroot $d slurmctld -V failed: $v"; return 1; }
  case "$v" in *" $WANT".*) ;; *) echo "chroot $d holds '$v', not Slurm $WANT"; return 1 ;; esac
  chroot "$d" /usr/bin/getent hosts localhost >/dev/null || { echo "localhost does not resolve in $d"; return 1; }
}

unmount_under() {  # detach whatever a crashed local cluster left mounted under $1, deepest first
  local d=$1 m
  awk -v d="$d/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | awk '{ print length, $0 }' | sort -rn |
    cut -d' ' -f2- | while read -r m; do umount -l "$m" || die "cannot unmount $m"; done
}

mirror() {
  local m=${FLEXSLURM_DEBIAN_MIRROR:-}
  if [ -z "$m" ]; then
    m=$( { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{ print $2 }'
           grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{ print $2 }'; } |
         grep -v -e security -e snapshot -e cloud.google -e nodesource | head -1)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

build() {
  [ "$(id -u)" = 0 ] || die "building the chroot needs root"
  if why=$(check "$DIR"); then echo "slurm-chroot: $DIR is good: $(chroot "$DIR" /usr/sbin/slurmctld -V)"; return 0; fi
  echo "slurm-chroot: (re)building $DIR: $why"
  if ! command -v mmdebstrap >/dev/null; then
    command -v apt-get >/dev/null || die "mmdebstrap is not installed and there is no apt-get to install it"
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null ||
      die "installing mmdebstrap failed"
  fi
  mkdir -p "$(dirname "$DIR")"
  # A local cluster of the chroot may be running (its mounts are in DIR):
  # wait for the host's local-cluster lock, which every such cluster holds.
  exec 9>/tmp/flexslurm-localcluster.lock
  flock -w 1800 9 || die "the local Slurm cluster lock /tmp/flexslurm-localcluster.lock stayed busy for 30 min"
  for d in "$DIR" "$DIR.new"; do
    unmount_under "$d"
    # --one-file-system: never descend into a bind mount (/dev, /proc) left behind
    [ -e "$d" ] && rm -rf --one-file-system "$d"
  done
  local m start
  m=$(mirror)
  start=$(date +%s)
  echo "slurm-chroot: mmdebstrap $SUITE from $m (takes a few minutes)"
  mmdebstrap --variant=apt --include=slurmctld,slurmd,slurm-client,munge "$SUITE" "$DIR.new" "$m" ||
    die "mmdebstrap failed"
  # The client commands resolve SlurmctldHost=localhost: mmdebstrap writes no /etc/hosts.
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$DIR.new/etc/hosts"
  chroot "$DIR.new" /usr/sbin/slurmctld -V > "$DIR.new/$STAMP"
  why=$(check "$DIR.new") || die "the new chroot is not good: $why"
  mv "$DIR.new" "$DIR"
  echo "slurm-chroot: built $DIR in $(( $(date +%s) - start )) s: $(cat "$DIR/$STAMP")"
}

case "$cmd" in
  build) build ;;
  check) check "$DIR" ;;
  -h|--help|help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
