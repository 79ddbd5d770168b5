#!/usr/bin/env bash
# The whole test suite, as CI runs it: pytest (unit + integration, ansible-doc of every
# module included), ansible-lint's production profile offline, ruff (lint and format check of
# the Python), and every role's molecule scenario. Each stage runs even if an earlier one
# failed; the exit status says if any did.
#
# Two lanes run at once, of about equal length: one pytest alone left one of the machine's
# two cores idle much of the time (process starts, ssh, TF's imports, waits on tasks).
#   tests   pytest of HEAVY: the modules' tests, the Slurm test cluster's, the integration tests;
#   checks  pytest of LIGHT (unit, moto, the workload's own processes, the node roles, the
#           test bed on namespaces, the study's stack on a test bed), then ansible-lint, ruff
#           and molecule.
# They share no port (TF tasks take free ports, a test bed's addresses or, in molecule, ports
# of their own), no network-namespace range (each test bed and Slurm test cluster claims a
# free one), no directory (each pytest has its own --basetemp). The checks lane's output
# follows the tests lane's, whole.
#
# Arguments go to one pytest of every folder, and the stages then run one after another
# (e.g. scripts/test.sh -k layout). PYTEST_ADDOPTS reaches both lanes' pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg"

# The integration tests last: their timing-sensitive ones (the shaped network, the interrupts)
# then run mostly after the checks lane has ended. The lanes are balanced on their measured
# times: each stage prints its own, PYTEST_ADDOPTS=--durations=40 the slowest tests. A file of
# a HEAVY folder may run in LIGHT instead (HEAVY's pytest then skips it): one on a test bed of
# its own, never one on the local inventory, whose TF tasks take the layout's fixed ports
# on 127.0.0.1 as the other local runs of HEAVY do.
#   test_study_stack_testbed.py  170-240 s: with it the lanes end within a minute of each other
#   test_accuracy_testbed.py, test_shared_storage_testbed.py  ~70 s, ~50 s: room in HEAVY for
#     test_accuracy_slurm.py's five jobs and the background reader's interrupt test
HEAVY=(tests/modules tests/slurm tests/integration)
LIGHT=(tests/unit tests/aws tests/workload tests/nodes tests/testbed tests/integration/test_study_stack_testbed.py
       tests/integration/test_accuracy_testbed.py tests/integration/test_shared_storage_testbed.py)
HEAVY_SKIPS=()
for path in "${LIGHT[@]}"; do
  [ -f "$path" ] && HEAVY_SKIPS+=("--ignore=$path")
done

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

# A folder of tests in neither lane would never run: refuse before anything starts.
lanes_cover_every_folder() {
  local folder missing=()
  for folder in tests/*/; do
    folder=${folder%/}
    compgen -G "$folder/test_*.py" >/dev/null || continue
    [[ " ${HEAVY[*]} ${LIGHT[*]} " == *" $folder "* ]] || missing+=("$folder")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "scripts/test.sh: ${missing[*]} in neither HEAVY nor LIGHT: add each to one of them" >&2
  return 1
}

checks() {
  stage ansible-lint scripts/lint.sh
  stage ruff scripts/ruff.sh
  stage molecule scripts/molecule.sh
}

[ $# -gt 0 ] || lanes_cover_every_folder || exit 2

# Debian packages the tests use (sshd for the test bed, Slurm and munge): installed when missing.
stage test-deps scripts/test-deps.sh

if [ $# -gt 0 ]; then
  stage pytest pytest_stage "$@"
  checks
else
  work=$(mktemp -d /tmp/dtfbench-test.XXXXXX)
  (
    failed=()
    stage "pytest (${LIGHT[*]})" pytest_stage --basetemp="$work/light" "${LIGHT[@]}"
    checks
    printf '%s\n' "${failed[@]}" > "$work/checks.failed"
  ) > "$work/checks.log" 2>&1 &
  checks_lane=$!
  stage "pytest (${HEAVY[*]})" pytest_stage --basetemp="$work/heavy" "${HEAVY_SKIPS[@]}" "${HEAVY[@]}"
  wait "$checks_lane"
  printf '\n===== the checks lane, run beside the tests above =====\n'
  cat "$work/checks.log"
  if [ -f "$work/checks.failed" ]; then
    while read -r name; do
      [ -n "$name" ] && failed+=("$name")
    done < "$work/checks.failed"
  else
    failed+=("the checks lane (it ended before its last stage)")
  fi
  # The tests' files stay for a look when anything failed.
  [ ${#failed[@]} -gt 0 ] && echo "the tests' files: $work" || rm -rf "$work"
fi

if [ ${#failed[@]} -gt 0 ]; then
  printf '\nFAILED stages: %s\n' "${failed[*]}"
  exit 1
fi
printf '\nall stages passed\n'
