#!/usr/bin/env bash
# Create or refresh .venv with the pinned environment (requirements/lock.txt + dtfbench).
#
# ansible 13+ (ansible-core 2.20+) needs Python >= 3.12. We look for one in this order:
#   $PYTHON, python3.12 / python3.13 on PATH, pyenv's installed 3.12.x / 3.13.x, python3.
# Each candidate is executed to check its version and its venv module: pyenv *shims* on
# PATH may exist for versions that are not selected, so their presence proves nothing.
# A second run with an unchanged lock file does nothing (a stamp file records the lock's hash).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
venv="$here/.venv"
lock="$here/requirements/lock.txt"
min_minor=12

say() { printf 'bootstrap: %s\n' "$*" >&2; }

usable() {  # usable PYTHON -> prints "major.minor" when it is >= 3.12 and has venv
  "$1" - "$min_minor" <<'PY' 2>/dev/null
import sys, venv, ensurepip  # noqa: F401  (both are needed to create the virtualenv)
ok = sys.version_info[:2] >= (3, int(sys.argv[1]))
print("%d.%d" % sys.version_info[:2]) if ok else sys.exit(1)
PY
}

find_python() {
  local c candidates=()
  [ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
  for c in python3.12 python3.13; do
    command -v "$c" >/dev/null 2>&1 && candidates+=("$(command -v "$c")")
  done
  local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
  for c in "$pyenv_root"/versions/3.12*/bin/python3 "$pyenv_root"/versions/3.13*/bin/python3; do
    [ -x "$c" ] && candidates+=("$c")
  done
  command -v python3 >/dev/null 2>&1 && candidates+=("$(command -v python3)")
  for c in "${candidates[@]}"; do
    if usable "$c" >/dev/null; then echo "$c"; return 0; fi
  done
  if [ -n "${PYTHON:-}" ]; then
    say "PYTHON=$PYTHON is not a Python >= 3.$min_minor with the venv module."
  fi
  say "no Python >= 3.$min_minor found (ansible 13+ needs it). Install one, e.g.:"
  say "  pyenv install 3.12   |   apt-get install python3.12 python3.12-venv"
  say "then run again, or point to it: make setup PYTHON=/path/to/python3.12"
  return 1
}

lock_hash=$(cat "$lock" "$here/pyproject.toml" | sha256sum | cut -c1-16)
stamp="$venv/.dtfbench-installed-$lock_hash"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && usable "$venv/bin/python" >/dev/null; then
  exit 0  # already set up with this exact lock
fi

python=$(find_python)
say "using $python (Python $(usable "$python")) for $venv"
if [ -x "$venv/bin/python" ] && ! usable "$venv/bin/python" >/dev/null; then
  say "existing .venv has an unsuitable Python; recreating it"
  rm -rf "$venv"
fi
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip_install() {
  # Some machines' pip.conf name local mirror folders that do not exist; pip warns once per
  # package about them. Keep every other line.
  "$venv/bin/python" -m pip install --quiet "$@" 2> >(grep -v "^WARNING: Location 'file:" >&2)
}
pip_install --upgrade pip
# Byte code afterwards, on every core and without the bundled collections' modules, which
# nothing imports (scripts/compile_venv.py): pip's own compile would take half the setup.
pip_install --no-compile -r "$lock"
# A file that does not compile (e.g. a package's Python 2 example) is named and skipped, as pip does.
"$venv/bin/python" "$here/scripts/compile_venv.py" "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" ||
  say "the files named above did not compile; nothing can import them (pip skips them too)"
# dtfbench itself, editable so that the playbooks always run the checkout's code.
pip_install --no-deps --no-build-isolation -e "$here"
rm -f "$venv"/.dtfbench-installed-*
touch "$stamp"
versions=$("$venv/bin/python" -c 'from importlib.metadata import version as v; print("ansible-core", v("ansible-core"), "| tensorflow-cpu", v("tensorflow-cpu"))')
say "ready: $versions"
