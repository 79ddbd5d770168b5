"""tf_host_run state=finished with start=false: wait for the tasks an earlier state=started started.

The tf_cluster role uses it on runs with more hosts than Ansible's forks (all hosts start
first, then each waits): a worker that ended between the two calls must be collected, not
started again, and a task that was never started is a failure, not a start.
"""

import json

import pytest

# no_leftovers: an autouse fixture, active in this module by being imported.
from task_processes import no_leftovers, wait_for  # noqa: F401
from test_tf_host_run import Host

pytestmark = pytest.mark.ansible


@pytest.fixture
def host(tmp_path, run_module, monkeypatch):
    return Host(tmp_path, run_module, monkeypatch)


def test_wait_only_collects_a_worker_that_ended_between_the_calls_and_starts_nothing(host):
    plan = {"ps-0": {"run": 30}, "worker-0": {"run": 1.0, "value": 1.5}, "worker-1": {"run": 4.0, "value": 2.5}}
    rc, started = host("started", plan, ready_timeout=30)
    assert rc == 0, started
    first_pid = host.record("worker-0")["pid"]
    assert wait_for(lambda: (host.run_dir / "run-worker-0.exit").exists(), timeout=20)
    ended = host.exit_record("run-worker-0")

    rc, finished = host("finished", plan, start=False, timeout=60)
    assert rc == 0, finished
    assert finished["changed"] is False
    assert [w["result"]["value"] for w in finished["workers"]] == [1.5, 2.5]
    assert all(w["rc"] == 0 for w in finished["workers"])
    # Not started again: the same program process, the same exit record, one start in its log.
    assert host.record("worker-0")["pid"] == first_pid
    assert host.exit_record("run-worker-0") == ended
    assert (host.run_dir / "run-worker-0.log").read_text().count("worker-0 (pid") == 1
    assert not (host.run_dir / "run-worker-0.log.1").exists()
    rc, stopped = host("stopped", complete_results=[w["result"] for w in finished["workers"]])
    assert rc == 0, stopped


def test_wait_only_on_tasks_never_started_fails_and_starts_nothing(host):
    rc, finished = host("finished", {}, start=False, timeout=5)
    assert rc != 0
    assert "was never started" in finished["msg"], finished["msg"]
    assert not (host.run_dir / "run-ps-0.pid").exists()
    assert not any(host.records.iterdir())
    assert json.dumps(finished)  # a plain result, no crash
