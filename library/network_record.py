#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: network_record
short_description: Store what a sweep's link probe measured, or why it measured nothing
description:
  - Summarises the conductor's result of M(link_probe) into the sweep's network document (per
    host its send and receive rates and round trip; the cluster's point-to-point and incast
    rates; the hosts far below the others) and appends it to the results store.
  - With O(unknown), records that nothing was measured and why (C(network_probe=false), one host,
    a Slurm launcher); the sweep's report then says the network is unknown, and why.
  - Runs on the controller (plugins/action/network_record.py, in ansible-playbook's own process).
    C(python -m dtfbench netprobe record) does the same from a shell.
version_added: "0.1.0"
author: dtfbench developers
extends_documentation_fragment:
  - dtfbench_sweep_store
options:
  probe:
    description: The conductor's C(probe) result of M(link_probe) (its rounds and every node's figures).
    type: dict
    default: {}
  unknown:
    description: Why nothing was measured; when given, O(probe) is not read.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Store what the probe measured
  network_record:
    results_db: results/results.sqlite
    sweep_id: "{{ sweep_id }}"
    probe: "{{ hostvars[groups['tf_nodes'][0]].probe_result.probe }}"
  run_once: true
  delegate_to: localhost
  register: network

- name: Store that the network was not probed
  network_record:
    results_db: results/results.sqlite
    sweep_id: "{{ sweep_id }}"
    unknown: network_probe=false
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
document:
  description: The stored network document (C(status) ok, partial or unknown; C(why); rates in GB/s; C(hosts); C(pairs)).
  returned: success
  type: dict
  sample: {status: unknown, why: network_probe=false, link_gb_s: null, incast_gb_s: null, rtt_ms: null, hosts: {}}
lines:
  description: What the playbook shows - the summary line first, then a warning a line for each slow host.
  returned: success
  type: list
  elements: str
  sample: ["network: not measured (network_probe=false)"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.adapters.calls import module_main
from ansible.module_utils.dtfbench.results.netprobe import ARGUMENT_SPEC, record_probe


# plugins/action/network_record.py stores on the controller without a module process (the
# project's ansible.cfg enables it); this module is what runs elsewhere.
def main():
    module_main(AnsibleModule, ARGUMENT_SPEC, record_probe, (ValueError,))


if __name__ == "__main__":
    main()
