# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""aws_cluster_plan on the controller: check the inputs of an AWS cluster and plan it, in this process.

Planning asks AWS nothing and runs before any host exists. The module
(library/aws_cluster_plan.py, where its documentation lives) and this plugin share the argument
spec and the code: src/dtfbench/plan/aws.py.
"""

from __future__ import annotations

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.adapters.action import ControllerAction
from dtfbench.plan.aws import ARGUMENT_SPEC, PlanError, plan_cluster


class ActionModule(ControllerAction):
    argument_spec = ARGUMENT_SPEC
    compute = staticmethod(plan_cluster)
    errors = (PlanError,)
    result_key = "plan"
