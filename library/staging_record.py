#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: staging_record
short_description: Store each node's staging of a sweep's dataset to local disk
description:
  - Appends each node's report of M(dataset_stage) (or of a Slurm job's copy of its engine) to
    the results store's C(stagings) table, and says what the staging cost the sweep - its slowest
    node's seconds, since the nodes stage at once - with a line for each node.
  - The report sets the staging time against the time the runs saved (this project's docs/storage.md).
  - Runs on the controller (plugins/action/staging_record.py, in ansible-playbook's own process).
version_added: "0.1.0"
author: dtfbench developers
extends_documentation_fragment:
  - dtfbench_sweep_store
options:
  stagings:
    description:
      - Each node's report of M(dataset_stage) (C(node), C(source), C(target), C(seconds),
        C(copied_bytes), C(bytes) and C(already_staged) at least; the whole report is stored).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Store every node's staging
  staging_record:
    results_db: results/results.sqlite
    sweep_id: "{{ sweep_id }}"
    stagings: "{{ ansible_play_hosts | map('extract', hostvars, 'staged') | list }}"
  run_once: true
  delegate_to: localhost
  register: staging
"""

RETURN = r"""
summary:
  description: The sweep's staging - C(nodes), C(seconds) (the slowest node's), C(node_seconds), C(copied_bytes), C(already_staged).
  returned: success
  type: dict
  sample: {nodes: 2, seconds: 41.2, node_seconds: 80.9, copied_bytes: 14789747712, already_staged: false}
lines:
  description: What the playbook shows - the sweep's staging first, then a line for each node.
  returned: success
  type: list
  elements: str
  sample: ["staging: 14.8 GB to 2 node(s) in 41.20 s (the slowest node's time: the sweep's first run waited that long)"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.adapters.calls import module_main
from ansible.module_utils.dtfbench.results.staging import ARGUMENT_SPEC, record_stagings

# plugins/action/staging_record.py stores on the controller without a module process (the
# project's ansible.cfg enables it); this module is what runs elsewhere.


def main():
    module_main(AnsibleModule, ARGUMENT_SPEC, record_stagings, (ValueError,))


if __name__ == "__main__":
    main()
