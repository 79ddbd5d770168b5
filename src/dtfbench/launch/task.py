# -*- coding: utf-8 -*-
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""One TensorFlow task process on this host: its supervisor, files, processes and states.

A library for the tf_task module (one task per call) and ``dtfbench.launch.host_run`` (all of
a host's tasks of one run per call, the tf_task_host_run module): ``TfTask(params, check_mode,
warn).run()`` returns the result of one state, or raises ``TaskError`` (its message and the
result fields). Each task's supervisor (``supervisor.py`` beside this file) is a fork of the
process that starts the task (``fork_supervisor``).

``TfTask`` holds what every state shares (the task's files, what they and /proc say of it, the
result); each state is a stage of its own: ``TaskStart`` (started), ``TaskReadiness`` (ready),
``TaskFinish`` (finished) and ``TaskStop`` (stopped).
"""

from __future__ import absolute_import, division, print_function

import errno
import gc
import json
import os
import pwd
import re
import signal
import socket
import stat
import sys
import time

from ..linux import files, procfs
from . import supervisor  # (also so that Ansible ships supervisor.py with this file)

MARKER_ENV = "DTFBENCH_TF_TASK"
# Where a program may beat its heartbeat (<run_dir>/<name>.heartbeat; dtfbench's workload does,
# dtfbench.workload.liveness): its mtime moving says that the program still runs, which a
# frozen one cannot say (dtfbench.launch.host_run watches it with stall_timeout).
HEARTBEAT_ENV = "DTFBENCH_TASK_HEARTBEAT"
# A supervisor's name in the process table (/proc/<pid>/comm, what `ps -e` and pgrep show; at
# most 15 bytes). With its standard output, the task's log, it says whose supervisor a process
# is (TfTask.is_supervisor): a fork keeps the command line and environment of the process it
# was forked from.
SUPERVISOR_COMM = "tf_task-superv"
POLL = 0.1
KILL_WAIT = 5.0
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}$")
# The variable that places the run directories (roles tf_cluster and benchmark): what a message
# about the run directory's disk tells the user to change.
RUN_ROOT_VARIABLE = "dtfbench_run_root"
# The room a run needs on its run directory's disk before anything starts: the supervisor and
# NIC sampler scripts, the tasks' logs, exit records and results, the complete marker (a small
# run takes ~200 KB on a tmpfs; TF's logs of a long run more).
RUN_ROOM_BYTES = 1 << 20
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _which(program, path):
    """shutil.which, imported only for a program named without a path: shutil imports zlib,
    bz2 and lzma, 5 ms of every call's start."""
    import shutil

    return shutil.which(program, path=path)


# ------------------------------------------------------------------------------------------
# Helpers (the /proc readers are dtfbench.linux.procfs)


def _child_status(pid):
    """How a supervisor this process started ended, when it died before writing its exit
    record (its wait status is all that is left of it); "" otherwise."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG) if pid else (0, 0)
    except OSError:
        return ""
    if done != pid:
        return ""
    if os.WIFSIGNALED(status):
        return " (the supervisor was killed by signal %d)" % os.WTERMSIG(status)
    return " (the supervisor exited with status %d)" % os.WEXITSTATUS(status)


def child_running(pid):
    """Whether a supervisor that this process started (and has not reaped) still runs: its
    wait status, read without reaping it (``_child_status`` reads it later). None when pid is
    no unreaped child of this process.

    /proc is no proof for a process just started: until the kernel has finished loading its
    program, a few ms after ``Popen`` returns (far longer on a busy host), its
    ``/proc/<pid>/cmdline`` and ``environ`` read empty, so ``is_supervisor`` says False for a
    supervisor that is starting.
    """
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except (ChildProcessError, OSError):
        return None


class Supervisor(object):
    """A supervisor this process forked (``fork_supervisor``), as callers use a Popen: ``pid``,
    ``poll()`` (None while it runs) and ``wait()``. Neither reaps it before ``wait``: its wait
    status stays there for ``_child_status`` to tell how it ended."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            try:
                ended = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except (ChildProcessError, OSError):
                self.returncode = 0  # reaped already (SIGCHLD ignored): ended, how is not known
            else:
                if ended is not None:  # None: it still runs
                    self.returncode = ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status
        return self.returncode

    def wait(self):
        try:
            self.returncode = supervisor.exit_code(os.waitpid(self.pid, 0)[1])
        except ChildProcessError:
            if self.returncode is None:
                self.returncode = 0
        return self.returncode


def fork_supervisor(exit_file, argv, env, chdir, log, program=None, keep=None):
    """Fork this task's supervisor: the child leads a session of its own, runs in ``chdir``
    with ``env`` as its environment, its standard input /dev/null and its output the log
    (descriptor ``log``), holds no other descriptor of this process (a pipe to sshd kept
    open would keep the controller's call waiting) but ``keep`` (its port's claim,
    launch/port_claim.py, which it holds for its life; its program does not inherit it), runs
    ``supervisor.supervise`` (with ``program``, a function its child runs in place of executing
    ``argv``) and ends there. The caller gets a ``Supervisor``.

    A fork, not a new interpreter: the supervisor's code is loaded here already, so a
    supervisor's whole life around /bin/true costs ~5 ms of CPU, against ~41 ms as
    ``python -S supervisor.py`` (a Python start and its imports).
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()  # what this process wrote would otherwise be written again by the child
        except (AttributeError, IOError, OSError, ValueError):
            pass
    pid = os.fork()
    if pid:
        return Supervisor(pid)

    def work():
        # What the child inherited stays shared with this process's pages: no collection of
        # the garbage collector writes to them (Python 3.7).
        getattr(gc, "freeze", lambda: None)()
        os.setsid()
        with open("/proc/self/comm", "w") as handle:
            handle.write(SUPERVISOR_COMM)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        for descriptor in supervisor.descriptors_beyond_stdio():
            if descriptor == keep:
                continue
            try:
                os.close(descriptor)
            except OSError:
                pass
        sys.stdout = os.fdopen(1, "w", 1)
        sys.stderr = os.fdopen(2, "w", 1)
        os.chdir(chdir)
        os.environ.clear()
        os.environ.update(env)
        # The handlers of the process it was forked from (its controller watch) are not the
        # supervisor's: supervise() sets its own for SIGTERM, SIGINT and SIGHUP.
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        return supervisor.supervise(exit_file, list(argv), program)

    supervisor.end_child(work, failed=70)  # EX_SOFTWARE: the child failed before supervise()


def _port_open(host, port, timeout):
    try:
        connection = socket.create_connection((host, port), timeout=max(timeout, 0.05))
    except (socket.error, socket.timeout, OSError):
        return False
    connection.close()
    return True


def _tail(path, lines):
    if lines <= 0:
        return []
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            block, data = 8192, b""
            while size > 0 and data.count(b"\n") <= lines:
                step = min(block, size)
                size -= step
                handle.seek(size)
                data = handle.read(step) + data
    except (IOError, OSError):
        return []
    return data.decode("utf-8", "replace").splitlines()[-lines:]


def free_bytes(path):
    """Bytes free to this user on the file system of ``path`` (its nearest existing folder), or None."""
    while True:
        try:
            info = os.statvfs(path)
        except OSError:
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent
            continue
        return info.f_bavail * info.f_frsize


def _free_some_room(run_dir):
    return (
        "free some room there (the folders of earlier runs under %s can go) or set %s to a folder on a disk with room"
        % (
            os.path.dirname(run_dir),
            RUN_ROOT_VARIABLE,
        )
    )


def room_problem(run_dir, need=RUN_ROOM_BYTES):
    """Why ``run_dir``'s disk cannot take a run (less than ``need`` bytes free), or None."""
    free = free_bytes(run_dir)
    if free is None or free >= need:
        return None
    return (
        "run_dir %s: the disk is full: %d KB free on its file system (a run needs at least %d KB for its logs and results); %s"
        % (
            run_dir,
            free // 1024,
            need // 1024,
            _free_some_room(run_dir),
        )
    )


def disk_full(run_dir, path, error):
    """One line for a write in ``run_dir`` that its full disk refused (``error``: the OSError)."""
    free = free_bytes(run_dir)
    return "run_dir %s: the disk is full: cannot write %s (%s%s); %s" % (
        run_dir,
        path or getattr(error, "filename", None) or "a file in it",
        error.strerror or error,
        "" if free is None else ", %d KB free on its file system" % (free // 1024),
        _free_some_room(run_dir),
    )


def write_replacing(path, data):
    """``data`` (text) to ``path`` through a temporary file renamed over it: a reader never sees
    half of it, and a failed write (a full disk) leaves no temporary file behind."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "w") as handle:
            handle.write(data)
        os.rename(tmp, path)
    except BaseException:
        files.discard(tmp)
        raise


def _user(uid):
    try:
        return "uid %d (%s)" % (uid, pwd.getpwuid(uid).pw_name)
    except KeyError:
        return "uid %d" % uid


def unsafe_dir_path(path, uid):
    """Why a folder on ``path`` (absolute) is not safe to keep scripts that ``uid`` runs, or None.

    Every component from / down must belong to ``uid`` or root and be writable by no one else,
    except a sticky folder such as /tmp (others cannot rename or remove what we own there, and
    the next component's owner is checked in turn); a link counts as its owner's and is followed
    (then its target's components are checked). The walk stops at the first component that does
    not exist: the caller creates it and checks again.
    """
    todo = [part for part in path.split("/") if part]
    current = "/"
    links = 0
    while True:
        try:
            info = os.lstat(current)
        except OSError as error:
            if error.errno == errno.ENOENT:
                return None
            return "%s cannot be examined (%s)" % (current, error.strerror)
        if info.st_uid not in (0, uid):
            what = (
                "the link" if stat.S_ISLNK(info.st_mode) else "the folder" if stat.S_ISDIR(info.st_mode) else "the file"
            )
            return "%s %s belongs to %s, neither this user (%s) nor root: it could swap what runs there" % (
                what,
                current,
                _user(info.st_uid),
                _user(uid),
            )
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > 40:
                return "%s: too many levels of links" % current
            target = os.readlink(current)
            todo = [part for part in target.split("/") if part] + todo
            current = os.path.dirname(current) if not target.startswith("/") else "/"
        elif not stat.S_ISDIR(info.st_mode):
            return "%s is not a folder" % current
        elif info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return "the folder %s is writable by %s (mode %o): they could swap what runs there" % (
                current,
                "others" if info.st_mode & 0o002 else "its group (gid %d)" % info.st_gid,
                stat.S_IMODE(info.st_mode),
            )
        if not todo:
            return None
        current = os.path.normpath(os.path.join(current, todo.pop(0)))


class TaskError(Exception):
    """A task call that failed: the message, and the result fields (``result``) so far."""

    def __init__(self, msg, result=None):
        Exception.__init__(self, msg)
        self.msg = msg
        self.result = dict(result or {})


class TfTask(object):
    """One task process: its identity, its files and what they and /proc say of it.

    ``params``: the tf_task module's options (missing ones take their defaults);
    ``check_mode``: change nothing, say what would change; ``warn``: a function that takes a
    warning's text; ``process``: the task's ``Supervisor`` when the caller started it.
    ``run()`` returns the result of ``params["state"]`` or raises TaskError. Beyond the
    module's options, ``params`` may hold ``program`` (callers in this process only): a
    function that the supervisor's child runs in place of executing ``argv``, which then
    describes it (the NIC sampler: no interpreter of its own to start); and ``port_claim``,
    the descriptor of the port's claim (launch/port_claim.py) the supervisor is to hold.

    Each state is a stage's (``TaskStart``: started; ``TaskReadiness``: ready, and a start's
    wait for the port; ``TaskFinish``: finished; ``TaskStop``: stopped, and the termination
    the other stages fall back on); what they share stays here: the task's files and what
    they and /proc say (the pid, the supervisor, its program, the exit record, the log), and
    the result. dtfbench.launch.host_run inspects tasks through these without running a state.
    """

    argument_spec = dict(
        name=dict(type="str", required=True),
        argv=dict(type="list", elements="str"),
        chdir=dict(type="path"),
        environment=dict(type="dict", default={}),
        run_dir=dict(type="path", required=True),
        state=dict(type="str", default="started", choices=["started", "ready", "finished", "stopped"]),
        wait_ready=dict(type="bool", default=True),
        port=dict(type="int"),
        ready_host=dict(type="str", default="127.0.0.1"),
        ready_timeout=dict(type="float", default=120.0),
        timeout=dict(type="float", default=3600.0),
        stop_on_timeout=dict(type="bool", default=False),
        grace_period=dict(type="float", default=10.0),
        max_runtime=dict(type="float", default=0.0),
        result_file=dict(type="path"),
        log_tail_lines=dict(type="int", default=40),
    )
    required_if = [("state", "started", ["argv"]), ("state", "ready", ["port"])]

    def __init__(self, params, check_mode=False, warn=None, process=None, table=None):
        params = dict(dict((key, spec.get("default")) for key, spec in self.argument_spec.items()), **params)
        self.params = params
        self.check_mode = check_mode
        self.warn = warn if warn is not None else (lambda text: None)
        self.name = params["name"]
        if not NAME_RE.match(self.name):
            raise TaskError(
                "name %r is not a valid task id: use letters, digits, '.', '_', "
                "'-', '+', '@', starting with a letter or digit (at most 200)" % self.name
            )
        for option in ("ready_timeout", "timeout", "grace_period", "max_runtime"):
            if params[option] < 0:
                raise TaskError("%s must be >= 0, got %s" % (option, params[option]))
        if params["port"] is not None and not 1 <= params["port"] <= 65535:
            raise TaskError("port must be in 1..65535, got %d" % params["port"])
        if params["state"] == "started" and not params["argv"]:
            raise TaskError("argv must name the program to start (state=started)")
        self.run_dir = os.path.abspath(params["run_dir"])
        self.chdir = os.path.abspath(params["chdir"]) if params["chdir"] else self.run_dir
        base = os.path.join(self.run_dir, self.name)
        self.pid_file = base + ".pid"
        self.log_file = base + ".log"
        self.exit_file = base + ".exit"
        self.heartbeat_file = base + ".heartbeat"
        self.marker = base
        self.marker_entry = ("%s=%s" % (MARKER_ENV, self.marker)).encode("utf-8")
        self.started_at = time.time()
        # The supervisor's ``Supervisor`` when this process started it (TaskStart.start, or
        # ``process`` from the caller that did: dtfbench.launch.host_run); kept, so nothing else
        # reaps it.
        self.process = process
        # The process table a caller read for several tasks' starts (``procfs.table()``): where
        # ``TaskStart.start`` looks for this task's leftovers. None: its own look.
        self.table = table
        self.result = dict(
            changed=False,
            name=self.name,
            state=params["state"],
            pid=None,
            running=False,
            pid_file=self.pid_file,
            log_file=self.log_file,
            exit_file=self.exit_file,
        )
        # The stages (below): each runs its state on this task's files and result.
        self.starting = TaskStart(self)
        self.readiness = TaskReadiness(self)
        self.finishing = TaskFinish(self)
        self.stopping = TaskStop(self)

    # ---- helpers ---------------------------------------------------------------------

    def elapsed(self):
        return round(time.time() - self.started_at, 3)

    def done(self, **kwargs):
        """The result of this call."""
        self.result.update(kwargs)
        self.result["elapsed"] = self.elapsed()
        return dict(self.result)

    def fail(self, msg, **kwargs):
        self.result.update(kwargs)
        self.result["elapsed"] = self.elapsed()
        raise TaskError(msg, self.result)

    def log_tail(self):
        return _tail(self.log_file, self.params["log_tail_lines"])

    def with_tail(self, msg):
        tail = self.log_tail()
        if not tail:
            return msg + " (the log %s is empty)" % self.log_file
        return msg + "; last %d lines of %s:\n%s" % (len(tail), self.log_file, "\n".join(tail))

    def read_pid(self):
        data = procfs.read(self.pid_file)
        if data is None:
            return None
        try:
            return int(data.strip())
        except ValueError:
            return None

    def is_supervisor(self, pid):
        """True when pid is this task's live supervisor (not just any live pid).

        The supervisor that this process started (``process``) is judged by its wait status
        (see ``child_running``: /proc does not show it as ours yet right after its start).
        Any other by /proc: its name (SUPERVISOR_COMM) and its output, this task's log (a
        reused pid, or another task's supervisor, has another).
        """
        if pid is None or pid <= 0:
            return False
        if self.process is not None and self.process.pid == pid:
            running = child_running(pid)
            if running is not None:
                return running
        return procfs.alive(pid) and procfs.comm(pid) == SUPERVISOR_COMM and procfs.writes_to(pid, 1, self.log_file)

    def running_supervisor(self):
        pid = self.read_pid()
        return pid if self.is_supervisor(pid) else None

    def running_argv(self, pid):
        """The command line of the program that the supervisor pid runs, or None."""
        program = self.program(pid)[0]
        if program is None:
            return None
        return procfs.cmdline(program) or None

    def read_exit(self, pid=None):
        """The exit record (of the supervisor pid when given), or None."""
        data = procfs.read(self.exit_file)
        if not data:
            return None
        try:
            record = json.loads(data)
        except ValueError:
            return None
        if not isinstance(record, dict):
            return None
        if pid is not None and record.get("supervisor_pid") != pid:
            return None
        return record

    def program(self, pid):
        """(pid, state) of the program that the supervisor pid runs, or (None, None) before it
        started it or after it reaped it."""
        for child in procfs.children(pid):
            state = procfs.state(child)
            if state is not None:
                return child, state
        return None, None

    def exit_fields(self, record):
        fields = dict(
            exit=record, rc=record.get("rc"), signal=record.get("signal"), signal_name=record.get("signal_name")
        )
        if record.get("duration") is not None:
            fields["runtime"] = round(record["duration"], 3)
        return fields

    def full_disk_note(self):
        """Why a task may have left no exit record or result: the run directory's disk, too full
        for the room its supervisor reserves for the record (supervisor.NO_ROOM_EXIT) or for
        the result; "" when the disk has room."""
        free = free_bytes(self.run_dir)
        if free is None or free >= 2 * supervisor.EXIT_RESERVE:
            return ""
        return "; the disk of run_dir %s is full (%d KB free on its file system): %s" % (
            self.run_dir,
            free // 1024,
            _free_some_room(self.run_dir),
        )

    def listener_hint(self, port):
        """Pids listening on the TCP port (best effort, own user's processes only)."""
        return procfs.listening_pids(port)

    # ---- what the stages do, as host_run asks it of a task --------------------------

    def processes(self, pgid=None, trusted=False, table=None):
        """The task's live pids, process groups and loners (``TaskStop.processes``)."""
        return self.stopping.processes(pgid, trusted, table)

    @staticmethod
    def signal_all(loners, groups, signum):
        TaskStop.signal_all(loners, groups, signum)

    def record_for_silent_supervisor(self, pid, program, status, ended, why):
        """The exit record of a supervisor that did not write it (``TaskFinish``)."""
        return self.finishing.record_for_silent_supervisor(pid, program, status, ended, why)

    # ---- states ----------------------------------------------------------------------

    def started(self):
        return self.starting.started()

    def ready(self):
        return self.readiness.ready()

    def finished(self):
        return self.finishing.finished()

    def stopped(self):
        return self.stopping.stopped()

    def run(self):
        try:
            return getattr(self, self.params["state"])()
        except (IOError, OSError) as error:
            if error.errno not in DISK_FULL:
                raise
            self.fail(disk_full(self.run_dir, None, error))


class TaskStart(object):
    """The started state of a ``TfTask``: the start of its supervisor and program.

    Owns what happens before the task runs: a task already running is left as it is (its
    command line compared); else the run directory is made safe, the program and its
    environment checked, leftovers of an earlier start stopped, a busy port refused, and the
    supervisor forked with a fresh log, its pid file written. The wait for the port that
    follows is ``TaskReadiness``'s.
    """

    def __init__(self, task):
        self.task = task

    def started(self):
        task = self.task
        pid = task.running_supervisor()
        if pid is not None:
            task.result.update(pid=pid, running=True)
            # A program run in the supervisor's fork (``program``) shows the command line of the
            # process it was forked from: only an executed one can be compared.
            cmd = task.running_argv(pid) if task.params.get("program") is None else task.params["argv"]
            if cmd is not None and cmd != task.params["argv"]:
                task.warn(
                    "task %s already runs (pid %d) with another command line; it is "
                    "left as it is - stop it first to apply the new one: %s" % (task.name, pid, " ".join(cmd))
                )
            task.result["cmd"] = cmd
            if task.params["port"] is None:
                return task.done(ready=True)
            if task.check_mode:
                return task.done(ready=_port_open(task.params["ready_host"], task.params["port"], 1.0))
            return task.readiness.wait_ready(pid, None)
        if task.check_mode:
            return task.done(
                changed=True, cmd=task.params["argv"], ready=False, msg="check mode: would start %s" % task.name
            )
        return self.start()

    def start(self):
        task = self.task
        params = task.params
        env = self.environment()
        self.safe_run_dir()
        self.check_program(env)
        # Leftovers of an earlier start (a stale pid file; descendants that outlived it). The
        # termination looks again: one seen in a caller's table may have ended since.
        leftovers = task.stopping.processes(table=task.table)[0]
        if leftovers:
            terminated, killed, remaining = task.stopping.terminate()
            if terminated:
                task.warn(
                    "stopped %d leftover process(es) of an earlier start of %s: %s"
                    % (len(terminated), task.name, terminated)
                )
            if remaining:
                task.fail("leftover processes of %s survive SIGKILL: %s" % (task.name, remaining))
        if params["port"] is not None and _port_open(params["ready_host"], params["port"], 1.0):
            owners = task.listener_hint(params["port"])
            task.fail(
                "port %d on %s already accepts connections before %s starts%s; a stale "
                "task or another program holds it - stop it or choose another port"
                % (params["port"], params["ready_host"], task.name, " (listening pids: %s)" % owners if owners else "")
            )
        for stale in (task.exit_file, task.pid_file, task.heartbeat_file):
            if os.path.exists(stale):
                os.unlink(stale)
        task.stopping.remove_stale_reservations()
        if os.path.exists(task.log_file):
            os.rename(task.log_file, task.log_file + ".1")
        log = os.open(task.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
        try:
            process = fork_supervisor(
                task.exit_file, params["argv"], env, task.chdir, log, params.get("program"), params.get("port_claim")
            )
        except OSError as error:
            task.fail("cannot start the supervisor of %s: %s" % (task.name, error))
        finally:
            os.close(log)
        task.process = process
        try:
            write_replacing(task.pid_file, "%d\n" % process.pid)
        except BaseException:
            # A supervisor that no later call could find (a full disk refused its pid file)
            # must not run on: its group (its own session's) goes with it.
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            process.wait()
            raise
        task.result.update(changed=True, pid=process.pid, running=True, cmd=list(params["argv"]))
        if params["port"] is None:
            return task.done(ready=True, ready_after=task.elapsed())
        if not params["wait_ready"]:
            return task.done(ready=False)
        return task.readiness.wait_ready(process.pid, process)

    def safe_run_dir(self):
        """Create run_dir (one folder at a time) and check its whole path.

        The task's files (its log, pid file, exit record, results) are written here, often as
        root: a folder on the path that someone else owns or may write to (another user's
        /tmp/dtfbench, made in advance, or a runs/ of mode 777) could swap them or point them
        elsewhere. Checked again after creating, so a folder someone else
        made in between is refused too (mkdir meets it as EEXIST).
        """
        task = self.task
        uid = os.geteuid()
        why = unsafe_dir_path(task.run_dir, uid)
        if why is None and not os.path.isdir(task.run_dir):
            parts = [part for part in task.run_dir.split("/") if part]
            for depth in range(1, len(parts) + 1):
                folder = "/" + "/".join(parts[:depth])
                try:
                    os.mkdir(folder, 0o700 if depth == len(parts) else 0o755)
                except OSError as error:
                    if error.errno != errno.EEXIST:
                        task.fail("cannot create run_dir %s: %s" % (task.run_dir, error))
            why = unsafe_dir_path(task.run_dir, uid)
        if why is None:
            info = os.lstat(task.run_dir)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o022:
                why = "%s itself must be a folder (not a link) of this user (%s) that only it can write (mode %o)" % (
                    task.run_dir,
                    _user(uid),
                    stat.S_IMODE(info.st_mode),
                )
        if why is not None:
            task.fail(
                "run_dir %s is unsafe: %s; remove or fix that (chown/chmod go-w), or choose a "
                "run_dir (dtfbench_run_root) on a path that only this user and root can write" % (task.run_dir, why)
            )

    def check_program(self, env):
        task = self.task
        argv = task.params["argv"]
        if not os.path.isdir(task.chdir) and task.chdir != task.run_dir:
            task.fail("chdir %s is not a directory" % task.chdir)
        if task.params.get("program") is not None:
            return  # run in the supervisor's fork: argv only describes it
        program = argv[0]
        if "/" in program:
            path = os.path.join(task.chdir, program)
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                task.fail("argv[0] %s is not an executable file (relative to chdir %s)" % (program, task.chdir))
        elif _which(program, env.get("PATH", os.defpath)) is None:
            task.fail(
                "argv[0] %s is not found in the task's PATH (%s); give its full path"
                % (program, env.get("PATH", os.defpath))
            )

    def environment(self):
        task = self.task
        env = dict(os.environ)
        for key, value in task.params["environment"].items():
            key = str(key)
            if value is None:
                env.pop(key, None)
            elif isinstance(value, bool):
                env[key] = "true" if value else "false"
            else:
                env[key] = str(value)
        env[MARKER_ENV] = task.marker
        env[HEARTBEAT_ENV] = task.heartbeat_file
        if task.params["max_runtime"]:
            env["TF_TASK_SUPERVISOR_MAX_RUNTIME"] = str(task.params["max_runtime"])
            env["TF_TASK_SUPERVISOR_GRACE"] = str(task.params["grace_period"])
        return env


class TaskReadiness(object):
    """The ready state of a ``TfTask``, and a start's wait for its port.

    Owns the wait for the task's port to accept connections: it fails fast when the task
    ends first (how, from its exit record and log) and, past ready_timeout, stops a task
    that this call started (``TaskStop``) and leaves one that already ran.
    """

    def __init__(self, task):
        self.task = task

    def ready(self):
        task = self.task
        pid = task.read_pid()
        if pid is None:
            task.fail(
                "task %s was never started: no pid file in %s; start it with "
                "state=started first" % (task.name, task.run_dir),
                ready=False,
            )
        task.result.update(pid=pid, running=task.is_supervisor(pid))
        if task.check_mode:
            return task.done(ready=_port_open(task.params["ready_host"], task.params["port"], 1.0))
        return self.wait_ready(pid, None)

    def wait_ready(self, pid, process):
        """Poll the port until it accepts; fail fast when the task exits (started it: stop it
        on timeout)."""
        task = self.task
        params = task.params
        deadline = time.time() + params["ready_timeout"]
        while True:
            exited = (process.poll() is not None) if process is not None else not task.is_supervisor(pid)
            if exited:
                record = task.read_exit(pid) or {}
                fields = task.exit_fields(record) if record else {}
                how = supervisor.how_it_ended(record) if record else "is gone"
                if record.get("error"):
                    how += " (%s)" % record["error"]
                if not record:
                    how += _child_status(pid)
                task.fail(
                    task.with_tail(
                        "task %s %s before port %d was ready%s"
                        % (task.name, how, params["port"], "" if record else task.full_disk_note())
                    ),
                    running=False,
                    ready=False,
                    log_tail=task.log_tail(),
                    **fields,
                )
            remaining = deadline - time.time()
            if _port_open(params["ready_host"], params["port"], min(1.0, max(remaining, 0))):
                return task.done(ready=True, ready_after=task.elapsed())
            if time.time() >= deadline:
                break
            time.sleep(min(POLL, max(deadline - time.time(), 0)))
        msg = "task %s did not accept connections on %s:%d within ready_timeout=%s s" % (
            task.name,
            params["ready_host"],
            params["port"],
            params["ready_timeout"],
        )
        if process is None:
            task.fail(
                task.with_tail(msg + " (it was already running; left running)"), ready=False, log_tail=task.log_tail()
            )
        terminated, killed, remaining = task.stopping.terminate(pid)
        process.wait()
        task.stopping.record_stop(pid, bool(killed))
        msg += "; stopped its process group"
        if remaining:
            msg += ", but pids %s survive SIGKILL" % remaining
        record = task.read_exit(pid) or {}
        task.fail(
            task.with_tail(msg),
            running=False,
            ready=False,
            log_tail=task.log_tail(),
            terminated=terminated,
            killed=killed,
            **task.exit_fields(record),
        )


class TaskFinish(object):
    """The finished state of a ``TfTask``: the wait for its end and what it left.

    Owns the wait for the task's exit record (up to timeout, then stop_on_timeout), the
    result file it wrote, the leftovers it left, and how the end is told (rc, signal,
    max_runtime, the worker's own reason); and the exit record that tf_host_run's wait writes
    for a supervisor that stopped answering after its program ended.
    """

    def __init__(self, task):
        self.task = task

    def finished(self):
        task = self.task
        params = task.params
        pid = task.read_pid()
        deadline = time.time() + params["timeout"]
        while True:
            alive = task.is_supervisor(pid)
            record = task.read_exit(pid)
            if record is None and not alive:
                record = task.read_exit(pid)
            if record is not None:
                break
            if not alive:
                if pid is None:
                    msg = "task %s was never started here: no pid file %s" % (task.name, task.pid_file)
                else:
                    msg = (
                        "task %s (pid %d) is gone without an exit status: it was killed with "
                        "SIGKILL, or the host restarted%s" % (task.name, pid, task.full_disk_note())
                    )
                if task.check_mode:
                    return task.done(msg="check mode: " + msg, log_tail=task.log_tail())
                task.fail(
                    task.with_tail(msg),
                    pid=pid,
                    log_tail=task.log_tail(),
                    rc=None,
                    signal=None,
                    signal_name=None,
                    result=None,
                    timed_out=False,
                )
            task.result.update(pid=pid, running=True)
            if task.check_mode:
                return task.done(
                    timed_out=False,
                    log_tail=task.log_tail(),
                    msg="check mode: task %s runs; would wait up to %s s for it" % (task.name, params["timeout"]),
                )
            remaining = deadline - time.time()
            if remaining <= 0:
                self.finished_timeout(pid)
            time.sleep(min(POLL * 2, remaining))
        task.result.update(pid=pid, running=False)
        fields = task.exit_fields(record)
        result, problem = self.read_result()
        leftover = [p for p in task.stopping.processes()[0] if p != pid]
        if leftover:
            task.warn(
                "task %s exited but left processes running: %s; stop them with state=stopped" % (task.name, leftover)
            )
        fields.update(result=result, timed_out=False, log_tail=task.log_tail(), leftover=leftover)
        if record.get("rc") == 0:
            if problem and problem[0] == "invalid":
                task.fail(problem[1], **fields)
            if problem:
                task.warn(problem[1])
            return task.done(**fields)
        how = supervisor.how_it_ended(record)
        if record.get("deadline_exceeded"):
            how += " after running past its max_runtime"
        if record.get("error"):
            how += " (%s)" % record["error"]
        reason = None
        if isinstance(result, dict):
            reason = result.get("reason") or result.get("error") or result.get("message")
        if reason:
            how += ": %s" % reason
        elif result is None:
            how += task.full_disk_note()  # a worker whose disk filled up could write no result
        task.fail(task.with_tail("task %s %s" % (task.name, how)), **fields)

    def finished_timeout(self, pid):
        task = self.task
        msg = "task %s still runs after timeout=%s s" % (task.name, task.params["timeout"])
        extra = {}
        if task.params["stop_on_timeout"]:
            terminated, killed, remaining = task.stopping.terminate(pid)
            task.stopping.record_stop(pid, bool(killed))
            msg += "; stopped it (stop_on_timeout)"
            if remaining:
                msg += ", but pids %s survive SIGKILL" % remaining
            extra.update(terminated=terminated, killed=killed, running=task.is_supervisor(pid))
        else:
            msg += "; it is left running (stop it with state=stopped, or set stop_on_timeout)"
        task.fail(
            task.with_tail(msg),
            timed_out=True,
            rc=None,
            signal=None,
            signal_name=None,
            result=None,
            log_tail=task.log_tail(),
            **extra,
        )

    def read_result(self):
        """(parsed result or None, None or (kind, message))."""
        task = self.task
        path = task.params["result_file"]
        if not path:
            return None, None
        path = os.path.join(task.chdir, path)
        data = procfs.read(path)
        if data is None:
            return None, ("missing", "task %s wrote no result file %s" % (task.name, path))
        try:
            return json.loads(data), None
        except ValueError as error:
            return None, ("invalid", "result file %s of task %s is not valid JSON: %s" % (path, task.name, error))

    def record_for_silent_supervisor(self, pid, program, status, ended, why):
        """Write the exit record that the supervisor pid did not write although its program
        ended (status: the program's wait status, read from /proc while it is a zombie): the
        program's own exit decides the task's outcome, not the stalled supervisor. The
        supervisor, if it runs again, replaces it with its own (the same exit)."""
        task = self.task
        record = {
            "schema": 1,
            "supervisor_pid": pid,
            "pid": program,
            "rc": None,
            "signal": None,
            "signal_name": None,
            "ended": ended,
            "recorded_by": "tf_host_run",
            "note": why,
        }
        if os.WIFSIGNALED(status):
            record["signal"] = os.WTERMSIG(status)
            try:
                record["signal_name"] = signal.Signals(record["signal"]).name
            except ValueError:
                record["signal_name"] = "SIG%d" % record["signal"]
        else:
            record["rc"] = os.WEXITSTATUS(status)
        tmp = "%s.tmp.%d" % (task.exit_file, os.getpid())
        try:
            with open(tmp, "w") as handle:
                json.dump(record, handle, sort_keys=True)
            os.rename(tmp, task.exit_file)
        except (IOError, OSError) as error:
            task.warn("could not write %s: %s" % (task.exit_file, error))
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return None
        return record


class TaskStop(object):
    """The stopped state of a ``TfTask``, and the termination every stage falls back on.

    Owns the task's live processes (its supervisor's group and whatever carries its marker)
    and their end: SIGTERM, the grace period, SIGKILL; the exit record of a supervisor killed
    before it wrote one; the room reserved for the records of supervisors that are gone. A
    start stops leftovers with it, a ready wait and a finished wait their timed-out task.
    """

    def __init__(self, task):
        self.task = task

    def stopped(self):
        task = self.task
        pid = task.running_supervisor()
        found = self.processes(pid)
        pids = found[0]
        task.result.update(pid=pid, running=bool(pid))
        if not pids:
            if not task.check_mode:
                self.remove_stale_reservations()
            return task.done(terminated=[], killed=[], msg="task %s is not running" % task.name)
        if task.check_mode:
            return task.done(changed=True, terminated=[], killed=[], msg="check mode: would stop pids %s" % pids)
        terminated, killed, remaining = self.terminate(pid, found)
        self.record_stop(pid, bool(killed))
        fields = dict(terminated=terminated, killed=killed, running=task.is_supervisor(pid))
        record = task.read_exit(pid)
        if record is not None:
            fields.update(task.exit_fields(record))
        if remaining:
            task.fail("processes of task %s survive SIGKILL: %s" % (task.name, remaining), changed=True, **fields)
        return task.done(changed=True, **fields)

    def processes(self, pgid=None, trusted=False, table=None):
        """Live pids of the task (the group of a verified supervisor, and every process that
        carries the marker), the process groups to signal, and the pids outside them; from
        ``table`` (``procfs.table()``, read once for several tasks) or a fresh look."""
        task = self.task
        own = os.getpid()
        own_group = os.getpgrp()
        marked, groups = set(), set()
        stats = {}
        for pid, found, environ in table if table is not None else procfs.table():
            if pid == own:
                continue
            stat = stats[pid] = (found[0], found[2])  # (state, process group)
            if task.marker_entry in environ:
                marked.add(pid)
                groups.add(stat[1])
        if pgid is not None and (trusted or task.is_supervisor(pgid)):
            groups.add(pgid)
        groups.discard(own_group)
        groups.discard(0)
        members = set(pid for pid, stat in stats.items() if stat[1] in groups)
        # Pids outside the signalled groups (only a marked process in our own group) are
        # signalled one by one; the others get the signal once, through their group.
        loners = sorted(pid for pid in marked if stats[pid][1] not in groups)
        return sorted(marked | members), sorted(groups), loners

    def terminate(self, pgid=None, found=None):
        """SIGTERM, grace period, SIGKILL; returns (terminated, killed, remaining).

        The group of pgid is signalled when pgid is this task's supervisor at the start; it
        stays trusted while its members die (a group id is not reused while it has members).
        ``found``: what ``processes(pgid)`` gave the caller just before (no second look).
        """
        task = self.task
        trusted = pgid is not None and task.is_supervisor(pgid)
        pids, groups, loners = found if found is not None else self.processes(pgid, trusted)
        if not pids:
            return [], [], []
        terminated = list(pids)
        self.signal_all(loners, groups, signal.SIGTERM)
        # A stopped process (SIGSTOP: a frozen task or supervisor) acts on its SIGTERM only
        # once it runs again, else it would sit out the whole grace period.
        self.signal_all(loners, groups, signal.SIGCONT)
        # Each look waits for one of them to end (a SIGTERM'd program and its supervisor end
        # within ms), or POLL at most.
        deadline = time.time() + task.params["grace_period"]
        while pids and time.time() < deadline:
            procfs.wait_for_any_end(pids, min(POLL, max(deadline - time.time(), 0)))
            pids, groups, loners = self.processes(pgid, trusted)
        killed = list(pids)
        if pids:
            self.signal_all(loners, groups, signal.SIGKILL)
            deadline = time.time() + KILL_WAIT
            while pids and time.time() < deadline:
                procfs.wait_for_any_end(pids, POLL)
                pids, groups, loners = self.processes(pgid, trusted)
                if pids:
                    self.signal_all(loners, groups, signal.SIGKILL)
        return terminated, killed, pids

    @staticmethod
    def signal_all(loners, groups, signum):
        for group in groups:
            try:
                os.killpg(group, signum)
            except OSError:
                pass
        for pid in loners:
            try:
                os.kill(pid, signum)
            except OSError:
                pass

    def record_stop(self, pid, killed):
        """Write an exit record when the supervisor died without writing one."""
        task = self.task
        if pid is None or task.read_exit(pid) is not None:
            return
        record = {
            "schema": 1,
            "supervisor_pid": pid,
            "pid": None,
            "rc": None,
            "signal": int(signal.SIGKILL if killed else signal.SIGTERM),
            "signal_name": "SIGKILL" if killed else "SIGTERM",
            "ended": time.time(),
            "stopped_by": "tf_task",
            "note": "the supervisor was killed before it could record the exit status",
        }
        # Into the room the supervisor reserved for its record (its supervisor.reservation),
        # which a full disk still has.
        tmp = supervisor.reservation(task.exit_file, pid)
        data = json.dumps(record, sort_keys=True).encode("utf-8")
        try:
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644), "wb") as handle:
                handle.write(data)
                handle.truncate(len(data))
            os.rename(tmp, task.exit_file)
        except (IOError, OSError) as error:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if error.errno in DISK_FULL:
                task.warn(disk_full(task.run_dir, task.exit_file, error))
            else:
                task.warn("could not write %s: %s" % (task.exit_file, error))

    def remove_stale_reservations(self):
        """The exit records' reserved room (supervisor.reservation) of supervisors that died
        without writing their record and without a stop that wrote it for them."""
        task = self.task
        prefix = os.path.basename(task.exit_file) + ".tmp."
        try:
            names = os.listdir(task.run_dir)
        except OSError:
            return
        for name in names:
            pid = name[len(prefix) :]
            if name.startswith(prefix) and pid.isdigit() and not task.is_supervisor(int(pid)):
                try:
                    os.unlink(os.path.join(task.run_dir, name))
                except OSError:
                    pass
