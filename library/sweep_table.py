#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sweep_table
short_description: The table of one sweep's runs from the results store
description:
  - The per-configuration table that run-benchmark.yml shows after a sweep (runs, images/sec
    per worker and in total with its 95% interval, speedup, efficiency, the NICs' bytes and
    what bounds the step), then the forecast's section (predicted beside measured, what an
    adaptive sweep skipped).
  - Read-only; a store that is missing, damaged or without the sweep's runs fails with one line
    naming it.
  - Runs on the controller (plugins/action/sweep_table.py, in ansible-playbook's own process).
    C(python -m dtfbench report table --db DB --sweep-id ID) prints the same text.
version_added: "0.1.0"
author: dtfbench developers
requirements:
  - dtfbench installed in the Python that runs it (the controller's, C(make setup))
extends_documentation_fragment:
  - dtfbench_sweep_store
"""

EXAMPLES = r"""
- name: Summarise the sweep from the results store
  sweep_table:
    results_db: results/results.sqlite
    sweep_id: "{{ benchmark_plan_result.sweep_id }}"
  run_once: true
  delegate_to: localhost
  register: summary

- name: Show it
  ansible.builtin.debug:
    msg: "{{ summary.table }}"
"""

RETURN = r"""
table:
  description: The table, and the forecast's section after a blank line where it has one.
  returned: success
  type: str
  sample: "system  model  data  gpus  workers  ps  variable_update  runs  img/s/worker ..."
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.adapters.calls import module_main

# The report needs numpy and scipy, so it is not among the standard-library-only subpackages that
# module_utils/ ships: the module imports the installed package (the controller's Python).
from dtfbench.commands.report import ARGUMENT_SPEC, ERRORS, sweep_table


# plugins/action/sweep_table.py answers on the controller without a module process (the
# project's ansible.cfg enables it); this module is what runs elsewhere.
def main():
    module_main(AnsibleModule, ARGUMENT_SPEC, sweep_table, ERRORS)


if __name__ == "__main__":
    main()
