"""The layout code a Slurm job runs: roles/slurm_cluster copies dtfbench's layout module alone to the
login node (files/dtfbench_layout.py) and the job runs it on the modules' Python, which may be a
TF 1.1 module's Python 3.6 without dtfbench. So it must be that very file, run as a script on its
own, in Python 3.6 syntax. (tests/integration/test_slurm_study.py runs it on a real 3.6.)"""

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import dtfbench.plan.layout

ROOT = Path(__file__).resolve().parents[2]
ROLE_COPY = ROOT / "roles" / "slurm_cluster" / "files" / "dtfbench_layout.py"


def test_the_role_ships_the_one_layout_implementation():
    # The file behind the role's copy is the module the plan and the SSH launcher's tf_cluster_spec use.
    assert ROLE_COPY.resolve() == Path(dtfbench.plan.layout.__file__).resolve()
    assert ROLE_COPY.resolve() == (ROOT / "module_utils" / "dtfbench" / "plan" / "layout.py").resolve()


def test_it_runs_alone_outside_the_package(tmp_path):
    alone = tmp_path / "dtfbench_layout.py"
    shutil.copyfile(ROLE_COPY, alone)
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            str(alone),
            "--nodelist",
            "node[1-2]",
            "--address-same-as-name",
            "--devices-per-node",
            "1",
            "--device-type",
            "cpu",
            "--gpus",
            "2",
            "--num-ps",
            "1",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cluster_spec"] == {"ps": ["node1:2230"], "worker": ["node1:2220", "node2:2220"]}


def test_it_is_python_3_6_code():
    ast.parse(ROLE_COPY.read_text(), feature_version=(3, 6))
