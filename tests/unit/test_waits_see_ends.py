"""tf_host_run's waits see a process end when it happens, not at their next look.

Its loops looked every 0.1-0.2 s (``task.POLL``): the wait for the workers' end, the stop's
wait for the PSs and each SIGTERM's wait for the task to go. A run paid up to a look's
interval at each of them, which a bare launcher (blocked in waitpid) does not (issue #31, P1).
They now sleep in ``procfs.wait_for_any_end``, which wakes when one of the processes ends.
Checked with POLL (and the workers' wait's WAIT_LOOK) raised to 30 s: the calls end within
seconds, not after a look. The supervisors' own wait no longer wakes 20 times a second.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from ports import free_ports

from dtfbench.launch import host_run, supervisor, task
from dtfbench.launch.host_run_spec import ARGUMENT_SPEC, TASK_SPEC
from dtfbench.linux import procfs

LONG_POLL = 30.0
QUICK = 10.0  # well under LONG_POLL, generous for a busy machine


def params(tmp_path, **options):
    values = {name: option.get("default") for name, option in ARGUMENT_SPEC.items()}
    worker = {name: option.get("default") for name, option in TASK_SPEC.items()}
    worker.update(job="worker", task_index=0, address="127.0.0.1", port=1)
    values.update(
        run_id="r",
        run_dir=str(tmp_path / "run"),
        tasks=[worker],
        cluster_spec={"worker": ["127.0.0.1:1"]},
        nic_sample_interval=0.0,
        grace_period=LONG_POLL * 2,
        environment={"DTFBENCH_TEST": str(tmp_path)},
    )
    values.update(options)
    return values


def test_the_wait_wakes_when_a_process_ends():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    try:
        began = time.monotonic()
        procfs.wait_for_any_end([child.pid], LONG_POLL)
        assert time.monotonic() - began < QUICK
        child.wait(QUICK)
        # A process that ended after the caller saw it alive (here already reaped) is not
        # slept on: the caller's next look sees its end. With no process at all the wait
        # sleeps its timeout.
        began = time.monotonic()
        procfs.wait_for_any_end([child.pid], LONG_POLL)
        assert time.monotonic() - began < QUICK
        began = time.monotonic()
        procfs.wait_for_any_end([], 0.2)
        assert time.monotonic() - began >= 0.2
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfds: Python 3.9 on Linux 5.3")
def test_a_zombie_ends_the_wait_at_once():
    """A zombie has ended: a stop whose task went between its look and its wait slept a
    whole look (0.1 s) in a third of a sweep's stops, the workers' wait 0.5 s (issue #31, P1)."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        deadline = time.monotonic() + QUICK
        while procfs.state(ended.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        began = time.monotonic()
        procfs.wait_for_any_end([running.pid, ended.pid], LONG_POLL)
        assert time.monotonic() - began < QUICK
    finally:
        running.kill()
        running.wait()
        ended.wait()


def test_the_run_ends_when_its_worker_does_and_a_stop_when_its_task_goes(tmp_path, monkeypatch):
    monkeypatch.setattr(host_run, "POLL", LONG_POLL)
    monkeypatch.setattr(host_run, "WAIT_LOOK", LONG_POLL)
    monkeypatch.setattr(task, "POLL", LONG_POLL)
    # Finished: the worker (no port to wait for: it is done before any look) ends after 1 s.
    began = time.monotonic()
    done = host_run.direct_entry(
        params(tmp_path, state="finished", program=[sys.executable, "-c", "import time; time.sleep(1)"]),
        False,
        None,
    )
    assert not done.get("failed"), done
    assert [w["rc"] for w in done["workers"]] == [0]
    assert time.monotonic() - began < QUICK
    # Stopped: a task that listens until SIGTERM, stopped with a grace period of 60 s.
    port = free_ports(1)[0]
    listener = [
        sys.executable,
        "-c",
        f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(600)",
    ]
    worker = dict(params(tmp_path)["tasks"][0], port=port)
    started = host_run.direct_entry(
        params(tmp_path, state="started", tasks=[worker], program=listener, ready_timeout=QUICK), False, None
    )
    assert not started.get("failed"), started
    began = time.monotonic()
    stopped = host_run.direct_entry(params(tmp_path, state="stopped", tasks=[worker]), False, None)
    assert not stopped.get("failed"), stopped
    assert stopped["tasks"][0]["terminated"] and not stopped["tasks"][0]["killed"]
    assert time.monotonic() - began < QUICK


def supervised(exit_file, program):
    """The command line of a task supervisor (its own file, as the task core runs it) of program."""
    return [sys.executable, supervisor.__file__, supervisor.PROGRAM_TAG, "m", str(exit_file), "--", *program]


def voluntary_switches(pid):
    for line in (procfs.read(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError(f"no /proc/{pid}/status")


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfds: Python 3.9 on Linux 5.3")
@pytest.mark.parametrize("runs", [3.0, 60.0])
def test_a_supervisor_with_a_deadline_sleeps_until_its_program_ends_or_the_deadline(tmp_path, runs):
    """Popen.wait(timeout) woke every 50 ms (~20 context switches a second) for the whole
    run; the supervisor now wakes when its program ends, or at max_runtime (5 s here)."""
    env = dict(os.environ, TF_TASK_SUPERVISOR_MAX_RUNTIME="5", TF_TASK_SUPERVISOR_GRACE="5")
    exit_file = tmp_path / "task.exit"
    program = [sys.executable, "-c", f"import time; time.sleep({runs})"]
    running = subprocess.Popen(
        supervised(exit_file, program), env=env, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        time.sleep(0.5)
        before = voluntary_switches(running.pid)
        time.sleep(2.0)
        assert voluntary_switches(running.pid) - before <= 5
        running.wait(QUICK + 5)
    finally:
        if running.poll() is None:
            os.killpg(running.pid, 9)
            running.wait()
    record = json.loads(exit_file.read_text())
    if runs < 5:
        assert record["rc"] == 0 and "deadline_exceeded" not in record
    else:  # the deadline still ends a program that outlives it
        assert record["deadline_exceeded"] is True and record["signal_name"] == "SIGTERM"


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfds: Python 3.9 on Linux 5.3")
def test_a_supervisor_takes_a_deadline_past_what_one_poll_can_wait(tmp_path):
    """poll() takes a C int of milliseconds: 35 days would overflow it in one call."""
    exit_file = tmp_path / "task.exit"
    done = subprocess.run(
        supervised(exit_file, [sys.executable, "-c", "pass"]),
        env=dict(os.environ, TF_TASK_SUPERVISOR_MAX_RUNTIME=str(35 * 86400)),
        capture_output=True,
        text=True,
        timeout=QUICK * 3,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(exit_file.read_text())["rc"] == 0


def test_a_hang_up_wakes_the_wait_with_no_process_to_wait_on():
    """The controller's side of the connection going (the module's stdout hung up)."""
    read_end, write_end = os.pipe()
    try:
        os.close(write_end)
        began = time.monotonic()
        procfs.wait_for_any_end([], LONG_POLL, hang_ups=(read_end,))
        assert time.monotonic() - began < QUICK
    finally:
        os.close(read_end)
