# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
name: cpu_per_task
type: aggregate
short_description: The controller's CPU-seconds per task (for benchmarks/controller_scaling.py)
description:
  - At each task's start and at the end of the play, the CPU time of ansible-playbook and of
    the children it has reaped (its forks, with the SSH clients they waited for) is read; the
    difference between two reads is the CPU the controller spent on that task. Written as
    JSON to the file named by C(DTFBENCH_CPU_PER_TASK) (a list of [task name, CPU-seconds]).
  - A worker is reaped when Ansible next looks at its slot, so a little of a task's cost may
    land on the next one.
"""

import json
import os
import resource

from ansible.plugins.callback import CallbackBase


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cpu_per_task"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        self.path = os.environ.get("DTFBENCH_CPU_PER_TASK")
        self.rows = []
        self.current = "(start)"
        self.mark = _cpu()

    def _next(self, name):
        now = _cpu()
        self.rows.append([self.current, round(now - self.mark, 4)])
        self.current, self.mark = name, now

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._next(task.get_name().strip())

    def v2_playbook_on_stats(self, stats):
        self._next("(end)")
        if self.path:
            with open(self.path, "w") as handle:
                json.dump(self.rows, handle)
