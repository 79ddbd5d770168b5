# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""network_record on the controller: the sweep's network document into the results store, in
this process.

A command task (`python -m dtfbench netprobe record`) cost a module process, a Python start and
dtfbench's imports, ~0.5 s a sweep, for milliseconds of work (docs/performance.md, P1). The
module (library/network_record.py, where the documentation lives) and this plugin share the
argument spec and the code: src/dtfbench/results/netprobe.py.
"""

from __future__ import annotations

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.adapters.action import ControllerAction
from dtfbench.results.netprobe import ARGUMENT_SPEC, record_probe


class ActionModule(ControllerAction):
    argument_spec = ARGUMENT_SPEC
    compute = staticmethod(record_probe)
    errors = (ValueError,)  # a bad document, or the store's StoreError
    plain_params = True  # the document is stored as the command line's JSON would give it
