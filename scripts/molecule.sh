#!/usr/bin/env bash
# Every role's molecule scenarios (converge, idempotence, verify), one role after another,
# then the test bed's own scenario (its create/destroy playbooks bring up sshd hosts).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
rc=0
for scenario_dir in roles/*/molecule tests/testbed/molecule; do
  [ -d "$scenario_dir" ] || continue
  role_dir=$(dirname "$scenario_dir")
  echo "--- molecule test --all in $role_dir"
  # reset first: molecule keeps a scenario's state (e.g. "prepared") under ~/.ansible, keyed by
  # its name, so an earlier run (another checkout, a killed run) would skip prepare.
  (cd "$role_dir" && molecule reset --all >/dev/null 2>&1; molecule test --all) || rc=1
done
exit $rc
