#!/usr/bin/env bash
# Print the path of a folder holding tf_keras (requirements/bench-tf-cnn.txt) for the project's
# TensorFlow, installing it on first use. tf_cnn_benchmarks master runs on TF 2.x with
# PYTHONPATH=<this folder> and TF_USE_LEGACY_KERAS=1 (benchmarks/workload_vs_tf_cnn.py).
#
#   scripts/tf-keras-path.sh       -> /root/.cache/dtfbench/tf_keras-<hash>
#
# --no-deps: its one dependency, tensorflow, is the .venv's own (pinned by requirements/lock.txt).
# Cache root: $DTFBENCH_CACHE_DIR (default ~/.cache/dtfbench), keyed on the pins; concurrent
# callers wait on a lock; an interrupted install is never used (.complete marks a verified one).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
pins="$here/requirements/bench-tf-cnn.txt"
python="$here/.venv/bin/python"
say() { printf 'tf-keras-path: %s\n' "$*" >&2; }
[ -x "$python" ] || { say "no $python: run make setup first"; exit 2; }

key=$( (cat "$pins" "$here/requirements/lock.txt") | sha256sum | cut -c1-12)
cache="${DTFBENCH_CACHE_DIR:-$HOME/.cache/dtfbench}"
target="$cache/tf_keras-$key"
mkdir -p "$cache"

exec 9>"$cache/.tf_keras.lock"
flock 9
if [ ! -f "$target/.complete" ]; then
  say "installing $pins into $target (once; later calls reuse it)"
  rm -rf "$target"
  if ! { "$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$target" -r "$pins" \
           2> >(grep -v "is ignored: it is neither a file nor a directory" >&2) &&
         PYTHONPATH="$target" TF_USE_LEGACY_KERAS=1 TF_CPP_MIN_LOG_LEVEL=3 "$python" -c \
           'import tensorflow as tf, tf_keras; assert tf.keras.__name__.startswith("tf_keras"), tf.keras.__name__'; }; then
    rm -rf "$target"
    say "installing $pins failed (above)"
    exit 1
  fi
  touch "$target/.complete"
fi
echo "$target"
