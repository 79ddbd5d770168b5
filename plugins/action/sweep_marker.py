# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""sweep_marker: the host writes and reads the marks, the controller says whose they are.

The module (library/sweep_marker.py, where the documentation lives) runs on the host; only the
controller knows who runs this sweep (ansible-playbook, the parent of the Ansible worker that
runs this plugin) and whether another mark's ansible-playbook, on this same machine, still
runs. A stale mark (its sweep ended without removing it: a killed controller) is removed with a
second call and left out of ``others``. The host's part is piped to its Python without
AnsiballZ where it can be (src/dtfbench/adapters/host_action.py: ~0.17 CPU-s less a host and
call, twice a sweep). Shared code: dtfbench.launch.sweep_marker.
"""

from __future__ import annotations

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.adapters.host_action import HostAction
from dtfbench.launch import direct_call
from dtfbench.launch.sweep_marker import ARGUMENT_SPEC, controller_identity, stale


class ActionModule(HostAction):
    call = "sweep_marker"
    argument_spec = ARGUMENT_SPEC
    direct_call = direct_call

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(HostAction, self).run(tmp, task_vars)
        controller = controller_identity()
        args = dict(self._task.args, controller=controller)
        try:
            done = self.call_on_host(args, task_vars)
            others = done.get("others") or []
            old = [marker for marker in others if stale(marker, controller)]
            if old and not done.get("failed"):
                args["remove"] = [marker["file"] for marker in old]
                done = self.call_on_host(args, task_vars)
                others = [marker for marker in done.get("others") or [] if not stale(marker, controller)]
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(done)
        if "others" in done:
            host = task_vars.get("inventory_hostname")
            result.update(others=[dict(marker, host=host) for marker in others], stale=old)
        return result
