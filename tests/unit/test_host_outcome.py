"""One host's outcome of a tf_cluster run (the tf_host_outcome filter that the role's last task
of a run calls on every host), from what its tf_host_run calls returned: the cause in order,
its wording, its time, the results and the NIC figures."""

import importlib.util
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("tf_nodes_filters", ROOT / "plugins" / "filter" / "tf_nodes.py")
tf_nodes = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(tf_nodes)
outcome = tf_nodes.FilterModule().filters()["tf_host_outcome"]

SKIPPED = {"skipped": True}
WORKERS = [{"task_index": 0, "rc": 0, "result": {"images_per_sec": 10.0}}]
CHECK = {"complete": False, "busy": [], "room_problem": None}
BUSY = {"job": "ps", "task_index": 0, "address": "10.0.0.1", "port": 2230, "pids": [42]}


def test_a_run_without_failure_keeps_the_workers_results_and_the_nic_figures():
    got = outcome("n1", CHECK, {"workers": WORKERS}, {"died": [], "nic": {"rx": 1}}, [], True, False)
    assert got == {"results": WORKERS, "failure": "", "failed_at": "", "nic": {"n1": {"rx": 1}}}


def test_a_run_that_had_completed_gives_back_the_stored_results():
    check = dict(CHECK, complete=True, stored_results=[{"images_per_sec": 9.0}])
    got = outcome("n1", check, SKIPPED, SKIPPED, [], True, True)
    assert got["results"] == [{"result": {"images_per_sec": 9.0}}] and got["failure"] == "" and got["nic"] == {}


def test_a_lost_host_is_the_cause_on_the_runs_hosts_only():
    before = time.time()
    got = outcome("n1", dict(CHECK, busy=[BUSY]), SKIPPED, SKIPPED, ["n3"], True, False)
    assert got["failure"] == "not started: n3, a host of this run, left the play (unreachable or failed)"
    assert got["failed_at"] >= before
    two = outcome("n1", CHECK, SKIPPED, SKIPPED, ["n3", "n4"], True, False)
    assert two["failure"].startswith("not started: n3, n4, hosts of this run")
    assert outcome("n9", SKIPPED, SKIPPED, SKIPPED, ["n3"], False, False)["failure"] == ""


def test_taken_ports_and_a_full_disk_name_the_port_its_holder_and_the_fix():
    check = dict(CHECK, busy=[BUSY, dict(BUSY, job="worker", port=2220, pids=[])], room_problem="disk full: free 1 MB")
    got = outcome("n1", check, SKIPPED, SKIPPED, [], True, False)
    assert got["failure"] == (
        "port 2230 on n1 (10.0.0.1), wanted by ps 0, is already in use (listening pids: [42]): stop what listens"
        " there (ss -ltnp 'sport = :2230') or move the ports with tf_cluster_ps_port_base / tf_cluster_worker_port_base; "
        "port 2220 on n1 (10.0.0.1), wanted by worker 0, is already in use: stop what listens there (ss -ltnp"
        " 'sport = :2220') or move the ports with tf_cluster_ps_port_base / tf_cluster_worker_port_base; "
        "disk full: free 1 MB"
    )


@pytest.mark.parametrize("died_ended", [[5.0, 3.0], [None]])
def test_the_waits_failure_comes_before_a_task_that_died_and_keeps_the_rescues_time(died_ended):
    stop = {"died": [{"msg": f"task {i} died", "ended": e} for i, e in enumerate(died_ended)]}
    failed = outcome("n1", CHECK, {"failed": True, "msg": "x"}, stop, [], True, False, "worker 0 failed", 7.0)
    assert (failed["failure"], failed["failed_at"]) == ("worker 0 failed", 7.0)
    before = time.time()
    died = outcome("n1", CHECK, {"workers": WORKERS}, stop, [], True, False)
    assert died["failure"] == "; ".join(f"task {i} died" for i in range(len(died_ended)))
    assert died["failed_at"] == 3.0 if died_ended[0] else died["failed_at"] >= before
