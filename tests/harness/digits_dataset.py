"""The digits dataset as `dtfbench tfrecords --dataset digits` writes it, for the tests that train or
stage on real data (tests/integration/test_local_benchmark.py, tests/harness/accuracy_runs.py,
tests/workload/test_accuracy.py, test_input_formats.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def make_digits(folder: str | Path, *args: str, env: dict | None = None) -> Path:
    """`dtfbench tfrecords --dataset digits --output_dir FOLDER ARGS` under this Python (with `env`,
    None: this process's); fails the test with its stderr unless it exits 0. The folder."""
    made = subprocess.run(
        [sys.executable, "-m", "dtfbench", "tfrecords", "--dataset", "digits", "--output_dir", str(folder), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    return Path(folder)
