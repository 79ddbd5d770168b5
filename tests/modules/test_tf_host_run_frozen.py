"""tf_host_run's wait on a frozen task, and on a frozen supervisor (issue #30).

A task stopped by SIGSTOP cannot end by its own timeouts: its peers give up on it after
step_timeout, but its own host's wait saw a live supervisor until the run's timeout (30 min
by default), and the run's reason named a peer's DeadlineExceeded first. A task's program
beats a heartbeat (here dtfbench's own Watchdog, as the workload does); the wait takes a
heartbeat that stands still for stall_timeout as a frozen task, stops it and names it.

A supervisor stopped by SIGSTOP cannot record the end of its program: a worker that finished
was a timeout. The program's own exit status (in /proc while it is a zombie) decides.

Real processes throughout (the module through Ansible, real supervisors, the stand-in
program of test_tf_host_run); the faults are real SIGSTOPs.
"""

import os
import signal
import time

import pytest

# no_leftovers: an autouse fixture, active in this module by being imported.
from task_processes import alive, no_leftovers, proc_state, wait_for  # noqa: F401
from test_tf_host_run import Host, in_background, port_open

pytestmark = pytest.mark.ansible

# The stand-in program, made to beat its heartbeat with the workload's own Watchdog.
BEATING = (
    "import os\n"
    "from dtfbench.workload.liveness import HEARTBEAT_ENV, Watchdog\n"
    "_dog = Watchdog(lambda what, seconds: None, heartbeat=os.environ[HEARTBEAT_ENV])\n"
    "_dog.arm(3600, 'step 12')\n"
)


@pytest.fixture
def host(tmp_path, run_module, monkeypatch):
    host = Host(tmp_path, run_module, monkeypatch)
    host.program.write_text(BEATING + host.program.read_text())
    return host


def when_all_listen(host, action):
    """Run action() in the background once every task of the host listens."""

    def wait_then_act():
        assert wait_for(lambda: all(port_open(p) for p in host.ps_ports + host.worker_ports), 60)
        time.sleep(1.0)  # the module is waiting for the workers by now
        action()

    return in_background(wait_then_act)


def test_a_frozen_worker_is_stopped_and_named_after_stall_timeout(host, tmp_path):
    go = tmp_path / "go"
    plan = {"ps-0": {"until": str(go)}, "worker-0": {"until": str(go)}}  # worker 1 runs until stopped
    frozen = []

    def freeze_worker1():
        frozen.append(time.time())
        os.kill(host.record("worker-1")["pid"], signal.SIGSTOP)

    join = when_all_listen(host, freeze_worker1)
    rc, result = host("finished", plan, timeout=60, stall_timeout=3)
    join()
    assert rc != 0
    # Ended at stall_timeout after the freeze, not at the run's timeout.
    assert time.time() - frozen[0] < 3 + 10, result["msg"]
    assert result["msg"].startswith("task run-worker-1 is frozen: its heartbeat stood still for"), result["msg"]
    assert "(stall_timeout=3 s), last at: step 12" in result["msg"]
    assert "is stopped by a signal (SIGSTOP or SIGTSTP); stopped it" in result["msg"]
    assert result["frozen"] == ["run-worker-1"]
    # The cause's time is when its heartbeat last moved: before any peer gave up on it.
    assert frozen[0] - 2 <= result["failed_at"] <= frozen[0] + 1
    # Stopped at once (SIGTERM, with SIGCONT: not after the grace period); the others run on.
    assert not alive(host.record("worker-1")["pid"])
    assert alive(host.record("worker-0")["pid"]) and alive(host.record("ps-0")["pid"])

    rc, stopped = host("stopped")
    assert rc == 0, stopped
    assert stopped["died"] == []  # the wait stopped it: not a death of its own


def test_a_frozen_supervisor_does_not_turn_a_finished_worker_into_a_timeout(host, tmp_path):
    go = tmp_path / "go"
    plan = {"ps-0": {"until": str(go)}, "worker-0": {"until": str(go), "value": 7}, "worker-1": {"until": str(go)}}
    frozen = []

    def freeze_supervisor0_then_finish():
        supervisor = host.supervisor("run-worker-0")
        os.kill(supervisor, signal.SIGSTOP)
        assert wait_for(lambda: proc_state(supervisor) == "T", 5)
        frozen.append(supervisor)
        go.write_text("")

    join = when_all_listen(host, freeze_supervisor0_then_finish)
    rc, result = host("finished", plan, timeout=20)
    join()
    assert rc == 0, result["msg"]
    assert result["elapsed"] < 20
    assert [(w["task_index"], w["rc"], w["result"]["value"]) for w in result["workers"]] == [(0, 0, 7), (1, 0, None)]
    record = host.exit_record("run-worker-0")
    assert record["recorded_by"] == "tf_host_run" and record["rc"] == 0, record
    assert "the supervisor (pid %d, state T) did not record the end of its program" % frozen[0] in record["note"]

    rc, stopped = host("stopped")
    assert rc == 0, stopped
    assert stopped["died"] == []
    assert not alive(frozen[0])
