#!/usr/bin/env bash
# Debian packages the test suite needs beyond the .venv, installed only when missing
# (idempotent: no apt-get at all when everything is there). Needs root (or sudo) when it
# installs. Called by scripts/test.sh before pytest.
#
#   openssh-server  sshd of every multi-host test-bed node (tests/testbed/)
#   openssh-client  ssh/ssh-keygen: Ansible's connection and the test bed's keys
#   iproute2        ip netns / ip link / bridge: the test bed's namespaces, veths and bridges
#   util-linux      unshare / nsenter: each node's own hostname and mount namespace
#   procps          pgrep/ps: the tests' leftover checks
set -euo pipefail

# command -> package that provides it
declare -A need=(
  [/usr/sbin/sshd]=openssh-server
  [/usr/bin/ssh]=openssh-client
  [/usr/bin/ssh-keygen]=openssh-client
  [/usr/sbin/ip]=iproute2
  [/usr/bin/unshare]=util-linux
  [/usr/bin/nsenter]=util-linux
  [/usr/bin/pgrep]=procps
)

missing=()
for path in "${!need[@]}"; do
  if [ ! -x "$path" ]; then
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
"${SUDO[@]}" apt-get update -qq
# --no-install-recommends: no extra daemons (xauth, ncurses-term, ...) are needed.
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The package's own sshd (if its postinst started one) is not the test bed's: the test bed
# runs its own sshd per node with its own configuration, and never this service.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet ssh 2>/dev/null; then
  echo "test-deps: note: the system's ssh service is running; the test bed does not use it"
fi
