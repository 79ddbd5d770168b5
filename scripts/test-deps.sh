#!/usr/bin/env bash
# Debian packages the test suite needs beyond the .venv, installed only when missing
# (idempotent: no apt-get at all when everything is there). Needs root (or sudo) when it
# installs. Called by scripts/test.sh before pytest.
#
#   openssh-server       sshd of every multi-host test-bed node (tests/testbed/)
#   openssh-client       ssh/ssh-keygen: Ansible's connection and the test bed's keys
#   slurmctld, slurmd    the test Slurm cluster (tests/slurm/): controller on the host,
#                        one slurmd per node namespace
#   slurm-client         sbatch, srun, scontrol, sinfo, scancel (the slurm_cluster role)
#   munge                authentication between them (a private munged, its own key)
#   environment-modules  `module use/load` in the batch scripts (Tcl modules, as on Cray)
#   iproute2             ip netns / ip link / bridge: namespaces, veths and bridges; tc: the
#                        test bed's shaped private links (tbf)
#   util-linux           unshare / nsenter: each node's own hostname, mounts and network
#   procps               pgrep/ps: the tests' leftover checks
#   sshfs                the test bed's shared file system (tests/testbed/shared_fs.py): FUSE
#                        over SFTP, since this kernel has no NFS client
#
# Installing never starts the packages' own services (sshd, slurmctld, slurmd, munge): the
# test infrastructure runs its own daemons with its own configuration, never these.
set -euo pipefail

# file -> package that provides it
declare -A need=(
  [/usr/sbin/sshd]=openssh-server
  [/usr/bin/ssh]=openssh-client
  [/usr/bin/ssh-keygen]=openssh-client
  [/usr/sbin/slurmctld]=slurmctld
  [/usr/sbin/slurmd]=slurmd
  [/usr/bin/sbatch]=slurm-client
  [/usr/bin/srun]=slurm-client
  [/usr/bin/scontrol]=slurm-client
  [/usr/bin/sinfo]=slurm-client
  [/usr/bin/scancel]=slurm-client
  [/usr/sbin/munged]=munge
  [/usr/sbin/mungekey]=munge
  [/usr/share/modules/init/bash]=environment-modules
  [/usr/sbin/ip]=iproute2
  [/usr/sbin/tc]=iproute2
  [/usr/bin/unshare]=util-linux
  [/usr/bin/nsenter]=util-linux
  [/usr/bin/pgrep]=procps
  [/usr/bin/sshfs]=sshfs
)

missing=()
for path in "${!need[@]}"; do
  if [ ! -e "$path" ]; then
    pkg=${need[$path]}
    [[ " ${missing[*]-} " == *" $pkg "* ]] || missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "test-deps: all Debian packages present"
  exit 0
fi

echo "test-deps: installing ${missing[*]}"
SUDO=()
[ "$(id -u)" -eq 0 ] || SUDO=(sudo)
export DEBIAN_FRONTEND=noninteractive

policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# scripts/test-deps.sh: no service starts while it installs\nexit 101\n' \
    | "${SUDO[@]}" tee "$policy" >/dev/null
  "${SUDO[@]}" chmod 755 "$policy"
  trap '"${SUDO[@]}" rm -f "$policy"' EXIT
fi

"${SUDO[@]}" apt-get update -qq
# --no-install-recommends: no mail transport agent, no extra daemons.
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
