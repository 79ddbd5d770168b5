"""tf_task through Ansible, with small real Python programs standing in for TF tasks.

After every test no process of the test may remain (checked by scanning /proc).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from memory_cgroup import memory_cgroup

# no_leftovers: an autouse fixture, active in this module by being imported.
from task_processes import alive, no_leftovers, processes_of, wait_for  # noqa: F401

from dtfbench.launch.task import SUPERVISOR_COMM
from dtfbench.linux import procfs

pytestmark = pytest.mark.ansible


# A stand-in for a PS/worker: optionally listens, runs until a file appears, a time passes or
# a signal arrives, writes a JSON result, exits with a chosen code, spawns children.
PROGRAM = textwrap.dedent(r"""
    import argparse, json, os, signal, socket, subprocess, sys, time

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    parser.add_argument("--listen-delay", type=float, default=0.0)
    parser.add_argument("--until-file")
    parser.add_argument("--run", type=float)
    parser.add_argument("--rc", type=int, default=0)
    parser.add_argument("--result")
    parser.add_argument("--reason")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--children", action="store_true")
    parser.add_argument("--pids-file")
    parser.add_argument("--say", default="")
    args = parser.parse_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("program %d starting %s" % (os.getpid(), args.say), flush=True)
    pids = [os.getpid()]
    if args.children:
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
        same = subprocess.Popen([sys.executable, "-c", code])
        other = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        pids += [same.pid, other.pid]
    if args.pids_file:
        with open(args.pids_file + ".tmp", "w") as handle:
            json.dump(pids, handle)
        os.rename(args.pids_file + ".tmp", args.pids_file)
    if args.port:
        time.sleep(args.listen_delay)
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", args.port))
        server.listen(16)
        print("listening on %d" % args.port, flush=True)
    start = time.time()
    while True:
        if args.until_file and os.path.exists(args.until_file):
            break
        if args.run is not None and time.time() - start >= args.run:
            break
        time.sleep(0.05)
    if args.result:
        result = {"status": "ok" if args.rc == 0 else "error", "cwd": os.getcwd(),
                  "env": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "DTFBENCH_TEST",
                                                          "DTFBENCH_TF_TASK", "HOME")}}
        if args.reason:
            result["reason"] = args.reason
        with open(args.result, "w") as handle:
            json.dump(result, handle)
    print("program done, rc %d" % args.rc, flush=True)
    sys.exit(args.rc)
""")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def task(tmp_path, run_module):
    """task(name, state, **options) -> (rc, result); argv built from program options."""
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    run_dir = tmp_path / "run"

    def call(name, state="started", program_args=None, check=False, **options):
        args = dict(name=name, state=state, run_dir=str(run_dir))
        if program_args is not None:
            args["argv"] = [sys.executable, str(program)] + [str(a) for a in program_args]
        args.update(options)
        return run_module("tf_task", args, check=check)

    call.run_dir = run_dir
    return call


def test_start_ready_idempotent_finish_with_result(task, tmp_path):
    port = free_port()
    go = tmp_path / "go"
    program_args = [
        "--port",
        port,
        "--listen-delay",
        "0.5",
        "--until-file",
        go,
        "--result",
        "result.json",
        "--say",
        "hello",
    ]
    rc, started = task(
        "t-ok",
        program_args=program_args,
        port=port,
        environment={"CUDA_VISIBLE_DEVICES": "", "DTFBENCH_TEST": 42, "HOME": None},
    )
    assert rc == 0, started
    assert started["changed"] is True and started["ready"] is True and started["running"]
    pid = started["pid"]
    assert alive(pid)
    assert os.getpgid(pid) == pid and os.getsid(pid) == pid  # leader of its own session
    # The supervisor is a fork of the module's process (no interpreter of its own starts): its
    # name and its output, the task's log, say whose it is.
    assert procfs.comm(pid) == SUPERVISOR_COMM, procfs.comm(pid)
    assert "AnsiballZ_tf_task" in " ".join(procfs.cmdline(pid)), procfs.cmdline(pid)
    assert procfs.writes_to(pid, 1, started["log_file"])
    # It holds nothing of the module's process beyond its standard streams (the pipe to the
    # controller would keep the call waiting), only the pidfd it waits on.
    held = {fd: os.readlink("/proc/%d/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%d/fd" % pid)}
    assert {fd: target for fd, target in held.items() if int(fd) > 2 and "pidfd" not in target} == {}, held
    assert held["0"] == os.devnull, held
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    assert open(started["pid_file"]).read().strip() == str(pid)

    rc, again = task("t-ok", program_args=program_args, port=port)
    assert rc == 0, again
    assert again["changed"] is False and again["pid"] == pid and again["ready"] is True

    go.write_text("")
    rc, done = task("t-ok", state="finished", result_file="result.json", timeout=30)
    assert rc == 0, done
    assert done["changed"] is False and done["running"] is False
    assert done["rc"] == 0 and done["signal"] is None
    assert done["result"]["status"] == "ok"
    # chdir defaults to run_dir; environment merged over the module's, None removes.
    assert done["result"]["cwd"] == str(task.run_dir)
    assert done["result"]["env"]["CUDA_VISIBLE_DEVICES"] == ""
    assert done["result"]["env"]["DTFBENCH_TEST"] == "42"
    assert done["result"]["env"]["HOME"] is None
    assert done["result"]["env"]["DTFBENCH_TF_TASK"] == str(task.run_dir / "t-ok")
    assert "starting hello" in "\n".join(done["log_tail"])
    assert "program done, rc 0" in "\n".join(done["log_tail"])
    assert done["exit"]["supervisor_pid"] == pid and done["runtime"] > 0
    assert wait_for(lambda: not alive(pid))

    # finished again: same answer; stopped: nothing to do.
    rc, again = task("t-ok", state="finished", result_file="result.json")
    assert rc == 0 and again["rc"] == 0
    rc, stopped = task("t-ok", state="stopped")
    assert rc == 0 and stopped["changed"] is False


def test_nonzero_exit_reports_rc_reason_and_log_tail(task):
    rc, started = task(
        "t-fail",
        program_args=["--run", "0.2", "--rc", "3", "--result", "r.json", "--reason", "bad flag --foo", "--say", "boom"],
    )
    assert rc == 0 and started["changed"] is True and started["ready"] is True
    rc, done = task("t-fail", state="finished", result_file="r.json", timeout=30, log_tail_lines=5)
    assert rc != 0
    assert done["rc"] == 3 and done["signal"] is None
    assert "exited with rc 3: bad flag --foo" in done["msg"]
    assert "starting boom" in done["msg"]
    assert len(done["log_tail"]) <= 5 and "program done, rc 3" in "\n".join(done["log_tail"])
    assert done["result"]["reason"] == "bad flag --foo"


def test_never_listening_fails_after_ready_timeout_and_leaves_nothing(task, tmp_path):
    port = free_port()
    pids_file = tmp_path / "pids.json"
    started_at = time.time()
    rc, result = task(
        "t-deaf", program_args=["--children", "--pids-file", pids_file], port=port, ready_timeout=1.5, grace_period=0.5
    )
    took = time.time() - started_at
    assert rc != 0
    assert "did not accept connections on 127.0.0.1:%d within ready_timeout=1.5" % port in result["msg"]
    assert "stopped its process group" in result["msg"]
    assert result["running"] is False and result["ready"] is False
    assert 1.5 <= result["elapsed"] < 10 and took < 30
    pids = json.loads(pids_file.read_text())
    assert wait_for(lambda: not any(alive(p) for p in pids), 3)
    assert set(pids) <= set(result["terminated"])
    assert not processes_of(tmp_path)


def test_exit_before_ready_fails_fast_with_log_tail(task):
    rc, result = task(
        "t-early",
        program_args=["--run", "0", "--rc", "2", "--say", "cannot bind: address in use"],
        port=free_port(),
        ready_timeout=120,
    )
    assert rc != 0
    assert result["elapsed"] < 10
    assert "exited with rc 2 before port" in result["msg"]
    assert "cannot bind: address in use" in result["msg"]
    assert result["rc"] == 2 and result["running"] is False


def test_missing_program_fails_before_starting(run_module, tmp_path):
    rc, result = run_module(
        "tf_task", dict(name="t-missing", run_dir=str(tmp_path / "run"), argv=["no-such-program-dtfbench", "--x"])
    )
    assert rc != 0 and "not found in the task's PATH" in result["msg"]
    assert not (tmp_path / "run" / "t-missing.pid").exists()


def test_stop_kills_a_term_ignoring_group_and_children(task, tmp_path):
    port = free_port()
    pids_file = tmp_path / "pids.json"
    rc, started = task(
        "t-stubborn", program_args=["--port", port, "--ignore-term", "--children", "--pids-file", pids_file], port=port
    )
    assert rc == 0, started
    pids = json.loads(pids_file.read_text())  # program, child in group, child in own session
    assert all(alive(p) for p in pids)
    assert os.getpgid(pids[2]) != started["pid"]

    rc, stopped = task("t-stubborn", state="stopped", grace_period=1)
    assert rc == 0, stopped
    assert stopped["changed"] is True
    assert stopped["elapsed"] >= 1.0
    assert set(pids) <= set(stopped["killed"])
    assert started["pid"] in stopped["terminated"]
    assert not any(alive(p) for p in pids)
    assert stopped["signal_name"] == "SIGKILL" and stopped["exit"]["stopped_by"] == "tf_task"

    rc, again = task("t-stubborn", state="stopped")
    assert rc == 0 and again["changed"] is False


def test_stop_with_sigterm_within_grace_period(task):
    port = free_port()
    rc, started = task("t-polite", program_args=["--port", port], port=port)
    assert rc == 0
    rc, stopped = task("t-polite", state="stopped", grace_period=30)
    assert rc == 0 and stopped["changed"] is True
    assert stopped["killed"] == [] and stopped["elapsed"] < 10
    # The supervisor survived the group's SIGTERM and recorded how the program ended.
    assert stopped["signal_name"] == "SIGTERM" and stopped["exit"]["signals_received"] == [15]
    rc, done = task("t-polite", state="finished")
    assert rc != 0 and done["signal"] == signal.SIGTERM and "killed by SIGTERM" in done["msg"]


def test_check_mode_acts_on_nothing(task, tmp_path):
    port = free_port()
    program_args = ["--port", port]
    rc, result = task("t-check", program_args=program_args, port=port, check=True)
    assert rc == 0 and result["changed"] is True and result["pid"] is None
    assert not task.run_dir.exists() and not processes_of(tmp_path)
    rc, result = task("t-check", state="stopped", check=True)
    assert rc == 0 and result["changed"] is False
    rc, result = task("t-check", state="finished", check=True)
    assert rc == 0 and "never started" in result["msg"]

    rc, started = task("t-check", program_args=program_args, port=port)
    assert rc == 0 and started["changed"] is True
    rc, result = task("t-check", program_args=program_args, port=port, check=True)
    assert rc == 0 and result["changed"] is False and result["ready"] is True
    rc, result = task("t-check", state="stopped", check=True)
    assert rc == 0 and result["changed"] is True
    rc, result = task("t-check", state="finished", check=True, timeout=60)
    assert rc == 0 and result["running"] is True and result["elapsed"] < 5
    assert alive(started["pid"])

    rc, stopped = task("t-check", state="stopped")
    assert rc == 0 and stopped["changed"] is True and not alive(started["pid"])


def test_finished_timeout_then_stop_on_timeout(task):
    rc, started = task("t-slow", program_args=["--run", "600"])
    assert rc == 0 and started["ready"] is True
    rc, result = task("t-slow", state="finished", timeout=1)
    assert rc != 0 and result["timed_out"] is True
    assert "still runs after timeout=1.0 s" in result["msg"] and "left running" in result["msg"]
    assert 1 <= result["elapsed"] < 10
    assert alive(started["pid"])
    rc, result = task("t-slow", state="finished", timeout=0.5, stop_on_timeout=True, grace_period=5)
    assert rc != 0 and result["timed_out"] is True and "stopped it" in result["msg"]
    assert result["running"] is False and not alive(started["pid"])


def test_stale_pid_file_is_replaced_and_busy_port_refused(task, tmp_path):
    task.run_dir.mkdir()
    # A pid file that points to a live process that is not this task (this test).
    (task.run_dir / "t-stale.pid").write_text("%d\n" % os.getpid())
    rc, started = task("t-stale", program_args=["--run", "600"])
    assert rc == 0 and started["changed"] is True and started["pid"] != os.getpid()
    rc, stopped = task("t-stale", state="stopped")
    assert rc == 0 and stopped["changed"] is True

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        rc, result = task("t-busy", program_args=["--port", port], port=port)
    assert rc != 0 and "already accepts connections" in result["msg"]
    assert str(os.getpid()) in result["msg"]  # the listener is named
    assert not (task.run_dir / "t-busy.pid").exists()


def test_finished_on_a_task_never_started(task):
    rc, result = task("t-none", state="finished", timeout=5)
    assert rc != 0 and "never started" in result["msg"] and result["elapsed"] < 5


def test_async_start_as_the_role_does(task, tmp_path, run_module):
    """roles/tf_cluster starts tasks with async/poll 0: the task must outlive the wrapper."""
    port = free_port()
    program = str(tmp_path / "program.py")
    rc, launched = run_module(
        "tf_task",
        dict(
            name="t-async",
            run_dir=str(task.run_dir),
            port=port,
            argv=[sys.executable, program, "--port", str(port), "--listen-delay", "0.5"],
        ),
        extra_args=["-B", "60", "-P", "0"],
    )
    assert rc == 0 and launched["ansible_job_id"], launched
    deadline = time.time() + 60
    while True:
        rc, status = run_module("async_status", dict(jid=launched["ansible_job_id"]))
        if status.get("finished") or time.time() > deadline:
            break
    assert rc == 0 and status["finished"] and status["ready"] is True, status
    pid = status["pid"]
    assert alive(pid) and os.getsid(pid) == pid
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    rc, stopped = task("t-async", state="stopped")
    assert rc == 0 and stopped["changed"] is True and not alive(pid)
    # Ansible's async watcher notices the job's end within its 5 s poll; leave nothing behind.
    job = launched["ansible_job_id"].split(".")[0].encode()

    def watcher_gone():
        return not any(job.decode() in "\0".join(procfs.cmdline(pid)) and alive(pid) for pid in procfs.pids())

    assert wait_for(watcher_gone, 20)


def test_max_runtime_ends_a_task_no_controller_stops(task, tmp_path):
    # The dead-man deadline: nobody calls state=stopped (the host became unreachable, the
    # playbook was killed), yet the supervisor ends the task and says why.
    rc, started = task("t-deadline", program_args=["--run", "600"], max_runtime=2, grace_period=2)
    assert rc == 0 and started["ready"] is True
    deadline = time.time() + 20
    while alive(started["pid"]) and time.time() < deadline:
        time.sleep(0.2)
    assert not alive(started["pid"])
    rc, result = task("t-deadline", state="finished", timeout=5)
    assert rc != 0 and "killed by SIGTERM after running past its max_runtime" in result["msg"]
    assert result["exit"]["deadline_exceeded"] is True
    assert 2 <= result["exit"]["duration"] < 10
    assert processes_of(tmp_path) == []


def test_max_runtime_kills_the_whole_group_that_ignores_sigterm(task, tmp_path):
    # The program and its child in the same group ignore SIGTERM: after the grace period the
    # supervisor SIGKILLs its whole group, not only the program. (A child that left the group
    # is beyond it: state=stopped finds that one by the task's marker.)
    pids_file = tmp_path / "pids.json"
    rc, started = task(
        "t-deadline-group",
        program_args=["--run", "600", "--ignore-term", "--children", "--pids-file", pids_file],
        max_runtime=2,
        grace_period=2,
    )
    assert rc == 0, started
    assert wait_for(pids_file.exists)
    program, same_group, other_session = json.loads(pids_file.read_text())
    assert wait_for(lambda: not alive(program) and not alive(same_group), 20), (program, same_group)
    assert alive(other_session)
    rc, result = task("t-deadline-group", state="finished", timeout=5)
    assert rc != 0 and "killed by SIGKILL after running past its max_runtime" in result["msg"], result["msg"]
    rc, stopped = task("t-deadline-group", state="stopped", grace_period=1)
    assert rc == 0 and other_session in stopped["killed"], stopped


def test_a_kernel_oom_kill_is_named_and_a_plain_sigkill_is_not(adhoc, tmp_path):
    # The supervisor, started by a module call inside a memory cgroup of the test's own (every
    # process of the call is in it from its start), tells the OOM killer's SIGKILL from another.
    run_dir, pid_file = tmp_path / "run", tmp_path / "sleeper.pid"
    hog = [sys.executable, "-c", "import time; hog = b'x' * (1 << 30); time.sleep(60)"]  # touches 1 GiB
    sleeper = [sys.executable, "-c", "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); "
               "time.sleep(60)", str(pid_file)]  # fmt: skip

    def call(cgroup=None, **args):
        argv = adhoc.command("tf_task", dict(args, run_dir=str(run_dir)))
        done = subprocess.run(
            argv, cwd=tmp_path, env=adhoc.env(), capture_output=True, text=True, timeout=120,
            preexec_fn=cgroup.join if cgroup else None,
        )  # fmt: skip
        return json.loads(done.stdout[done.stdout.index("=> {") + 3 :])

    with memory_cgroup(256) as cgroup:
        assert call(cgroup, name="t-hog", state="started", argv=hog)["pid"]
        assert call(cgroup, name="t-sleeper", state="started", argv=sleeper)["pid"]
        hogged = call(name="t-hog", state="finished", timeout=60)
        assert hogged["signal_name"] == "SIGKILL", hogged
        assert "task t-hog was killed by the kernel's OOM killer (SIGKILL; memory." in hogged["msg"], hogged["msg"]
        assert "oom_kill 0 -> 1 in %s" % cgroup.path in hogged["msg"], hogged["msg"]
        assert hogged["exit"]["oom_killed"] is True, hogged["msg"]
        log = (run_dir / "t-hog.log").read_text()
        assert "program was killed by the kernel's OOM killer" in log and "Traceback" not in log, log
        # The same cgroup, its count already 1: a SIGKILL from elsewhere is only a SIGKILL.
        assert wait_for(pid_file.exists)
        time.sleep(0.2)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        killed = call(name="t-sleeper", state="finished", timeout=30)
        assert "task t-sleeper was killed by SIGKILL" in killed["msg"] and "OOM" not in killed["msg"], killed["msg"]
    assert processes_of(tmp_path) == []
