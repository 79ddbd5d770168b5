"""tf_task refuses a run_dir whose path another user could change (issue 30, case 4).

The supervisor script is written into the run directory and executed, often as root. Each
case is set up the way another local user would: the ``nobody`` account makes the folder or
the link, in a sticky world-writable folder that stands for /tmp (the real /tmp/dtfbench is
in use by the other tests).
"""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making files as another user needs root")

OTHER = "nobody"


@pytest.fixture
def shared_tmp():
    """A folder like /tmp: root's, mode 1777 (sticky, world-writable), reachable by nobody."""
    path = tempfile.mkdtemp(prefix="dtfbench-shared-", dir="/tmp")
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_other(*argv):
    subprocess.run(list(argv), check=True, user=OTHER, group="nogroup")


def start(run_module, run_dir, name="t-safe"):
    return run_module(
        "tf_task", dict(name=name, run_dir=run_dir, argv=[sys.executable, "-c", "import time; time.sleep(30)"])
    )


def test_another_users_dtfbench_folder_is_refused(run_module, shared_tmp):
    planted = os.path.join(shared_tmp, "dtfbench")
    as_other("mkdir", "-m", "0755", planted)
    rc, result = start(run_module, os.path.join(planted, "runs", "r1"))
    assert rc != 0
    msg = result["msg"]
    assert "\n" not in msg
    assert "the folder %s belongs to uid 65534 (nobody)" % planted in msg, msg
    assert "dtfbench_run_root" in msg
    assert os.listdir(planted) == []  # nothing made there


def test_a_link_another_user_made_is_refused(run_module, shared_tmp):
    theirs = os.path.join(shared_tmp, "theirs")
    link = os.path.join(shared_tmp, "dtfbench")
    as_other("mkdir", "-m", "0777", theirs)
    as_other("ln", "-s", theirs, link)
    rc, result = start(run_module, os.path.join(link, "runs", "r1"))
    assert rc != 0
    assert "the link %s belongs to uid 65534 (nobody)" % link in result["msg"], result["msg"]
    assert os.listdir(theirs) == []


def test_a_runs_folder_others_can_write_is_refused(run_module, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(0o777)
    rc, result = start(run_module, str(runs / "r1"))
    assert rc != 0
    assert "the folder %s is writable by others (mode 777)" % runs in result["msg"], result["msg"]
    assert list(runs.iterdir()) == []


def test_our_folder_in_a_sticky_tmp_is_fine(run_module, shared_tmp):
    """/tmp itself is world-writable but sticky: what we make in it stays ours."""
    run_dir = os.path.join(shared_tmp, "dtfbench", "runs", "r1")
    rc, result = start(run_module, run_dir)
    assert rc == 0, result
    assert oct(os.stat(run_dir).st_mode & 0o777) == oct(0o700)
    # The task's files only: its supervisor is a fork, no program is written to execute.
    files = os.listdir(run_dir)
    assert {"t-safe.log", "t-safe.pid"} <= set(files), files
    assert [name for name in files if name.endswith((".py", ".pyc"))] == [], files
    rc, stopped = run_module("tf_task", dict(name="t-safe", run_dir=run_dir, state="stopped", grace_period=1))
    assert rc == 0, stopped
