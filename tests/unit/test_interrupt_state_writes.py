"""The interrupt callback's state file: written once per task, never behind a start (issue #19).

The callback (plugins/callback/dtfbench_interrupt.py) keeps, for its watchdog, the hosts
whose tf_host_run checked the run (they may start its tasks). Rewriting the whole file on
every host's result cost O(N) bytes N times a phase (11 CPU-s a run at 1,024 hosts); the
host entries are now written at the next task's start, before any host runs that task, and
at once when ansible-playbook gets a signal. The plugin runs here on its own, fed results as
Ansible feeds them, with its real state file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "callback" / "dtfbench_interrupt.py"
HOSTS = [f"node{i:02d}" for i in range(1, 41)]


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    monkeypatch.delenv("DTFBENCH_INTERRUPT_OFF", raising=False)
    monkeypatch.setenv("DTFBENCH_CONTROLLER", "0")  # the plugin sets it in os.environ
    spec = importlib.util.spec_from_file_location("dtfbench_interrupt_under_test", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    callback = module.CallbackModule()
    callback.state_file = tmp_path / "state.json"  # as start_watchdog sets it (no watchdog here)
    callback.state = dict(argv=["ansible-playbook"], hosts={})
    callback.save()
    tasks = {h: [dict(job="worker", task_index=i, address="10.0.0.%d" % i, port=2220)] for i, h in enumerate(HOSTS)}
    callback.seen(result("tf_cluster_spec", "node01", dict(cluster_spec={}, hosts=tasks)))
    return callback


def result(action, host, outcome):
    return SimpleNamespace(
        task=SimpleNamespace(action=action), host=SimpleNamespace(get_name=lambda: host), result=outcome
    )


def on_disk(callback) -> dict:
    return json.loads(callback.state_file.read_text())


def checked_everywhere(callback):
    for host in HOSTS:
        callback.seen(result("tf_host_run", host, dict(complete=False, busy=[], run_id="r1", run_dir="/runs/r1")))


def test_host_entries_are_written_once_at_the_next_task_start(plugin):
    writes = []
    save = plugin.save
    plugin.save = lambda: (writes.append(1), save())
    checked_everywhere(plugin)
    assert writes == [], "the state file was rewritten on every host's result"
    assert on_disk(plugin)["hosts"] == {}
    plugin.v2_playbook_on_task_start(SimpleNamespace(), False)  # the start, on every host
    assert sorted(on_disk(plugin)["hosts"]) == HOSTS
    assert len(writes) == 1
    plugin.v2_playbook_on_task_start(SimpleNamespace(), False)
    assert len(writes) == 1, "nothing pending, nothing written"
    for host in HOSTS:  # each host's stop returned
        plugin.seen(result("tf_host_run", host, dict(died=[], changed=True)))
    assert sorted(on_disk(plugin)["hosts"]) == HOSTS  # a host stopped twice is no harm
    plugin.v2_playbook_on_stats(SimpleNamespace())
    assert on_disk(plugin)["hosts"] == {} and on_disk(plugin)["ended"] is True


def test_a_signal_writes_the_pending_hosts_at_once(plugin):
    checked_everywhere(plugin)
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        plugin.wrap(signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    state = on_disk(plugin)
    assert state["signal"] == "SIGUSR1"
    assert sorted(state["hosts"]) == HOSTS


def test_the_benchmark_roles_record_task_ends_the_run_for_the_watchdog(plugin):
    """The run is the watchdog's to record until the role's record task returned (its action, as
    roles/benchmark/tasks/run_record.yml names it), or failed with its own error; another task leaves
    it pending."""
    tasks = yaml.safe_load((PLUGIN.parents[2] / "roles" / "benchmark" / "tasks" / "run_record.yml").read_text())
    record = next(t for t in tasks if t.get("name") == "Record the run in the results store")
    (action,) = [key for key in record if key.endswith("run_record")]
    plugin.state["run"] = dict(run_id="r1")
    plugin.seen(result("ansible.builtin.command", "localhost", dict(cmd=["python", "-m", "dtfbench", "record"])))
    assert plugin.state["run"] == dict(run_id="r1")
    plugin.seen(result(action, "localhost", dict(record=dict(run_id="r1", status="ok"))))
    assert plugin.state["run"] is None and on_disk(plugin)["run"] is None
    plugin.state["run"] = dict(run_id="r2")
    plugin.seen(result(action, "localhost", dict(failed=True, msg="run r2 finished but was not recorded")))
    assert plugin.state["run"] is None


def test_a_signal_in_a_just_forked_worker_ends_it_by_the_signal_without_a_traceback(plugin, tmp_path):
    """Ctrl-C reaches the whole process group, workers Ansible has just forked included, before
    a worker puts in its own handler. The controller's handler asserts in a child ("can only
    test a child process", as TaskQueueManager._signal_handler does); the wrapper must never
    call it there, nor write the controller's state."""
    parent = os.getpid()

    def controller_only(number, frame):
        assert os.getpid() == parent, "can only test a child process"

    previous = signal.signal(signal.SIGUSR1, controller_only)
    stderr = tmp_path / "child.err"
    try:
        plugin.wrap(signal.SIGUSR1)
        before = plugin.state_file.read_bytes()
        child = os.fork()
        if child == 0:  # the worker: stderr to a file, then the signal
            try:
                fd = os.open(stderr, os.O_WRONLY | os.O_CREAT)
                os.dup2(fd, 2)
                os.kill(os.getpid(), signal.SIGUSR1)
            finally:
                os._exit(3)  # reached only if the signal did not end it
        _, status = os.waitpid(child, 0)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGUSR1, status
    assert stderr.read_text() == ""
    assert plugin.state_file.read_bytes() == before
