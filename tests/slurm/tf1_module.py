#!/usr/bin/env python3
"""The study's TensorFlow module on the Slurm test cluster (tests/slurm/slurm_testcluster.py).

    python tests/slurm/tf1_module.py [--dir /tmp/dtfbench-slurm-test]

Writes the Tcl modulefile ``TensorFlow/1.1.0-CrayGNU-17.08-cuda-8.0-python3`` (Piz Daint's module
of the study, the default of ``system=daint``) into the cluster's ``modulefiles``: like the site's
module, it puts a Python 3.6 with TensorFlow 1.1.0 first on PATH, here the study's TF 1.1
virtualenv of ``scripts/tf1-venv.sh`` (created once, cached). ``slurm_testcluster.py down``
removes it with the other modulefiles. The pytest fixture ``slurm_tf1_module`` writes it into the
session's cluster.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TF1_MODULE = "TensorFlow/1.1.0-CrayGNU-17.08-cuda-8.0-python3"


def tf1_venv() -> Path:
    """The study's TF 1.1 virtualenv (scripts/tf1-venv.sh prints it, creating it on first use)."""
    done = subprocess.run([str(ROOT / "scripts" / "tf1-venv.sh")], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/tf1-venv.sh failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return Path(done.stdout.strip())


def write_tf1_modulefile(cluster_dir: str | os.PathLike, venv: str | os.PathLike) -> Path:
    """Write the module for `venv` (a virtualenv with TensorFlow 1.1) into the cluster in
    `cluster_dir`; return the modulefile's path."""
    venv = Path(venv)
    if not (venv / "bin" / "python3").exists():
        raise FileNotFoundError(f"{venv} holds no bin/python3: give the TF 1.1 virtualenv (scripts/tf1-venv.sh)")
    path = Path(cluster_dir) / "modulefiles" / TF1_MODULE
    text = (
        "#%Module1.0\n"
        "## Stand-in for Piz Daint's TensorFlow 1.1 module of the study: Python 3.6 and TensorFlow 1.1.0\n"
        "## first on PATH, from scripts/tf1-venv.sh's virtualenv (tests/slurm/tf1_module.py)\n"
        f"prepend-path PATH {venv / 'bin'}\n"
        "setenv TF_CPP_MIN_LOG_LEVEL 2\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, prefix=".tmp-") as handle:
        handle.write(text)
    os.chmod(handle.name, 0o644)
    os.replace(handle.name, path)
    return path


try:
    import pytest
except ImportError:  # pragma: no cover - the CLI needs no pytest
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="session")
    def slurm_tf1_module(slurm_test_cluster, tf1_python):
        """The session cluster's TF 1.1 module (its name), for the study's TF 1.1 virtualenv."""
        write_tf1_modulefile(slurm_test_cluster["dir"], Path(tf1_python).parents[1])
        return TF1_MODULE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="/tmp/dtfbench-slurm-test", help="the test cluster's directory")
    args = parser.parse_args(argv)
    if not (Path(args.dir) / "modulefiles").is_dir():
        parser.error(f"{args.dir} holds no test cluster (no modulefiles/): run slurm_testcluster.py up first")
    print(write_tf1_modulefile(args.dir, tf1_venv()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
