#!/usr/bin/env bash
# ansible-lint, production profile, offline (Galaxy is never reached: the collections come
# with the pinned `ansible` package). Configuration: .ansible-lint.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg"
exec ansible-lint --offline --profile production "$@"
