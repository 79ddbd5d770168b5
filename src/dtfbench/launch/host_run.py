# -*- coding: utf-8 -*-
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""One host's PSs and workers of one run, in one call: check, start and wait, stop.

A library for the tf_host_run module (library/tf_host_run.py documents the states and what
they return): ``HostRun(params, check_mode, warn).run()`` returns the result of one state or
raises ``TaskError``. Each task is a ``TfTask`` (``task.py``); while it waits, the call
watches for the controller going away and then stops every task of the run on this host.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import signal
import time

from ..linux import procfs
from .controller_watch import ControllerWatch
from .task import POLL, TaskError, TfTask, _port_open

COMPLETE_MARKER = "complete"


def ready_polls(first=0.01, factor=1.5, cap=POLL):
    """The waits between two looks at the ports of starting tasks: short at first (a task
    that listens a moment after its start is seen within ~10 ms, not up to POLL later: a
    fixed POLL is wall time a launch adds to every start), growing to POLL."""
    wait = first
    while True:
        yield wait
        wait = min(wait * factor, cap)


class HostRun(object):
    """One host's tasks of one run, driven through TfTask in one call.

    ``params``: the tf_host_run module's options; ``check_mode``: change nothing; ``warn``: a
    function that takes a warning's text. ``run()`` returns the result of ``params["state"]``
    or raises TaskError (its message, and the result fields).
    """

    def __init__(self, params, check_mode=False, warn=None):
        self.params = params
        self.check_mode = check_mode
        self.warn = warn if warn is not None else (lambda text: None)
        self.run_dir = os.path.abspath(self.params["run_dir"])
        self.tasks = sorted(self.params["tasks"], key=lambda t: (t["job"] != "ps", t["task_index"]))
        self.started_at = time.time()
        self.watch = None
        # The supervisors this call started, by task name (their Popen objects): a task's
        # state is judged by its wait status, not /proc, which shows nothing of a supervisor
        # for a few ms after its start (TfTask.is_supervisor; issue #19: a worker started
        # last was "gone before port ... was ready", its log empty, at 64 test-bed hosts).
        self.children = {}

    # ---- helpers -------------------------------------------------------------------

    def name(self, task):
        return "%s-%s-%d" % (self.params["run_id"], task["job"], task["task_index"])

    def result_file(self, task):
        if task["job"] != "worker" or not self.params["result_flag"]:
            return None
        return os.path.join(self.run_dir, "worker-%d.json" % task["task_index"])

    def argv(self, task):
        spec = self.params["cluster_spec"] or {}
        flags = [
            "--job_name",
            task["job"],
            "--task_index",
            str(task["task_index"]),
            "--worker_hosts",
            ",".join(spec.get("worker") or []),
        ]
        if spec.get("ps"):
            flags += ["--ps_hosts", ",".join(spec["ps"])]
        result = self.result_file(task)
        if result:
            flags += [self.params["result_flag"], result]
        return list(self.params["program"]) + flags + list(self.params["program_args"])

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

    def call(self, params, state, check_mode=False):
        """Run one TfTask state (with the task's supervisor when this call started it):
        (failed, result); a failed result has ``msg``."""
        task = TfTask(dict(params, state=state), check_mode, self.warn, self.children.get(params["name"]))
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
        stopped = [r["name"] for r in reports if r.get("terminated")]
        self.fail(
            "interrupted: %s; stopped %s" % (why, ", ".join(stopped) or "nothing (no task ran)"),
            changed=bool(stopped),
            interrupted=True,
            failed_at=time.time(),
            tasks=reports,
        )

    # ---- checked -------------------------------------------------------------------

    def checked(self):
        stored = procfs.read(os.path.join(self.run_dir, COMPLETE_MARKER))
        complete, stored_results = False, None
        if stored is not None:
            try:
                stored_results = json.loads(stored)
                complete = isinstance(stored_results, list)
            except ValueError:
                self.warn("the marker %s/%s is not valid JSON: the run is done again" % (self.run_dir, COMPLETE_MARKER))
        busy = []
        if not complete:
            for task in self.tasks:
                if _port_open(task["address"], task["port"], 1.0):
                    pids = self.task(task).listener_hint(task["port"])
                    busy.append(
                        dict(
                            job=task["job"],
                            task_index=task["task_index"],
                            address=task["address"],
                            port=task["port"],
                            pids=pids,
                            msg="port %d on %s, wanted by %s %d, is already in use%s"
                            % (
                                task["port"],
                                task["address"],
                                task["job"],
                                task["task_index"],
                                " (listening pids: %s)" % pids if pids else "",
                            ),
                        )
                    )
        result = dict(changed=False, complete=complete, busy=busy, run_id=self.params["run_id"], run_dir=self.run_dir)
        if complete:
            result["stored_results"] = stored_results
        return self.done(**result)

    # ---- started / finished ----------------------------------------------------------

    def start_all(self):
        """Start every task without waiting; returns the per-task reports."""
        reports = []
        for task in self.tasks:
            params = self.task_params(
                task,
                argv=self.argv(task),
                wait_ready=False,
                max_runtime=self.params["max_runtime"],
                ready_timeout=self.params["ready_timeout"],
                environment=dict(
                    self.params["environment"], CUDA_VISIBLE_DEVICES=task.get("cuda_visible_devices") or ""
                ),
            )
            if task["job"] == "ps":
                # A PS never takes a GPU.
                params["environment"]["CUDA_VISIBLE_DEVICES"] = ""
            failed, result = self.call(params, "started", self.check_mode)
            if failed:
                self.fail(result["msg"], changed=True, failed_at=time.time(), tasks=reports + [result])
            reports.append(result)
        return reports

    def wait_all_ready(self, reports):
        """Poll every task's port until all accept; fail fast on a task that exits first."""
        deadline = time.time() + self.params["ready_timeout"]
        waiting = list(range(len(self.tasks)))
        polls = ready_polls()
        while waiting:
            for position in list(waiting):
                task = self.tasks[position]
                inspector = self.task(task)
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
                    failed, result = self.call(self.task_params(task, ready_timeout=0), "ready")
                    if failed:
                        record = result.get("exit") or {}
                        self.fail(
                            result["msg"], changed=True, failed_at=record.get("ended") or time.time(), tasks=reports
                        )
                if _port_open(task["address"], task["port"], 0.2):
                    reports[position]["ready"] = True
                    reports[position]["ready_after"] = round(time.time() - self.started_at, 3)
                    waiting.remove(position)
            self.check_controller()
            if waiting and time.time() >= deadline:
                late = ", ".join(
                    "%s %d on %s:%d"
                    % (
                        self.tasks[p]["job"],
                        self.tasks[p]["task_index"],
                        self.tasks[p]["address"],
                        self.tasks[p]["port"],
                    )
                    for p in waiting
                )
                first = self.task(self.tasks[waiting[0]])
                self.fail(
                    first.with_tail(
                        "%s did not accept connections within ready_timeout=%s s" % (late, self.params["ready_timeout"])
                    ),
                    changed=True,
                    failed_at=time.time(),
                    tasks=reports,
                )
            if waiting:
                time.sleep(next(polls))

    def start_and_wait(self):
        """Start every task and wait until all are ready (in check mode: start nothing)."""
        self.watch = ControllerWatch()
        reports = self.start_all()
        if not self.check_mode:
            self.wait_all_ready(reports)
        return reports

    def check_mode_result(self, reports):
        # TfTask in check mode starts nothing and says which tasks it would start: those
        # that already run are no change (as without check mode).
        would = [report["name"] for report in reports if report.get("changed")]
        return self.done(
            changed=bool(would),
            tasks=reports,
            msg="check mode: would start %s" % ", ".join(would) if would else "check mode: every task already runs",
        )

    def started(self):
        reports = self.start_and_wait()
        if self.check_mode:
            return self.check_mode_result(reports)
        return self.done(changed=self.any_started(reports), tasks=reports)

    def finished(self):
        if self.params["start"]:
            reports = self.start_and_wait()
            if self.check_mode:
                return self.check_mode_result(reports)
        else:  # started by an earlier state=started call: only wait (see the option start)
            self.watch = ControllerWatch()
            reports = [dict(name=self.name(task), changed=False) for task in self.tasks]
        workers = [t for t in self.tasks if t["job"] == "worker"]
        deadline = time.time() + self.params["timeout"]
        outcomes, ps_done = {}, set()
        while len(outcomes) < len(workers):
            for task in self.tasks:
                name = self.name(task)
                if name in outcomes or name in ps_done:
                    continue
                inspector = self.task(task)
                pid = inspector.read_pid()
                record = inspector.read_exit(pid)
                if record is None and inspector.is_supervisor(pid):
                    continue  # still running
                if task["job"] == "ps" and record is not None and record.get("rc") == 0:
                    ps_done.add(name)  # ours exit by themselves once every worker is done
                    continue
                # Ended: TfTask's finished phrases how, with the result file and log tail.
                failed, result = self.call(
                    self.task_params(task, timeout=0, result_file=self.result_file(task)), "finished"
                )
                if failed:
                    record = result.get("exit") or {}
                    self.fail(
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
            self.check_controller()
            if len(outcomes) < len(workers):
                if time.time() >= deadline:
                    late = [self.name(t) for t in workers if self.name(t) not in outcomes]
                    self.fail(
                        self.task([t for t in workers if self.name(t) in late][0]).with_tail(
                            "%s still run(s) after timeout=%s s" % (", ".join(late), self.params["timeout"])
                        ),
                        changed=True,
                        failed_at=time.time(),
                        tasks=reports,
                        workers=self.worker_reports(workers, outcomes),
                    )
                time.sleep(POLL * 2)
        return self.done(
            changed=self.any_started(reports), tasks=reports, workers=self.worker_reports(workers, outcomes)
        )

    @staticmethod
    def any_started(reports):
        # Only a task that this call started is a change: one that already ran is left as it
        # is ("not started again"), so a repeated call reports changed=false.
        return any(report.get("changed") for report in reports)

    def worker_reports(self, workers, outcomes):
        reports = []
        for task in workers:
            outcome = outcomes.get(self.name(task))
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

    # ---- stopped ---------------------------------------------------------------------

    def stopped(self):
        params = self.params
        ps_tasks = [t for t in self.tasks if t["job"] == "ps"]
        deadline = time.time() + params["ps_exit_timeout"]
        # Signals only note that the controller went away: the stop goes on to its end.
        self.watch = ControllerWatch()
        while ps_tasks and time.time() < deadline and not self.watch.gone():
            if not any(self.task(t).running_supervisor() for t in ps_tasks):
                break
            time.sleep(POLL * 2)
        died = []
        for task in self.tasks:
            inspector = self.task(task)
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
                how = (
                    "was killed by %s" % record.get("signal_name")
                    if record.get("signal")
                    else "exited with rc %s" % record.get("rc")
                )
                died.append(
                    dict(
                        name=self.name(task),
                        ended=record.get("ended"),
                        msg=inspector.with_tail("task %s %s" % (self.name(task), how)),
                    )
                )
        changed = False
        if params["complete_results"] is not None:
            path = os.path.join(self.run_dir, COMPLETE_MARKER)
            content = json.dumps(params["complete_results"], indent=2, sort_keys=True) + "\n"
            # Writing the marker is a change (state=checked reports the run complete from now
            # on), also when there was nothing left to stop; the same marker again is none.
            if procfs.read(path) != content:
                changed = True
                if not self.check_mode:
                    tmp = "%s.tmp.%d" % (path, os.getpid())
                    with open(tmp, "w") as handle:
                        handle.write(content)
                    os.rename(tmp, path)
        reports, survivors = [], []
        for task in self.tasks:
            failed, result = self.call(self.task_params(task), "stopped", self.check_mode)
            changed = changed or result.get("changed", False)
            reports.append(result)
            if failed:
                survivors.append(result["msg"])
        if survivors:
            self.fail("; ".join(survivors), changed=changed, tasks=reports, died=died)
        return self.done(changed=changed, tasks=reports, died=died)

    def run(self):
        state = self.params["state"]
        if state in ("started", "finished"):
            missing = [o for o in ("cluster_spec", "program") if not self.params[o]]
            if missing:
                self.fail("%s required with state=%s" % (" and ".join(missing), state))
        return getattr(self, state)()
