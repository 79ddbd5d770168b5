# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""run_record on the controller: one finished run into the results store, in this process.

The store is on the controller and a run's record is a few milliseconds of work: a module
process for it (a fork, AnsiballZ, a Python start and its imports) cost ~0.5 s a run, which
short runs cannot hide (docs/performance.md, P1). The module (library/run_record.py, where the
documentation lives) and this plugin share the argument spec and the code:
src/dtfbench/results/record.py.
"""

from __future__ import annotations

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.adapters.action import ControllerAction
from dtfbench.results.record import ARGUMENT_SPEC, RecordError, record_run


class ActionModule(ControllerAction):
    argument_spec = ARGUMENT_SPEC
    compute = staticmethod(record_run)
    plain_params = True  # as `dtfbench store add` reads a finished run from the playbook's to_json
    errors = (RecordError,)
    result_key = "record"
    shown = True  # the run's record in the play's output, without a debug task a run
