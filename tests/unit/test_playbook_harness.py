"""The one way tests run a playbook (tests/harness/playbook_harness.py): its output, its timeout."""

import sys
import time
import uuid

import pytest
from playbook_harness import ansible_env, extra_vars, run_playbook, small_run

from dtfbench.linux import procfs

pytestmark = pytest.mark.ansible

LOCAL = ["-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"]
PLAY = """\
- name: Say something, then hang
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Say
      ansible.builtin.debug:
        msg: "{{{{ marker }}}}"
    - name: Hang
      ansible.builtin.command: sleep {seconds}
      changed_when: false
"""


def test_a_finished_playbook_keeps_both_outputs(tmp_path):
    book = tmp_path / "play.yml"
    book.write_text(PLAY.format(seconds=0))
    done = run_playbook(book, *LOCAL, "-e", "marker=said-and-done", timeout=120)
    assert done.returncode == 0, done.output
    assert "said-and-done" in done.stdout and done.output == done.stdout + done.stderr


def test_a_playbook_past_its_timeout_is_killed_and_fails_the_test_with_its_output(tmp_path):
    book = tmp_path / "play.yml"
    seconds = f"{600 + uuid.uuid4().int % 1000}"  # a sleep of its own, to find it among the processes
    book.write_text(PLAY.format(seconds=seconds))
    # Killed (SIGKILL), the command module's wrapper leaves its payload folder in its TMPDIR:
    # the test's own folder, not the machine's /tmp.
    with pytest.raises(pytest.fail.Exception) as failed:
        run_playbook(
            book, *LOCAL, "-e", "marker=said-before-hanging", env=ansible_env(TMPDIR=str(tmp_path)), timeout=15
        )
    assert "ran past 15 s" in str(failed.value) and "said-before-hanging" in str(failed.value)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(procfs.cmdline(p)[-2:] == ["sleep", seconds] for p in procfs.pids()):
        time.sleep(0.2)
    assert not any(procfs.cmdline(p)[-2:] == ["sleep", seconds] for p in procfs.pids())


def test_small_run_and_extra_vars():
    assert extra_vars(a=1, b="x y") == ["-e", "a=1", "-e", "b=x y"]
    small = small_run(steps=3, image_size=None, num_ps="auto")
    assert small == extra_vars(model="trivial", batch_size=8, warmup_steps=2, steps=3, repetitions=1, num_ps="auto")
