#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sweep_marker
short_description: Mark a host as running a sweep, and say which other sweeps run there now
description:
  - Two sweeps on the same hosts at once slow each other's runs down, and nothing in a run's
    figures shows it. Each sweep marks every host before its first run (O(state=present))
    and removes its mark after its last (O(state=absent)); the marks of other sweeps that a
    host holds are returned in RV(others), so that the sweep can warn.
  - A mark is the file C(<run_root>/_sweeps/<sweep_id>--<controller host>--<pid>.json). The
    folder's whole path is checked as C(tf_task) checks a run directory (owned by this user or
    root, writable by no one else).
  - Its action plugin (plugins/action/sweep_marker.py) fills in O(controller) and, on the
    controller, drops the marks whose sweep ended without removing them (same controller
    machine, its ansible-playbook gone) with a second call that names them in O(remove).
version_added: "0.1.0"
author: dtfbench developers
options:
  sweep_id:
    description: The sweep's id.
    type: str
    required: true
  run_root:
    description: The host's run root (C(dtfbench_run_root)); the marks live in its C(_sweeps) folder.
    type: path
    required: true
  state:
    description: C(present) writes this sweep's mark and returns the others; C(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  controller:
    description:
      - Who runs the sweep - C(host), C(pid) and C(pid_started) of its ansible-playbook, and
        C(since). The action plugin sets it; not meant to be given by hand.
    type: dict
    required: true
  remove:
    description: Names of other sweeps' mark files to remove (their sweeps ended; the action plugin decides).
    type: list
    elements: str
    default: []
notes:
  - Supports check mode (nothing is written or removed; the others are still read).
"""

EXAMPLES = r"""
- name: Mark every host as running this sweep, and find the others
  sweep_marker:
    sweep_id: "{{ benchmark_plan_result.sweep_id }}"
    run_root: "{{ benchmark_run_root }}"
  register: benchmark_sweep_marker

- name: Remove the mark after the last run
  sweep_marker:
    sweep_id: "{{ benchmark_plan_result.sweep_id }}"
    run_root: "{{ benchmark_run_root }}"
    state: absent
"""

RETURN = r"""
unwritten:
  description:
    - Why this sweep's mark could not be written (a full or read-only disk). The mark only
      warns other sweeps, so this does not fail the call; the runs report the disk themselves.
      Folders the call created for it are removed again.
  returned: when the mark could not be written
  type: str
  sample: "/mnt/local_ssd/dtfbench/runs/_sweeps/s--ctl--4242.json: No space left on device"
marker:
  description:
    - The path of this sweep's mark on the host; null where the disk refused to hold it (see
      C(unwritten)).
  returned: always
  type: str
  sample: /mnt/local_ssd/dtfbench/runs/_sweeps/20261126T093000-1a2b--ctl--4242.json
others:
  description:
    - The marks of other sweeps on this host (O(state=present)), with C(file), C(path), and what
      their sweep wrote (C(sweep_id), C(controller), C(run_root)); the action plugin leaves out the stale ones.
  returned: when state is present
  type: list
  elements: dict
  sample:
    - {sweep_id: 20261126T092500-9f3c, file: 20261126T092500-9f3c--ctl--4100.json,
       controller: {host: ctl, pid: 4100, pid_started: "123456", since: "2026-11-26T09:25:00Z"}}
removed:
  description: The names of O(remove) that were removed.
  returned: when state is present
  type: list
  elements: str
stale:
  description: The stale marks the action plugin removed (their controller is this machine and its ansible-playbook is gone).
  returned: when state is present
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.launch.sweep_marker import ARGUMENT_SPEC, direct_entry


# plugins/action/sweep_marker.py pipes the same code to the host's Python where it can (no
# AnsiballZ: src/dtfbench/adapters/host_action.py); this module is what runs otherwise.
def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = direct_entry(module.params, module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
