#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_nodes
short_description: The nodes a Slurm job may get, as hosts for the dtfbench cluster layout
description:
  - Asks the scheduler (C(sinfo)) for the nodes of a partition that respond and can run jobs
    (not down, drained, failing or in maintenance), keeps those with the feature of a simple
    C(--constraint), and returns them in the shape the cluster layout takes
    (C({name, address, devices, device_type}), the address being the node name).
  - The layout computed on this list tells how many nodes a job of N devices needs, and that
    the partition has too few before anything is submitted.
  - With O(query=false) (the scheduler is not reachable, only scripts are written) it returns
    O(max_nodes) placeholder nodes instead.
  - Changes nothing.
version_added: "0.1.0"
author: dtfbench developers
options:
  partition:
    description: Partition; empty for every partition (the nodes of the default one are usually meant).
    type: str
    default: ""
  constraint:
    description:
      - The job's C(--constraint). A single feature name (C(gpu)) keeps the nodes that have
        it; an expression (C(gpu&startx), C([a|b])) filters nothing.
    type: str
    default: ""
  max_nodes:
    description: At most this many nodes (a site's per-job limit); 0 for no limit. Required with O(query=false).
    type: int
    default: 0
  devices_per_node:
    description: Devices (GPUs, or CPU worker slots) of every node.
    type: int
    default: 1
  device_type:
    description: Device type of every node.
    type: str
    choices: [gpu, cpu]
    default: gpu
  query:
    description: Ask the scheduler. False returns O(max_nodes) placeholder nodes C(node1..N).
    type: bool
    default: true
notes:
  - Supports check mode (it changes nothing in any mode).
"""

EXAMPLES = r"""
- name: The usable GPU nodes of partition normal
  slurm_nodes:
    partition: normal
    constraint: gpu
    devices_per_node: 1
  register: nodes
"""

RETURN = r"""
hosts:
  description: The usable nodes in the scheduler's order, as layout hosts.
  returned: success
  type: list
  elements: dict
  sample: [{name: nid00012, address: nid00012, devices: 1, device_type: gpu}]
count:
  description: Number of hosts.
  returned: success
  type: int
  sample: 128
source:
  description: C(sinfo), or C(max_nodes) for placeholders.
  returned: success
  type: str
  sample: sinfo
excluded:
  description: Nodes left out, with why (state or missing feature).
  returned: success
  type: list
  elements: str
  sample: ["nid00013: drained"]
"""

import re

from ansible.module_utils.basic import AnsibleModule

# Base states (sinfo %T without its flag characters) in which a node can take a job.
USABLE = {"idle", "mixed", "allocated", "completing", "planned", "reserved"}
FLAGS = "*~#!%$@^-+"


def parse_sinfo(text, constraint):
    """Lines `name|state|features` -> (names in order, excluded with reasons)."""
    feature = constraint if re.match(r"^[A-Za-z0-9_.-]+$", constraint or "") else ""
    names, excluded, seen = [], [], set()
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 3 or not parts[0]:
            continue
        name, state, features = parts[0], parts[1].lower(), parts[2]
        if name in seen:
            continue
        seen.add(name)
        base = state.rstrip(FLAGS)
        if base not in USABLE:
            excluded.append("%s: %s" % (name, state))
            continue
        if feature and feature not in [f.strip() for f in features.split(",")]:
            excluded.append("%s: no feature %s (has %s)" % (name, feature, features))
            continue
        names.append(name)
    return names, excluded


def main():
    module = AnsibleModule(
        argument_spec=dict(
            partition=dict(type="str", default=""),
            constraint=dict(type="str", default=""),
            max_nodes=dict(type="int", default=0),
            devices_per_node=dict(type="int", default=1),
            device_type=dict(type="str", choices=["gpu", "cpu"], default="gpu"),
            query=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["max_nodes"] < 0 or p["devices_per_node"] < 0:
        module.fail_json(msg="max_nodes and devices_per_node must be >= 0")
    excluded = []
    if p["query"]:
        sinfo = module.get_bin_path("sinfo")
        if not sinfo:
            module.fail_json(
                msg="sinfo not found on this host: run the role on the cluster's login node "
                "(Slurm's client commands), or set submit=false to only write the scripts"
            )
        argv = [sinfo, "--noheader", "--Node", "--responding", "--format=%N|%T|%f"]
        if p["partition"]:
            argv.append("--partition=%s" % p["partition"])
        rc, out, err = module.run_command(argv)
        if rc != 0:
            module.fail_json(msg="sinfo failed (exit %d): %s" % (rc, (err or out).strip()), argv=argv)
        names, excluded = parse_sinfo(out, p["constraint"])
        source = "sinfo"
    else:
        if p["max_nodes"] < 1:
            module.fail_json(
                msg="the scheduler is not asked (submit=false): set the most nodes a job may get "
                "(max_nodes; slurm_cluster_max_nodes in the system profile)"
            )
        names = ["node%d" % i for i in range(1, p["max_nodes"] + 1)]
        source = "max_nodes"
    if p["max_nodes"]:
        names = names[: p["max_nodes"]]
    hosts = [
        {"name": n, "address": n, "devices": p["devices_per_node"], "device_type": p["device_type"]} for n in names
    ]
    module.exit_json(changed=False, hosts=hosts, count=len(hosts), source=source, excluded=excluded)


if __name__ == "__main__":
    main()
