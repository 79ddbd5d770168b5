# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""sweep_table on the controller: the table printed after a sweep, in this process.

A command task (`python -m dtfbench report table`) cost a module process, a Python start and
the report's imports, ~1.2 s a sweep (docs/performance.md, P1). The module
(library/sweep_table.py, where the documentation lives) and this plugin share the argument spec
and the code: src/dtfbench/commands/report.py.
"""

from __future__ import annotations

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.adapters.action import ControllerAction
from dtfbench.commands.report import ARGUMENT_SPEC, ERRORS, sweep_table


class ActionModule(ControllerAction):
    argument_spec = ARGUMENT_SPEC
    compute = staticmethod(sweep_table)
    errors = ERRORS
