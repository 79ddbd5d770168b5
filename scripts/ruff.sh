#!/usr/bin/env bash
# ruff over the project's Python: the lint rules (pyproject.toml, [tool.ruff.lint]) and the
# format check (the code is as `ruff format` writes it). Both run; the exit status says if
# either failed. Fix with: .venv/bin/ruff check --fix PATHS && .venv/bin/ruff format PATHS
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
paths=(src library plugins benchmarks tests scripts)
rc=0
ruff check --no-cache "${paths[@]}" || rc=1
ruff format --no-cache --check "${paths[@]}" || rc=1
exit $rc
