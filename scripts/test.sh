#!/usr/bin/env bash
# The whole test suite, as CI runs it: pytest (unit + integration, ansible-doc of every
# module included), ansible-lint's production profile offline, ruff (lint and format check of
# the Python), and every role's molecule scenario. Each stage runs even if an earlier one
# failed; the exit status says if any did.
# Arguments go to pytest (e.g. scripts/test.sh -k layout).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg"

failed=()
stage() {
  local name=$1; shift
  printf '\n===== %s =====\n' "$name"
  local start=$SECONDS
  "$@"
  local rc=$?
  printf '===== %s: %s in %ss =====\n' "$name" "$([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")" $((SECONDS - start))
  [ $rc -eq 0 ] || failed+=("$name")
}

pytest_stage() {
  python -m pytest "$@"
  local rc=$?
  # Exit 5 means pytest collected no test: a run that proves nothing is a failure here.
  [ $rc -eq 5 ] && echo "pytest collected no tests" >&2
  return $rc
}

# Debian packages the tests use (sshd for the test bed, Slurm and munge): installed when missing.
stage test-deps scripts/test-deps.sh
stage pytest pytest_stage "$@"
stage ansible-lint scripts/lint.sh
stage ruff scripts/ruff.sh
stage molecule scripts/molecule.sh

if [ ${#failed[@]} -gt 0 ]; then
  printf '\nFAILED stages: %s\n' "${failed[*]}"
  exit 1
fi
printf '\nall stages passed\n'
