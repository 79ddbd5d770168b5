# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""sweep_cost on the controller: a sweep's predicted cost on EC2, refused above max_cost_usd.

The scaling model needs numpy and scipy, which ansible-playbook's Python has (the project's
.venv) and a target need not: it runs only here. library/sweep_cost.py is its documentation;
the code is src/dtfbench/forecast/cost_guard.py.
"""

from __future__ import annotations

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.adapters.action import ControllerAction
from dtfbench.forecast.cost_guard import ARGUMENT_SPEC, ERRORS, SPEC_OPTIONS, from_params


class ActionModule(ControllerAction):
    argument_spec = ARGUMENT_SPEC
    spec_options = SPEC_OPTIONS
    compute = staticmethod(from_params)
    errors = ERRORS
