# -*- coding: utf-8 -*-
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""Ports claimed on a host while a run's tasks hold them, so that two sweeps never race for one.

A run's check (tf_host_run, state checked) finds a port that something listens on. But a task's
TF server listens only seconds after its start (TensorFlow's import), and a second sweep that
checked in between found the port free, started, and lost its run to "Could not start gRPC
server" (issue 56, case 3). So every task's start claims its port first: an exclusive flock(2)
on ``<run root>/_ports/<address>_<port>``, taken before the task's supervisor is forked and held
by the supervisor (an inherited descriptor) for the task's life. The run root is the host's,
shared by every sweep there (as the sweep markers are). The kernel drops the lock when the
supervisor ends, however it ends, so a claim never goes stale; the file only says who held it
last (run id, task, pid, since) for the message of a sweep that finds it held.

A check that finds a port claimed waits for the claim (another sweep's run ends in minutes), up
to its ready timeout. Two sweeps can still check at the same moment and both find the ports
free: their starts then claim all of a run's ports or none (HostStart.claim_all), in one order,
and the one that finds a port held lets its own go and waits for it, up to the same timeout,
before it names the holder.
Standard library only, and the nodes' oldest Python, as the rest of the host code.
"""

from __future__ import absolute_import, division, print_function

import errno
import fcntl
import json
import os
import time

CLAIM_DIR = "_ports"
HELD = (errno.EWOULDBLOCK, errno.EAGAIN)


def claim_path(run_root, address, port):
    return os.path.join(run_root, CLAIM_DIR, "%s_%d" % (str(address).replace("/", "_"), int(port)))


def _holder_of(descriptor):
    try:
        text = os.pread(descriptor, 4096, 0).decode("utf-8", "replace")
        holder = json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        holder = {}
    return holder if isinstance(holder, dict) else {}


def take(run_root, address, port, owner):
    """(descriptor, None): the claim, held while the descriptor (or a fork's copy) is open; or
    (None, holder): another process holds it, ``holder`` what its file says. Raises OSError
    where the claim cannot be made (a run root that refuses the folder or the file)."""
    folder = os.path.join(run_root, CLAIM_DIR)
    try:
        os.makedirs(folder, 0o700)
    except OSError as error:
        if error.errno != errno.EEXIST:
            raise
    descriptor = os.open(
        claim_path(run_root, address, port), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
    )
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        holder = _holder_of(descriptor)
        os.close(descriptor)
        if error.errno in HELD:
            return None, holder
        raise
    text = json.dumps(dict(owner, since=time.time())).encode("utf-8")
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, text, 0)
    return descriptor, None


def name_holder(descriptor, pid):
    """Put the supervisor's pid in the claim's file once it runs (the messages name it)."""
    owner = dict(_holder_of(descriptor), pid=pid)
    text = json.dumps(owner).encode("utf-8")
    try:
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, text, 0)
    except OSError:
        pass  # the claim holds all the same; only its message lacks the pid


def holder(run_root, address, port):
    """What the claim's file says of its holder while a process holds it; None when nobody does."""
    try:
        descriptor = os.open(claim_path(run_root, address, port), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None  # never claimed (or a run root this user cannot read: nothing to wait for)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as error:
        return _holder_of(descriptor) if error.errno in HELD else None
    finally:
        os.close(descriptor)
    return None


def wait_released(run_root, address, port, seconds, poll=0.25, ignore_run=None):
    """None once nobody holds the claim (at once where nobody does), else after ``seconds`` the
    holder that still held it. A claim of ``ignore_run`` (this run's own) counts as released."""
    deadline = time.monotonic() + max(0.0, seconds)
    while True:
        held = holder(run_root, address, port)
        if held is None or (ignore_run is not None and held.get("run_id") == ignore_run):
            return None
        if time.monotonic() >= deadline:
            return held
        time.sleep(poll)


def describe(held):
    """The holder as the messages name it: 'run R (worker 0, pid N, for 12 s)'."""
    if not held:
        return "another run (its claim file says no more)"
    parts = []
    if held.get("job") is not None:
        parts.append("%s %s" % (held.get("job"), held.get("task_index")))
    if held.get("pid"):
        parts.append("pid %s" % held["pid"])
    if isinstance(held.get("since"), (int, float)):
        parts.append("for %d s" % max(0, time.time() - held["since"]))
    return "run %s%s" % (held.get("run_id", "?"), " (%s)" % ", ".join(parts) if parts else "")
