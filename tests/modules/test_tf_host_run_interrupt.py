"""tf_host_run's node side of an interrupt (#21): a waiting call whose controller goes away
stops every task of its host, without any later call and without the controller's watchdog.

The module runs through ad-hoc ``ansible localhost -c local`` (no project ansible.cfg, no
callback plugins: nothing but the module can stop the tasks), with the stand-in programs of
test_tf_host_run. Two ways the controller goes away:
- Ctrl-C: SIGINT to ansible, which passes it on to its worker's process group, where the
  module runs on a local connection;
- a lost connection: the Ansible worker that reads the module's output is SIGKILLed, the
  module's stdout hangs up (on a remote host: sshd closing the channel of a dead ssh client).
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from task_processes import alive, no_leftovers, processes_of, wait_for  # noqa: F401
from test_tf_host_run import RUN_ID, Host, port_open

from dtfbench.launch.task import SUPERVISOR_COMM
from dtfbench.linux import procfs

pytestmark = pytest.mark.ansible

# Every task stopped within this many seconds of the interrupt (SIGTERM; the stand-ins obey).
BOUND = 10.0


def _cmdline(pid):
    return " ".join(procfs.cmdline(pid))


def _ppid(pid):
    return procfs.parent(pid)


def _descends_from(pid, ancestor):
    while pid and pid > 1:
        pid = _ppid(pid)
        if pid == ancestor:
            return True
    return False


def start_finished(host, adhoc, tmp_path):
    """tf_host_run state=finished in the background, every task running until stopped."""
    plan = {"worker-0": {}, "worker-1": {}}
    args = dict(
        state="finished",
        run_id=RUN_ID,
        run_dir=str(host.run_dir),
        tasks=host.tasks,
        cluster_spec=host.cluster_spec,
        result_flag="--result_file",
        grace_period=5,
        program=[sys.executable, str(host.program)],
        program_args=["--plan", json.dumps(plan), "--record-dir", str(host.records)],
    )
    cmd = adhoc.command("tf_host_run", args)
    log = open(str(tmp_path / "ansible.log"), "w+")
    host_tmp(tmp_path).mkdir()
    env = dict(adhoc.env(), TMPDIR=str(host_tmp(tmp_path)))
    process = subprocess.Popen(
        cmd, cwd=str(tmp_path), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    assert wait_for(lambda: all(port_open(p) for p in host.ps_ports + host.worker_ports), 60), _output(log)
    time.sleep(1.0)  # the module is waiting for its workers by now
    if not os.environ.get("DTFBENCH_TEST_DIRECT_CALL"):  # the direct call unpacks nothing there
        assert list(host_tmp(tmp_path).glob("ansible_*_payload_*")), "AnsiballZ unpacked nothing into TMPDIR"
    return process, log


def host_tmp(tmp_path):
    """The host's temporary folder (TMPDIR) for this test's call: where AnsiballZ unpacks the module."""
    return tmp_path / "host-tmp"


def assert_no_payload_left(tmp_path):
    """The interrupted call removed what it unpacked on the host (AnsiballZ's payload folder),
    by its end (which may come after ansible's: Ctrl-C ends ansible while the module stops)."""

    def left():
        return sorted(p.name for p in host_tmp(tmp_path).glob("ansible_*_payload_*"))

    assert wait_for(lambda: left() == [], BOUND), left()


def _output(log):
    log.flush()
    log.seek(0)
    return log.read()


def task_pids(host):
    return [host.record(me)["pid"] for me in ("ps-0", "worker-0", "worker-1")]


def assert_stopped_within_bound(host, pids, since, log):
    assert wait_for(lambda: not any(alive(p) for p in pids), BOUND + 5), _output(log)
    took = time.time() - since
    assert took <= BOUND, "the tasks took %.1f s to stop" % took
    # Each stop left its exit record: the module stopped them (SIGTERM), not the test.
    for name in ("run-ps-0", "run-worker-0", "run-worker-1"):
        assert wait_for(lambda name=name: (host.run_dir / (name + ".exit")).exists(), 5), name
        record = host.exit_record(name)
        assert record["signal_name"] == "SIGTERM", record


def test_ctrl_c_to_ansible_stops_the_hosts_tasks(tmp_path, run_module, monkeypatch, adhoc):
    host = Host(tmp_path, run_module, monkeypatch)
    process, log = start_finished(host, adhoc, tmp_path)
    pids = task_pids(host)
    since = time.time()
    os.kill(process.pid, signal.SIGINT)  # what Ctrl-C does to ansible (its workers have their own session)
    assert_stopped_within_bound(host, pids, since, log)
    process.wait(30)
    assert process.returncode != 0
    assert_no_payload_left(tmp_path)


def test_a_lost_connection_stops_the_hosts_tasks(tmp_path, run_module, monkeypatch, adhoc):
    host = Host(tmp_path, run_module, monkeypatch)
    process, log = start_finished(host, adhoc, tmp_path)
    pids = task_pids(host)
    # This ansible's module process only: the other CI lane may run tf_host_run at the same time.
    modules = [
        p
        for p in procfs.pids()
        if _cmdline(p).startswith(sys.executable + " ")
        and ("AnsiballZ_tf_host_run" in _cmdline(p) or _cmdline(p).endswith(" - dtfbench-tf_host_run"))
        and _descends_from(p, process.pid)
        and procfs.comm(p) != SUPERVISOR_COMM  # the tasks' supervisors are forks of it
    ]
    assert len(modules) == 1, [_cmdline(p) for p in modules]
    # The reader of the module's output: the Ansible worker above the module (and its shell).
    worker = _ppid(modules[0])
    while _ppid(worker) != process.pid:
        worker = _ppid(worker)
    since = time.time()
    os.kill(worker, signal.SIGKILL)  # the module gets no signal: only its stdout hangs up
    assert_stopped_within_bound(host, pids, since, log)
    assert wait_for(lambda: not alive(modules[0]), 10)
    process.wait(30)
    assert_no_payload_left(tmp_path)
