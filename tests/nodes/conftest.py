"""Shared helpers of the node-role tests: run a small playbook on localhost or the test bed."""

from pathlib import Path

import playbook_harness
import pytest

NODES = Path(__file__).resolve().parent


@pytest.fixture
def run_playbook(tmp_path):
    """run_playbook(text, *args, env=None) -> CompletedProcess of ansible-playbook on a play text."""

    def run(text, *args, env=None, timeout=600):
        book = tmp_path / f"play-{len(list(tmp_path.glob('play-*.yml')))}.yml"
        book.write_text(text)
        return playbook_harness.run_playbook(
            book, *args, env=playbook_harness.ansible_env(**(env or {})), timeout=timeout
        )

    return run
