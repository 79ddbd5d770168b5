"""What the tf_task and tf_host_run tests share: finding a test's processes in /proc.

Every process a task starts carries DTFBENCH_TF_TASK=<run_dir>/<name> in its environment
(or the test's tmp_path on its command line); after each test none of them may be left.
"""

import os
import signal
import time

import pytest

MARKER = b"DTFBENCH_TF_TASK="


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            data = handle.read()
    except OSError:
        return None
    return data[data.rfind(")") + 2:].split()[0]


def alive(pid):
    return proc_state(pid) not in (None, "Z", "X")


def processes_of(tmp_path):
    """Live pids that belong to this test: the task marker or tmp_path on their command line."""
    needle = str(tmp_path).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        try:
            with open("/proc/%d/environ" % pid, "rb") as handle:
                environ = handle.read().split(b"\0")
            with open("/proc/%d/cmdline" % pid, "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        marked = any(item.startswith(MARKER + needle) for item in environ)
        if (marked or needle in cmdline) and alive(pid):
            found.append(pid)
    return found


def wait_for(condition, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


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
