#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)

from __future__ import absolute_import, division, print_function

DOCUMENTATION = r"""
---
module: tf_host_run
short_description: Run one host's part of a TensorFlow cluster run in one call per phase
description:
  - Drives all the tasks (parameter servers and workers) that one host runs in one run of a
    cluster layout (M(tf_cluster_spec)'s C(hosts[<host>])), with the process model of
    M(tf_task) (a supervisor per task, exit status recorded, clean stopping), in three calls
    instead of a dozen M(tf_task) calls per host - on a controller that fans out to many
    hosts, each module call costs CPU on both sides, so the number of calls per run is what
    the orchestration overhead scales with.
  - O(state=checked) changes nothing. It reports whether this host's part of the run
    already completed (the C(<run_dir>/complete) marker that O(state=stopped) writes, with
    the stored worker results) and which of the host's ports already accept connections
    (another program, or a stale task, holds them). The caller decides, across hosts, that
    no host starts anything while any port is taken.
  - O(state=started) starts every task of the host at once (parameter servers first, no
    waiting in between - a worker waits for its parameter servers itself) and returns once
    every task accepts connections on its port. It fails fast, with the log tail, when a
    task exits before its port is ready, and after O(ready_timeout). A task that already
    runs is not started again.
  - O(state=finished) does what O(state=started) does, then waits until every worker of the
    host has exited (or O(timeout) passes) and returns each worker's exit status and result
    file. It fails at the first failure it sees - a worker that exits non-zero or is
    killed, or a parameter server of this host that dies while its workers run - with that
    task's message and the time it ended (C(failed_at)), so that the caller can tell the
    cause of a failed run from its consequences on other hosts. A host with no workers
    returns once its parameter servers listen.
  - O(state=stopped) gives the parameter servers up to O(ps_exit_timeout) to exit by
    themselves (ours do once every worker is done), writes the C(complete) marker when
    O(complete_results) is given, then stops every task of the host (SIGTERM to each task's
    process group, SIGKILL after O(grace_period)). It reports the tasks that had ended by
    themselves with a failure before they were stopped (C(died)), which names a parameter
    server that died on a host without workers.
  - While O(state=started) and O(state=finished) wait, they watch the controller that waits on
    them. When it goes away - SIGINT, SIGTERM or SIGHUP to this process (Ctrl-C reaches a
    local connection's module that way), or the hang-up of the module's standard output (a
    closed SSH channel, a dead Ansible worker) - every task of the host is stopped at once
    and the call fails with C(interrupted). O(state=stopped) then skips the rest of its wait
    for the parameter servers, and completes the stop.
version_added: "0.3.0"
author:
  - dtfbench developers
options:
  state:
    description: The phase of the run to carry out on this host.
    type: str
    choices: [checked, started, finished, stopped]
    required: true
  run_id:
    description: The run's id; a task's name is C(<run_id>-<job>-<task_index>).
    type: str
    required: true
  run_dir:
    description: This run's directory on the host (pid, log, exit and result files, the marker).
    type: path
    required: true
  tasks:
    description:
      - This host's tasks, as M(tf_cluster_spec) returns them in C(hosts[<host>]).
    type: list
    elements: dict
    required: true
    suboptions:
      job:
        description: C(ps) or C(worker).
        type: str
        required: true
        choices: [ps, worker]
      task_index:
        description: The task's index in its job.
        type: int
        required: true
      address:
        description: The address the task listens on (the host's private address).
        type: str
        required: true
      port:
        description: The task's TCP port.
        type: int
        required: true
      cuda_visible_devices:
        description: The task's C(CUDA_VISIBLE_DEVICES) (empty for a parameter server).
        type: str
        default: ""
      host:
        description: The inventory host (as M(tf_cluster_spec) returns it; not used).
        type: str
      endpoint:
        description: C(address:port) (as M(tf_cluster_spec) returns it; not used).
        type: str
      num_devices:
        description: Devices of the task (as M(tf_cluster_spec) returns it; not used).
        type: int
      device_type:
        description: C(gpu) or C(cpu) (as M(tf_cluster_spec) returns it; not used).
        type: str
  cluster_spec:
    description:
      - "The run's cluster, C({ps: [host:port, ...], worker: [host:port, ...]}), passed to every
        task as C(--ps_hosts) and C(--worker_hosts) with C(--job_name) and C(--task_index)."
      - Required with O(state=started) and O(state=finished).
    type: dict
  program:
    description:
      - The program to run, as an argv prefix (for example C([python, -m, dtfbench.train])); the
        cluster flags, the result flag and O(program_args) follow it.
      - Required with O(state=started) and O(state=finished).
    type: list
    elements: str
  program_args:
    description: Arguments after the cluster flags, the same for every task.
    type: list
    elements: str
    default: []
  result_flag:
    description:
      - The program's flag that names a worker's JSON result file (for example
        C(--result_file)); the module passes C(<run_dir>/worker-<index>.json) with it and reads
        the file back. Empty - the program writes no result file.
    type: str
    default: ""
  environment:
    description: Environment variables for every task (C(CUDA_VISIBLE_DEVICES) comes from O(tasks)).
    type: dict
    default: {}
  ready_timeout:
    description: Seconds every task gets to accept connections on its port.
    type: float
    default: 180.0
  timeout:
    description: Seconds the workers get to finish, counted after they are ready (O(state=finished)).
    type: float
    default: 1800.0
  ps_exit_timeout:
    description: Seconds the parameter servers get to exit by themselves before they are stopped (O(state=stopped)).
    type: float
    default: 0.0
  grace_period:
    description: Seconds between SIGTERM and SIGKILL when a task is stopped.
    type: float
    default: 10.0
  max_runtime:
    description:
      - The dead-man deadline of each task's supervisor (see M(tf_task)); 0 for none.
    type: float
    default: 0.0
  start:
    description:
      - With O(state=finished), C(false) starts nothing and waits for the tasks that an
        earlier O(state=started) call of the same run started; a task that ended meanwhile
        is collected (its exit status and result), not started again, and one that was never
        started is a failure.
      - For a run on more hosts than Ansible's C(forks), as the tf_cluster role does then. A
        O(state=finished) call holds its fork until the host's workers end, and the workers
        wait for every other worker at TF's start barrier, so the hosts beyond the first
        C(forks) would not start before the barrier gives up. Starting every host first
        (O(state=started) returns once its tasks listen) and then waiting avoids that.
    type: bool
    default: true
  complete_results:
    description:
      - With O(state=stopped), mark this host's part of the run complete, storing these worker
        results in C(<run_dir>/complete) for O(state=checked) to give back. Omit it when the
        host's part failed.
    type: list
    elements: raw
  log_tail_lines:
    description: How many lines of a failed task's log a message quotes.
    type: int
    default: 40
notes:
  - Supports check mode. O(state=checked) reports as always; the other states only report
    what they would do.
seealso:
  - module: tf_task
  - module: tf_cluster_spec
"""

EXAMPLES = r"""
- name: Check this host's part of the run
  tf_host_run:
    state: checked
    run_id: "{{ run_id }}"
    run_dir: "/tmp/dtfbench/runs/{{ run_id }}"
    tasks: "{{ layout.hosts[inventory_hostname] }}"
  register: check

- name: Start this host's tasks and wait for its workers
  tf_host_run:
    state: finished
    run_id: "{{ run_id }}"
    run_dir: "/tmp/dtfbench/runs/{{ run_id }}"
    tasks: "{{ layout.hosts[inventory_hostname] }}"
    cluster_spec: "{{ layout.cluster_spec }}"
    program: ["{{ dtfbench_python }}", -m, dtfbench.train]
    program_args: [--model, trivial, --num_batches, "100"]
    result_flag: --result_file
    timeout: 1800
  register: host_run

- name: Stop this host's tasks and mark its part complete
  tf_host_run:
    state: stopped
    run_id: "{{ run_id }}"
    run_dir: "/tmp/dtfbench/runs/{{ run_id }}"
    tasks: "{{ layout.hosts[inventory_hostname] }}"
    ps_exit_timeout: 60
    complete_results: "{{ host_run.workers | map(attribute='result') | list }}"
"""

RETURN = r"""
complete:
  description: Whether this host's part of the run completed earlier (the marker exists).
  returned: when O(state=checked)
  type: bool
stored_results:
  description: The worker results stored in the marker when it was written.
  returned: when O(state=checked) and C(complete) is true
  type: list
  elements: raw
run_dir:
  description:
    - The run directory (absolute), and O(run_id), for a controller that has to stop the run
      later (the callback plugin C(dtfbench_interrupt)).
  returned: when O(state=checked)
  type: str
run_id:
  description: O(run_id).
  returned: when O(state=checked)
  type: str
busy:
  description: The host's ports that already accept connections, one entry per task.
  returned: when O(state=checked)
  type: list
  elements: dict
  contains:
    job:
      description: The task's job.
      type: str
    task_index:
      description: The task's index.
      type: int
    address:
      description: The address probed.
      type: str
    port:
      description: The port that is taken.
      type: int
    pids:
      description: Pids that listen on the port (best effort).
      type: list
      elements: int
    msg:
      description: One line naming the port, the task that wants it and who holds it.
      type: str
tasks:
  description: Per task, what the phase did (name, pid, ready, started, ended exit record).
  returned: when O(state=started), O(state=finished) or O(state=stopped)
  type: list
  elements: dict
workers:
  description:
    - Per worker of this host, in task order - C(task_index), C(rc), C(signal_name),
      C(runtime), C(result) (the parsed result file, or null) and C(log_tail).
  returned: when O(state=finished)
  type: list
  elements: dict
failed_at:
  description: When the failed task ended (seconds since the epoch), or when the failure was seen.
  returned: failure of O(state=started) or O(state=finished)
  type: float
interrupted:
  description: True when the call stopped the host's tasks because the controller went away.
  returned: failure of O(state=started) or O(state=finished) for that reason
  type: bool
died:
  description:
    - Tasks that had ended by themselves with a non-zero exit or a signal before
      O(state=stopped) stopped the rest - C(name), C(msg), C(ended).
  returned: when O(state=stopped)
  type: list
  elements: dict
"""

import json
import os
import select
import signal
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.launch.task import POLL, TfTask, TaskCall, _port_open, call
from ansible.module_utils.dtfbench.linux.procfs import read as _read

COMPLETE_MARKER = "complete"
INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class ControllerWatch(object):
    """Whether the controller that waits on this module call went away.

    Two signs, checked at every poll of the waiting phases: a signal (Ctrl-C or SIGTERM that
    ansible-playbook passes on to its worker's process group, which holds this process on a
    local connection; SIGHUP), and the hang-up of our standard output - the pipe to sshd (or,
    on a local connection, to the Ansible worker) is closed once the controller's side of
    the connection is gone, which is all a remote host ever learns of a dead controller.
    """

    def __init__(self):
        self.why = None
        self.poller = None
        try:
            self.poller = select.poll()
            self.poller.register(1, 0)  # POLLERR/POLLHUP are always reported
        except (OSError, ValueError):
            self.poller = None
        for signum in INTERRUPT_SIGNALS:
            signal.signal(signum, self.note)

    def note(self, signum, frame):
        if self.why is None:
            self.why = "%s to the module" % signal.Signals(signum).name

    def gone(self):
        if self.why is None and self.poller is not None:
            for _fd, event in self.poller.poll(0):
                if event & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    self.why = "the controller's connection was closed"
        return self.why


class Interrupted(Exception):
    """The controller went away while this call waited."""


class HostRun(object):
    """One host's tasks of one run, driven through TfTask in one module call."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.run_dir = os.path.abspath(self.params["run_dir"])
        self.warnings = []
        self.tasks = sorted(self.params["tasks"], key=lambda t: (t["job"] != "ps", t["task_index"]))
        self.started_at = time.time()
        self.watch = None

    # ---- helpers -------------------------------------------------------------------

    def name(self, task):
        return "%s-%s-%d" % (self.params["run_id"], task["job"], task["task_index"])

    def result_file(self, task):
        if task["job"] != "worker" or not self.params["result_flag"]:
            return None
        return os.path.join(self.run_dir, "worker-%d.json" % task["task_index"])

    def argv(self, task):
        spec = self.params["cluster_spec"] or {}
        flags = ["--job_name", task["job"], "--task_index", str(task["task_index"]),
                 "--worker_hosts", ",".join(spec.get("worker") or [])]
        if spec.get("ps"):
            flags += ["--ps_hosts", ",".join(spec["ps"])]
        result = self.result_file(task)
        if result:
            flags += [self.params["result_flag"], result]
        return list(self.params["program"]) + flags + list(self.params["program_args"])

    def task_params(self, task, **extra):
        params = dict(name=self.name(task), run_dir=self.run_dir, port=task["port"],
                      ready_host=task["address"], grace_period=self.params["grace_period"],
                      log_tail_lines=self.params["log_tail_lines"])
        params.update(extra)
        return params

    def task(self, task):
        """A TfTask for inspection (no state is run)."""
        return TfTask(TaskCall(self.task_params(task, state="ready"), self.module.check_mode, self.warnings))

    def pass_warnings(self):
        for text in self.warnings:
            self.module.warn(text)
        self.warnings = []

    def exit_json(self, **result):
        self.pass_warnings()
        self.module.exit_json(elapsed=round(time.time() - self.started_at, 3), **result)

    def fail_json(self, msg, **result):
        self.pass_warnings()
        self.module.fail_json(msg=msg, elapsed=round(time.time() - self.started_at, 3), **result)

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
        reports = [call(self.task_params(task), False, self.warnings, "stopped")[1] for task in self.tasks]
        stopped = [r["name"] for r in reports if r.get("terminated")]
        try:
            self.fail_json("interrupted: %s; stopped %s" % (why, ", ".join(stopped) or "nothing (no task ran)"),
                           changed=bool(stopped), interrupted=True, failed_at=time.time(), tasks=reports)
        except (IOError, OSError):
            os._exit(1)  # nobody reads our result any more

    # ---- checked -------------------------------------------------------------------

    def checked(self):
        stored = _read(os.path.join(self.run_dir, COMPLETE_MARKER))
        complete, stored_results = False, None
        if stored is not None:
            try:
                stored_results = json.loads(stored)
                complete = isinstance(stored_results, list)
            except ValueError:
                self.warnings.append("the marker %s/%s is not valid JSON: the run is done again"
                                     % (self.run_dir, COMPLETE_MARKER))
        busy = []
        if not complete:
            for task in self.tasks:
                if _port_open(task["address"], task["port"], 1.0):
                    pids = self.task(task).listener_hint(task["port"])
                    busy.append(dict(
                        job=task["job"], task_index=task["task_index"], address=task["address"],
                        port=task["port"], pids=pids,
                        msg="port %d on %s, wanted by %s %d, is already in use%s"
                            % (task["port"], task["address"], task["job"], task["task_index"],
                               " (listening pids: %s)" % pids if pids else "")))
        result = dict(changed=False, complete=complete, busy=busy, run_id=self.params["run_id"],
                      run_dir=self.run_dir)
        if complete:
            result["stored_results"] = stored_results
        self.exit_json(**result)

    # ---- started / finished ----------------------------------------------------------

    def start_all(self):
        """Start every task without waiting; returns the per-task reports."""
        reports = []
        for task in self.tasks:
            params = self.task_params(
                task, argv=self.argv(task), wait_ready=False, max_runtime=self.params["max_runtime"],
                ready_timeout=self.params["ready_timeout"],
                environment=dict(self.params["environment"],
                                 CUDA_VISIBLE_DEVICES=task.get("cuda_visible_devices") or ""))
            if task["job"] == "ps":
                # A PS never takes a GPU.
                params["environment"]["CUDA_VISIBLE_DEVICES"] = ""
            failed, result = call(params, self.module.check_mode, self.warnings, "started")
            if failed:
                self.fail_json(result["msg"], changed=True, failed_at=time.time(), tasks=reports + [result])
            reports.append(result)
        return reports

    def wait_all_ready(self, reports):
        """Poll every task's port until all accept; fail fast on a task that exits first."""
        deadline = time.time() + self.params["ready_timeout"]
        waiting = list(range(len(self.tasks)))
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
                    failed, result = call(self.task_params(task, ready_timeout=0), False, self.warnings, "ready")
                    if failed:
                        record = result.get("exit") or {}
                        self.fail_json(result["msg"], changed=True, failed_at=record.get("ended") or time.time(),
                                       tasks=reports)
                if _port_open(task["address"], task["port"], 0.2):
                    reports[position]["ready"] = True
                    reports[position]["ready_after"] = round(time.time() - self.started_at, 3)
                    waiting.remove(position)
            self.check_controller()
            if waiting and time.time() >= deadline:
                late = ", ".join("%s %d on %s:%d" % (self.tasks[p]["job"], self.tasks[p]["task_index"],
                                                     self.tasks[p]["address"], self.tasks[p]["port"])
                                 for p in waiting)
                first = self.task(self.tasks[waiting[0]])
                self.fail_json(first.with_tail("%s did not accept connections within ready_timeout=%s s"
                                               % (late, self.params["ready_timeout"])),
                               changed=True, failed_at=time.time(), tasks=reports)
            if waiting:
                time.sleep(POLL)

    def started(self):
        self.watch = ControllerWatch()
        reports = self.start_all()
        if self.module.check_mode:
            # TfTask in check mode starts nothing and says which tasks it would start: those
            # that already run are no change (as without check mode).
            would = [report["name"] for report in reports if report.get("changed")]
            self.exit_json(changed=bool(would), tasks=reports,
                           msg="check mode: would start %s" % ", ".join(would) if would
                           else "check mode: every task already runs")
        self.wait_all_ready(reports)
        return reports

    def finished(self):
        if self.params["start"]:
            reports = self.started()
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
                failed, result = call(self.task_params(task, timeout=0, result_file=self.result_file(task)),
                                      False, self.warnings, "finished")
                if failed:
                    record = result.get("exit") or {}
                    self.fail_json(result["msg"], changed=True, failed_at=record.get("ended") or time.time(),
                                   tasks=reports, workers=self.worker_reports(workers, outcomes))
                if task["job"] == "worker":
                    outcomes[name] = result
                else:
                    ps_done.add(name)
            self.check_controller()
            if len(outcomes) < len(workers):
                if time.time() >= deadline:
                    late = [self.name(t) for t in workers if self.name(t) not in outcomes]
                    self.fail_json(self.task([t for t in workers if self.name(t) in late][0]).with_tail(
                        "%s still run(s) after timeout=%s s" % (", ".join(late), self.params["timeout"])),
                        changed=True, failed_at=time.time(), tasks=reports,
                        workers=self.worker_reports(workers, outcomes))
                time.sleep(POLL * 2)
        self.exit_json(changed=self.any_started(reports), tasks=reports,
                       workers=self.worker_reports(workers, outcomes))

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
            reports.append(dict(task_index=task["task_index"], rc=outcome.get("rc"),
                                signal_name=outcome.get("signal_name"), runtime=outcome.get("runtime"),
                                result=outcome.get("result"), log_tail=outcome.get("log_tail")))
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
            if record is not None and (record.get("signal") or record.get("rc")) \
                    and (record.get("deadline_exceeded") or not stopped_here):
                how = ("was killed by %s" % record.get("signal_name") if record.get("signal")
                       else "exited with rc %s" % record.get("rc"))
                died.append(dict(name=self.name(task), ended=record.get("ended"),
                                 msg=inspector.with_tail("task %s %s" % (self.name(task), how))))
        changed = False
        if params["complete_results"] is not None:
            path = os.path.join(self.run_dir, COMPLETE_MARKER)
            content = json.dumps(params["complete_results"], indent=2, sort_keys=True) + "\n"
            # Writing the marker is a change (state=checked reports the run complete from now
            # on), also when there was nothing left to stop; the same marker again is none.
            if _read(path) != content:
                changed = True
                if not self.module.check_mode:
                    tmp = "%s.tmp.%d" % (path, os.getpid())
                    with open(tmp, "w") as handle:
                        handle.write(content)
                    os.rename(tmp, path)
        reports, survivors = [], []
        for task in self.tasks:
            failed, result = call(self.task_params(task), self.module.check_mode, self.warnings, "stopped")
            changed = changed or result.get("changed", False)
            reports.append(result)
            if failed:
                survivors.append(result["msg"])
        if survivors:
            self.fail_json("; ".join(survivors), changed=changed, tasks=reports, died=died)
        self.exit_json(changed=changed, tasks=reports, died=died)

    def run(self):
        state = self.params["state"]
        if state in ("started", "finished"):
            missing = [o for o in ("cluster_spec", "program") if not self.params[o]]
            if missing:
                self.fail_json("%s required with state=%s" % (" and ".join(missing), state))
        if state == "started":
            reports = self.started()
            self.exit_json(changed=self.any_started(reports), tasks=reports)
        getattr(self, state)()


def main():
    task_spec = dict(job=dict(type="str", required=True, choices=["ps", "worker"]),
                     task_index=dict(type="int", required=True),
                     address=dict(type="str", required=True),
                     port=dict(type="int", required=True),
                     cuda_visible_devices=dict(type="str", default=""),
                     # The rest of what tf_cluster_spec returns per task; not used here.
                     host=dict(type="str"), endpoint=dict(type="str"),
                     num_devices=dict(type="int"), device_type=dict(type="str"))
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", required=True, choices=["checked", "started", "finished", "stopped"]),
            run_id=dict(type="str", required=True),
            run_dir=dict(type="path", required=True),
            tasks=dict(type="list", elements="dict", required=True, options=task_spec),
            cluster_spec=dict(type="dict"),
            program=dict(type="list", elements="str"),
            program_args=dict(type="list", elements="str", default=[]),
            result_flag=dict(type="str", default=""),
            environment=dict(type="dict", default={}),
            ready_timeout=dict(type="float", default=180.0),
            timeout=dict(type="float", default=1800.0),
            ps_exit_timeout=dict(type="float", default=0.0),
            grace_period=dict(type="float", default=10.0),
            max_runtime=dict(type="float", default=0.0),
            start=dict(type="bool", default=True),
            complete_results=dict(type="list", elements="raw"),
            log_tail_lines=dict(type="int", default=40),
        ),
        supports_check_mode=True)
    HostRun(module).run()


if __name__ == "__main__":
    main()
