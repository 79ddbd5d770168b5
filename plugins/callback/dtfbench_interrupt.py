# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
name: dtfbench_interrupt
type: notification
short_description: Stop and record a run when ansible-playbook ends in the middle of it
description:
  - Starts the controller's watchdog (C(python -m dtfbench interrupt watch)) in a session of
    its own, and keeps, in a file only it reads, what the watchdog needs when ansible-playbook
    ends before the run in progress does (Ctrl-C, SIGTERM, SIGKILL, a lost terminal) - the
    hosts whose M(tf_host_run) started the run (from its O(state=checked) call, which comes
    before any start), the run the benchmark role noted (C(benchmark_run_in_progress)), its
    layout, the signal ansible-playbook received, and its command line.
  - The watchdog then stops every task of that run on every host, records the run as
    C(failed) with reason C(interrupted), and prints one line with the command that resumes
    the sweep. A playbook that ends normally leaves it nothing to do.
  - For a run on the Slurm launcher it keeps the run's directory on the login node (the
    slurm_cluster role's C(slurm_cluster_run_dir)) until M(slurm_job) returns, and the watchdog
    cancels that run's job (M(slurm_job) O(state=cancelled)).
  - Every process ansible-playbook starts carries C(DTFBENCH_CONTROLLER=<its pid>), so that
    the ones it leaves behind can be found.
  - For a run with C(background_io) it keeps the node and state file of the background reader
    (C(dtfbench background_read start) prints them) until its stop returns, and the watchdog
    stops that reader.
  - For C(provision-aws.yml) it keeps the cluster the aws_cluster role planned (C(aws_cluster_plan)); an
    interrupt before the playbook ends prints the exact C(teardown-aws.yml) command for it.
  - Off when C(DTFBENCH_INTERRUPT_OFF) is set (the watchdog's own stop playbook).
requirements:
  - the dtfbench package importable by ansible-playbook's Python (the project's .venv)
  - Linux 5.3 or newer (pidfd)
"""

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ansible import context
from ansible.plugins.callback import CallbackBase

MARKER_ENV = "DTFBENCH_CONTROLLER"
OFF_ENV = "DTFBENCH_INTERRUPT_OFF"
STOP_PLAYBOOK = Path(__file__).resolve().parents[2] / "playbooks" / "stop-interrupted.yml"
RUN_FACT = "benchmark_run_in_progress"
# The benchmark role's fact after the sweep's last run is recorded: an interrupt during the
# summary that follows has no run to stop or record, and no sweep to resume.
SWEEP_RECORDED_FACT = "benchmark_sweep_recorded"
# The slurm_cluster role's fact naming the run's directory on the login node: from then on,
# until slurm_job returns the job's final state, an interrupted run has a job to cancel there.
SLURM_RUN_DIR_FACT = "slurm_cluster_run_dir"
# The aws_cluster role's plan of a cluster to launch (its instance type set: provisioning, not teardown).
AWS_PLAN_FACT = "aws_cluster_plan"
# `dtfbench background_read start|stop` prints {"reader": "started"|"stopped", ...} (background_io).
READER_KEY = "reader"
# Options that make no sense for the stop playbook (its tasks are tagged always).
DROPPED_OPTIONS = {"--start-at-task": 1, "--step": 0, "--check": 0, "-C": 0, "--diff": 0, "-D": 0}


def _stop_argv(argv, playbooks):
    """ansible-playbook's own command line for the stop playbook: its options (inventory,
    connection, extra vars), not its playbooks."""
    kept, skip = [], 0
    for arg in argv[1:]:
        if skip:
            skip -= 1
            continue
        if arg in DROPPED_OPTIONS:
            skip = DROPPED_OPTIONS[arg]
            continue
        if arg.startswith("--start-at-task=") or arg in playbooks:
            continue
        kept.append(arg)
    return [sys.executable, argv[0]] + kept + [str(STOP_PLAYBOOK)]


def _reader_said(outcome):
    """What `dtfbench background_read` printed (its JSON), or None for any other command's output."""
    stdout = outcome.get("stdout")
    if not isinstance(stdout, str) or not stdout.startswith("{") or f'"{READER_KEY}"' not in stdout:
        return None
    try:
        said = json.loads(stdout)
    except ValueError:
        return None
    return said if isinstance(said, dict) and said.get(READER_KEY) in ("started", "stopped") else None


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "dtfbench_interrupt"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        self.pid = os.getpid()
        self.watchdog = None
        self.state = {}
        self.state_file = None
        # Host entries not yet in the file: written once per task (at the next task's start,
        # before any host runs it), not on every result - a rewrite per result is O(N) bytes
        # N times a phase (~11 CPU-s a run at 1,024 hosts). Nothing starts a run's tasks on
        # a host before the task that follows its checked call, so the file always names
        # every host that may run them; a signal writes what is pending at once.
        self.pending = False
        if os.environ.get(OFF_ENV):
            return
        os.environ[MARKER_ENV] = str(self.pid)

    # ---- the state file ----------------------------------------------------------------

    def save(self):
        if self.state_file is None:
            return
        self.pending = False
        # Results (a thread of Ansible's) and the signal handler both save: one file each.
        tmp = self.state_file.with_name("%s.tmp.%d" % (self.state_file.name, threading.get_ident()))
        try:
            tmp.write_text(json.dumps(self.state, sort_keys=True, default=str))
            tmp.replace(self.state_file)
        except OSError as error:
            self._display.warning("dtfbench_interrupt: cannot write %s: %s" % (self.state_file, error))

    def start_watchdog(self):
        workdir = Path(tempfile.mkdtemp(prefix="dtfbench-interrupt-"))
        self.state_file = workdir / "state.json"
        playbooks = list(context.CLIARGS.get("args") or [])
        argv = list(sys.argv)
        self.state = dict(argv=argv, cwd=os.getcwd(), hosts={}, stop_argv=_stop_argv(argv, playbooks))
        self.save()
        env = dict(os.environ)
        env.pop(MARKER_ENV, None)
        try:
            self.watchdog = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dtfbench",
                    "interrupt",
                    "watch",
                    "--pid",
                    str(self.pid),
                    "--state",
                    str(self.state_file),
                ],
                # Ansible makes its stdio not inheritable: pass the terminal on explicitly.
                stdin=subprocess.PIPE,
                stdout=sys.__stdout__,
                stderr=sys.__stderr__,
                env=env,
                start_new_session=True,
            )
        except OSError as error:
            self._display.warning(
                "dtfbench_interrupt: no watchdog (%s): an interrupted run is "
                "neither stopped on hosts without a waiting call nor recorded" % error
            )
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            self.wrap(signum)
        atexit.register(self.at_exit)

    def wrap(self, signum):
        """Note the signal in the state, then let Ansible's own handler do what it does."""
        previous = signal.getsignal(signum)

        def handler(number, frame):
            if os.getpid() != self.pid:
                # A worker Ansible has just forked and that has not yet put in its own handler
                # (WorkerProcess._term): Ansible's controller handler would assert here ("can
                # only test a child process"). Die by the signal, as that worker would.
                signal.signal(number, signal.SIG_DFL)
                os.kill(os.getpid(), number)
                return
            if not self.state.get("signal"):
                self.state["signal"] = signal.Signals(number).name
                self.save()
            if self.state.get("sweep_recorded") and not self.state.get("run"):
                # Every run is recorded (the summary): nothing needs Ansible's orderly stop.
                # Its handler raises KeyboardInterrupt wherever the main thread is, and a fork
                # hook or a lock's release swallows it with a traceback ("Exception ignored in
                # ...") while the play goes on. End by the signal itself instead; the watchdog
                # sees the controller gone, ends what it started and says that all is recorded.
                signal.signal(number, signal.SIG_DFL)
                os.kill(os.getpid(), number)
                return
            if callable(previous):
                previous(number, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(number, signal.SIG_DFL)
                os.kill(os.getpid(), number)

        signal.signal(signum, handler)

    def at_exit(self):
        """After Ctrl-C, wait for the watchdog's cleanup, so its line comes before the prompt."""
        if os.getpid() != self.pid or self.watchdog is None or self.state.get("ended"):
            return
        if self.pending:
            self.save()
        if not (
            self.state.get("hosts")
            or self.state.get("slurm")
            or self.state.get("run")
            or self.state.get("sweep_id")
            or self.state.get("provisioning")
        ):
            return
        try:
            self.watchdog.stdin.write(b"!")
            self.watchdog.stdin.flush()
            self.watchdog.wait(timeout=180)
        except (OSError, subprocess.TimeoutExpired, KeyboardInterrupt):
            pass

    # ---- events --------------------------------------------------------------------------

    def v2_playbook_on_start(self, playbook):
        if not os.environ.get(OFF_ENV) and self.watchdog is None and self.state_file is None:
            self.start_watchdog()

    def v2_playbook_on_task_start(self, task, is_conditional):
        if self.pending:
            self.save()

    def v2_playbook_on_handler_task_start(self, task):
        if self.pending:
            self.save()

    def v2_playbook_on_stats(self, stats):
        self.state["ended"] = True
        self.save()

    def v2_runner_on_ok(self, result):
        self.seen(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self.seen(result)

    def seen(self, result):
        if self.state_file is None:
            return
        action = result.task.action or ""
        outcome = result.result if isinstance(result.result, dict) else {}
        facts = outcome.get("ansible_facts") or {}
        changed = False
        if isinstance(facts.get(RUN_FACT), dict):
            run = facts[RUN_FACT]
            self.state.update(run=run, layout=None, hosts={}, slurm={}, sweep_id=run.get("sweep_id"))
            changed = True
        elif isinstance(facts.get(SWEEP_RECORDED_FACT), dict):
            self.state.update(run=None, hosts={}, slurm={}, sweep_recorded=facts[SWEEP_RECORDED_FACT])
            changed = True
        elif isinstance(facts.get(AWS_PLAN_FACT), dict) and facts[AWS_PLAN_FACT].get("instance_type"):
            # provision-aws.yml planned a cluster: from here until the playbook ends, an interrupt may leave
            # instances running, and the watchdog prints their teardown.
            plan = facts[AWS_PLAN_FACT]
            self.state["provisioning"] = dict(cluster_name=plan.get("cluster_name"), region=plan.get("region"))
            changed = True
        elif facts.get(SLURM_RUN_DIR_FACT) and self.state.get("run"):
            host = result.host.get_name()
            self.state.setdefault("slurm", {})[host] = dict(run_dir=facts[SLURM_RUN_DIR_FACT])
            changed = True
        elif action.endswith("slurm_job"):
            # Returned: the job ended (or the module cancelled it on its way out).
            changed = self.state.get("slurm", {}).pop(result.host.get_name(), None) is not None
        elif action.endswith("tf_cluster_spec") and not outcome.get("failed"):
            self.state["layout"] = dict(
                (key, outcome.get(key)) for key in ("cluster_spec", "hosts", "hosts_used", "num_workers", "num_ps")
            )
            changed = True
        elif action.endswith("tf_host_run"):
            # What the host's stop needs: the checked call (before any start) says where the
            # run lives, the layout which tasks the host runs; a stop that returned (a "died"
            # list) leaves nothing there.
            host = result.host.get_name()
            tasks = ((self.state.get("layout") or {}).get("hosts") or {}).get(host)
            if "complete" in outcome and outcome.get("run_dir") and tasks:
                self.state.setdefault("hosts", {})[host] = dict(
                    run_id=outcome["run_id"], run_dir=outcome["run_dir"], tasks=tasks
                )
                self.pending = True
            elif "died" in outcome and not outcome.get("failed"):
                self.pending = self.state.get("hosts", {}).pop(host, None) is not None or self.pending
        elif action.endswith("command") and (said := _reader_said(outcome)):
            # background_io's reader, on the node the task was delegated to: kept until its stop returns.
            node = (outcome.get("_ansible_delegated_vars") or {}).get(
                "ansible_delegated_host"
            ) or result.host.get_name()
            readers = self.state.setdefault("readers", {})
            if said.get(READER_KEY) == "started":
                readers[node] = dict(state=said.get("state"), python=said.get("python"))
            else:
                readers.pop(node, None)
            changed = True
        elif action.endswith("run_record"):
            self.state["run"] = None  # recorded (or its own error shown): nothing to do for it
            changed = True
        if changed:
            self.save()
