# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""tf_cluster_spec on the controller: the layout without a module process per call.

The layout is a pure computation, and a sweep asks for one per run; as a module each call
forks a worker, opens a connection and starts a Python that unpacks the module, for a few
milliseconds of work. The module (library/tf_cluster_spec.py, where its documentation lives)
and this plugin share the argument spec and the code: src/dtfbench/plan/layout.py.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.plan.layout import ARGUMENT_SPEC, LayoutError, layout_from_params


class ActionModule(ActionBase):
    """Validate the arguments with the module's spec, compute the layout here."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        # A failure is returned, not raised, as a module's would be: a raised one would pass
        # over the task's failed_when (the Slurm role reads the message of a layout that
        # does not fit).
        try:
            _, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
            layout = layout_from_params(params)
        except (AnsibleActionFail, LayoutError) as error:
            result.update(failed=True, changed=False, msg=str(error))
            return result
        result.update(changed=False, **layout)
        return result
