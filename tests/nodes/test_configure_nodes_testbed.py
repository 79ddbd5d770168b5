"""configure-nodes.yml over real SSH on a 2-host test bed, profile current, twice.

The test-bed hosts have no NVIDIA GPU: nvidia_stack must say so and install nothing;
tf_virtualenv makes each host its own virtualenv on its own disk (/mnt/local_ssd, private
to the host, as an EC2 node's disk is) with the lock file's CPU TensorFlow, boto3 and the
workload wheel. The second run, through the ip_pairs inventory and the two IP files (the
hand-launched flow), must change nothing.

The test-bed hosts have no internet (network namespaces), like nodes in a private subnet:
the controller downloads the wheels once (`pip download` into .cache/wheelhouse-<python>,
kept between runs) and the nodes install from it (tf_virtualenv_pip_extra_args
--no-index --find-links). That download is the test's main cost the first time.
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from playbook_harness import run_adhoc, run_playbook
from testbed_fixtures import testbed_factory, wheelhouse  # noqa: F401

pytestmark = [pytest.mark.ansible, pytest.mark.tf]

VENV = "/mnt/local_ssd/dtfbench/venv"


def configure(inventory, extra, timeout=1200):
    return run_playbook("configure-nodes.yml", "-i", inventory, *extra, timeout=timeout)


def locked(project_root, name):
    text = (project_root / "requirements" / "lock.txt").read_text()
    return re.search(rf"(?im)^{name}==(\S+)", text).group(1)


def wheelhouse_for_nodes(project_root, python):
    """The wheels of the lock's tensorflow-cpu, boto3, awscrt, isal, mlperf-logging and lmdb for the nodes' python, downloaded here."""
    tag = subprocess.run(
        [python, "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return wheelhouse(
        python,
        project_root / ".cache" / f"wheelhouse-{tag}",
        f"tensorflow-cpu=={locked(project_root, 'tensorflow[-_]cpu')}",
        f"boto3=={locked(project_root, 'boto3')}",
        f"awscrt=={locked(project_root, 'awscrt')}",
        f"isal=={locked(project_root, 'isal')}",
        f"mlperf-logging=={locked(project_root, 'mlperf-logging')}",
        f"lmdb=={locked(project_root, 'lmdb')}",
    )


def recap(stdout):
    return {
        host: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", rest)}
        for host, rest in re.findall(r"^(node\d+)\s+:\s+(.*)$", stdout, re.MULTILINE)
    }


def test_configure_two_hosts_twice(testbed_factory, project_root, ansible_env, tmp_path):
    bed = testbed_factory(hosts=2)
    # A snapshot of the sources: the wheel must not change between the runs because someone
    # edits the checkout meanwhile.
    snapshot = tmp_path / "project"
    snapshot.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(project_root / name, snapshot / name)
    shutil.copytree(project_root / "src", snapshot / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    wheelhouse = wheelhouse_for_nodes(project_root, bed.state["python"])
    extra = [
        "-e",
        "node_profile=current",
        "-e",
        f"tf_virtualenv_path={VENV}",
        "-e",
        # --no-compile (this test's only, the role's default compiles as before): the
        # virtualenvs go with the test bed, and byte-compiling all of TF at install costs more
        # than compiling what the imports load.
        json.dumps({"tf_virtualenv_pip_extra_args": f"--no-index --find-links {wheelhouse} --no-compile"}),
        "-e",
        f"tf_virtualenv_python={bed.state['python']}",
        "-e",
        f"tf_virtualenv_project_dir={snapshot}",
        "-e",
        f"tf_virtualenv_wheel_dir={tmp_path / 'wheels'}",
    ]

    first = configure(bed.inventory, extra)
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-2000:]
    counts = recap(first.stdout)
    assert set(counts) == {"node01", "node02"} and all(c["failed"] == 0 and c["changed"] > 0 for c in counts.values())
    said = " ".join(first.stdout.split())  # the YAML callback wraps long messages
    for node in ("node01", "node02"):
        assert f"no NVIDIA GPU on {node} (nvidia-smi: absent): nothing to install" in said
        assert (
            f"{node}: dtfbench_python={VENV}/bin/python (TensorFlow {locked(project_root, 'tensorflow[-_]cpu')})"
            in said
        )
        # Each host's own virtualenv, on its own disk.
        python = bed.local_ssd(node) / "dtfbench" / "venv" / "bin" / "python"
        assert python.exists(), sorted(str(p) for p in bed.local_ssd(node).rglob("*"))[:20]
        wheels = list((bed.local_ssd(node) / "dtfbench" / "venv" / "dtfbench-wheels").glob("dtfbench-*.whl"))
        assert len(wheels) == 1
    assert not Path(VENV).exists()  # nothing on the shared filesystem's /mnt/local_ssd

    # Over SSH, on the node: the workload from its virtualenv, with its TF.
    node = bed.nodes[0]
    probe = run_adhoc(
        "-i",
        bed.inventory,
        node["name"],
        "-m",
        "ansible.builtin.command",
        "-a",
        f"{VENV}/bin/python -c 'import dtfbench.plan.layout, tensorflow as tf; print(tf.__version__, dtfbench.plan.layout.__file__)'",
        cwd=project_root,
        env=ansible_env,
        timeout=300,
    )
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert f"{VENV}/lib/" in probe.stdout

    second = configure(bed.ip_pairs_config, extra)
    assert second.returncode == 0, second.stdout[-6000:] + second.stderr[-2000:]
    counts = recap(second.stdout)
    assert set(counts) == {"node01", "node02"}
    assert all(c["changed"] == 0 and c["failed"] == 0 for c in counts.values()), second.stdout[-6000:]

    bed.down()
    assert bed.leftovers() == []
