#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: link_probe
short_description: Measure the links between the nodes over their private addresses
description:
  - One node's part of the link probe (C(dtfbench.node.netprobe)). Run it on every node of
    O(hosts) at the same time (C(async) with C(poll=0), then C(async_status)); each listens on
    its private address only, on O(port), for the probe's length only; the first host conducts
    the rounds (round trips, two rounds of disjoint pairs sending both ways at once, then every
    other host sending into it) and returns every node's figures.
  - Never fails because the network cannot be measured (the port taken, a host that does not
    answer); what went wrong is in the result's C(error) or the conductor's C(missing). It fails
    only on bad arguments.
  - Changes nothing on the node; supports check mode (it then measures nothing).
version_added: "0.1.0"
author: dtfbench developers
options:
  host:
    description: This node's name, one of O(hosts).
    type: str
    required: true
  hosts:
    description:
      - Every node of the probe, in the same order on every node, as C([name, private address])
        pairs; the first is the conductor and the incast's receiver.
    type: list
    elements: list
    required: true
  port:
    description:
      - The TCP port every node listens on (its private address only) while the probe runs.
        Before a sweep's first run the TF worker base port is free and already open between
        the nodes, and only between them.
    type: int
    default: 2220
  duration:
    description: Seconds each transfer lasts (three transfer rounds in all at most).
    type: float
    default: 2.0
  join_timeout:
    description: Seconds the conductor waits for the other nodes to join (and they for it).
    type: float
    default: 20
  timeout:
    description: Seconds after which this node stops listening, whatever happened.
    type: float
    default: 120
notes:
  - Supports check mode (measures nothing).
  - What is measured and how, and what it means for a sweep, is in this project's docs/network.md;
    C(python -m dtfbench netprobe record) turns the conductor's result into the sweep's stored figures.
"""

EXAMPLES = r"""
- name: Measure the links (every node at once)
  link_probe:
    host: "{{ inventory_hostname }}"
    hosts: "{{ groups['tf_nodes'] | map('extract', hostvars) | map(attribute='private_ip') | list
               | zip(groups['tf_nodes']) | map('reverse') | list }}"
  async: 120
  poll: 0
  register: probe_job

- name: Wait for it
  ansible.builtin.async_status:
    jid: "{{ probe_job.ansible_job_id }}"
  register: probe
  until: probe.finished
  retries: 120
  delay: 1
"""

RETURN = r"""
probe:
  description:
    - This node's outcome. The conductor's holds C(rounds), C(figures) (per round, per host),
      C(joined), C(missing) (host to why) and C(seconds); a member's C(role=member); either
      C(error) when this node could not take part.
  returned: always
  type: dict
  sample: {role: member, seconds: 7.5}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.node.netprobe import probe


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            hosts=dict(type="list", elements="list", required=True),
            port=dict(type="int", default=2220),
            duration=dict(type="float", default=2.0),
            join_timeout=dict(type="float", default=20),
            timeout=dict(type="float", default=120),
        ),
        supports_check_mode=True,
    )
    p = module.params
    names = [h[0] for h in p["hosts"] if isinstance(h, list) and len(h) == 2]
    if len(names) != len(p["hosts"]) or len(set(names)) != len(names):
        module.fail_json(msg="hosts=%r: give distinct [name, private address] pairs" % (p["hosts"],))
    if p["host"] not in names:
        module.fail_json(msg="host=%r is not one of hosts (%s)" % (p["host"], ", ".join(names)))
    if not 1 <= p["port"] <= 65535:
        module.fail_json(msg="port=%r: choose 1 to 65535" % p["port"])
    if not 0 < p["duration"] <= 60 or p["join_timeout"] <= 0 or p["timeout"] <= 0:
        module.fail_json(msg="duration (0 to 60 s), join_timeout and timeout must be > 0")
    if module.check_mode:
        module.exit_json(changed=False, probe={"role": "skipped", "error": "check mode: nothing measured"})
    result = probe(p["host"], p["hosts"], p["port"], p["duration"], p["join_timeout"], p["timeout"])
    module.exit_json(changed=False, probe=result)


if __name__ == "__main__":
    main()
