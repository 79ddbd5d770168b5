#!/usr/bin/env bash
# Print the path of a virtualenv with the study's TensorFlow 1.1 (requirements/tf1.1-cpu.txt),
# creating it on first use. Tests and benchmarks share it: it lives in a cache keyed on the
# pins and the Python version, so a second call costs nothing and a changed pin builds anew.
#
#   scripts/tf1-venv.sh            -> /root/.cache/dtfbench/venvs/tf1.1-cpu-py3.6-<hash>
#
# TF 1.1 has wheels for Python 3.5 and 3.6 only. The Python is, in this order: $TF1_PYTHON,
# python3.6 / python3.5 on PATH, pyenv's installed 3.6.x / 3.5.x. None: one message, exit 2.
# Cache root: $DTFBENCH_CACHE_DIR (default ~/.cache/dtfbench). Concurrent callers wait on a
# lock; a half-built venv (interrupted) is never used: it counts once verified, else is rebuilt.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
pins="$here/requirements/tf1.1-cpu.txt"
say() { printf 'tf1-venv: %s\n' "$*" >&2; }

version_of() {  # version_of PYTHON -> "3.6" when it is 3.5 or 3.6 with venv
  "$1" -c 'import sys, venv; v = sys.version_info[:2]; assert v in ((3, 5), (3, 6)); print("%d.%d" % v)' 2>/dev/null
}

find_python() {
  local c candidates=()
  if [ -n "${TF1_PYTHON:-}" ]; then  # asked for: that one or an error, never another
    version_of "$TF1_PYTHON" >/dev/null && { echo "$TF1_PYTHON"; return 0; }
    say "TF1_PYTHON=$TF1_PYTHON is not a Python 3.5 or 3.6 with the venv module"
    say "(TensorFlow 1.1 has wheels for those only): point it to one, or unset it."
    return 2
  fi
  for c in python3.6 python3.5; do
    command -v "$c" >/dev/null 2>&1 && candidates+=("$(command -v "$c")")
  done
  local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
  for c in "$pyenv_root"/versions/3.6*/bin/python3 "$pyenv_root"/versions/3.5*/bin/python3; do
    [ -x "$c" ] && candidates+=("$c")
  done
  for c in "${candidates[@]}"; do
    if version_of "$c" >/dev/null; then echo "$c"; return 0; fi
  done
  say "no Python 3.5 or 3.6 found: TensorFlow 1.1 has wheels for those only. Install one"
  say "(pyenv install 3.6.15) or point to it: TF1_PYTHON=/path/to/python3.6 $0"
  return 2
}

python=$(find_python) || exit 2
pyver=$(version_of "$python")
key=$( (cat "$pins"; echo "$pyver") | sha256sum | cut -c1-12)
cache="${DTFBENCH_CACHE_DIR:-$HOME/.cache/dtfbench}/venvs"
venv="$cache/tf1.1-cpu-py$pyver-$key"
mkdir -p "$cache"

exec 9>"$cache/.lock"
flock 9
# A venv counts only once its install was verified (.complete): an interrupted build is redone.
if [ ! -f "$venv/.complete" ]; then
  say "creating $venv with $python (once; later calls reuse it)"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  quiet() { "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" \
              2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
  if ! { quiet "pip>=21,<22" && quiet -r "$pins" &&
         "$venv/bin/python" -c 'import tensorflow as tf; assert tf.__version__ == "1.1.0", tf.__version__'; }; then
    rm -rf "$venv"
    say "installing $pins failed (above)"
    exit 1
  fi
  touch "$venv/.complete"
fi
echo "$venv"
