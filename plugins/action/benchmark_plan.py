# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""benchmark_plan on the controller: validate a sweep and expand it into runs, in this process.

The plan reads the inventory's host list and the results store on the controller and never
touches a node. The module (library/benchmark_plan.py, where its documentation lives) and this
plugin share the argument spec and the code: src/dtfbench/plan/sweep.py, resumed from the store
by src/dtfbench/results/sweep_resume.py.
"""

from __future__ import annotations

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.adapters.action import ControllerAction
from dtfbench.plan.sweep import ARGUMENT_SPEC, PlanError
from dtfbench.results.sweep_resume import plan_from_params


class ActionModule(ControllerAction):
    argument_spec = ARGUMENT_SPEC
    compute = staticmethod(plan_from_params)
    errors = (PlanError,)
