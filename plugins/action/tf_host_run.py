# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""tf_host_run without AnsiballZ: the same call for a fifth of the host's CPU.

Starting a host's tasks costs ~0.03 CPU-s of its own; AnsiballZ would add ~0.17 a call, which
the launch pays once per host and phase. The plugin validates the arguments here with the
module's spec and pipes the stdlib-only launch code to the host's Python
(src/dtfbench/adapters/host_action.py); the module (library/tf_host_run.py, where the
documentation lives) runs the same code, dtfbench.launch.host_run, where that does not apply.
"""

from __future__ import annotations

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.adapters.host_action import HostAction
from dtfbench.launch import direct_call
from dtfbench.launch.host_run_spec import ARGUMENT_SPEC


class ActionModule(HostAction):
    call = "tf_host_run"
    argument_spec = ARGUMENT_SPEC
    direct_call = direct_call
