# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""aws_cluster_plan on the controller: check the inputs of an AWS cluster and plan it, in this process.

Planning asks AWS nothing and runs before any host exists, so it runs here, as tf_cluster_spec
does, instead of in a module process. The module (library/aws_cluster_plan.py, where its
documentation lives) and this plugin share the argument spec and the code:
src/dtfbench/plan/aws.py.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.plan.aws import ARGUMENT_SPEC, PlanError, build_plan


class ActionModule(ActionBase):
    """Validate the arguments with the module's spec, plan the cluster here."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        # A failure is returned, not raised, as a module's would be (failed_when sees it).
        try:
            _, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
            plan = build_plan(params)
        except (AnsibleActionFail, PlanError) as error:
            result.update(failed=True, changed=False, msg=str(error))
            return result
        result.update(changed=False, plan=plan)
        return result
