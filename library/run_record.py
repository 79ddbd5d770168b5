#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: run_record
short_description: Record one finished benchmark run in the results store
description:
  - Turns one run, as the playbook saw it (the plan's run, the cluster layout, every host's
    outcome, the workers' results, their environments and NIC figures), into one row of the
    results store (SQLite, O(results_db)), with its status and, for a failed run, the first
    reason found (the earliest host failure, the cause; a worker's own reason; a missing result).
  - A run is C(ok) only when every worker of the layout returned an C(ok) result.
  - The record is written to a JSON file beside the store first and removed once the store
    holds it, so that a store that refuses a finished run (a full disk) loses nothing; the
    failure then names the file and the command that adds it later.
  - Runs on the controller (plugins/action/run_record.py, in ansible-playbook's own process).
version_added: "0.1.0"
author: dtfbench developers
options:
  run:
    description: The run as M(benchmark_plan) planned it (C(run_id), C(gpus), C(num_ps), C(variable_update), ...).
    type: dict
    required: true
  sweep_id:
    description: The sweep the run belongs to.
    type: str
    required: true
  sweep_config:
    description: The sweep's configuration, recorded with the run where it is not the last one recorded.
    type: dict
  system:
    description: The system's name (C(local), C(testbed), C(aws), C(daint), ...).
    type: str
    required: true
  results_db:
    description: The results store; C(results/results.sqlite) when omitted.
    type: str
  store_expected:
    description:
      - The store must exist (the sweep had it at its start, or recorded runs in it) - a store that is gone is
        not made again (which would hide the runs lost with it) - the run is kept as JSON and the task fails.
    type: bool
    default: false
  git_revision:
    description: The project's revision that ran it.
    type: str
    default: ""
  workload:
    description: The workload (C(name), C(ref), C(commit)) as the plan resolved it.
    type: dict
  started_at:
    description: When the run started (ISO 8601, UTC).
    type: raw
  finished_at:
    description: When the run finished (ISO 8601, UTC).
    type: raw
  layout:
    description: M(tf_cluster_spec)'s result for the run (C(hosts_used), C(num_workers), C(cluster_spec)).
    type: dict
    required: true
  hosts:
    description:
      - Per host, its outcome - C(failure) (empty, or why), C(failed_at) (epoch seconds), C(workers)
        (M(tf_host_run)'s finished results), C(environment) and C(nic) (its NIC figures).
    type: dict
    default: {}
  instance_types:
    description: Per host, the inventory's C(instance_type) (empty where none).
    type: dict
    default: {}
  data_read:
    description: Per host, the read-throughput figures of a real-data run.
    type: dict
    default: {}
  background_read:
    description:
      - A run with C(background_io) - the figures the background reader printed when it stopped (C(dtfbench
        background_read stop)); its C(mb_per_s) is recorded with the run.
    type: dict
    default: {}
  interrupted:
    description: Why the controller left the run unfinished (an interrupted run only).
    type: str
notes:
  - The interrupt watchdog records an interrupted run with the same code, through
    C(python -m dtfbench store add) (the payload as JSON on standard input).
"""

EXAMPLES = r"""
- name: Record the run in the results store
  run_record:
    run: "{{ benchmark_run }}"
    sweep_id: "{{ benchmark_plan_result.sweep_id }}"
    system: local
    results_db: results/results.sqlite
    layout: "{{ tf_cluster_layout }}"
    hosts: "{{ tf_cluster_layout.hosts | tf_run_outcomes(hostvars, ansible_play_hosts) }}"
  run_once: true
  delegate_to: localhost
  register: recorded
"""

RETURN = r"""
record:
  description: The stored row - its id, the run's id, status, reason (failed runs) and images/sec (ok runs).
  returned: success
  type: dict
  sample: {id: 12, run_id: s1-g2-ps1-parameter_server-r1-3f2a, status: ok, reason: null, images_per_sec: 812.4}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.adapters.calls import module_main
from ansible.module_utils.dtfbench.results.record import ARGUMENT_SPEC, RecordError, record_run


# plugins/action/run_record.py records on the controller without a module process (the
# project's ansible.cfg enables it); this module is what runs elsewhere.
def main():
    module_main(AnsibleModule, ARGUMENT_SPEC, record_run, (RecordError,), result_key="record")


if __name__ == "__main__":
    main()
