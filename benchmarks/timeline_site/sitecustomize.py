"""Loaded by ansible-playbook's Python when benchmarks/task_timeline.py puts this folder on
PYTHONPATH: a line of JSON for each worker (a fork per task and host) when it starts, when its
task's action begins, when it sends its first command to the host and when its result is ready,
into the file named by DTFBENCH_TIMELINE; and once each, when ansible-playbook has imported
Ansible's executor and when its interpreter ends. With DTFBENCH_WORKER_PROFILES (a folder),
each worker also runs under cProfile with a CPU clock and leaves <pid>.prof there. Measurement
only; nothing of the project imports it.
"""

import atexit
import builtins
import json
import os
import sys
import time

LOG = os.environ.get("DTFBENCH_TIMELINE")
PROFILES = os.environ.get("DTFBENCH_WORKER_PROFILES")


def mark(event, **fields):
    with open(LOG, "a") as handle:
        handle.write(json.dumps(dict(fields, time=time.time(), pid=os.getpid(), event=event)) + "\n")


def instrument():
    from ansible.executor import task_executor
    from ansible.executor.process import worker
    from ansible.plugins.action import ActionBase

    run, execute, low_level = (
        worker.WorkerProcess._run,
        task_executor.TaskExecutor._execute,
        ActionBase._low_level_execute_command,
    )

    def timed_run(self, *args, **kwargs):
        mark(
            "worker", host=str(self._host), task=self._task.get_name(), uuid=self._task._uuid, action=self._task.action
        )
        if not PROFILES:
            return run(self, *args, **kwargs)
        # CPU time, not wall: what the worker waits for (the host, ssh) does not count.
        import cProfile

        profile = cProfile.Profile(time.process_time)
        try:
            return profile.runcall(run, self, *args, **kwargs)
        finally:
            profile.dump_stats(os.path.join(PROFILES, "%d.prof" % os.getpid()))

    def timed_execute(self, *args, **kwargs):
        mark("action")
        try:
            return execute(self, *args, **kwargs)
        finally:
            mark("result")

    def timed_low_level(self, *args, **kwargs):
        mark("send")
        return low_level(self, *args, **kwargs)

    worker.WorkerProcess._run = timed_run
    task_executor.TaskExecutor._execute = timed_execute
    ActionBase._low_level_execute_command = timed_low_level


if LOG:
    _import = builtins.__import__

    def _watch(name, *args, **kwargs):
        module = _import(name, *args, **kwargs)
        if name == "ansible.executor.task_queue_manager":
            builtins.__import__ = _import  # once, before the strategy forks its first worker
            mark("imported")  # Ansible's executor is in: the CLI goes on to the inventory and the playbook
            instrument()
        return module

    # Only ansible-playbook's own process logs (its workers are forks and keep LOG); the
    # Pythons it starts (a local module, the interrupt watchdog) neither log nor keep the hook.
    os.environ.pop("DTFBENCH_TIMELINE")
    os.environ.pop("DTFBENCH_WORKER_PROFILES", None)
    if "ansible-playbook" in os.path.basename(sys.argv[0] if sys.argv else ""):
        builtins.__import__ = _watch
        _main = os.getpid()
        # Its interpreter's end (its workers leave by os._exit and run no atexit hooks): the
        # pipes' end would also wait for the interrupt watchdog, which outlives it a moment.
        atexit.register(lambda: os.getpid() == _main and mark("exit"))
