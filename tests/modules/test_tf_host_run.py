"""tf_host_run through Ansible, with a small real Python program standing in for TF tasks.

One stand-in program plays every PS and worker: it reads the cluster flags the module gives
it, listens on its own endpoint, records its argv and environment, and behaves as a per-task
plan (passed in the program arguments, the same for every task) says. After every test no
process of the test may remain (checked by scanning /proc).
"""

import json
import os
import re
import signal
import socket
import sys
import textwrap
import threading
import time

import pytest
from ports import free_ports

# no_leftovers: an autouse fixture, active in this module by being imported.
from task_processes import alive, no_leftovers, processes_of, wait_for  # noqa: F401

from dtfbench.contract.outcomes import PEER_LOST
from dtfbench.launch.task import SUPERVISOR_COMM
from dtfbench.linux import procfs

pytestmark = pytest.mark.ansible

RUN_ID = "run"

# The stand-in for a PS or worker. Its plan (per "<job>-<index>") says:
#   say: a line to print first; exit_at_once: exit with this code before listening;
#   listen: false to never listen; listen_delay: seconds before it listens;
#   run: seconds to run after listening; until: a file whose appearance ends it;
#   rc: the exit code; value: put in the worker's result file.
# Without run/until it runs until a signal ends it. It records its argv, pid, environment,
# start and listen times in <record-dir>/<job>-<index>.json (atomically).
PROGRAM = textwrap.dedent(r"""
    import json, os, socket, sys, time

    args = sys.argv[1:]

    def flag(name, default=None):
        return args[args.index(name) + 1] if name in args else default

    job, index = flag("--job_name"), int(flag("--task_index"))
    me = "%s-%d" % (job, index)
    plan = json.loads(flag("--plan", "{}")).get(me, {})
    record = {"argv": args, "pid": os.getpid(), "started": time.time(),
              "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
              "test_env": os.environ.get("DTFBENCH_HOSTRUN_TEST")}

    def save():
        path = os.path.join(flag("--record-dir"), me + ".json")
        with open(path + ".tmp", "w") as handle:
            json.dump(record, handle)
        os.rename(path + ".tmp", path)

    save()
    print("%s (pid %d) starting %s" % (me, os.getpid(), plan.get("say", "")), flush=True)
    if "exit_at_once" in plan:
        sys.exit(plan["exit_at_once"])
    if plan.get("listen", True):
        time.sleep(plan.get("listen_delay", 0))
        host, port = flag("--%s_hosts" % job).split(",")[index].rsplit(":", 1)
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((host, int(port)))
        server.listen(16)
        record["listening"] = time.time()
        save()
        print("%s listening on %s" % (me, port), flush=True)
    start = time.time()
    while True:
        if plan.get("until") and os.path.exists(plan["until"]):
            break
        if plan.get("run") is not None and time.time() - start >= plan["run"]:
            break
        time.sleep(0.05)
    if flag("--result_file"):
        with open(flag("--result_file"), "w") as handle:
            json.dump({"task_index": index, "value": plan.get("value"),
                       "status": "ok" if plan.get("rc", 0) == 0 else "error",
                       "reason": plan.get("reason")}, handle)
    print("%s done, rc %d" % (me, plan.get("rc", 0)), flush=True)
    sys.exit(plan.get("rc", 0))
""")


def proc_starttime(pid):
    return int(procfs.stat_fields(pid)[19])


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def task_entry(job, task_index, port, cuda_visible_devices, num_devices, device_type):
    """One task on 127.0.0.1 as tf_cluster_spec returns it (with its keys the module does not use)."""
    return dict(
        host="localhost",
        job=job,
        task_index=task_index,
        address="127.0.0.1",
        port=port,
        endpoint="127.0.0.1:%d" % port,
        cuda_visible_devices=cuda_visible_devices,
        num_devices=num_devices,
        device_type=device_type,
    )


class Host:
    """One host's part of a run on 127.0.0.1: 1 PS and 2 workers (by default) on free ports."""

    def __init__(self, tmp_path, run_module, monkeypatch, num_ps=1, num_workers=2):
        self.tmp_path = tmp_path
        self.run_module = run_module
        self.run_dir = tmp_path / "run"
        self.records = tmp_path / "records"
        self.records.mkdir()
        self.program = tmp_path / "program.py"
        self.program.write_text(PROGRAM)
        # Reaches the tasks through the module's environment (the module passes its own on).
        monkeypatch.setenv("DTFBENCH_HOSTRUN_TEST", str(tmp_path))
        ports = free_ports(num_ps + num_workers)
        self.ps_ports, self.worker_ports = ports[:num_ps], ports[num_ps:]
        self.cluster_spec = {
            "ps": ["127.0.0.1:%d" % p for p in self.ps_ports],
            "worker": ["127.0.0.1:%d" % p for p in self.worker_ports],
        }
        # As tf_cluster_spec returns them (with its unused keys), workers first: the module
        # orders them itself.
        self.tasks = [task_entry("worker", i, p, str(i), 1, "gpu") for i, p in enumerate(self.worker_ports)]
        self.tasks += [task_entry("ps", i, p, "", 0, "cpu") for i, p in enumerate(self.ps_ports)]

    def __call__(self, state, plan=None, check=False, **options):
        args = dict(state=state, run_id=RUN_ID, run_dir=str(self.run_dir), tasks=self.tasks)
        if state in ("started", "finished") and plan is not None:
            args.update(
                cluster_spec=self.cluster_spec,
                result_flag="--result_file",
                program=[sys.executable, str(self.program)],
                program_args=["--plan", json.dumps(plan), "--record-dir", str(self.records)],
            )
        args.update(options)
        return self.run_module("tf_host_run", args, check=check)

    def record(self, me):
        """What the stand-in program <job>-<index> recorded about itself."""
        return json.loads((self.records / (me + ".json")).read_text())

    def exit_record(self, name):
        return json.loads((self.run_dir / (name + ".exit")).read_text())

    def supervisor(self, name):
        return int((self.run_dir / (name + ".pid")).read_text())

    def expected_argv(self, job, index, plan):
        argv = [
            "--job_name",
            job,
            "--task_index",
            str(index),
            "--worker_hosts",
            ",".join(self.cluster_spec["worker"]),
            "--ps_hosts",
            ",".join(self.cluster_spec["ps"]),
        ]
        if job == "worker":
            argv += ["--result_file", str(self.run_dir / ("worker-%d.json" % index))]
        return argv + ["--plan", json.dumps(plan), "--record-dir", str(self.records)]


@pytest.fixture
def host(tmp_path, run_module, monkeypatch):
    return Host(tmp_path, run_module, monkeypatch)


def by_name(reports):
    return dict((report["name"], report) for report in reports)


def in_background(action):
    """Run action() in a thread; join() re-raises what it raised."""
    errors = []

    def target():
        try:
            action()
        except BaseException as error:  # join() raises it in the test's thread
            errors.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()

    def join():
        thread.join(60)
        assert not thread.is_alive(), "the test's helper thread still runs"
        if errors:
            raise errors[0]

    return join


def module_running(tmp_path):
    """True while a tf_host_run module process of this test runs (seen in /proc)."""
    entry = ("DTFBENCH_HOSTRUN_TEST=%s" % tmp_path).encode()
    return any(
        entry in procfs.environ(pid)
        for pid in procfs.pids()
        # The module, or the direct call of its action plugin (plugins/action/tf_host_run.py).
        if any("AnsiballZ_tf_host_run" in part or part == "dtfbench-tf_host_run" for part in procfs.cmdline(pid))
        and procfs.comm(pid) != SUPERVISOR_COMM  # the tasks' supervisors are forks of it
    )


# ---- checked ------------------------------------------------------------------------------


def test_checked_fresh_run_dir_then_a_busy_port(host):
    rc, fresh = host("checked")
    assert rc == 0, fresh
    assert fresh["changed"] is False and fresh["complete"] is False and fresh["busy"] == []
    assert "stored_results" not in fresh
    assert not host.run_dir.exists()  # checked changes nothing

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", host.worker_ports[1]))
        listener.listen(1)
        rc, busy = host("checked")
    assert rc == 0, busy
    assert busy["changed"] is False and busy["complete"] is False
    assert len(busy["busy"]) == 1, busy["busy"]
    entry = busy["busy"][0]
    assert (entry["job"], entry["task_index"]) == ("worker", 1)
    assert (entry["address"], entry["port"]) == ("127.0.0.1", host.worker_ports[1])
    assert os.getpid() in entry["pids"]
    assert entry["msg"].startswith("port %d on 127.0.0.1, wanted by worker 1, is already in use" % host.worker_ports[1])
    assert str(os.getpid()) in entry["msg"]


# ---- started ------------------------------------------------------------------------------


def test_started_starts_all_at_once_with_cluster_flags_and_devices(host):
    # Every task listens only 3 s after it starts: one started after the previous listened
    # would start after that one's listen time.
    plan = dict((me, {"listen_delay": 3.0}) for me in ("ps-0", "worker-0", "worker-1"))
    host.tasks[-1]["cuda_visible_devices"] = "5"  # given to the PS by mistake: it takes no GPU
    rc, started = host(
        "started", plan, environment={"DTFBENCH_HOSTRUN_TEST": "from-options", "CUDA_VISIBLE_DEVICES": "7"}
    )
    assert rc == 0, started
    assert started["changed"] is True
    assert [t["name"] for t in started["tasks"]] == ["run-ps-0", "run-worker-0", "run-worker-1"]
    assert all(t["ready"] is True and t["changed"] is True for t in started["tasks"])
    # Returned once every task listens.
    for port in host.ps_ports + host.worker_ports:
        assert port_open(port), port
    records = dict((me, host.record(me)) for me in plan)
    assert max(r["started"] for r in records.values()) < min(r["listening"] for r in records.values())
    # PSs first (the supervisors' start times, in clock ticks).
    starts = [proc_starttime(t["pid"]) for t in started["tasks"]]
    assert starts == sorted(starts), starts
    for report in started["tasks"]:
        assert alive(report["pid"]) and report["pid"] == host.supervisor(report["name"])

    # The cluster flags; the result flag for workers only; program_args last.
    assert records["ps-0"]["argv"] == host.expected_argv("ps", 0, plan)
    assert records["worker-0"]["argv"] == host.expected_argv("worker", 0, plan)
    assert records["worker-1"]["argv"] == host.expected_argv("worker", 1, plan)
    # CUDA_VISIBLE_DEVICES is the task's (not the environment option's); empty for a PS.
    assert [records[me]["cuda"] for me in ("ps-0", "worker-0", "worker-1")] == ["", "0", "1"]
    assert all(r["test_env"] == "from-options" for r in records.values())

    # Already running: nothing starts again.
    rc, again = host("started", plan)
    assert rc == 0, again
    assert again["changed"] is False
    assert [t["pid"] for t in again["tasks"]] == [t["pid"] for t in started["tasks"]]
    assert all(t["changed"] is False and t["ready"] is True for t in again["tasks"])

    rc, stopped = host("stopped")
    assert rc == 0, stopped
    assert stopped["changed"] is True and stopped["died"] == []
    assert not any(alive(t["pid"]) for t in started["tasks"])


def test_started_fails_fast_when_a_task_exits_before_its_port_is_ready(host):
    plan = {"worker-1": {"exit_at_once": 3, "say": "cannot bind: boom"}}
    began = time.time()
    rc, result = host("started", plan, ready_timeout=120)
    assert rc != 0
    assert result["elapsed"] < 30  # not ready_timeout
    assert result["msg"].startswith(
        "task run-worker-1 exited with rc 3 before port %d was ready" % host.worker_ports[1]
    ), result["msg"]
    assert (
        "worker-1 (pid %d) starting cannot bind: boom" % host.record("worker-1")["pid"] in result["msg"]
    )  # the log tail
    ended = host.exit_record("run-worker-1")["ended"]
    assert result["failed_at"] == ended and began < ended < time.time()

    rc, stopped = host("stopped")
    assert rc == 0, stopped
    assert [d["name"] for d in stopped["died"]] == ["run-worker-1"]
    assert "exited with rc 3" in stopped["died"][0]["msg"]


def test_a_task_that_finishes_before_its_port_was_seen_is_no_failure(host):
    # A short program may listen and exit 0 between two readiness polls: done, not failed.
    plan = {"worker-1": {"exit_at_once": 0, "say": "nothing to do"}, "worker-0": {"run": 1.5, "value": 1.0}}
    rc, finished = host("finished", plan, timeout=60)
    assert rc == 0, finished
    assert [(w["task_index"], w["rc"]) for w in finished["workers"]] == [(0, 0), (1, 0)]
    assert finished["workers"][1]["result"] is None  # it wrote none: a warning, not a failure
    rc, stopped = host("stopped")
    assert rc == 0 and stopped["died"] == [], stopped


def test_started_fails_after_ready_timeout_naming_the_task_that_never_listens(host):
    plan = {"worker-0": {"listen": False, "say": "stuck loading the model"}}
    rc, result = host("started", plan, ready_timeout=2)
    assert rc != 0
    assert 2 <= result["elapsed"] < 30
    assert result["msg"].startswith(
        "worker 0 on 127.0.0.1:%d did not accept connections within ready_timeout=2.0 s" % host.worker_ports[0]
    ), result["msg"]
    assert "stuck loading the model" in result["msg"]  # its log tail
    assert "ps 0" not in result["msg"] and "worker 1" not in result["msg"]
    assert result["failed_at"] <= time.time()
    rc, stopped = host("stopped")
    assert rc == 0 and stopped["changed"] is True and stopped["died"] == []


# ---- finished, stopped, checked: a whole run ------------------------------------------------


def test_a_whole_run_finished_stopped_then_checked_complete(host):
    # The PS exits 0 by itself while the workers still run: no failure. (Every task runs a
    # second or more after it listens: one that ended before the module's readiness poll saw
    # its port would be a task that exited before it was ready.)
    plan = {"ps-0": {"run": 1.5}, "worker-0": {"run": 3.0, "value": 10.5}, "worker-1": {"run": 2.0, "value": 20.25}}
    rc, finished = host("finished", plan, timeout=60)
    assert rc == 0, finished
    assert finished["changed"] is True
    assert [w["task_index"] for w in finished["workers"]] == [0, 1]
    for index, worker in enumerate(finished["workers"]):
        assert worker["rc"] == 0 and worker["signal_name"] is None and worker["runtime"] > 0
        assert worker["result"] == {
            "task_index": index,
            "status": "ok",
            "reason": None,
            "value": plan["worker-%d" % index]["value"],
        }
        assert "worker-%d done, rc 0" % index in "\n".join(worker["log_tail"])
    ps0 = host.exit_record("run-ps-0")
    assert ps0["rc"] == 0 and ps0["ended"] < host.exit_record("run-worker-1")["ended"]
    # It returned once the workers had exited.
    for index in (0, 1):
        assert host.exit_record("run-worker-%d" % index)["ended"] < time.time()
        assert not alive(host.supervisor("run-worker-%d" % index))

    results = [w["result"] for w in finished["workers"]]
    rc, stopped = host("stopped", complete_results=results)
    assert rc == 0, stopped
    assert stopped["died"] == []
    # Nothing was left to stop; the marker is the change.
    assert all(t["changed"] is False for t in stopped["tasks"]) and stopped["changed"] is True
    assert json.loads((host.run_dir / "complete").read_text()) == results

    rc, checked = host("checked")
    assert rc == 0, checked
    assert checked["complete"] is True and checked["stored_results"] == results
    assert checked["busy"] == [] and checked["changed"] is False

    rc, again = host("stopped", complete_results=results)
    assert rc == 0, again
    assert again["changed"] is False and again["died"] == []


def test_finished_fails_fast_on_a_failing_worker_while_another_runs(host, tmp_path):
    go = tmp_path / "go"
    plan = {
        "ps-0": {"until": str(go)},
        "worker-0": {"until": str(go)},
        "worker-1": {"run": 1.5, "rc": 4, "reason": "loss is NaN"},
    }
    rc, result = host("finished", plan, timeout=120)
    assert rc != 0
    assert result["elapsed"] < 30  # did not wait for worker 0 (or the timeout)
    assert result["msg"].startswith("task run-worker-1 exited with rc 4: loss is NaN"), result["msg"]
    assert "worker-1 done, rc 4" in result["msg"]  # the log tail
    assert result["failed_at"] == host.exit_record("run-worker-1")["ended"]
    assert result["workers"] == []
    # Worker 0 and the PS were left running.
    worker0, ps0 = host.record("worker-0")["pid"], host.record("ps-0")["pid"]
    assert alive(worker0) and alive(ps0)
    assert not (host.run_dir / "run-worker-0.exit").exists()

    rc, stopped = host("stopped")
    assert rc == 0, stopped
    assert [d["name"] for d in stopped["died"]] == ["run-worker-1"]
    assert stopped["died"][0]["msg"].startswith("task run-worker-1 exited with rc 4")
    assert not alive(worker0) and not alive(ps0)
    assert not (host.run_dir / "complete").exists()  # no complete_results: no marker


def kill_the_ps_in_background(host, ready, delay):
    """SIGKILL ps-0 `delay` s after ready() holds, in a thread: (join, [the kill's time])."""
    killed = []

    def kill_the_ps():
        assert wait_for(ready, 60)
        time.sleep(delay)
        killed.append(time.time())
        os.kill(host.record("ps-0")["pid"], signal.SIGKILL)

    return in_background(kill_the_ps), killed


def test_finished_fails_when_a_ps_is_killed_while_the_workers_run(host):
    plan = {"worker-0": {}, "worker-1": {}}  # the workers run until they are stopped
    # 1 s after every task listens: the module is waiting for the workers by now.
    join, killed = kill_the_ps_in_background(
        host, lambda: all(port_open(p) for p in host.ps_ports + host.worker_ports), 1.0
    )
    rc, result = host("finished", plan, timeout=120)
    join()
    assert rc != 0
    assert result["elapsed"] < 60
    assert result["msg"].startswith("task run-ps-0 was killed by SIGKILL"), result["msg"]
    assert "before port" not in result["msg"]
    assert result["failed_at"] == host.exit_record("run-ps-0")["ended"]
    assert killed[0] <= result["failed_at"] < killed[0] + 10
    assert result["workers"] == []

    rc, stopped = host("stopped")
    assert rc == 0, stopped
    assert [d["name"] for d in stopped["died"]] == ["run-ps-0"]
    assert "was killed by SIGKILL" in stopped["died"][0]["msg"]


def test_a_ps_killed_just_before_a_worker_that_lost_it_is_named_first(host):
    """The worker says it lost a peer and its exit is recorded before the PS's (whose supervisor
    was slower): the killed PS is still the cause, the worker its consequence."""
    plan = {"worker-0": {"run": 1.0, "rc": 1, "say": "step 1 failed with ps 0 " + PEER_LOST}, "worker-1": {}}
    join, _ = kill_the_ps_in_background(host, lambda: (host.run_dir / "run-worker-0.exit").exists(), 0.3)
    rc, result = host("finished", plan, timeout=120)
    join()
    assert rc != 0
    assert result["msg"].startswith("task run-ps-0 was killed by SIGKILL"), result["msg"]
    assert "\nthen: task run-worker-0 exited with rc 1" in result["msg"], result["msg"]
    assert host("stopped")[0] == 0


def test_finished_timeout_names_the_workers_still_running(host):
    plan = {"worker-0": {"run": 1.5, "value": 1}, "worker-1": {"say": "slow worker"}}
    rc, result = host("finished", plan, timeout=3)
    assert rc != 0
    assert 3 <= result["elapsed"] < 30
    assert result["msg"].startswith("run-worker-1 still run(s) after timeout=3.0 s"), result["msg"]
    assert "slow worker" in result["msg"]  # worker 1's log tail
    assert "run-worker-0" not in result["msg"]
    assert [(w["task_index"], w["rc"]) for w in result["workers"]] == [(0, 0)]
    assert alive(host.record("worker-1")["pid"])
    rc, stopped = host("stopped")
    assert rc == 0 and stopped["changed"] is True and stopped["died"] == []


# ---- stopped ------------------------------------------------------------------------------


def test_stopped_reports_a_task_that_died_by_itself_not_those_it_stopped(host, tmp_path):
    rc, started = host("started", {})
    assert rc == 0, started
    os.kill(host.record("worker-1")["pid"], signal.SIGKILL)
    assert wait_for(lambda: (host.run_dir / "run-worker-1.exit").exists())

    rc, stopped = host("stopped", grace_period=5)
    assert rc == 0, stopped
    assert stopped["changed"] is True
    assert len(stopped["died"]) == 1, stopped["died"]
    died = stopped["died"][0]
    assert died["name"] == "run-worker-1"
    assert died["msg"].startswith("task run-worker-1 was killed by SIGKILL")
    assert died["ended"] == host.exit_record("run-worker-1")["ended"]
    reports = by_name(stopped["tasks"])
    assert reports["run-ps-0"]["changed"] is True and reports["run-worker-0"]["changed"] is True
    assert reports["run-worker-1"]["changed"] is False
    assert host.exit_record("run-ps-0")["signal_name"] == "SIGTERM"
    assert not processes_of(tmp_path)
    assert not (host.run_dir / "complete").exists()

    # Again: nothing to stop, and the tasks it stopped itself did not die by themselves.
    rc, again = host("stopped")
    assert rc == 0, again
    assert again["changed"] is False
    assert [d["name"] for d in again["died"]] == ["run-worker-1"]


def test_stopped_reports_tasks_that_max_runtime_ended(host, tmp_path):
    # The supervisor's dead-man deadline signals its own group: those tasks did not survive
    # the run, so they died (unlike a task that a stop signalled).
    rc, started = host("started", {}, max_runtime=3, grace_period=1)
    assert rc == 0, started
    assert wait_for(lambda: not processes_of(tmp_path), 30)
    rc, stopped = host("stopped")
    assert rc == 0, stopped
    assert stopped["changed"] is False
    assert [d["name"] for d in stopped["died"]] == ["run-ps-0", "run-worker-0", "run-worker-1"]
    assert all("was killed by SIGTERM" in d["msg"] for d in stopped["died"]), stopped["died"]
    assert host.exit_record("run-ps-0")["deadline_exceeded"] is True


def test_stopped_waits_up_to_ps_exit_timeout_for_the_ps(tmp_path, run_module, monkeypatch):
    host = Host(tmp_path, run_module, monkeypatch, num_ps=2, num_workers=1)
    done = tmp_path / "ps-0-done"
    # PS 0 exits by itself once the test creates its file, a second into the stopped call;
    # PS 1 never does.
    plan = {"ps-0": {"until": str(done)}}
    rc, started = host("started", plan)
    assert rc == 0, started

    def release_ps0():
        assert wait_for(lambda: module_running(tmp_path), 60), "no tf_host_run module seen"
        time.sleep(1.0)
        done.write_text("")

    join = in_background(release_ps0)
    rc, stopped = host("stopped", ps_exit_timeout=4, grace_period=5)
    join()
    assert rc == 0, stopped
    assert 4 <= stopped["elapsed"] < 30  # waited the whole ps_exit_timeout for PS 1
    ps0 = host.exit_record("run-ps-0")
    assert ps0["rc"] == 0 and ps0["signal"] is None and "signals_received" not in ps0
    assert ps0["ended"] < host.exit_record("run-worker-0")["ended"]
    reports = by_name(stopped["tasks"])
    assert reports["run-ps-0"]["changed"] is False
    assert reports["run-ps-1"]["changed"] is True
    assert reports["run-ps-1"]["signal_name"] == "SIGTERM"
    assert reports["run-worker-0"]["changed"] is True
    assert stopped["died"] == []
    assert not processes_of(tmp_path)


def test_the_marker_is_written_before_the_wait_for_the_ps(tmp_path, run_module, monkeypatch):
    """The workers' results are complete when the stop begins: the marker is on disk while the
    stop still waits for a PS (up to ps_exit_timeout), so a stop that is cut short there (its
    host's sshd gone, the call killed) leaves a run that a rerun finds complete."""
    host = Host(tmp_path, run_module, monkeypatch, num_ps=1, num_workers=1)
    rc, started = host("started", {})  # the PS never exits by itself
    assert rc == 0, started
    results = [{"task_index": 0, "status": "ok", "reason": None, "value": 1.0}]
    marker = host.run_dir / "complete"
    seen = []

    def look_while_the_stop_waits():
        assert wait_for(lambda: module_running(tmp_path), 60), "no tf_host_run module seen"
        assert wait_for(marker.exists, 6), "no marker while the stop waited for the PS"
        seen.append(host.exit_record("run-ps-0") if (host.run_dir / "run-ps-0.exit").exists() else None)

    join = in_background(look_while_the_stop_waits)
    rc, stopped = host("stopped", ps_exit_timeout=8, grace_period=5, complete_results=results)
    join()
    assert rc == 0, stopped
    assert seen == [None]  # the PS was still running when the marker was there
    assert json.loads(marker.read_text()) == results
    assert by_name(stopped["tasks"])["run-ps-0"]["signal_name"] == "SIGTERM"


# ---- check mode, bad input -----------------------------------------------------------------


def test_check_mode_starts_and_stops_nothing(host, tmp_path):
    plan = {"worker-0": {}, "worker-1": {}}
    for state in ("started", "finished"):
        rc, result = host(state, plan, check=True)
        assert rc == 0, result
        assert result["changed"] is True
        assert result["msg"] == "check mode: would start run-ps-0, run-worker-0, run-worker-1"
        assert not host.run_dir.exists() and not processes_of(tmp_path)
    rc, result = host("stopped", check=True)
    assert rc == 0 and result["changed"] is False, result
    rc, result = host("stopped", check=True, complete_results=[])
    assert rc == 0 and result["changed"] is True, result  # it would write the marker
    assert not host.run_dir.exists()

    rc, started = host("started", plan)
    assert rc == 0, started
    pids = sorted(processes_of(tmp_path))
    for state in ("started", "finished"):
        rc, result = host(state, plan, check=True, timeout=60)
        assert rc == 0 and result["elapsed"] < 10, result
        assert result["changed"] is False and result["msg"] == "check mode: every task already runs"
    rc, result = host("stopped", check=True, complete_results=[{"x": 1}])
    assert rc == 0, result
    assert result["changed"] is True
    assert all(t["changed"] is True and t["msg"].startswith("check mode: would stop") for t in result["tasks"])
    assert sorted(processes_of(tmp_path)) == pids
    assert not (host.run_dir / "complete").exists()

    rc, stopped = host("stopped")
    assert rc == 0 and stopped["changed"] is True, stopped


def test_finished_without_program_or_cluster_spec_is_one_clear_error(host):
    rc, result = host("finished")
    assert rc != 0
    assert result["msg"] == "cluster_spec and program required with state=finished"
    rc, result = host("started", cluster_spec=host.cluster_spec)
    assert rc != 0 and result["msg"] == "program required with state=started"
    assert not host.run_dir.exists()


def test_another_sweeps_run_waits_for_the_ports_this_run_claimed_before_its_tasks_listen(host, tmp_path):
    """Issue 56, case 3: two sweeps on one host. A task's server listens seconds after its start
    (TF's import); a second sweep's check in between found the port free, started, and lost the
    race. Each start claims its ports first (dtfbench.launch.port_claim): the other sweep's check
    waits for the claim and names the run that holds it; so does its start (two checks at one
    moment both find the ports free), which then is refused, starting nothing."""
    plan = dict((me, {"listen_delay": 4.0}) for me in ("ps-0", "worker-0", "worker-1"))
    join = in_background(lambda: host("started", plan))
    time.sleep(1.5)  # run "run" has started its tasks; none listens yet
    assert not any(port_open(p) for p in host.ps_ports + host.worker_ports)
    other = dict(run_id="other-sweep-01", run_dir=str(tmp_path / "other-sweep-01"), tasks=host.tasks)
    rc, checked = host.run_module("tf_host_run", dict(other, state="checked", ready_timeout=1.0))
    assert rc == 0 and len(checked["busy"]) == 3, checked
    ps = [b for b in checked["busy"] if b["job"] == "ps"][0]
    assert ps["msg"].startswith(
        "port %d on 127.0.0.1, wanted by ps 0, is held by run run (ps 0, pid " % host.ps_ports[0]
    )
    assert "of another sweep on this host after a wait of 1 s" in ps["msg"], ps["msg"]
    rc, refused = host.run_module(
        "tf_host_run",
        dict(other, state="started", cluster_spec=host.cluster_spec, program=[sys.executable, str(host.program)],
             program_args=["--plan", "{}", "--record-dir", str(host.records)], ready_timeout=1.0),
    )  # fmt: skip
    # The first held port in (address, port) order: whichever of the three the free ports made lowest.
    assert rc != 0 and re.search(
        r"wanted by (ps|worker) \d, is held by run run \((ps|worker) \d, pid ", refused["msg"]
    ), refused
    assert "after a wait of 1 s" in refused["msg"], refused["msg"]
    assert not (tmp_path / "other-sweep-01").exists() or not list((tmp_path / "other-sweep-01").glob("*.pid"))
    join()
    rc, stopped = host("stopped")
    assert rc == 0, stopped
    # The tasks ended: their supervisors' claims went with them, and the other sweep's check passes at once.
    started = time.monotonic()
    rc, checked = host.run_module("tf_host_run", dict(other, state="checked", ready_timeout=30.0))
    assert rc == 0 and checked["busy"] == [] and time.monotonic() - started < 10, checked
