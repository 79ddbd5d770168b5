"""The /proc process table: pids, state, parent, group, command line, environment, listeners.

Every reader returns None or an empty list when the process is gone or unreadable (a pid
can end between two reads), never raises. Linux only; standard library only, for the task core's old targets (the oldest Python:
pyproject.toml's [tool.dtfbench.oldest-python]).
"""

from __future__ import absolute_import, division, print_function

import errno
import os
import select
import time


def read(path, mode="r"):
    """The whole file, or None when it cannot be read."""
    try:
        with open(path, mode) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def pids():
    """Every pid in /proc, ascending."""
    return sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name (state is [0], ppid [1], pgrp [2],
    starttime [19]), or None when the process is gone."""
    data = read("/proc/%d/stat" % pid)
    if not data:
        return None
    return data[data.rfind(")") + 2 :].split()  # the command name may hold spaces and ')'


def cpu_seconds(pid):
    """User + system CPU seconds a process (all its threads) has used so far, or None when it
    is gone."""
    fields = stat_fields(pid)
    try:
        return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))  # utime, stime
    except (TypeError, IndexError, ValueError):
        return None


def live_threads_cpu_seconds(pid):
    """CPU seconds the process's live threads have run so far, to the nanosecond (each
    /proc/<pid>/task/<tid>/schedstat's first field), or None when it is gone. cpu_seconds
    counts in the clock's ticks (10 ms) and keeps ended threads' time; this one is for short
    windows over long-lived threads."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    total = 0
    for tid in tids:
        data = read("/proc/%d/task/%s/schedstat" % (pid, tid))
        if data:  # a thread that ended between the listing and the read counts nothing
            total += int(data.split()[0])
    return total / 1e9


def stat(pid):
    """(state, ppid, pgrp) of a process, or None when it is gone."""
    fields = stat_fields(pid)
    try:
        return fields[0], int(fields[1]), int(fields[2])
    except (TypeError, IndexError, ValueError):
        return None


def state(pid):
    """The one-letter state (R, S, D, Z, ...), or None when the process is gone."""
    found = stat(pid)
    return found[0] if found else None


def parent(pid):
    """The parent pid, or None when the process is gone."""
    found = stat(pid)
    return found[1] if found else None


def children(pid):
    """The pids of a process's children (its main thread's), [] when gone or none."""
    data = read("/proc/%d/task/%d/children" % (pid, pid))
    if data is None:  # a kernel without CONFIG_PROC_CHILDREN: the whole table
        return [child for child in pids() if parent(child) == pid]
    return [int(part) for part in data.split()]


def exit_status(pid):
    """The wait status of a zombie (what its parent would get from waitpid), or None when the
    process is gone, still runs, or the kernel does not show it (before Linux 3.5)."""
    fields = stat_fields(pid)
    if not fields or fields[0] != "Z" or len(fields) < 50:
        return None
    try:
        return int(fields[49])  # field 52, exit_code
    except ValueError:
        return None


def alive(pid):
    """True while the process exists and is no zombie."""
    return state(pid) not in (None, "Z", "X", "x")


# Whether this Python can wait on a process's end (os.pidfd_open: Python 3.9, Linux 5.3).
PIDFDS = hasattr(os, "pidfd_open")


def wait_for_any_end(pids, timeout, hang_ups=()):
    """Sleep up to ``timeout`` s, waking as soon as one of ``pids`` ends (becomes a zombie or
    goes) or one of the descriptors ``hang_ups`` is hung up: a poll loop that sleeps a fixed
    interval sees an end up to that interval late, which every run of a sweep pays. One that
    ended already (after the caller's look, which saw it alive) returns at once: the caller's
    next look sees the end, where a sleep would add the timeout (a stop's 0.1 s, the workers'
    wait's 0.5 s). Ends are seen through pidfds (PIDFDS); without them the wait lasts the
    timeout unless a descriptor hangs up. A pid reused since at worst sleeps the timeout."""
    descriptors = []
    try:
        for pid in pids if PIDFDS else ():
            if not alive(pid):
                return  # ended already
            try:
                descriptors.append(os.pidfd_open(pid))
            except OSError as error:
                if error.errno == errno.ESRCH:
                    return  # gone meanwhile
                continue  # a kernel without pidfds
        if not descriptors and not hang_ups:
            time.sleep(timeout)
            return
        poller = select.poll()  # not select(): no limit on the descriptors' numbers
        for descriptor in descriptors:
            poller.register(descriptor, select.POLLIN)
        for descriptor in hang_ups:
            poller.register(descriptor, 0)  # POLLHUP and POLLERR are always reported
        poller.poll(max(timeout, 0) * 1000.0)
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def cmdline(pid):
    """The argv of a process as text ([] when gone, or for a kernel thread)."""
    data = read("/proc/%d/cmdline" % pid, "rb")
    if not data:
        return []
    return [part.decode("utf-8", "replace") for part in data.rstrip(b"\0").split(b"\0")]


def comm(pid):
    """The process's name (/proc/<pid>/comm: its program's, or what it set; 15 bytes at most),
    or None when it is gone."""
    data = read("/proc/%d/comm" % pid)
    return data.rstrip("\n") if data is not None else None


def writes_to(pid, descriptor, path):
    """Whether the process's ``descriptor`` is the file ``path`` (the same inode: links and a
    renamed file are seen through); False when either is gone or not ours to look at."""
    try:
        opened, named = os.stat("/proc/%d/fd/%d" % (pid, descriptor)), os.stat(path)
    except OSError:
        return False
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


def environ(pid):
    """The environment entries (b"NAME=value") of a process ([] when gone or not ours)."""
    data = read("/proc/%d/environ" % pid, "rb")
    return data.split(b"\0") if data else []


def table():
    """Every live process once: [(pid, (state, ppid, pgrp), its environment entries)], zombies
    and dead ones left out. A caller that looks for several tasks' processes reads the table
    once (each look reads every process's stat and environment: ~17 us a process here)."""
    rows = []
    for pid in pids():
        found = stat(pid)
        if found is None or found[0] in ("Z", "X", "x"):
            continue
        rows.append((pid, found, environ(pid)))
    return rows


def listening_pids(port):
    """Pids listening on the TCP port (best effort: only processes whose fds we may read)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in (read(table) or "").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    if not inodes:
        return []
    found = []
    for pid in pids():
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    found.append(pid)
                    break
        except OSError:
            continue
    return found


# File systems whose data lives on another machine: their source names the server and export.
# FUSE ones by their kernel type (fuse.<name>): sshfs is the test bed's shared file system.
NETWORK_FILESYSTEMS = (
    "nfs",
    "nfs4",
    "lustre",
    "cifs",
    "smb3",
    "gpfs",
    "beegfs",
    "ceph",
    "glusterfs",
    "9p",
    "fuse.sshfs",
    "fuse.glusterfs",
    "fuse.cephfs",
)


def mount_of(path, mountinfo="/proc/self/mountinfo"):
    """The file system `path` lives on, as this process sees it (its mount namespace):
    {"fs_type", "source", "mount_point", "network"}, from the deepest mount above the path's real
    location (the last of several at one point: the one on top). None when unreadable."""
    text = read(mountinfo)
    if text is None:
        return None
    real = os.path.realpath(path)
    best = None
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields or len(fields) < 5:
            continue
        tail = fields[fields.index("-") + 1 :]
        if len(tail) < 2:
            continue
        point = _unescape(fields[4])
        if real == point or real.startswith(point.rstrip("/") + "/"):
            if best is None or len(point) >= len(best[0]):
                best = (point, tail[0], _unescape(tail[1]))
    if best is None:
        return None
    point, fs_type, source = best
    return {"fs_type": fs_type, "source": source, "mount_point": point, "network": fs_type in NETWORK_FILESYSTEMS}


def _unescape(field):
    """mountinfo's octal escapes (a space is \\040) back to characters."""
    import re

    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)
