"""The slurm_cluster role's modules: what slurm_nodes reads from sinfo, and their documentation.

slurm_job's logic is dtfbench.launch.slurm_job (tests/unit/test_slurm_job.py).
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parents[2] / "roles" / "slurm_cluster" / "library"


def load(name):
    spec = importlib.util.spec_from_file_location(f"slurm_cluster_{name}", LIBRARY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


slurm_nodes = load("slurm_nodes")


def test_usable_nodes_respond_are_not_down_and_have_the_feature():
    text = "\n".join(
        [
            "nid00001|idle|gpu,startx",
            "nid00002|allocated|gpu",
            "nid00003|drained|gpu",
            "nid00004|down*|gpu",
            "nid00005|mixed|mc",
            "nid00006|idle~|gpu",
            "nid00001|idle|gpu",
            "",
        ]
    )
    names, excluded = slurm_nodes.parse_sinfo(text, "gpu")
    assert names == ["nid00001", "nid00002", "nid00006"]
    assert excluded == ["nid00003: drained", "nid00004: down*", "nid00005: no feature gpu (has mc)"]
    # An expression is the scheduler's business: no filter by feature.
    assert slurm_nodes.parse_sinfo(text, "gpu&startx")[0] == ["nid00001", "nid00002", "nid00005", "nid00006"]


@pytest.mark.ansible
@pytest.mark.parametrize("module", ["slurm_job", "slurm_nodes"])
def test_ansible_doc_renders(module):
    tool = Path(sys.executable).parent / "ansible-doc"
    if not tool.exists():
        pytest.skip(f"ansible-doc is not installed next to {sys.executable}")
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run([str(tool), "-M", str(LIBRARY), module], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "[WARNING]" not in proc.stderr and "[ERROR]" not in proc.stderr, proc.stderr
    for section in ("OPTIONS", "RETURN VALUES", "EXAMPLES"):
        assert section in proc.stdout, proc.stdout
