# -*- coding: utf-8 -*-
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""The tf_task supervisor: leader of one task's session and process group.

It runs the program as its child, waits for it and writes the exit status atomically. The
task core (``dtfbench.launch.task``) copies this file to ``<run_dir>/tf_task_supervisor.py``,
so that it outlives the module's temporary files, and runs it there with the module's
Python. So it stands alone: standard library only, imports nothing of dtfbench (it reads
/proc itself for the same reason), Python 3.5-compatible.

usage: python tf_task_supervisor.py tf_task-supervisor MARKER EXIT_FILE -- PROGRAM [ARGS...]
"""

import json
import os
import signal
import subprocess
import sys
import time

DEADLINE_ENV = "TF_TASK_SUPERVISOR_MAX_RUNTIME"
GRACE_ENV = "TF_TASK_SUPERVISOR_GRACE"


def say(text):
    sys.stdout.write("[tf_task %s] %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), text))
    sys.stdout.flush()


def write_exit(path, record):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as handle:
        json.dump(record, handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def kill_group_but_self():
    """SIGKILL every process of this process group but the supervisor itself: the program's
    own children that ignore SIGTERM die with it."""
    group, me = os.getpgrp(), os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                data = handle.read()
            if int(data[data.rfind(")") + 2 :].split()[2]) == group:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


def main():
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        sys.stderr.write("usage: %s tf_task-supervisor MARKER EXIT_FILE -- PROGRAM...\n" % sys.argv[0])
        return 2
    exit_file, argv = sys.argv[3], sys.argv[5:]
    received = []

    def note(signum, frame):
        received.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, note)
    # The dead-man deadline: the module passes it in the environment, the program never sees it.
    max_runtime = float(os.environ.pop(DEADLINE_ENV, "0") or 0)
    grace = float(os.environ.pop(GRACE_ENV, "10") or 10)
    record = {
        "schema": 1,
        "supervisor_pid": os.getpid(),
        "argv": argv,
        "pid": None,
        "started": time.time(),
        "rc": None,
        "signal": None,
        "signal_name": None,
    }
    say("starting: %s" % " ".join(argv))
    try:
        child = subprocess.Popen(argv)
    except OSError as error:
        record.update(rc=127, error="cannot execute %s: %s" % (argv[0], error), ended=time.time())
        record["duration"] = record["ended"] - record["started"]
        say(record["error"])
        write_exit(exit_file, record)
        return 127
    record["pid"] = child.pid
    status = None
    if max_runtime > 0:
        try:
            status = child.wait(timeout=max_runtime)
        except subprocess.TimeoutExpired:
            record["deadline_exceeded"] = True
            say("max_runtime=%g s passed: stopping the task's process group" % max_runtime)
            os.killpg(os.getpgrp(), signal.SIGTERM)  # we only note it (see note())
            try:
                status = child.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                kill_group_but_self()
                status = child.wait()
    if status is None:
        status = child.wait()
    record["ended"] = time.time()
    record["duration"] = record["ended"] - record["started"]
    if status < 0:
        record["signal"] = -status
        try:
            record["signal_name"] = signal.Signals(-status).name
        except ValueError:
            record["signal_name"] = "SIG%d" % -status
        text = "killed by %s" % record["signal_name"]
    else:
        record["rc"] = status
        text = "exited with rc %d" % status
    if received:
        record["signals_received"] = received
    write_exit(exit_file, record)
    # A clean end is in the exit file only: the log ends with the program's own last lines,
    # which tools of the study read (its extraction takes the log's second-to-last line).
    if status != 0 or received or record.get("deadline_exceeded"):
        say("program %s after %.1f s" % (text, record["duration"]))
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
