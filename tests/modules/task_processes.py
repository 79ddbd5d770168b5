"""What the tf_task and tf_host_run tests share: finding a test's processes in /proc.

Every program a task starts carries DTFBENCH_TF_TASK=<run_dir>/<name> in its environment
(or the test's tmp_path on its command line), and its supervisor writes to the task's log;
after each test none of them may be left.
"""

import os
import signal

import pytest
from polling import wait_for

from dtfbench.linux import procfs

MARKER = b"DTFBENCH_TF_TASK="


def proc_state(pid):
    return procfs.state(pid)


def alive(pid):
    return procfs.alive(pid)


def _output(pid):
    try:
        return os.readlink("/proc/%d/fd/1" % pid)
    except OSError:
        return ""


def processes_of(tmp_path):
    """Live pids that belong to this test: the task marker, or tmp_path on their command line
    or as their output (a task's supervisor, a fork, writes to the task's log)."""
    needle = str(tmp_path)
    found = []
    for pid in procfs.pids():
        if pid == os.getpid():
            continue
        marked = any(item.startswith(MARKER + needle.encode()) for item in procfs.environ(pid))
        mentions = needle in "\0".join(procfs.cmdline(pid)) or _output(pid).startswith(needle)
        if (marked or mentions) and procfs.alive(pid):
            found.append(pid)
    return found


@pytest.fixture(autouse=True)
def no_leftovers(tmp_path):
    """Fail the test when any of its processes outlives it (and kill them)."""
    yield
    left = processes_of(tmp_path)
    if left:
        wait_for(lambda: not processes_of(tmp_path), 2.0)
        left = processes_of(tmp_path)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, "processes of the test remain: %s" % left
