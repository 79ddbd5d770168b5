"""The marks of the sweeps that run on a host (dtfbench.launch.sweep_marker), on real files and
processes: what a host holds, what the second sweep sees, and which marks are stale.

The test bed runs it whole (the module, its action plugin, the warning):
tests/integration/test_faults_testbed.py::test_a_second_sweep_on_the_same_hosts_is_warned_of_the_first.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from store_harness import fill

from dtfbench.launch import sweep_marker


def controller(pid: int, host: str = "ctl") -> dict:
    identity = sweep_marker.controller_identity(pid)
    identity["host"] = host
    return identity


def ended_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_each_sweep_sees_the_others_and_removes_only_its_own(tmp_path):
    root = str(tmp_path / "runs")
    first, second = controller(os.getpid()), controller(os.getppid())
    done = sweep_marker.present(root, "sweep-a", first)
    assert done["changed"] and done["others"] == []
    assert sweep_marker.present(root, "sweep-a", first)["changed"] is False  # the same mark again
    seen = sweep_marker.present(root, "sweep-b", second)["others"]
    assert [(m["sweep_id"], m["controller"]["pid"]) for m in seen] == [("sweep-a", os.getpid())]
    assert seen[0]["path"] == os.path.join(root, "_sweeps", seen[0]["file"])
    # The first sees the second too (each writes its own before reading the others).
    assert [m["sweep_id"] for m in sweep_marker.present(root, "sweep-a", first)["others"]] == ["sweep-b"]
    assert sweep_marker.absent(root, "sweep-b", second)["changed"]
    assert sweep_marker.absent(root, "sweep-b", second)["changed"] is False
    assert sweep_marker.present(root, "sweep-a", first)["others"] == []


def test_a_named_stale_mark_is_removed(tmp_path):
    root = str(tmp_path / "runs")
    old = sweep_marker.present(root, "killed", controller(ended_pid()))["marker"]
    done = sweep_marker.present(root, "now", controller(os.getpid()), remove=[os.path.basename(old)])
    assert done["removed"] == [os.path.basename(old)] and done["others"] == []
    assert not os.path.exists(old)


def test_stale_is_a_mark_of_this_machine_whose_ansible_playbook_is_gone():
    here = controller(os.getpid())
    assert sweep_marker.stale({"controller": controller(ended_pid())}, here)
    assert not sweep_marker.stale({"controller": controller(os.getpid())}, here)
    # The pid is another process now: another start time.
    reused = dict(controller(os.getpid()), pid_started="1")
    assert sweep_marker.stale({"controller": reused}, here)
    # Another controller machine: this one cannot tell, so the mark counts.
    assert not sweep_marker.stale({"controller": controller(ended_pid(), host="elsewhere")}, here)


def test_a_marker_folder_others_may_write_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(sweep_marker.MarkerError, match=r"the sweep marker folder .*/shared/runs/_sweeps is unsafe"):
        sweep_marker.present(str(shared / "runs"), "sweep-a", controller(os.getpid()))
    assert not (shared / "runs").exists()


def test_a_full_disk_leaves_no_mark_and_no_folder_and_fails_nothing(small_tmpfs):
    # The mark only warns other sweeps: a disk that refuses it is the runs' to report (each
    # run's own check names the disk), so the call answers and leaves the run root as it was.
    disk = small_tmpfs("64k")
    fill(disk)
    root = str(disk / "runs")
    done = sweep_marker.present(root, "sweep-a", controller(os.getpid()))
    assert done["marker"] is None and done["changed"] is False
    assert "No space left on device" in done["unwritten"]
    assert not os.path.exists(root)


def test_the_last_mark_removed_takes_its_folder(tmp_path):
    root = str(tmp_path / "runs")
    sweep_marker.present(root, "sweep-a", controller(os.getpid()))
    sweep_marker.absent(root, "sweep-a", controller(os.getpid()))
    assert os.listdir(root) == []
