"""Shared fixtures: the project root, the environment to run Ansible in, leftover checks."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def ansible_env() -> dict:
    """Environment for ansible-playbook: this interpreter's bin first, the project's config."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def processes_matching(text: str) -> list[str]:
    """Command lines of live processes whose argv or environment mentions `text`."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if text in cmdline or text in environ:
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


@pytest.fixture(scope="session")
def live_processes():
    """A function: live processes whose argv or environment mentions a text."""
    return processes_matching


@pytest.fixture
def small_tmpfs(tmp_path):
    """A function: mount a tmpfs of `size` (as mount's size=, e.g. '64k') on a new folder and
    return it; every one is unmounted at the end of the test. Needs root (as the test bed)."""
    import subprocess
    mounted = []

    def mount(size: str):
        point = tmp_path / f"tmpfs{len(mounted)}"
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs (needs root): {done.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", "--lazy", str(point)], check=False)
