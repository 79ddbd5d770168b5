"""How often a host's start and stop read the process table (every process's stat and environment).

Each task's start looked for leftovers of an earlier start of itself with a look of its own; a
host starts its NIC sampler, a PS and a worker, so three looks a host and run (~4 ms each with
16 test-bed hosts' processes: issue #31, P2). The host call now reads the table once and each
task looks for its own marker in it. A task's stop looked twice before its first signal (the
stop's look, then the same look again in its termination); once now.
"""

import os
import subprocess
import sys

from ports import free_ports

from dtfbench.launch import host_run, task
from dtfbench.launch.host_run_spec import ARGUMENT_SPEC, TASK_SPEC
from dtfbench.linux import procfs

# A task that listens on its own endpoint (from the cluster flags) until it is stopped.
LISTENER = (
    "import socket, sys, time\n"
    "flags = dict(zip(sys.argv[1::2], sys.argv[2::2]))\n"
    "endpoint = flags['--%s_hosts' % flags['--job_name']].split(',')[int(flags['--task_index'])]\n"
    "host, port = endpoint.rsplit(':', 1)\n"
    "server = socket.create_server((host, int(port)))\n"
    "time.sleep(600)\n"
)


def params(tmp_path, ports, **options):
    values = {name: option.get("default") for name, option in ARGUMENT_SPEC.items()}
    spec = {name: option.get("default") for name, option in TASK_SPEC.items()}
    values.update(
        run_id="looks",
        run_dir=str(tmp_path / "run"),
        tasks=[
            dict(spec, job="ps", task_index=0, address="127.0.0.1", port=ports[0]),
            dict(spec, job="worker", task_index=0, address="127.0.0.1", port=ports[1]),
        ],
        cluster_spec={"ps": ["127.0.0.1:%d" % ports[0]], "worker": ["127.0.0.1:%d" % ports[1]]},
        program=[sys.executable, "-c", LISTENER],
        ready_timeout=30.0,
        grace_period=5.0,
        nic_sample_interval=0.1,
    )
    values.update(options)
    return values


def counting_looks(monkeypatch, events=None):
    looks = [] if events is None else events
    real = procfs.pids

    def pids():
        looks.append("look")
        return real()

    monkeypatch.setattr(procfs, "pids", pids)
    return looks


def test_a_start_of_a_sampler_a_ps_and_a_worker_reads_the_process_table_once(tmp_path, monkeypatch):
    ports = free_ports(2)
    looks = counting_looks(monkeypatch)
    warnings = []
    try:
        started = host_run.direct_entry(params(tmp_path, ports, state="started"), False, warnings.append)
        assert not started.get("failed"), started
        assert [t["ready"] for t in started["tasks"]] == [True, True] and not warnings, (started, warnings)
        assert len(looks) == 1, "the start read the process table %d times" % len(looks)
    finally:
        monkeypatch.undo()
        stopped = host_run.direct_entry(params(tmp_path, ports, state="stopped"), False, None)
        assert not stopped.get("failed"), stopped


def test_the_one_look_still_finds_and_stops_a_later_tasks_leftover(tmp_path, monkeypatch):
    """A leftover of the worker (the second task the host starts) from an earlier start."""
    ports = free_ports(2)
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    marker = os.path.join(str(run_dir), "looks-worker-0")
    leftover = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env=dict(os.environ, **{task.MARKER_ENV: marker}),
        start_new_session=True,
    )
    looks = counting_looks(monkeypatch)
    warnings = []
    try:
        started = host_run.direct_entry(params(tmp_path, ports, state="started"), False, warnings.append)
        assert not started.get("failed"), started
        assert [w for w in warnings if "leftover" in w] == [
            "stopped 1 leftover process(es) of an earlier start of looks-worker-0: [%d]" % leftover.pid
        ], (warnings, looks)
        assert leftover.wait(10) is not None
        # One look for the start, and the leftover's stop looks again (fresh) until it is gone.
        assert len(looks) >= 2
    finally:
        if leftover.poll() is None:
            leftover.kill()
            leftover.wait()
        monkeypatch.undo()
        stopped = host_run.direct_entry(params(tmp_path, ports, state="stopped"), False, None)
        assert not stopped.get("failed"), stopped


def test_a_stop_looks_once_before_its_first_signal(tmp_path, monkeypatch):
    ports = free_ports(2)
    options = dict(tasks=params(tmp_path, ports)["tasks"][1:], nic_sample_interval=0.0)
    started = host_run.direct_entry(params(tmp_path, ports, state="started", **options), False, None)
    assert not started.get("failed"), started
    events = []
    counting_looks(monkeypatch, events)
    real_killpg = os.killpg

    def killpg(group, number):
        events.append("signal")
        return real_killpg(group, number)

    monkeypatch.setattr(os, "killpg", killpg)
    stopped = host_run.direct_entry(params(tmp_path, ports, state="stopped", **options), False, None)
    assert not stopped.get("failed"), stopped
    assert stopped["tasks"][0]["terminated"], stopped
    assert events[:2] == ["look", "signal"], events
