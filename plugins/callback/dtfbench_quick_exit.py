# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
name: dtfbench_quick_exit
type: notification
short_description: Spare ansible-playbook's interpreter its last collection of everything it holds
description:
  - When ansible-playbook ends, Python's finalization runs one more garbage collection over every
    object the process still holds (its inventory, variables, plugins, results). After a 3-run
    sweep on 4 test-bed hosts that took 0.1-0.15 s of the 0.18-0.25 s between the last task and
    the process's exit, paid by every playbook run, a sweep's included (docs/performance.md, P1).
  - At the playbook's end (its statistics) this plugin moves every object the collector tracks
    into its permanent generation (C(gc.freeze())), which that last collection skips. The memory
    goes back to the system when the process exits, as it would anyway; what is created after
    (the recap, the cleanup) is collected as before.
notes:
  - Python does not promise to run the finalizers (C(__del__)) of objects in reference cycles
    that are still alive at exit, and after this plugin that last collection runs none of the
    frozen ones. C(atexit) hooks, where Ansible removes its temporary files, run as before.
"""

import gc

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "dtfbench_quick_exit"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_stats(self, stats):
        gc.freeze()
