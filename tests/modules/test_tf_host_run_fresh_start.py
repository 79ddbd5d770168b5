"""tf_host_run does not take a supervisor that is still being loaded for a gone one (issue #19).

Right after ``Popen`` returns, the kernel may still be loading the supervisor's program:
until it is done, ``/proc/<pid>/cmdline`` (and ``environ``) read empty, so a check by command
line says "not our supervisor". On a busy host (64 test-bed hosts on 2 cores) the module got
there first, and reported the worker it had started last "gone before port ... was ready",
its log empty, in 4 of 7 launches. The module now judges the supervisors it started by
their wait status.

The race is made certain here, with real processes: the module runs at a real-time priority
(SCHED_FIFO, reset on fork, so its children run at the normal one) on one CPU, so every
supervisor it starts waits, half-loaded, until the module sleeps - after its first look.
"""

import os
import subprocess
import sys

import pytest

# no_leftovers: an autouse fixture, active in this module by being imported.
from task_processes import no_leftovers  # noqa: F401
from test_tf_host_run import Host

pytestmark = pytest.mark.ansible


@pytest.fixture
def greedy_host(tmp_path, run_module, monkeypatch):
    """A Host whose module runs at SCHED_FIFO on one CPU; its children at the normal priority."""
    cpu = min(os.sched_getaffinity(0))
    probe = subprocess.run(["chrt", "--fifo", "10", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("cannot run at a real-time priority here (needs root): %s" % probe.stderr.strip())
    interpreter = tmp_path / "greedy-python"
    interpreter.write_text(
        '#!/bin/sh\nexec chrt --fifo --reset-on-fork 10 taskset --cpu-list %d %s "$@"\n' % (cpu, sys.executable)
    )
    interpreter.chmod(0o755)
    host = Host(tmp_path, run_module, monkeypatch)
    extra = ["-e", "ansible_python_interpreter=%s" % interpreter]
    host.run_module = lambda module, args, check=False: run_module(module, args, check=check, extra_args=extra)
    return host


def test_started_waits_for_supervisors_it_started_that_are_still_loading(greedy_host):
    rc, started = greedy_host("started", {}, ready_timeout=30)
    try:
        assert rc == 0, started["msg"] if "msg" in started else started
        assert all(report["ready"] for report in started["tasks"]), started["tasks"]
        assert sorted(report["name"] for report in started["tasks"]) == ["run-ps-0", "run-worker-0", "run-worker-1"]
    finally:
        rc, stopped = greedy_host("stopped")
        assert rc == 0, stopped
