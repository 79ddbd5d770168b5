"""Shared helpers of the node-role tests: run a small playbook on localhost or the test bed."""

import subprocess
import sys
from pathlib import Path

import pytest

NODES = Path(__file__).resolve().parent


@pytest.fixture
def run_playbook(project_root, ansible_env, tmp_path):
    """run_playbook(text, *args, env=None) -> CompletedProcess of ansible-playbook on a play text."""

    def run(text, *args, env=None, timeout=600):
        book = tmp_path / f"play-{len(list(tmp_path.glob('play-*.yml')))}.yml"
        book.write_text(text)
        full_env = dict(ansible_env, **(env or {}))
        return subprocess.run(
            [str(Path(sys.executable).parent / "ansible-playbook"), str(book), *args],
            cwd=project_root,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run
