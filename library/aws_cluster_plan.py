#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: aws_cluster_plan
short_description: Validate the inputs of provision-aws.yml and return the cluster's plan
description:
  - Checks every input of C(provision-aws.yml) (the M(aws_cluster) role) before anything is
    launched or paid for, and returns what the role creates - names, tags, instance count,
    the TF port ranges of the security group, the node profile.
  - Each problem is one error that names the variable, says what is wrong and how to fix it.
  - Pure computation on the controller; it never calls AWS (the role checks credentials,
    the AMI and a given subnet next).
version_added: "0.1.0"
author: dtfbench developers
options:
  state:
    description:
      - What the role is about to do. V(present) checks every option; V(absent) (teardown)
        only O(cluster_name), O(region), O(key_name) and O(output_dir); V(expired) only O(region).
    type: str
    choices: [present, absent, expired]
    default: present
  cluster_name:
    description:
      - Name of the cluster; tags every resource and names the key pair, security group,
        placement group and VPC (C(dtfbench-<cluster_name>)).
      - Lower-case letters, digits and C(-), starting with a letter, at most 40 characters
        (DNS-safe).
    type: str
    default: ""
  instance_type:
    description: EC2 GPU instance type, one of C(dtfbench.plan.ec2_types.INSTANCE_TYPES).
    type: str
    default: ""
  instance_count:
    description: Instances to run. Give this or O(gpus), not both.
    type: raw
  gpus:
    description: GPUs in total; divided by the GPUs of one O(instance_type). Give this or O(instance_count).
    type: raw
  max_instances:
    description: The most instances this cluster may have; a larger request is refused (a cost guard).
    type: int
    default: 8
  allow_more_instances:
    description: Launch more than O(max_instances) anyway.
    type: bool
    default: false
  ssh_cidr:
    description:
      - The only addresses that may reach the nodes' SSH port, in CIDR notation (C(203.0.113.7/32));
        a bare address means C(/32).
    type: str
  ssh_cidr_allow_anywhere:
    description: Accept C(0.0.0.0/0) for O(ssh_cidr) (SSH open to the whole internet).
    type: bool
    default: false
  node_profile:
    description:
      - Software stack of the nodes, C(cscs2017) or C(current); empty for the one that supports
        O(instance_type) (C(cscs2017) on K80/p2, C(current) otherwise).
    type: str
    default: ""
  spot:
    description: Run spot instances instead of on-demand ones.
    type: bool
    default: false
  spot_max_price:
    description: Highest hourly price in USD for a spot instance (e.g. C(0.50)); empty for the on-demand price.
    type: str
    default: ""
  root_volume_size:
    description: Size of each instance's root volume in GiB (8 to 16384).
    type: int
    default: 200
  region:
    description: AWS region, e.g. C(us-east-1).
    type: str
    required: true
  expiry_hours:
    description: Hours from now after which the cluster counts as expired (the C(dtfbench-expiry) tag).
    type: float
    default: 24
  owner:
    description: Who owns the cluster (the C(dtfbench-owner) tag).
    type: str
    default: ""
  ami:
    description: AMI id (C(ami-...)); empty to look up the node profile's Ubuntu image.
    type: str
    default: ""
  vpc_subnet_id:
    description: An existing subnet (C(subnet-...)) to launch into; empty to create a VPC and subnet for the cluster.
    type: str
    default: ""
  vpc_cidr:
    description: CIDR of the VPC created for the cluster.
    type: str
    default: 10.42.0.0/16
  subnet_cidr:
    description: CIDR of the subnet created for the cluster, inside O(vpc_cidr).
    type: str
    default: 10.42.0.0/24
  key_name:
    description: An existing EC2 key pair to use (never deleted); empty for C(dtfbench-<cluster_name>), managed by the role.
    type: str
    default: ""
  public_key_file:
    description: OpenSSH public key file for the managed key pair; empty to let EC2 generate the key.
    type: str
    default: ""
  output_dir:
    description: Folder of the IP files and inventories the role writes (and teardown removes).
    type: str
    default: ""
  tf_worker_port_base:
    description: First worker port on each node; default the cluster layout's.
    type: int
  tf_ps_port_base:
    description: First parameter-server port on each node; default the cluster layout's.
    type: int
  tf_ps_ports:
    description: Parameter-server ports to open per node, from O(tf_ps_port_base).
    type: int
    default: 8
notes:
  - Supports check mode (it changes nothing in any mode).
"""

EXAMPLES = r"""
- name: Validate the request and plan the cluster
  aws_cluster_plan:
    cluster_name: study
    instance_type: p2.8xlarge
    gpus: 16
    ssh_cidr: 203.0.113.7/32
    region: us-east-1
    owner: alice
    output_dir: inventories/aws/study
  register: plan
"""

RETURN = r"""
plan:
  description: The cluster the role provisions.
  returned: success
  type: dict
  sample:
    cluster_name: study
    instance_type: p2.8xlarge
    instance_count: 2
    gpus_per_instance: 8
    gpus: 16
    gpu_model: K80
    node_profile: cscs2017
    ssh_user: ubuntu
    ami_owner: "099720109477"
    ami_name: ubuntu/images/hvm-ssd/ubuntu-xenial-16.04-amd64-server-*
    ssh_cidr: 203.0.113.7/32
    spot: false
    spot_max_price: ""
    root_volume_size: 200
    region: us-east-1
    expiry: "2026-11-23T10:15:00Z"
    resource_name: dtfbench-study
    cluster_tag: dtfbench-cluster
    tags: {dtfbench-cluster: study, dtfbench-owner: alice, dtfbench-expiry: "2026-11-23T10:15:00Z", created-by: dtfbench}
    tf_port_ranges: [[2220, 2227], [2230, 2237]]
    tf_devices_by_type: {p2.8xlarge: 8}
    security_group_rules:
      - {proto: tcp, from_port: 22, to_port: 22, cidr_ip: 203.0.113.7/32, rule_desc: SSH from ssh_cidr}
      - {proto: tcp, from_port: 2220, to_port: 2227, group_name: dtfbench-study, rule_desc: TensorFlow gRPC within the cluster}
      - {proto: tcp, from_port: 2230, to_port: 2237, group_name: dtfbench-study, rule_desc: TensorFlow gRPC within the cluster}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.adapters.calls import module_main
from ansible.module_utils.dtfbench.plan.aws import ARGUMENT_SPEC, PlanError, plan_cluster


# plugins/action/aws_cluster_plan.py computes the same on the controller without a module process (the
# project's ansible.cfg enables it); this module is what runs elsewhere.
def main():
    module_main(AnsibleModule, ARGUMENT_SPEC, plan_cluster, (PlanError,), result_key="plan")


if __name__ == "__main__":
    main()
