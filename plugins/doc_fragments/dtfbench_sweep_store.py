# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""The two options that name one sweep in the results store, documented once.

network_record and sweep_table both read or write one sweep's part of the store, with these two
options required and meaning the same. Referenced as
``extends_documentation_fragment: [dtfbench_sweep_store]`` (ansible.cfg: doc_fragment_plugins).
run_record's results_db has a default (the project's store), so it documents its own.
"""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  results_db:
    description: The results store (SQLite).
    type: str
    required: true
  sweep_id:
    description: The sweep, by its id in the store.
    type: str
    required: true
"""
