# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""tf_cluster_spec on the controller: the layout without a module process per call.

A sweep's runs come with their layout, computed once by the plan (benchmark_plan), which this
takes as it is (option layout); the tf_cluster role used alone (launch.yml) computes one per
run here, and the Slurm role one on the candidate nodes before it submits a job. The module (library/tf_cluster_spec.py, where its
documentation lives) and this plugin share the argument spec and the code:
src/dtfbench/plan/layout.py. A layout that does not fit is a returned failure, not a raised
one: the Slurm role's failed_when reads its message.
"""

from __future__ import annotations

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.adapters.action import ControllerAction
from dtfbench.plan.layout import ARGUMENT_SPEC, SPEC_OPTIONS, LayoutError, layout_from_params


class ActionModule(ControllerAction):
    argument_spec = ARGUMENT_SPEC
    spec_options = SPEC_OPTIONS
    compute = staticmethod(layout_from_params)
    errors = (LayoutError,)
