# -*- coding: utf-8 -*-
"""A bounded background reader: load on a shared file system while a run measures (background_io).

    python -m dtfbench background_read start /mnt/shared/imagenet --state F --seconds 1800 [--mb-per-s 50]
    python -m dtfbench background_read stop --state F

A shared file system's speed "is heavily dependant on the overall I/O in the system" (the
Summitdev study, Fig. 4b): the spread of the runs that read it grows with the other jobs' reads.
``background_io`` (docs/storage.md) makes such a job: a node the run does not use reads the
dataset's files (``train-*``, ``validation-*``) over and over while the run measures, each file's
cached pages dropped first (posix_fadvise DONTNEED), so every pass crosses the link to the
server again, as another job's first epoch would.

It is bounded twice: by ``--seconds`` (the run's timeout: a controller that dies mid-run leaves
no reader behind for long) and, with ``--mb-per-s``, by its rate (a steady load rather than all
the server gives). ``start`` detaches the reader (its own session) and prints ``{"reader":
"started", "pid", "state", "python"}``: what the controller's interrupt watchdog needs to stop it
(plugins/callback/dtfbench_interrupt.py keeps it until the stop returns). ``stop`` ends it
(SIGTERM), waits for its figures and prints them as one JSON object: ``{"reader": "stopped",
"data_dir", "bytes", "seconds", "mb_per_s", "passes", "bound_mb_per_s", "ended"}``, ``ended``
"stopped" or "time" (it ran out of ``--seconds`` before the run ended: the last part of the run
had no load). Both remove the state file's leftovers. Standard library only, and the nodes'
oldest Python.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import signal
import sys
import time

# The dataset's files and the read size are the read test's (the same files the page cache setting covers).
from dtfbench.linux.files import write_atomic
from dtfbench.linux.read_throughput import BLOCK, dataset_files


def write_json(path, document):
    """Atomically: a reader of the state file sees the old document or the new one, never half."""
    write_atomic(path, json.dumps(document))


class _Stop(Exception):
    pass


def read_loop(data_dir, seconds, mb_per_s=None, clock=time.monotonic, sleep=time.sleep):
    """Read the dataset's files in turn until `seconds` pass or SIGTERM; returns the figures."""
    paths = dataset_files(data_dir)
    if not paths:
        raise FileNotFoundError("no train-* or validation-* files in %s" % data_dir)
    rate = mb_per_s * 1e6 if mb_per_s else None
    started = clock()
    deadline = started + seconds
    total = passes = 0
    ended = "time"
    try:
        while clock() < deadline:
            for path in paths:
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    while True:
                        now = clock()
                        if now >= deadline:
                            raise _Stop()
                        if rate is not None and total > rate * (now - started):
                            sleep(min(total / rate - (now - started), deadline - now))
                            continue
                        chunk = os.read(fd, BLOCK)
                        if not chunk:
                            break
                        total += len(chunk)
                finally:
                    os.close(fd)
            passes += 1
    except (_Stop, KeyboardInterrupt):
        ended = "time" if clock() >= deadline else "stopped"
    elapsed = clock() - started
    return {
        "data_dir": str(data_dir),
        "bytes": total,
        "seconds": round(elapsed, 6),
        "mb_per_s": round(total / 1e6 / elapsed, 3) if elapsed > 0 else None,
        "passes": passes,
        "bound_mb_per_s": mb_per_s,
        "ended": ended,
    }


def _reader(args):
    """The detached reader: SIGTERM raises KeyboardInterrupt in the loop, which returns its figures."""

    def on_term(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_term)
    try:
        figures = read_loop(args.data_dir, args.seconds, args.mb_per_s)
    except (OSError, KeyboardInterrupt) as err:
        figures = {"data_dir": str(args.data_dir), "error": str(err) or type(err).__name__}
    write_json(args.state + ".result", figures)
    return 0


def start(args):
    """Check the dataset, detach the reader, record its pid in the state file; print {"pid"}."""
    if not dataset_files(args.data_dir):
        print(
            "background_read: error: %s holds no train-* or validation-* files to read; give background_io "
            "a data_dir the sweep reads (its shared copy)" % args.data_dir,
            file=sys.stderr,
        )
        return 2
    for leftover in (args.state, args.state + ".result"):
        if os.path.exists(leftover):
            os.unlink(leftover)
    pid = os.fork()
    if pid == 0:  # the reader: its own session, nothing inherited from Ansible's pipes
        code = 1
        try:
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            write_json(args.state, {"pid": os.getpid(), "data_dir": str(args.data_dir)})
            code = _reader(args)
        finally:
            os._exit(code)
    deadline = time.monotonic() + 10
    while not os.path.exists(args.state) and time.monotonic() < deadline:
        time.sleep(0.01)
    print(json.dumps({"reader": "started", "pid": pid, "state": args.state, "python": sys.executable}))
    return 0


def stop(args, wait=30.0):
    """End the reader and print its figures; a reader already gone (its time ran out) has left them."""
    result = args.state + ".result"
    try:
        with open(args.state) as f:
            pid = json.load(f)["pid"]
    except (OSError, ValueError, KeyError):
        print(
            json.dumps({"reader": "stopped", "error": "no background reader was started (%s is missing)" % args.state})
        )
        return 0
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass  # gone: its time ran out
    deadline = time.monotonic() + wait
    while not os.path.exists(result) and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        with open(result) as f:
            figures = json.load(f)
    except (OSError, ValueError):
        figures = {"error": "the background reader (pid %d) left no figures within %g s" % (pid, wait)}
    for leftover in (args.state, result):
        if os.path.exists(leftover):
            os.unlink(leftover)
    figures["reader"] = "stopped"
    print(json.dumps(figures))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="dtfbench background_read", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action")
    sub.required = True
    p_start = sub.add_parser("start", help="detach a reader of data_dir's dataset files")
    p_start.add_argument("data_dir")
    p_start.add_argument("--state", required=True, help="its state file (pid, then the figures beside it)")
    p_start.add_argument("--seconds", type=float, required=True, help="it ends by itself after this long")
    p_start.add_argument("--mb-per-s", type=float, default=None, help="read at most this fast (default: unbounded)")
    p_stop = sub.add_parser("stop", help="end the reader and print its figures as JSON")
    p_stop.add_argument("--state", required=True)
    args = parser.parse_args(argv)
    if args.action == "start":
        if args.seconds <= 0 or (args.mb_per_s is not None and args.mb_per_s <= 0):
            parser.error("--seconds and --mb-per-s must be above 0")
        return start(args)
    return stop(args)
