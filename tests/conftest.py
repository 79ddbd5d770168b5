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
