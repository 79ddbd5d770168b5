# -*- coding: utf-8 -*-
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""The tf_task supervisor: leader of one task's session and process group.

It runs the program as its child, waits for it and writes the exit status atomically. The
task core (``dtfbench.launch.task``) forks it from the process that starts the task and
calls ``supervise`` in the child: no interpreter starts and nothing is imported again
(~20 ms of CPU a task, three a host and run). It also runs as a program of its own
(the bare launchers of benchmarks/ start it so), so it stands alone: standard library only,
imports nothing of dtfbench (it reads /proc itself for the same reason), for old targets'
Python (pyproject.toml's [tool.dtfbench.oldest-python]).

usage: python supervisor.py tf_task-supervisor MARKER EXIT_FILE -- PROGRAM [ARGS...]

The exit record's room on disk is taken before the program starts (``reserve_exit``): a disk
that fills up while the program runs cannot keep a finished task's exit status from being
recorded. A disk too full for that room ends the supervisor with NO_ROOM_EXIT before the
program starts.
"""

import json
import os
import re
import select
import signal
import sys
import time

# The program's first argument (see usage): what names a supervisor started as a program in
# its command line.
PROGRAM_TAG = "tf_task-supervisor"
DEADLINE_ENV = "TF_TASK_SUPERVISOR_MAX_RUNTIME"
GRACE_ENV = "TF_TASK_SUPERVISOR_GRACE"
# The room taken for the exit record (beside the program's command line, which it holds):
# a record is a few hundred bytes, a file takes at least a page or a block.
EXIT_RESERVE = 16384
# EX_TEMPFAIL (sysexits.h): no room for the exit record on the run directory's disk.
NO_ROOM_EXIT = 75


def say(text):
    try:
        sys.stdout.write("[tf_task %s] %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), text))
        sys.stdout.flush()
    except (IOError, OSError):
        pass  # the log's disk is full: the exit record (reserved) still tells how the task ended


def reservation(path, supervisor_pid):
    """The file that holds the exit record's room until the record is written into it."""
    return "%s.tmp.%d" % (path, supervisor_pid)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def reserve_exit(path, size):
    """Take ``size`` bytes on the exit file's disk for its record (written, not sparse: a file
    system counts written bytes against its room at once, also before they reach the disk, so
    no fsync delays the program's start)."""
    tmp = reservation(path, os.getpid())
    try:
        with open(tmp, "wb") as handle:
            handle.write(b" " * size)
    except BaseException:
        _remove(tmp)
        raise


def write_exit(path, record):
    """The record, written over its reservation (no new room needed when it fits), then
    renamed to ``path``; a failed write leaves no file behind."""
    tmp = reservation(path, os.getpid())
    data = json.dumps(record, sort_keys=True).encode("utf-8")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o666), "wb") as handle:
            handle.write(data)
            handle.truncate(len(data))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def record_exit(path, record):
    try:
        write_exit(path, record)
    except (IOError, OSError) as error:
        say("cannot write the exit record %s: %s" % (path, error))


class TimedOut(Exception):
    """The program still runs after the time given to ``wait_child``."""


# Popen's destructor reaps an ended child (waitpid WNOHANG): the Popen of the fallback is
# kept, so that only wait_child reaps the program.
_POPENS = []


def _spawn_reports_exec_errors():
    """Whether os.posix_spawnp raises when the program cannot be executed: glibc 2.24 and
    later; before, the child just exits 127 (CPython's subprocess makes the same check)."""
    try:
        libc, version = os.confstr("CS_GNU_LIBC_VERSION").split(None, 1)
        major, minor = (int(part) for part in version.split(".")[:2])
    except (AttributeError, OSError, ValueError):
        return False
    return libc == "glibc" and (major, minor) >= (2, 24)


def descriptors_beyond_stdio():
    """This process's open descriptors but 0, 1 and 2 (the listing's own among them, closed
    once it is read); [] when /proc cannot tell."""
    try:
        return [int(name) for name in os.listdir("/proc/self/fd") if int(name) > 2]
    except OSError:
        return []


def _no_inheritance_beyond_stdio():
    """Popen's close_fds: the program gets stdin, stdout and stderr alone, whatever the
    supervisor's own starter left open (its files are non-inheritable already)."""
    for descriptor in descriptors_beyond_stdio():
        try:
            if os.get_inheritable(descriptor):
                os.set_inheritable(descriptor, False)
        except OSError:
            pass  # the listing's own descriptor, closed since


def spawn(argv):
    """Start the program as this supervisor's child (its session and process group); its pid.

    posix_spawnp (Python 3.8, glibc 2.24) starts it without importing ``subprocess``, ~6 ms of
    each supervisor's start (three a host and run); elsewhere Popen. Either way the program
    starts as Popen leaves it: SIGPIPE and SIGXFSZ back to their defaults (Python ignores
    them, and an exec keeps what is ignored), no descriptor beyond stdin, stdout and stderr.
    A program that cannot be executed raises OSError.
    """
    posix_spawnp = getattr(os, "posix_spawnp", None)
    if posix_spawnp is None or not _spawn_reports_exec_errors():
        import subprocess

        child = subprocess.Popen(argv)
        _POPENS.append(child)
        return child.pid
    _no_inheritance_beyond_stdio()
    restored = [getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, name)]
    return posix_spawnp(argv[0], argv, dict(os.environ), setsigdef=restored)


def end_child(work, failed=1):
    """End this forked child with ``work()``'s return value as its exit status (``failed`` when
    it raises, with its traceback on stderr). Never returns: a fork runs nothing of its
    parent's code after this (no caller's ``finally``, no atexit handler)."""
    status = failed
    try:
        status = work() or 0
    except BaseException:
        try:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
    finally:
        os._exit(status)


def run_forked(program):
    """Run ``program()`` in a fork of this process, as its child; the child's pid. The child
    takes the default action of the signals this supervisor notes, unless ``program`` sets
    its own, and ends with ``program``'s return value as its exit status (1 when it raises)."""
    pid = os.fork()
    if pid:
        return pid

    def work():
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        return program()

    end_child(work)


def exit_code(status):
    """A wait status as Popen's returncode: the exit code, or -N for a kill by signal N."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _reaped(pid, options):
    """os.waitpid's (pid, status); a child that is not there to wait for (SIGCHLD ignored: the
    kernel reaps it) counts as ended with 0, as Popen counts it."""
    try:
        return os.waitpid(pid, options)
    except ChildProcessError:
        return pid, 0


def wait_child(pid, timeout=None):
    """The child's returncode (``exit_code``), or TimedOut after ``timeout`` s (None: no limit).

    Popen.wait(timeout) polls: it wakes every 50 ms for as long as the program runs, a
    supervisor per task and NIC sampler, all taking the cores from the training they watch.
    Where pidfds exist (Python 3.9, Linux 5.3) this sleeps in poll() until the child ends or
    the time passes; a signal that arrives meanwhile runs its handler and the poll goes on.
    Elsewhere it looks as Popen.wait does, every 50 ms at most. The deadline is on the
    monotonic clock: a step of the wall clock (NTP at a node's boot) moves no max_runtime.
    """
    if timeout is not None:
        deadline = time.monotonic() + timeout
        descriptor = None
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            try:
                descriptor = pidfd_open(pid)
            except OSError:
                descriptor = None  # a kernel without pidfds, or no child to open: the looks below
        if descriptor is not None:
            try:
                poller = select.poll()
                poller.register(descriptor, select.POLLIN)
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimedOut()
                    # A day at most a poll: poll() takes its timeout in milliseconds as a C
                    # int, which a max_runtime over 24 days would overflow.
                    if poller.poll(min(remaining, 86400.0) * 1000.0):
                        break
            finally:
                os.close(descriptor)
        else:
            pause = 0.0005
            while True:
                ended, status = _reaped(pid, os.WNOHANG)
                if ended:
                    return exit_code(status)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimedOut()
                pause = min(pause * 2, remaining, 0.05)
                time.sleep(pause)
    return exit_code(_reaped(pid, 0)[1])


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


def _mount_of(mountinfo, fstype, option):
    """(mount point, root inside the hierarchy) of the first mount of `fstype` (with `option` among
    its super options, for cgroup v1's memory), or None."""
    for line in mountinfo:
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if len(fields) > sep + 3 and fields[sep + 1] == fstype:
            if option is None or option in fields[sep + 3].split(","):
                return fields[4], fields[3]
    return None


def memory_cgroup_counter():
    """The file that counts this process's memory cgroup's OOM kills: cgroup v1's
    memory.oom_control or v2's memory.events (both have the line 'oom_kill N'); None when
    neither can be read. The program runs in the supervisor's cgroup, so a kill of it counts
    there (v2 also counts it in every ancestor)."""
    try:
        with open("/proc/self/cgroup") as handle:
            groups = handle.read().splitlines()
        with open("/proc/self/mountinfo") as handle:
            mountinfo = handle.read().splitlines()
    except (IOError, OSError):
        return None
    candidates = []
    for line in groups:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if "memory" in parts[1].split(","):
            mount, name = _mount_of(mountinfo, "cgroup", "memory"), "memory.oom_control"
        elif parts[0] == "0" and parts[1] == "":
            mount, name = _mount_of(mountinfo, "cgroup2", None), "memory.events"
        else:
            continue
        if mount is None:
            continue
        point, root = mount
        path = parts[2]
        if root != "/" and (path + "/").startswith(root + "/"):
            path = path[len(root) :]
        candidates.append(os.path.join(point, path.lstrip("/"), name))
    for path in candidates:
        if oom_kills(path) is not None:
            return path
    return None


def oom_kills(path):
    """The 'oom_kill N' count of a memory.events or memory.oom_control file; None if unreadable."""
    try:
        with open(path) as handle:
            for line in handle:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (IOError, OSError, ValueError):
        pass
    return None


def kernel_oom_line(pid):
    """The kernel log's line on the OOM killer's kill of `pid` ('Out of memory: Killed process
    PID (…)' or 'Memory cgroup out of memory: …'), or None: not there, or /dev/kmsg not
    readable (root or CAP_SYSLOG where kernel.dmesg_restrict=1)."""
    pattern = re.compile(r"Killed process %d \(" % pid)
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    found = None
    try:
        for _ in range(200000):
            try:
                record = os.read(fd, 8192)
            except OSError as error:
                if error.errno == 32:  # EPIPE: records overwritten while reading; go on
                    continue
                break  # EAGAIN: the end of the buffer
            if not record:
                break
            text = record.decode("utf-8", "replace")
            if pattern.search(text):
                # 'Memory cgroup out of memory: Killed process 123 (python) total-vm:…, anon-rss:…,
                # file-rss:…, shmem-rss:…, UID:0 …': up to the resident sizes.
                found = ",".join(text.split(";", 1)[-1].strip().splitlines()[0].split(",")[:3])
    finally:
        os.close(fd)
    return found


def oom_evidence(pid, counter, kills_before):
    """Why a program killed by SIGKILL was the OOM killer's victim ('memory.events oom_kill
    0 -> 1 in <file>', the kernel's line), or None when neither says so."""
    found = []
    line = kernel_oom_line(pid)
    if counter is not None and kills_before is not None:
        kills_after = oom_kills(counter)
        if kills_after is not None and kills_after > kills_before:
            found.append(
                "%s oom_kill %d -> %d in %s"
                % (os.path.basename(counter), kills_before, kills_after, os.path.dirname(counter))
            )
    if line:
        found.append("kernel log: %s" % line)
    return "; ".join(found) or None


def how_it_ended(record, advice=True):
    """How a task's program ended, from its exit record, as the failure reasons word it:
    'was killed by the kernel's OOM killer (…)', 'was killed by SIGTERM', 'exited with rc 1'."""
    if record.get("oom_killed"):
        text = "was killed by the kernel's OOM killer (SIGKILL; %s)" % record.get("oom_evidence")
        if advice:
            text += (
                ": it needed more memory than its node or memory cgroup gives; lower batch_size or "
                "use a node with more memory"
            )
        return text
    if record.get("signal"):
        return "was killed by %s" % record.get("signal_name")
    return "exited with rc %s" % record.get("rc")


def main():
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        sys.stderr.write("usage: %s %s MARKER EXIT_FILE -- PROGRAM...\n" % (sys.argv[0], PROGRAM_TAG))
        return 2
    return supervise(sys.argv[3], sys.argv[5:])


def supervise(exit_file, argv, program=None):
    """Run ``argv`` as this process's child, wait for it, record its end in ``exit_file``; the
    exit status the supervisor ends with. This process is the task's session leader.

    ``program``: a function that the child runs instead of executing ``argv`` (a fork of this
    process; its return value is the child's exit status), which ``argv`` then only describes
    in the log and the exit record.
    """
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
    try:
        reserve_exit(exit_file, EXIT_RESERVE + len(json.dumps(argv)))
    except (IOError, OSError) as error:
        say("no room for the exit record %s (%s): the program is not started" % (exit_file, error))
        return NO_ROOM_EXIT
    say("starting: %s" % " ".join(argv))
    # The OOM kills of this cgroup before the program: a SIGKILL with more of them after is
    # the kernel's OOM killer, which leaves no other trace in the exit status.
    counter = memory_cgroup_counter()
    kills_before = oom_kills(counter) if counter else None
    try:
        pid = spawn(argv) if program is None else run_forked(program)
    except OSError as error:
        record.update(rc=127, error="cannot execute %s: %s" % (argv[0], error), ended=time.time())
        record["duration"] = record["ended"] - record["started"]
        say(record["error"])
        record_exit(exit_file, record)
        return 127
    record["pid"] = pid
    status = None
    if max_runtime > 0:
        try:
            status = wait_child(pid, max_runtime)
        except TimedOut:
            record["deadline_exceeded"] = True
            say("max_runtime=%g s passed: stopping the task's process group" % max_runtime)
            os.killpg(os.getpgrp(), signal.SIGTERM)  # we only note it (see note())
            try:
                status = wait_child(pid, grace)
            except TimedOut:
                kill_group_but_self()
                status = wait_child(pid)
    if status is None:
        status = wait_child(pid)
    record["ended"] = time.time()
    record["duration"] = record["ended"] - record["started"]
    if status < 0:
        record["signal"] = -status
        try:
            record["signal_name"] = signal.Signals(-status).name
        except ValueError:
            record["signal_name"] = "SIG%d" % -status
        if -status == signal.SIGKILL and not record.get("deadline_exceeded"):
            evidence = oom_evidence(pid, counter, kills_before)
            if evidence:
                record.update(oom_killed=True, oom_evidence=evidence)
    else:
        record["rc"] = status
    if received:
        record["signals_received"] = received
    record_exit(exit_file, record)
    # A clean end is in the exit file only: the log ends with the program's own last lines,
    # which tools of the study read (its extraction takes the log's second-to-last line).
    if status != 0 or received or record.get("deadline_exceeded"):
        say("program %s after %.1f s" % (how_it_ended(record, advice=False), record["duration"]))
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
