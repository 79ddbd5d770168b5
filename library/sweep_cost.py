#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sweep_cost
short_description: Predict what a benchmark sweep costs on EC2 and refuse it above max_cost_usd
description:
  - The dollar guard of C(provision-aws.yml) (before anything is launched) and of
    C(run-benchmark.yml) with C(system=aws) (before the first run).
  - Predicts the cost as instances x hours x price; the hours are a setup time and, for each
    run not yet done, a run overhead plus its steps at the step time of the scaling model
    (C(dtfbench.forecast.scaling_model)) fitted to the study's published table of the instance type
    (or, for a type without one, the K80 table of as many GPUs per node; RV(estimate.basis)
    says which). The price is the dated table's (C(dtfbench/forecast/price_data)), a price file, or
    O(price_usd_per_hour).
  - Above O(max_cost_usd) it fails with one message naming the predicted figure and the
    variable to raise. An instance type without a price, a negative price, or a bad
    O(max_cost_usd) is one error each.
  - Runs on the controller, as an action plugin (C(plugins/action/sweep_cost.py)) in
    ansible-playbook's Python (numpy and scipy for the model); it changes nothing. This file is
    its documentation.
version_added: "0.1.0"
author: dtfbench developers
options:
  runs:
    description:
      - The sweep's runs, as M(benchmark_plan) returns them (runs with C(done) true are not
        counted). Give this or O(sweep).
    type: list
    elements: dict
  sweep:
    description:
      - A sweep request in C(run-benchmark.yml)'s variables (gpus, model, batch_size,
        variable_update, num_ps, repetitions, warmup_steps, steps, devices_per_worker),
        expanded into runs on O(instances) nodes of O(gpus_per_instance) GPUs as
        M(benchmark_plan) would; an empty C(gpus) means 1, 2, 4, ... up to the cluster's GPUs.
    type: dict
  instance_types:
    description: The instance type of each node (C(''), unknown, needs O(price_usd_per_hour)).
    type: list
    elements: str
    required: true
  gpus_per_instance:
    description: GPUs of one node.
    type: int
    required: true
  price_usd_per_hour:
    description: Price of one node per hour in USD, instead of the price table's; empty for the table's.
    type: raw
  price_file:
    description: A price table (instance_type,region,usd_per_hour,as_of) overriding the packaged one.
    type: str
    default: ""
  max_cost_usd:
    description: The most the sweep may be predicted to cost, in USD; empty for C(dtfbench.forecast.pricing.DEFAULT_MAX_COST_USD) (100).
    type: raw
  setup_minutes:
    description: Minutes the nodes are paid for besides the runs (launching and configuring them).
    type: float
    default: 0
  checkpoint_gb_per_s:
    description:
      - The rate the nodes save checkpoints at, in GB/s, for runs with C(checkpoint_every_steps) or
        C(checkpoint_every_secs) - each save writes the model's variables (twice with the momentum optimizer's
        slots). Empty for 0.3, TF's save to a local disk (D3, docs/storage.md); a shared file system under load
        writes slower.
    type: raw
notes:
  - Supports check mode (it changes nothing in any mode).
"""

EXAMPLES = r"""
- name: Refuse a sweep predicted above 50 USD
  sweep_cost:
    runs: "{{ benchmark_plan_result.runs }}"
    instance_types: "{{ groups['tf_nodes'] | map('extract', hostvars) | map(attribute='instance_type', default='') | list }}"
    gpus_per_instance: 1
    max_cost_usd: 50
  register: cost

- name: The study's default sweep on 2 x p2.8xlarge about to be launched
  sweep_cost:
    sweep: {model: inception3, batch_size: 64, num_ps: 1, repetitions: 5}
    instance_types: [p2.8xlarge, p2.8xlarge]
    gpus_per_instance: 8
    setup_minutes: 30
"""

RETURN = r"""
estimate:
  description: The prediction.
  returned: success, and with a refusal above max_cost_usd
  type: dict
  sample:
    instance_type: p2.xlarge
    instances: 2
    runs: 10
    run_hours: 0.79
    hours: 1.29
    usd_per_hour: 0.9
    cost_usd: 2.32
    price_note: dtfbench/forecast/price_data/aws_ec2_on_demand.csv, 2024-06-01
    basis: the scaling model fitted to the study's published p2.xlarge table (inception3, batch 64, synthetic data)
    message: "predicted cost of the planned sweep: $2.32 = 2 x p2.xlarge x 1.29 h x $0.9/h (...)"
max_cost_usd:
  description: The limit the estimate was checked against.
  returned: success
  type: float
  sample: 100.0
"""
