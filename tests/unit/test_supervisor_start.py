"""The task supervisor starts its program as Popen would, without importing ``subprocess``.

Three supervisors start a host's run (a PS's, a worker's, the NIC sampler's); ``subprocess``
was ~6 ms of each one's start, paid by every host at every launch (issue #31, P2). Where
``os.posix_spawnp`` exists (Python 3.8) the supervisor starts its program with it, restoring
the signals Popen restores; older Pythons (TF 1.1's 3.6) use Popen, and the timed wait looks
as Popen.wait does where there are no pidfds. Each case runs the supervisor's own file, as the
task core runs it.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dtfbench.launch import supervisor

PY36 = next(
    (p for p in ("/root/.pyenv/versions/3.6.15/bin/python", shutil.which("python3.6")) if p and Path(p).exists()), None
)
PYTHONS = [sys.executable] + ([PY36] if PY36 else [])
# Python ignores these two; an exec keeps what is ignored, so the program would inherit it.
RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)


def supervise(python, tmp_path, program, env=None):
    """Run the supervisor's file under `python` on `program` in a session of its own; (the
    supervisor's output, its exit record)."""
    exit_file = tmp_path / "task.exit"
    done = subprocess.run(
        [python, "-S", supervisor.__file__, supervisor.PROGRAM_TAG, "m", str(exit_file), "--", *program],
        env=dict(os.environ, **(env or {})),
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    return done.stdout + done.stderr, json.loads(exit_file.read_text())


def ignored_signals(output):
    mask = next(line for line in output.splitlines() if line.startswith("SigIgn:")).split()[1]
    return {number for number in range(1, 65) if int(mask, 16) >> (number - 1) & 1}


@pytest.mark.parametrize("python", PYTHONS, ids=lambda p: Path(p).parent.parent.name or p)
def test_the_program_starts_with_the_signals_popen_restores(tmp_path, python):
    output, record = supervise(python, tmp_path, ["sh", "-c", "grep SigIgn /proc/$$/status"])
    assert record["rc"] == 0, output
    assert not ignored_signals(output) & set(RESTORED), output


@pytest.mark.skipif(not hasattr(os, "posix_spawnp"), reason="os.posix_spawnp: Python 3.8")
def test_the_supervisor_starts_its_program_without_importing_subprocess(tmp_path):
    """The modules loaded when the program is spawned (a spy on os.posix_spawnp)."""
    exit_file = tmp_path / "task.exit"
    spy = (
        "import json, os, runpy, sys\n"
        "spawn = os.posix_spawnp\n"
        "def spied(*args, **kwargs):\n"
        "    sys.stderr.write('LOADED ' + json.dumps(sorted(sys.modules)) + '\\n')\n"
        "    return spawn(*args, **kwargs)\n"
        "os.posix_spawnp = spied\n"
        f"sys.argv = [{supervisor.__file__!r}, {supervisor.PROGRAM_TAG!r}, 'm', {str(exit_file)!r}, '--', 'true']\n"
        f"runpy.run_path({supervisor.__file__!r}, run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", spy], capture_output=True, text=True, timeout=60, start_new_session=True
    )
    loaded = json.loads(done.stderr.split("LOADED ", 1)[1].splitlines()[0])
    assert "subprocess" not in loaded
    assert json.loads(exit_file.read_text())["rc"] == 0


@pytest.mark.parametrize("python", PYTHONS, ids=lambda p: Path(p).parent.parent.name or p)
def test_a_program_that_cannot_be_executed_is_rc_127_with_why(tmp_path, python):
    missing = str(tmp_path / "no-such-program")
    output, record = supervise(python, tmp_path, [missing])
    assert record["rc"] == 127 and record["pid"] is None, record
    assert record["error"].startswith(f"cannot execute {missing}: [Errno 2]"), record


@pytest.mark.parametrize("python", PYTHONS, ids=lambda p: Path(p).parent.parent.name or p)
def test_exit_codes_signals_and_the_deadline_as_before(tmp_path, python):
    output, record = supervise(python, tmp_path, ["sh", "-c", "exit 3"])
    assert (record["rc"], record["signal"]) == (3, None), output
    output, record = supervise(python, tmp_path, ["sh", "-c", "kill -KILL $$"])
    assert (record["rc"], record["signal_name"]) == (None, "SIGKILL"), output
    # A program that ignores SIGTERM past the deadline: SIGTERM to the group, then SIGKILL.
    # (1 s: time for sh to set its trap on a busy machine.)
    deadline = {supervisor.DEADLINE_ENV: "1", supervisor.GRACE_ENV: "1"}
    output, record = supervise(python, tmp_path, ["sh", "-c", "trap '' TERM; sleep 30"], deadline)
    assert record["deadline_exceeded"] is True and record["signal_name"] == "SIGKILL", output
    assert record["duration"] < 10, record


def test_the_timed_wait_without_pidfds_sees_the_end_and_the_deadline(monkeypatch):
    """Python < 3.9 or a kernel without pidfds: waitpid(WNOHANG) looks, as Popen.wait does."""
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    ends = subprocess.Popen(["sh", "-c", "sleep 0.2; exit 4"])
    assert supervisor.wait_child(ends.pid, 30) == 4
    runs = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(supervisor.TimedOut):
            supervisor.wait_child(runs.pid, 0.2)
    finally:
        runs.kill()
    assert supervisor.wait_child(runs.pid) == -signal.SIGKILL


def test_the_popen_fallback_leaves_the_reaping_to_the_wait(monkeypatch):
    """Below Python 3.8: a Popen dropped at once reaps its ended child (its destructor, or the
    next Popen's clean-up of dropped ones), and the wait would see no exit status."""
    monkeypatch.delattr(os, "posix_spawnp", raising=False)
    pid = supervisor.spawn(["sh", "-c", "exit 3"])
    time.sleep(0.3)
    subprocess.run(["true"], check=True)  # a Popen cleans up the dropped ones it knows of
    assert supervisor.wait_child(pid, 30) == 3


def test_posix_spawnp_only_where_it_reports_exec_errors(monkeypatch):
    """glibc before 2.24 runs the child and exits 127 where the exec fails: no OSError, no why."""
    libc, version = (os.confstr("CS_GNU_LIBC_VERSION") or "? 0.0").split(None, 1)
    here = libc == "glibc" and tuple(int(part) for part in version.split(".")[:2]) >= (2, 24)
    assert supervisor._spawn_reports_exec_errors() is here
    for answer, expected in (("glibc 2.17", False), ("glibc 2.24", True), ("glibc 2.39", True)):
        monkeypatch.setattr(os, "confstr", lambda name, answer=answer: answer)
        assert supervisor._spawn_reports_exec_errors() is expected, answer

    def unknown(name):
        raise ValueError("unrecognized configuration name")  # musl: no CS_GNU_LIBC_VERSION

    monkeypatch.setattr(os, "confstr", unknown)
    assert supervisor._spawn_reports_exec_errors() is False


def test_the_program_gets_no_descriptor_its_supervisors_starter_left_open(tmp_path):
    read_end, write_end = os.pipe()
    try:
        exit_file = tmp_path / "task.exit"
        program = [sys.executable, "-c", "import os; print('FDS', sorted(int(f) for f in os.listdir('/proc/self/fd')))"]
        done = subprocess.run(
            [sys.executable, "-S", supervisor.__file__, supervisor.PROGRAM_TAG, "m", str(exit_file), "--", *program],
            pass_fds=(write_end,),
            capture_output=True,
            text=True,
            timeout=60,
            start_new_session=True,
        )
        listed = json.loads(done.stdout.split("FDS ", 1)[1].splitlines()[0])
        assert write_end not in listed and listed[:3] == [0, 1, 2], listed
    finally:
        os.close(read_end)
        os.close(write_end)
