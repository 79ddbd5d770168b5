# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
name: dtfbench_patient_poll
type: notification
short_description: Look for the workers' results less often once nothing has happened for a second
description:
  - ansible-playbook's strategy looks for its workers' results every C(internal_poll_interval)
    (5 ms in the project's ansible.cfg) for as long as a task runs. On a run's start-and-wait
    task that is the whole training, and it costs ~1.7% of a core (0.5 CPU-s over 30 s of the
    study's training), on a controller that may share its cores with the run (the test bed, a
    login node; docs/performance.md, P1). With this plugin 0.12 CPU-s.
  - This plugin keeps that interval while things happen (a task starts, a host's result comes)
    and lengthens it to O(interval) once nothing has happened for O(after) seconds, until the
    next event. A short task's results still come within C(internal_poll_interval); the end of
    a task that ran for longer than O(after) is seen at most O(interval) later.
  - One thread of its own sleeps until the quiet time is up; it wakes at most once per
    O(after) seconds.
options:
  after:
    description: Seconds without a task start or a host's result before the interval lengthens.
    type: float
    default: 1.0
    ini:
      - section: callback_dtfbench_patient_poll
        key: after
    env:
      - name: DTFBENCH_PATIENT_POLL_AFTER
  interval:
    description: Seconds between looks for results once it is quiet.
    type: float
    default: 0.05
    ini:
      - section: callback_dtfbench_patient_poll
        key: interval
    env:
      - name: DTFBENCH_PATIENT_POLL_INTERVAL
notes:
  - It sets C(ansible.constants.DEFAULT_INTERNAL_POLL_INTERVAL), which the strategy reads at
    every look (ansible-core 2.21). Where a later ansible-core stops reading it there, the plugin
    changes nothing and the configured interval stays in force.
  - A C(pause) prompt reads its keys at the same interval, while it is quiet 20 keys a second.
"""

import threading
import time

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "dtfbench_patient_poll"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.busy_interval = C.DEFAULT_INTERNAL_POLL_INTERVAL
        self.cond = threading.Condition()
        self.last_event = 0.0
        self.armed = False  # the thread counts down to the quiet interval
        self.quiet = False  # the quiet interval is in force
        self.thread = None

    def set_options(self, *args, **kwargs):
        super().set_options(*args, **kwargs)
        for option in ("after", "interval"):
            value = self.get_option(option)
            if not value > 0:
                raise AnsibleError(
                    f"{self.CALLBACK_NAME}: {option}={value} is not a positive number of seconds: set "
                    f"DTFBENCH_PATIENT_POLL_{option.upper()} or [callback_{self.CALLBACK_NAME}] {option} in "
                    f"ansible.cfg to one (the default: {'1.0' if option == 'after' else '0.05'})"
                )
        self.after = self.get_option("after")
        self.quiet_interval = self.get_option("interval")

    def event(self):
        """A task started or a result came: look often again, and count the quiet time anew."""
        with self.cond:
            self.last_event = time.monotonic()
            if self.quiet:
                C.DEFAULT_INTERNAL_POLL_INTERVAL = self.busy_interval
                self.quiet = False
            if not self.armed:
                self.armed = True
                if self.thread is None:
                    self.thread = threading.Thread(target=self.count_down, name=self.CALLBACK_NAME, daemon=True)
                    self.thread.start()
                else:
                    self.cond.notify()

    def count_down(self):
        with self.cond:
            while True:
                if not self.armed:
                    self.cond.wait()
                    continue
                left = self.last_event + self.after - time.monotonic()
                if left > 0:
                    self.cond.wait(left)
                    continue
                C.DEFAULT_INTERNAL_POLL_INTERVAL = self.quiet_interval
                self.quiet, self.armed = True, False

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.event()

    def v2_playbook_on_handler_task_start(self, task):
        self.event()

    def v2_runner_on_ok(self, result):
        self.event()

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self.event()

    def v2_runner_on_skipped(self, result):
        self.event()

    def v2_runner_on_unreachable(self, result):
        self.event()

    def v2_playbook_on_stats(self, stats):
        with self.cond:
            C.DEFAULT_INTERNAL_POLL_INTERVAL = self.busy_interval
            self.quiet, self.armed = False, False
