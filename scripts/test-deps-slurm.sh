#!/usr/bin/env bash
# Debian packages of the test Slurm cluster (tests/slurm/) and of the slurm_cluster role's
# molecule scenario, installed only when missing (idempotent: no apt-get at all when
# everything is there). Needs root (or sudo) when it installs.
#
#   slurmctld            the controller, on the host
#   slurmd               one per test node, each in its own network namespace
#   slurm-client         sbatch, srun, scontrol, sinfo, scancel (the role's commands)
#   munge                authentication between them (a private munged, its own key)
#   environment-modules  `module use/load` in the batch scripts (Tcl modules, as on Cray)
#   iproute2             ip netns / ip link: the nodes' namespaces, veths and the bridge
#   util-linux           nsenter / unshare: a node's hostname, /etc/hosts and network
#   procps               pgrep/ps: the teardown's and the tests' leftover checks
#
# Installing never starts the packages' own services (slurmctld, slurmd, munge): a
# policy-rc.d that forbids it is put in place for the install when none exists. The test
# cluster runs its own daemons with its own configuration, never these services.
set -euo pipefail

# file -> package that provides it
declare -A need=(
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
  [/usr/bin/unshare]=util-linux
  [/usr/bin/nsenter]=util-linux
  [/usr/bin/pgrep]=procps
)

missing=()
for path in "${!need[@]}"; do
  if [ ! -e "$path" ]; then
    pkg=${need[$path]}
    [[ " ${missing[*]-} " == *" $pkg "* ]] || missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "test-deps-slurm: all Debian packages present"
  exit 0
fi

echo "test-deps-slurm: installing ${missing[*]}"
SUDO=()
[ "$(id -u)" -eq 0 ] || SUDO=(sudo)
export DEBIAN_FRONTEND=noninteractive

policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# test-deps-slurm.sh: no service starts while it installs\nexit 101\n' \
    | "${SUDO[@]}" tee "$policy" >/dev/null
  "${SUDO[@]}" chmod 755 "$policy"
  trap '"${SUDO[@]}" rm -f "$policy"' EXIT
fi

"${SUDO[@]}" apt-get update -qq
# --no-install-recommends: no mail transport agent, no extra daemons.
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
