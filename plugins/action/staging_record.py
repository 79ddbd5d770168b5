# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""staging_record on the controller: each node's staging of the dataset into the results store,
in this process (as network_record: no module process for milliseconds of work). The module
(library/staging_record.py, where the documentation lives) and this plugin share the argument
spec and the code: src/dtfbench/results/staging.py.
"""

from __future__ import annotations

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.adapters.action import ControllerAction
from dtfbench.results.staging import ARGUMENT_SPEC, record_stagings


class ActionModule(ControllerAction):
    argument_spec = ARGUMENT_SPEC
    compute = staticmethod(record_stagings)
    errors = (ValueError,)  # a report without its figures, or the store's StoreError
    plain_params = True  # the reports are stored as the nodes gave them
    shown = True  # what the staging cost in the play's output, without a debug task after it
