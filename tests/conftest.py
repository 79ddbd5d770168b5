"""Shared fixtures: the project root, the environment to run Ansible in, leftover checks."""

import os
from pathlib import Path

import ansible.module_utils
import playbook_harness
import pytest
from mirror_bundles import MIRRORS_ENV, find_bundle, mirror_places

# The session's Slurm test cluster (tests/slurm/slurm_testcluster.py), defined here once: a
# fixture imported into each test module is a fixture of that module, and each module would
# bring up a cluster of its own (and keep it up to the end of the session).
from slurm_testcluster import slurm_test_cluster  # noqa: F401

from dtfbench.linux import procfs

ROOT = Path(__file__).resolve().parents[1]

# The project's module_utils (ansible.module_utils.dtfbench.*), as ansible.cfg's
# `module_utils = module_utils` gives them to Ansible: a test that loads a module file
# directly (tests/slurm/test_slurm_modules.py) imports them the way the module does under Ansible.
ansible.module_utils.__path__.append(str(ROOT / "module_utils"))


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def ansible_env() -> dict:
    """Environment for ansible-playbook: this interpreter's bin first, the project's config."""
    return playbook_harness.ansible_env()


def processes_matching(text: str) -> list[str]:
    """Live processes whose argv, environment or standard output (a task's log) mentions `text`:
    "<pid>: <argv> [<name>]". A task's supervisor is a fork (dtfbench.launch.task): its argv and
    environment are those of the process it was forked from, its output is the task's log."""
    found = []
    me = os.getpid()
    for pid in procfs.pids():
        if pid == me or not procfs.alive(pid):
            continue
        cmdline = " ".join(procfs.cmdline(pid))
        environ = b"\0".join(procfs.environ(pid)).decode(errors="replace")
        try:
            output = os.readlink(f"/proc/{pid}/fd/1")
        except OSError:
            output = ""
        if text in cmdline or text in environ or text in output:
            found.append(f"{pid}: {cmdline.strip()} [{procfs.comm(pid)}]")
    return found


@pytest.fixture(scope="session")
def live_processes():
    """A function: live processes whose argv or environment mentions a text."""
    return processes_matching


# --- the study's stack: its TF 1.1 virtualenv, the git bundles, the study's output tools ---


@pytest.fixture(scope="session")
def tf1_python() -> str:
    """The python of the study's TF 1.1 virtualenv (scripts/tf1-venv.sh: built once, cached)."""
    import subprocess

    done = subprocess.run([str(ROOT / "scripts" / "tf1-venv.sh")], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        pytest.fail(f"scripts/tf1-venv.sh failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return str(Path(done.stdout.strip()) / "bin" / "python")


@pytest.fixture(scope="session")
def mirror_bundle():
    """A function: the path of a git bundle of the mirrors directory ($DTFBENCH_MIRRORS, else
    ../shared/mirrors beside the checkout or beside its main worktree), or the test is skipped
    with the reason (the bundles are this machine's copies of GitHub: tests never fetch it)."""

    def find(name: str) -> Path:
        places = mirror_places(ROOT)
        found = find_bundle(name, places)
        if found is not None:
            return found
        pytest.skip(f"no {name} in {', '.join(map(str, places))}: set {MIRRORS_ENV} to the folder of the git bundles")

    return find


def _study_extraction(log: Path) -> str:
    import subprocess

    return subprocess.run(
        ["bash", "-c", "tail -2 $1 | head -n 1 | cut -d' ' -f3", "-", str(log)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _perfkit_total(text: str):
    import re

    found = re.search(r"total images/sec: (\S+)", text)
    return found.group(1) if found else None


@pytest.fixture(scope="session")
def study_extraction():
    """A function: the study's own reading of a worker's log file, `tail -2 $file | head -n 1 |
    cut -d' ' -f3` (its run_dist_benchmarks_daint.sh), run by bash."""
    return _study_extraction


@pytest.fixture(scope="session")
def perfkit_total():
    """A function: PerfKitBenchmarker's reading of tf_cnn_benchmarks' output,
    ``total images/sec: (\\S+)`` (regex_util.ExtractFloat, the first match), or None."""
    return _perfkit_total


@pytest.fixture
def small_tmpfs(tmp_path):
    """A function: mount a tmpfs of `size` (as mount's size=, e.g. '64k') on a new folder and
    return it; every one is unmounted at the end of the test. Needs root (as the test bed)."""
    import subprocess

    mounted = []

    def mount(size: str):
        point = tmp_path / f"tmpfs{len(mounted)}"
        point.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(point)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs (needs root): {done.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", "--lazy", str(point)], check=False)
