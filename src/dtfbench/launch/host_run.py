# -*- coding: utf-8 -*-
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""One host's PSs and workers of one run, in one call: check, start and wait, stop.

A library for the tf_host_run module (library/tf_host_run.py documents the states and what
they return): ``HostRun(params, check_mode, warn).run()`` returns the result of one state or
raises ``TaskError``. Each task is a ``TfTask`` (``task.py``); while it waits, the call
watches for the controller going away and then stops every task of the run on this host.

``HostRun`` holds what every state shares (the run's tasks, their names and options, the
supervisors this call started, the controller watch); each state is a stage of its own:
``HostCheck`` (checked), ``HostStart`` (started, and the start of finished), ``HostFinish``
(finished) and ``HostStop`` (stopped); ``NicSamplerTask`` is the host's NIC sampler.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import signal
import time

from ..contract.outcomes import PEER_LOST, busy_port
from ..linux import procfs
from . import nic_sampler, port_claim, supervisor
from .controller_watch import ControllerWatch
from .task import (
    DISK_FULL,
    POLL,
    TaskError,
    TfTask,
    _port_open,
    disk_full,
    room_problem,
    unsafe_dir_path,
    write_replacing,
)

# Two tasks of a host that fail together (a worker, then the PS that lost it) end within this
# many seconds of each other; the one that ended first is the cause.
CAUSE_SLACK = 2.0

COMPLETE_MARKER = "complete"
# The NIC sampler (nic_sampler.py) runs as one more task of the host's run, in a fork of its
# supervisor (no interpreter of its own to start, no program written to execute). Its name and its
# samples file carry the host's first task ("<run_id>-nic-ps-0", "nic-ps-0.samples"), unique
# in the run: the tasks' markers are seen across hosts that share a process table (the test
# bed's namespaces) and a run directory may be on a file system the hosts share.
NIC_TASK = "nic"
# A supervisor records its program's end within ms (it waits on it); one that has not after
# this long, its program a zombie, stopped answering (SIGSTOP, a stuck host): the program's
# own exit status, in /proc while it is a zombie, is recorded in its place.
SILENT_SUPERVISOR_GRACE = 2.0
# How often the wait for the workers looks at what nothing wakes it for (heartbeats, a signal
# to the call, the timeout) where pidfds wake it at a task's end (POLL * 2 without them); each
# look reads every task's files and /proc entries, on cores the training uses.
WAIT_LOOK = 0.5
# How a frozen task's program is, by its /proc state.
FROZEN_STATES = {
    "T": "stopped by a signal (SIGSTOP or SIGTSTP)",
    "t": "stopped by a debugger",
    "D": "in uninterruptible sleep (stuck in the kernel: a disk, a network file system, a device)",
}


def ready_polls(first=0.01, factor=1.5, cap=POLL):
    """The waits between two looks at the ports of starting tasks: short at first (a task
    that listens a moment after its start is seen within ~10 ms, not up to POLL later: a
    fixed POLL is wall time a launch adds to every start), growing to POLL."""
    wait = first
    while True:
        yield wait
        wait = min(wait * factor, cap)


def task_argv(program, task, cluster_spec, program_args):
    """A task's command line: `program`, the task's place in the cluster as tf_cnn_benchmarks
    takes it (--job_name, --task_index, --worker_hosts, --ps_hosts when there are PSs), then
    `program_args`."""
    flags = [
        "--job_name",
        task["job"],
        "--task_index",
        str(task["task_index"]),
        "--worker_hosts",
        ",".join(cluster_spec.get("worker") or []),
    ]
    if cluster_spec.get("ps"):
        flags += ["--ps_hosts", ",".join(cluster_spec["ps"])]
    return list(program) + flags + list(program_args)


def direct_entry(params, check_mode, warn):
    """One call as tf_host_run answers it, for the direct call (launch/direct_call.py)."""
    try:
        return HostRun(params, check_mode, warn).run()
    except TaskError as error:
        return dict(error.result, failed=True, msg=error.msg)


class HostRun(object):
    """One host's tasks of one run, driven through TfTask in one call.

    ``params``: the tf_host_run module's options; ``check_mode``: change nothing; ``warn``: a
    function that takes a warning's text. ``run()`` returns the result of ``params["state"]``
    or raises TaskError (its message, and the result fields).

    Each state is a stage's (``HostCheck``, ``HostStart``, ``HostFinish``, ``HostStop``); what
    they share stays here: the tasks, their names, command lines and TfTask options, the
    TfTask calls (with the supervisors this call started), the controller watch and the
    interrupt it leads to, and the call's result.
    """

    def __init__(self, params, check_mode=False, warn=None):
        self.params = params
        self.check_mode = check_mode
        self.warn = warn if warn is not None else (lambda text: None)
        self.run_dir = os.path.abspath(self.params["run_dir"])
        # The host's run root (every sweep's runs, its sweep markers and its port claims).
        self.run_root = os.path.dirname(self.run_dir)
        self.run_id = self.params["run_id"]
        self.tasks = sorted(self.params["tasks"], key=lambda t: (t["job"] != "ps", t["task_index"]))
        self.started_at = time.time()
        self.watch = None
        # The supervisors this call started, by task name (their Popen objects): a task's
        # state is judged by its wait status, not /proc, which shows nothing of a supervisor
        # for a few ms after its start (TfTask.is_supervisor; issue #19: a worker started
        # last was "gone before port ... was ready", its log empty, at 64 test-bed hosts).
        self.children = {}
        # The stages (below), and the NIC sampler that the start and the stop run beside them.
        self.nic = NicSamplerTask(self)
        self.checking = HostCheck(self)
        self.starting = HostStart(self)
        self.finishing = HostFinish(self)
        self.stopping = HostStop(self)

    # ---- helpers -------------------------------------------------------------------

    def name(self, task):
        return "%s-%s-%d" % (self.params["run_id"], task["job"], task["task_index"])

    def result_file(self, task):
        if task["job"] != "worker" or not self.params["result_flag"]:
            return None
        return os.path.join(self.run_dir, "worker-%d.json" % task["task_index"])

    def argv(self, task):
        result = self.result_file(task)
        extra = [self.params["result_flag"], result] if result else []
        return task_argv(
            self.params["program"], task, self.params["cluster_spec"] or {}, extra + list(self.params["program_args"])
        )

    def task_params(self, task, **extra):
        params = dict(
            name=self.name(task),
            run_dir=self.run_dir,
            port=task["port"],
            ready_host=task["address"],
            grace_period=self.params["grace_period"],
            log_tail_lines=self.params["log_tail_lines"],
        )
        params.update(extra)
        return params

    def task(self, task):
        """A TfTask for inspection (no state is run)."""
        return TfTask(
            self.task_params(task, state="ready"), self.check_mode, self.warn, self.children.get(self.name(task))
        )

    def call(self, params, state, check_mode=False, table=None):
        """Run one TfTask state (with the task's supervisor when this call started it):
        (failed, result); a failed result has ``msg``. ``table``: the process table read
        for this call's starts (TfTask's)."""
        task = TfTask(dict(params, state=state), check_mode, self.warn, self.children.get(params["name"]), table)
        try:
            result = task.run()
        except TaskError as error:
            return True, dict(error.result, msg=error.msg)
        if task.process is not None:
            self.children[task.name] = task.process
        return False, result

    def done(self, **result):
        """The result of this call."""
        return dict(result, elapsed=round(time.time() - self.started_at, 3))

    def fail(self, msg, **result):
        raise TaskError(msg, dict(result, elapsed=round(time.time() - self.started_at, 3)))

    def check_controller(self):
        """Stop every task of the run on this host when the controller went away."""
        if self.watch is not None and self.watch.gone():
            self.interrupt(self.watch.why)

    def interrupt(self, why):
        # SIGTERM to every task's process group first, so that they all end at once, then
        # each task's stop (its grace period, SIGKILL, exit record).
        for task in self.tasks:
            inspector = self.task(task)
            _pids, groups, loners = inspector.processes(inspector.running_supervisor())
            inspector.signal_all(loners, groups, signal.SIGTERM)
        reports = [self.call(self.task_params(task), "stopped")[1] for task in self.tasks]
        if self.tasks:
            self.call(self.nic.task_params(), "stopped")
        stopped = [r["name"] for r in reports if r.get("terminated")]
        self.fail(
            "interrupted: %s; stopped %s" % (why, ", ".join(stopped) or "nothing (no task ran)"),
            changed=bool(stopped),
            interrupted=True,
            failed_at=time.time(),
            tasks=reports,
        )

    @staticmethod
    def any_started(reports):
        # Only a task that this call started is a change: one that already ran is left as it
        # is ("not started again"), so a repeated call reports changed=false.
        return any(report.get("changed") for report in reports)

    # ---- states ----------------------------------------------------------------------

    def checked(self):
        return self.checking.checked()

    def started(self):
        return self.starting.started()

    def finished(self):
        return self.finishing.finished()

    def stopped(self):
        return self.stopping.stopped()

    def wait_all_ready(self, reports):
        """Poll every task's port until all accept (``HostStart.wait_all_ready``)."""
        return self.starting.wait_all_ready(reports)

    def run(self):
        state = self.params["state"]
        if state in ("started", "finished"):
            missing = [o for o in ("cluster_spec", "program") if not self.params[o]]
            if missing:
                self.fail("%s required with state=%s" % (" and ".join(missing), state))
        return getattr(self, state)()


class HostCheck(object):
    """The checked state of a ``HostRun``: whether the run can start on this host.

    Owns the look before anything of the run starts anywhere: the complete marker of a run
    done already (its stored results), the ports (another sweep's claim waited for, a listener
    named), the room on the run directory's disk, the data directory's read rate.
    """

    def __init__(self, host):
        self.host = host

    def checked(self):
        host = self.host
        stored = procfs.read(os.path.join(host.run_dir, COMPLETE_MARKER))
        complete, stored_results = False, None
        if stored is not None:
            try:
                stored_results = json.loads(stored)
                complete = isinstance(stored_results, list)
            except ValueError:
                host.warn("the marker %s/%s is not valid JSON: the run is done again" % (host.run_dir, COMPLETE_MARKER))
        busy = []
        if not complete:
            # Another sweep's run on this host holds its ports from its tasks' start, before they
            # listen (launch/port_claim.py): wait for it to end, up to the ready timeout, then
            # say which run holds the port.
            deadline = time.monotonic() + (0.0 if host.check_mode else host.params["ready_timeout"])
            for task in host.tasks:
                held = port_claim.wait_released(
                    host.run_root, task["address"], task["port"], deadline - time.monotonic(), ignore_run=host.run_id
                )
                if held is not None or _port_open(task["address"], task["port"], 1.0):
                    entry = dict(
                        job=task["job"],
                        task_index=task["task_index"],
                        address=task["address"],
                        port=task["port"],
                        pids=host.task(task).listener_hint(task["port"]),
                    )
                    if held is not None:
                        entry.update(claimed_by=port_claim.describe(held), waited=round(host.params["ready_timeout"]))
                    busy.append(dict(entry, msg=busy_port(entry)))
        result = dict(
            changed=False,
            complete=complete,
            busy=busy,
            # Before anything of the run starts anywhere, as the ports: a disk without room
            # for the run's logs and results would fail it, or lose what it measured, later.
            room_problem=None if complete else room_problem(host.run_dir),
            run_id=host.params["run_id"],
            run_dir=host.run_dir,
        )
        if complete:
            result["stored_results"] = stored_results
        if host.params["data_read_dir"]:
            # Just before the run, not during it (which would slow the run down), in the call
            # the run pays anyway: a task of its own cost every run a module call a host.
            from ..linux import read_throughput

            result["data_read"] = read_throughput.measured(
                host.params["data_read_dir"], files=host.params["data_read_files"], cache=host.params["data_cache"]
            )
        return host.done(**result)


class NicSamplerTask(object):
    """This host's NIC sampler: one more task of the run (nic_sampler.py), in a fork of its
    supervisor.

    Owns the sampler's task (its name and samples file carry the host's first task), its start
    before the host's tasks, which never fails the run, and its stop, which gives this host's
    NIC figures over nic_window. ``host``: the ``HostRun``.
    """

    def __init__(self, host):
        self.host = host

    def tag(self):
        host = self.host
        first = host.tasks[0]
        return "%s-%s-%d" % (NIC_TASK, first["job"], first["task_index"])

    def samples(self):
        host = self.host
        return os.path.join(host.run_dir, "%s.samples" % self.tag())

    def task_params(self, **extra):
        host = self.host
        params = dict(
            name="%s-%s" % (host.params["run_id"], self.tag()),
            run_dir=host.run_dir,
            grace_period=min(host.params["grace_period"], 2.0),
            log_tail_lines=host.params["log_tail_lines"],
        )
        params.update(extra)
        return params

    def start(self, table=None):
        """Start this host's NIC sampler (before its tasks, so that its samples span their
        measured steps). Never fails the run: a sampler that cannot start is a warning, and
        the host's NIC figures are unknown, with why."""
        host = self.host
        interval = host.params["nic_sample_interval"]
        if not interval or host.check_mode or not host.tasks:
            return
        samples = self.samples()
        address, max_runtime = host.tasks[0]["address"], host.params["max_runtime"]
        try:
            if os.path.exists(samples):
                os.unlink(samples)
        except (IOError, OSError) as error:
            host.warn("the NIC sampler cannot be set up in %s: %s" % (host.run_dir, error))
            return

        def sampler():
            return nic_sampler.run(address, samples, interval, max_runtime, parent=os.getppid())

        # What it runs, as its command line would say it (the log, the exit record).
        argv = [
            nic_sampler.PROGRAM_NAME,
            "--address",
            address,
            "--out",
            samples,
            "--interval",
            str(interval),
            "--max-runtime",
            str(max_runtime),
        ]
        failed, result = host.call(
            self.task_params(argv=argv, program=sampler, wait_ready=False, max_runtime=max_runtime),
            "started",
            table=table,
        )
        if failed:
            host.warn("the NIC sampler did not start: %s" % result["msg"])

    def stop(self):
        """Stop the sampler; this host's NIC figures over ``nic_window`` (docs/network.md)."""
        host = self.host
        if not host.params["nic_sample_interval"]:
            return nic_sampler.unknown("the NIC sampler is off (nic_sample_interval=0)")
        if not host.tasks:
            return nic_sampler.unknown("no task of the run on this host")
        failed, result = host.call(self.task_params(), "stopped", host.check_mode)
        if failed:
            host.warn("the NIC sampler did not stop: %s" % result["msg"])
        window = host.params["nic_window"]
        if window is None:
            return nic_sampler.unknown("no measured window was given (the run failed or gave no results)")
        return nic_sampler.host_figures(self.samples(), window)


class HostStart(object):
    """The started state of a ``HostRun`` (and the start of its finished state).

    Owns the start of every task and the wait until every port accepts: the ports claimed
    first (all or none, launch/port_claim.py), one look at the process table for every task's
    leftovers, the NIC sampler started before the tasks; in check mode, what would start.
    """

    def __init__(self, host):
        self.host = host

    def started(self):
        host = self.host
        reports = self.start_and_wait()
        if host.check_mode:
            return self.check_mode_result(reports)
        return host.done(changed=host.any_started(reports), tasks=reports)

    def start_and_wait(self):
        """Start every task and wait until all are ready (in check mode: start nothing)."""
        host = self.host
        host.watch = ControllerWatch()
        reports = self.start_all()
        if not host.check_mode:
            self.wait_all_ready(reports)
        return reports

    def start_all(self):
        """Start every task without waiting; returns the per-task reports."""
        host = self.host
        # One look at the process table for every task's leftovers, not one a task: a look
        # reads every process's environment (three looks a host and run, ~4 ms each with the
        # processes of 16 test-bed hosts).
        table = None if host.check_mode else procfs.table()
        # Every port claimed before anything starts (launch/port_claim.py): a port that another
        # sweep's run holds refuses the start with nothing started.
        claims = {} if host.check_mode else self.claim_all()
        try:
            host.nic.start(table)
            reports = []
            for task in host.tasks:
                params = host.task_params(
                    task,
                    argv=host.argv(task),
                    wait_ready=False,
                    max_runtime=host.params["max_runtime"],
                    ready_timeout=host.params["ready_timeout"],
                    environment=dict(
                        host.params["environment"], CUDA_VISIBLE_DEVICES=task.get("cuda_visible_devices") or ""
                    ),
                )
                if task["job"] == "ps":
                    # A PS never takes a GPU.
                    params["environment"]["CUDA_VISIBLE_DEVICES"] = ""
                claim = claims.get(host.name(task))
                failed, result = host.call(dict(params, port_claim=claim), "started", host.check_mode, table)
                if claim is not None and result.get("pid"):
                    port_claim.name_holder(claim, result["pid"])
                if failed:
                    host.fail(result["msg"], changed=True, failed_at=time.time(), tasks=reports + [result])
                reports.append(result)
            return reports
        finally:
            for claim in claims.values():
                os.close(claim)  # each supervisor holds its copy

    def claim_all(self):
        """{task name: descriptor of its port's claim}, for the supervisors to hold. All or none:
        a port that another run holds lets every claim taken go again, waits for that run to let
        it go (its sweep checked the ports free at the same moment as this one did), and tries
        again, up to the ready timeout; then the start fails, naming the holder, with nothing
        started. Claims are taken in one order (address, port), so two runs that want the same
        ports never each hold one the other waits for. A task of this run that still runs (a
        call again) holds its own: TfTask finds it running.

        Claims are a guard, as the sweep markers are: a run root that is not safe to write in
        (the task's start refuses it, naming why) or a disk that refuses the claim's file (full,
        read-only: the check names the disk) starts the run without them, never fails it."""
        host = self.host
        if unsafe_dir_path(host.run_root, os.geteuid()) is not None:
            return {}
        deadline = time.monotonic() + host.params["ready_timeout"]
        ordered = sorted(host.tasks, key=lambda task: (str(task["address"]), int(task["port"])))
        while True:
            claims, blocked = self.try_claims(ordered)
            if blocked is None:
                return claims
            task, held = blocked
            held = port_claim.wait_released(
                host.run_root, task["address"], task["port"], deadline - time.monotonic(), ignore_run=host.run_id
            )
            if held is not None:
                entry = dict(
                    job=task["job"],
                    task_index=task["task_index"],
                    address=task["address"],
                    port=task["port"],
                    claimed_by=port_claim.describe(held),
                    waited=round(host.params["ready_timeout"]),
                )
                host.fail(busy_port(entry), changed=False, failed_at=time.time())

    def try_claims(self, ordered):
        """({task name: descriptor}, None) with every port claimed that can be, or ({}, (task,
        holder)) for the first port another run holds, with every claim taken let go again."""
        host = self.host
        claims = {}
        try:
            for task in ordered:
                owner = dict(run_id=host.run_id, job=task["job"], task_index=task["task_index"])
                try:
                    descriptor, held = port_claim.take(host.run_root, task["address"], task["port"], owner)
                except OSError as error:
                    host.warn(
                        "port %d on %s is not claimed for %s %d (%s): a sweep started beside this one could take it"
                        % (task["port"], task["address"], task["job"], task["task_index"], error)
                    )
                    continue
                if descriptor is not None:
                    claims[host.name(task)] = descriptor
                elif held.get("run_id") != host.run_id:
                    for taken in claims.values():
                        os.close(taken)
                    return {}, (task, held)
        except BaseException:
            for descriptor in claims.values():
                os.close(descriptor)
            raise
        return claims, None

    def wait_all_ready(self, reports):
        """Poll every task's port until all accept; fail fast on a task that exits first."""
        host = self.host
        deadline = time.time() + host.params["ready_timeout"]
        waiting = list(range(len(host.tasks)))
        polls = ready_polls()
        while waiting:
            for position in list(waiting):
                task = host.tasks[position]
                inspector = host.task(task)
                pid = inspector.read_pid()
                if not inspector.is_supervisor(pid):
                    record = inspector.read_exit(pid) or {}
                    if record.get("rc") == 0 and not record.get("signal"):
                        # Done already (a short program can listen and finish between two
                        # polls): no failure; finished() collects its result.
                        reports[position]["ready"] = True
                        waiting.remove(position)
                        continue
                    # Gone before its port was ready: TfTask's ready phrases it, with the log tail.
                    failed, result = host.call(host.task_params(task, ready_timeout=0), "ready")
                    if failed:
                        record = result.get("exit") or {}
                        host.fail(
                            result["msg"], changed=True, failed_at=record.get("ended") or time.time(), tasks=reports
                        )
                if _port_open(task["address"], task["port"], 0.2):
                    reports[position]["ready"] = True
                    reports[position]["ready_after"] = round(time.time() - host.started_at, 3)
                    waiting.remove(position)
            host.check_controller()
            if waiting and time.time() >= deadline:
                late = ", ".join(
                    "%s %d on %s:%d"
                    % (
                        host.tasks[p]["job"],
                        host.tasks[p]["task_index"],
                        host.tasks[p]["address"],
                        host.tasks[p]["port"],
                    )
                    for p in waiting
                )
                first = host.task(host.tasks[waiting[0]])
                host.fail(
                    first.with_tail(
                        "%s did not accept connections within ready_timeout=%s s" % (late, host.params["ready_timeout"])
                    ),
                    changed=True,
                    failed_at=time.time(),
                    tasks=reports,
                )
            if waiting:
                time.sleep(next(polls))

    def check_mode_result(self, reports):
        # TfTask in check mode starts nothing and says which tasks it would start: those
        # that already run are no change (as without check mode).
        host = self.host
        would = [report["name"] for report in reports if report.get("changed")]
        return host.done(
            changed=bool(would),
            tasks=reports,
            msg="check mode: would start %s" % ", ".join(would) if would else "check mode: every task already runs",
        )


class HostFinish(object):
    """The finished state of a ``HostRun``: the wait for its workers' end.

    Owns what that wait sees of the running tasks (their heartbeats; a program whose end its
    supervisor did not record) and what it makes of an end: the workers' outcomes, a frozen
    task stopped and named, a failure reported with the task of this host that ended first.
    """

    def __init__(self, host):
        self.host = host
        # What the wait saw of each running task: its heartbeat's mtime and when the wait saw
        # it change ({name: (mtime_ns, seen_at)}, on this host's clock: a run directory on a
        # shared file system may carry another clock's mtimes), and since when its program
        # has been a zombie that its supervisor has not recorded ({name: seen_at}).
        self.beats = {}
        self.unrecorded = {}

    def finished(self):
        host = self.host
        if host.params["start"]:
            reports = host.starting.start_and_wait()
            if host.check_mode:
                return host.starting.check_mode_result(reports)
        else:  # started by an earlier state=started call: only wait (see the option start)
            host.watch = ControllerWatch()
            reports = [dict(name=host.name(task), changed=False) for task in host.tasks]
        return self.wait_for_workers(reports)

    def wait_for_workers(self, reports):
        """Wait until every worker has ended (a PS that exits by itself on the way is done);
        the first failure, a frozen task, the controller going away or the timeout fails the
        run. ``reports``: the tasks' reports of the start."""
        host = self.host
        workers = [t for t in host.tasks if t["job"] == "worker"]
        deadline = time.time() + host.params["timeout"]
        outcomes, ps_done = {}, set()
        while len(outcomes) < len(workers):
            stalled, running = [], []
            for task in host.tasks:
                name = host.name(task)
                if name in outcomes or name in ps_done:
                    continue
                inspector = host.task(task)
                pid = inspector.read_pid()
                record = inspector.read_exit(pid)
                if record is None and inspector.is_supervisor(pid):
                    record = self.look_at_running(task, inspector, pid, stalled)
                    if record is None:
                        running.append(pid)
                        continue  # still running
                if task["job"] == "ps" and record is not None and record.get("rc") == 0:
                    ps_done.add(name)  # ours exit by themselves once every worker is done
                    continue
                # Ended: TfTask's finished phrases how, with the result file and log tail.
                failed, result = host.call(
                    host.task_params(task, timeout=0, result_file=host.result_file(task)), "finished"
                )
                if failed:
                    result = self.cause_first(task, result)
                    record = result.get("exit") or {}
                    host.fail(
                        result["msg"],
                        changed=True,
                        failed_at=record.get("ended") or time.time(),
                        tasks=reports,
                        workers=self.worker_reports(workers, outcomes),
                    )
                if task["job"] == "worker":
                    outcomes[name] = result
                else:
                    ps_done.add(name)
            if stalled:
                self.stop_frozen(stalled, reports, workers, outcomes)
            host.check_controller()
            if len(outcomes) < len(workers):
                if time.time() >= deadline:
                    late = [host.name(t) for t in workers if host.name(t) not in outcomes]
                    host.fail(
                        host.task([t for t in workers if host.name(t) in late][0]).with_tail(
                            "%s still run(s) after timeout=%s s" % (", ".join(late), host.params["timeout"])
                        ),
                        changed=True,
                        failed_at=time.time(),
                        tasks=reports,
                        workers=self.worker_reports(workers, outcomes),
                    )
                # A supervisor exits right after it recorded its program's end, and the
                # controller's side hangs up when it goes: both wake this wait at once. The
                # heartbeats, a signal and the timeout are looked at every WAIT_LOOK.
                procfs.wait_for_any_end(running, WAIT_LOOK if procfs.PIDFDS else POLL * 2, host.watch.hang_ups())
        return host.done(
            changed=host.any_started(reports), tasks=reports, workers=self.worker_reports(workers, outcomes)
        )

    def look_at_running(self, task, inspector, pid, stalled):
        """A task whose supervisor runs: the exit record written in place of a supervisor that
        stopped answering after its program ended, else None (the task runs; appended to
        ``stalled`` when its heartbeat stood still for stall_timeout)."""
        host = self.host
        name, now = host.name(task), time.time()
        program, state = inspector.program(pid)
        if state == "Z":
            first = self.unrecorded.setdefault(name, now)
            status = procfs.exit_status(program)
            if now - first < SILENT_SUPERVISOR_GRACE or status is None:
                return None
            return inspector.record_for_silent_supervisor(
                pid,
                program,
                status,
                first,
                "the supervisor (pid %d, state %s) did not record the end of its program (pid %d) within %g s: "
                "recorded by tf_host_run from the program's exit status in /proc"
                % (pid, procfs.state(pid), program, SILENT_SUPERVISOR_GRACE),
            )
        self.unrecorded.pop(name, None)
        if program is None or not host.params["stall_timeout"]:
            return None
        try:
            mtime = os.stat(inspector.heartbeat_file).st_mtime_ns
        except OSError:
            return None  # no heartbeat (yet, or the program keeps none): not judged by it
        seen = self.beats.get(name)
        if seen is None or seen[0] != mtime:
            self.beats[name] = (mtime, now)
        elif now - seen[1] >= host.params["stall_timeout"]:
            stalled.append(dict(task=task, inspector=inspector, program=program, state=state, since=seen[1]))
        return None

    def stop_frozen(self, stalled, reports, workers, outcomes):
        """Stop the tasks whose heartbeat stood still for stall_timeout and fail, naming them as
        the cause: a frozen task cannot end by its own timeouts, and its peers' errors
        (DeadlineExceeded) are only the consequence. failed_at is when their heartbeat last
        moved, before the peers gave up on them."""
        host = self.host
        what = []
        for frozen in stalled:
            doing = ""
            try:
                doing = json.loads(procfs.read(frozen["inspector"].heartbeat_file) or "").get("doing") or ""
            except (ValueError, AttributeError):
                pass
            what.append(
                "task %s is frozen: its heartbeat stood still for %.0f s (stall_timeout=%g s)%s; its program (pid %d) "
                "is %s"
                % (
                    frozen["inspector"].name,
                    time.time() - frozen["since"],
                    host.params["stall_timeout"],
                    ", last at: %s" % doing if doing else "",
                    frozen["program"],
                    FROZEN_STATES.get(frozen["state"], "in state %s" % frozen["state"]),
                )
            )
        stops = [host.call(host.task_params(frozen["task"]), "stopped")[1] for frozen in stalled]
        host.fail(
            stalled[0]["inspector"].with_tail(
                "; ".join(what) + ("; stopped it" if len(stalled) == 1 else "; stopped them")
            ),
            changed=True,
            failed_at=min(frozen["since"] for frozen in stalled),
            frozen=[frozen["inspector"].name for frozen in stalled],
            tasks=reports + stops,
            workers=self.worker_reports(workers, outcomes),
        )

    def cause_first(self, task, result):
        """The failure to report when `task` failed: the task of this host that ended first, with
        `task`'s first line after it ('then: …'). A PS fails when its worker goes away, so a
        failed PS waits up to CAUSE_SLACK s for a worker's exit record (a supervisor that reads
        the kernel log after an OOM kill writes it a little later). So does a worker whose own
        words say it lost a peer (PEER_LOST); a task of this host killed by a signal within
        that time is its cause even when its supervisor, slower on busy cores, recorded the
        end a moment after the worker's."""
        host = self.host
        ended = (result.get("exit") or {}).get("ended") or time.time()
        peer_lost = PEER_LOST in (result.get("msg") or "")
        slack = CAUSE_SLACK if task["job"] == "ps" or peer_lost else 0.0
        deadline = time.time() + slack
        while True:
            earlier = []
            for other in host.tasks:
                inspector = host.task(other)
                record = inspector.read_exit(inspector.read_pid()) if other is not task else None
                if record and (record.get("rc") or record.get("signal")) and record.get("ended"):
                    if record["ended"] < ended + slack:
                        killed = bool(record.get("signal"))
                        earlier.append((record["ended"], other["job"], other["task_index"], killed, other))
            if earlier or time.time() >= deadline:
                break
            time.sleep(POLL)
        killed = [e for e in earlier if e[3]]
        if peer_lost and killed:
            cause = min(killed)[4]
        elif earlier and min(earlier)[0] < ended:
            cause = min(earlier)[4]
        else:
            return result
        failed, cause_result = host.call(
            host.task_params(cause, timeout=0, result_file=host.result_file(cause)), "finished"
        )
        if not failed:
            return result
        return dict(cause_result, msg="%s\nthen: %s" % (cause_result["msg"], result["msg"].splitlines()[0]))

    def worker_reports(self, workers, outcomes):
        host = self.host
        reports = []
        for task in workers:
            outcome = outcomes.get(host.name(task))
            if outcome is None:
                continue
            reports.append(
                dict(
                    task_index=task["task_index"],
                    rc=outcome.get("rc"),
                    signal_name=outcome.get("signal_name"),
                    runtime=outcome.get("runtime"),
                    result=outcome.get("result"),
                    log_tail=outcome.get("log_tail"),
                )
            )
        return reports


class HostStop(object):
    """The stopped state of a ``HostRun``: the run's end on this host.

    Owns the complete marker (written first), the wait for the PSs to exit by themselves (up
    to ps_exit_timeout), which tasks died rather than being stopped, and the stop of every
    task and of the NIC sampler.
    """

    def __init__(self, host):
        self.host = host

    def stopped(self):
        host = self.host
        changed = self.mark_complete()
        self.wait_for_the_ps()
        died = self.died()
        reports, survivors = [], []
        for task in host.tasks:
            failed, result = host.call(host.task_params(task), "stopped", host.check_mode)
            changed = changed or result.get("changed", False)
            reports.append(result)
            if failed:
                survivors.append(result["msg"])
        nic = host.nic.stop()
        if survivors:
            host.fail("; ".join(survivors), changed=changed, tasks=reports, died=died, nic=nic)
        return host.done(changed=changed, tasks=reports, died=died, nic=nic)

    def mark_complete(self):
        """The complete marker, written first: the workers' results are complete whatever the
        PSs do next, and a controller that goes away while they exit (up to ps_exit_timeout)
        leaves a run that a rerun finds complete. Whether that is a change."""
        host = self.host
        params = host.params
        changed = False
        if params["complete_results"] is not None:
            path = os.path.join(host.run_dir, COMPLETE_MARKER)
            content = json.dumps(params["complete_results"], indent=2, sort_keys=True) + "\n"
            # Writing the marker is a change (state=checked reports the run complete from now
            # on), also when there was nothing left to stop; the same marker again is none.
            if procfs.read(path) != content:
                changed = True
                if not host.check_mode:
                    changed = self.write_marker(path, content)
        return changed

    def wait_for_the_ps(self):
        """Up to ps_exit_timeout for the PSs to exit by themselves (once their workers are done)."""
        host = self.host
        ps_tasks = [t for t in host.tasks if t["job"] == "ps"]
        deadline = time.time() + host.params["ps_exit_timeout"]
        # Signals only note that the controller went away: the stop goes on to its end.
        host.watch = ControllerWatch()
        while ps_tasks and time.time() < deadline and not host.watch.gone():
            running = [pid for pid in (host.task(t).running_supervisor() for t in ps_tasks) if pid is not None]
            if not running:
                break
            procfs.wait_for_any_end(running, min(POLL * 2, max(deadline - time.time(), 0)))

    def died(self):
        """The tasks that ended by a signal or a failure before this stop's own, not by a stop
        (but by the dead-man deadline): each one's name, when and how it ended."""
        host = self.host
        died = []
        for task in host.tasks:
            inspector = host.task(task)
            pid = inspector.read_pid()
            record = inspector.read_exit(pid) if pid is not None else None
            # A task this or an earlier stop ended carries the signal its supervisor received
            # (or the stop's own record); one that the dead-man deadline ended died as well.
            stopped_here = record is not None and (record.get("signals_received") or record.get("stopped_by"))
            if (
                record is not None
                and (record.get("signal") or record.get("rc"))
                and (record.get("deadline_exceeded") or not stopped_here)
            ):
                how = supervisor.how_it_ended(record)
                died.append(
                    dict(
                        name=host.name(task),
                        ended=record.get("ended"),
                        msg=inspector.with_tail("task %s %s" % (host.name(task), how)),
                    )
                )
        return died

    def write_marker(self, path, content):
        """Write the complete marker; a disk too full for it is a warning, not a failure: the
        results are already the controller's (``complete_results``), which records the run; the
        marker only spares a rerun of the same run id. Whether it was written."""
        host = self.host
        try:
            write_replacing(path, content)
        except (IOError, OSError) as error:
            if error.errno not in DISK_FULL:
                raise
            host.warn(
                "%s; the run's results reached the controller, which records them, but a rerun of "
                "run %s will not find it complete here and runs it again"
                % (
                    disk_full(host.run_dir, path, error),
                    host.params["run_id"],
                )
            )
            return False
        return True
