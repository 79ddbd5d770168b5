#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)


DOCUMENTATION = r"""
---
module: tf_cluster_spec
short_description: Compute the TensorFlow cluster layout (PS, workers, ports, devices)
description:
  - Decides which TensorFlow task (parameter server or worker) runs on which host, on which
    port and with which devices, from the hosts and the requested number of devices and
    parameter servers.
  - A pure computation with the one layout implementation of dtfbench
    (C(src/dtfbench/plan/layout.py), shipped as C(module_utils/dtfbench/plan/layout.py)); it changes
    nothing and is usually run once on the controller (C(run_once), C(delegate_to=localhost)).
  - Workers fill the hosts in order, O(hosts[].devices // devices_per_worker) per host.
    Parameter servers go round-robin over the worker hosts (each up to O(hosts[].max_ps)) when
    O(ps_on_worker_nodes) is true, else one per host that holds no worker, in host order.
    On each host the k-th worker listens on O(worker_port_base) + k, the k-th parameter server
    on O(ps_port_base) + k. A parameter server never gets a GPU.
  - Fails, before anything starts, with a message naming the wrong input and the fix when the
    hosts are not enough, O(gpus) is not a multiple of O(devices_per_worker), the port ranges
    collide, or host names or addresses repeat.
  - Given O(layout) (a layout computed before, e.g. the benchmark plan's for the run), returns it
    as it is and computes nothing; the inputs that compute one go without it.
version_added: "0.1.0"
author: dtfbench developers
options:
  layout:
    description:
      - A layout computed before - this module's result (its RV(cluster_spec), RV(tasks), RV(hosts),
        RV(num_workers), RV(num_ps) and RV(hosts_used); other keys are left out), or M(benchmark_plan)'s
        C(runs[].layout). Returned as it is, after a check that its parts agree with its tasks.
      - Mutually exclusive with O(hosts), O(gpus), O(num_ps), O(devices_per_worker),
        O(ps_on_worker_nodes), O(ps_port_base) and O(worker_port_base); one of O(layout) and O(hosts)
        is required.
    type: dict
  hosts:
    description:
      - The candidate hosts, in the order in which they are filled. Required without O(layout).
    type: list
    elements: dict
    suboptions:
      name:
        description: Host name (the inventory name); the key of RV(hosts).
        type: str
        required: true
      address:
        description:
          - Address TensorFlow tasks use to reach the host (the private IP); defaults to
            O(hosts[].name).
        type: str
      devices:
        description:
          - Device slots the host offers (GPUs, or CPU worker slots when
            O(hosts[].device_type=cpu)). May be 0 (a host for parameter servers only).
        type: int
        required: true
      device_type:
        description:
          - V(gpu) gives each worker its device indices in C(CUDA_VISIBLE_DEVICES);
            V(cpu) gives it an empty C(CUDA_VISIBLE_DEVICES).
        type: str
        choices: [gpu, cpu]
        default: gpu
      max_ps:
        description:
          - Parameter servers the host may run beside its workers when
            O(ps_on_worker_nodes=true). One on a cluster node, as the study's launchers on
            Piz Daint and EC2; more on a workstation (its local launcher).
        type: int
        default: 1
  gpus:
    description: Devices to train on in total (GPUs, or CPU slots on CPU hosts). Required with O(hosts).
    type: int
  num_ps:
    description: Number of parameter servers; V(0) for collective_all_reduce or independent. Required with O(hosts).
    type: int
  devices_per_worker:
    description:
      - Devices driven by each worker task (V(8) on p2.8xlarge with distributed_replicated,
        one worker per node). O(gpus) must be a multiple of it.
    type: int
    default: 1
  ps_on_worker_nodes:
    description:
      - V(true) places the parameter servers on the worker hosts (round-robin, each up to its
        O(hosts[].max_ps)); V(false) on the hosts after the worker hosts, one per host.
    type: bool
    default: true
  ps_port_base:
    description: Port of the first parameter server on a host.
    type: int
    default: 2230
  worker_port_base:
    description: Port of the first worker on a host.
    type: int
    default: 2220
attributes:
  check_mode:
    support: full
    description: The module computes only; check mode returns the same result.
  diff_mode:
    support: none
    description: Nothing to diff.
notes:
  - Always returns C(changed=false).
seealso:
  - module: tf_task
"""

EXAMPLES = r"""
- name: Lay out 8 workers and 2 parameter servers on the tf_nodes group
  tf_cluster_spec:
    hosts: >-
      {{ groups['tf_nodes'] | map('extract', hostvars)
         | community.general.json_query('[].{name: inventory_hostname, address: private_ip,
                          devices: gpus_per_node, device_type: device_type}') }}
    gpus: 8
    num_ps: 2
  run_once: true
  delegate_to: localhost
  register: layout

- name: p2.8xlarge, distributed_replicated - one worker of 8 GPUs per node, PS on separate nodes
  tf_cluster_spec:
    hosts:
      - {name: node1, address: 10.0.0.11, devices: 8}
      - {name: node2, address: 10.0.0.12, devices: 8}
      - {name: ps1, address: 10.0.0.21, devices: 0}
    gpus: 16
    devices_per_worker: 8
    num_ps: 1
    ps_on_worker_nodes: false
  register: layout

- name: The run's layout as the benchmark plan computed it (nothing is computed again)
  tf_cluster_spec:
    layout: "{{ benchmark_run.layout }}"
  run_once: true
  delegate_to: localhost
  register: layout

- name: The tasks of this host
  ansible.builtin.debug:
    msg: "{{ layout.hosts[inventory_hostname] | default([]) }}"
"""

RETURN = r"""
cluster_spec:
  description: The TensorFlow cluster spec, C(address:port) per task in task-index order.
  returned: success
  type: dict
  sample: {"ps": ["10.0.0.1:2230"], "worker": ["10.0.0.1:2220", "10.0.0.2:2220"]}
  contains:
    ps:
      description: Parameter server endpoints.
      type: list
      elements: str
      returned: always
    worker:
      description: Worker endpoints.
      type: list
      elements: str
      returned: always
tasks:
  description: All tasks, the parameter servers by task index, then the workers by task index.
  returned: success
  type: list
  elements: dict
  sample:
    - {"host": "node1", "address": "10.0.0.1", "job": "ps", "task_index": 0, "port": 2230,
       "endpoint": "10.0.0.1:2230", "cuda_visible_devices": "", "num_devices": 0,
       "device_type": "cpu"}
    - {"host": "node1", "address": "10.0.0.1", "job": "worker", "task_index": 0, "port": 2220,
       "endpoint": "10.0.0.1:2220", "cuda_visible_devices": "0", "num_devices": 1,
       "device_type": "gpu"}
  contains:
    host:
      description: Host name (O(hosts[].name)).
      type: str
      returned: always
    address:
      description: Host address (O(hosts[].address)).
      type: str
      returned: always
    job:
      description: V(ps) or V(worker).
      type: str
      returned: always
    task_index:
      description: Index of the task within its job, from 0.
      type: int
      returned: always
    port:
      description: TCP port the task listens on.
      type: int
      returned: always
    endpoint:
      description: C(address:port).
      type: str
      returned: always
    cuda_visible_devices:
      description: Value for C(CUDA_VISIBLE_DEVICES); empty for parameter servers and CPU workers.
      type: str
      returned: always
    num_devices:
      description: Devices the task drives (O(devices_per_worker) for workers, 0 for PS).
      type: int
      returned: always
    device_type:
      description: V(gpu) or V(cpu) (always V(cpu) for a parameter server).
      type: str
      returned: always
hosts:
  description: The tasks of each used host (same elements as RV(tasks)), keyed by host name.
  returned: success
  type: dict
  sample:
    node1:
      - {"job": "ps", "task_index": 0, "port": 2230}
      - {"job": "worker", "task_index": 0, "port": 2220}
num_workers:
  description: Number of worker tasks (O(gpus) // O(devices_per_worker)).
  returned: success
  type: int
  sample: 2
num_ps:
  description: Number of parameter servers.
  returned: success
  type: int
  sample: 1
hosts_used:
  description: Names of the hosts that run at least one task, in host order.
  returned: success
  type: list
  elements: str
  sample: ["node1", "node2"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.adapters.calls import module_main
from ansible.module_utils.dtfbench.plan.layout import ARGUMENT_SPEC, SPEC_OPTIONS, LayoutError, layout_from_params


# plugins/action/tf_cluster_spec.py computes the same on the controller without a module process (the
# project's ansible.cfg enables it); this module is what runs elsewhere.
def main():
    module_main(AnsibleModule, ARGUMENT_SPEC, layout_from_params, (LayoutError,), **SPEC_OPTIONS)


if __name__ == "__main__":
    main()
