# -*- coding: utf-8 -*-
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""The tf_host_run module's options (library/tf_host_run.py documents them).

The module and its action plugin (plugins/action/tf_host_run.py, which validates them on the
controller) share them. A module of its own, with nothing to import: the action plugin is
imported in every Ansible worker, once per host and call.
"""

TASK_SPEC = dict(
    job=dict(type="str", required=True, choices=["ps", "worker"]),
    task_index=dict(type="int", required=True),
    address=dict(type="str", required=True),
    port=dict(type="int", required=True),
    cuda_visible_devices=dict(type="str", default=""),
    # The rest of what tf_cluster_spec returns per task; not used here.
    host=dict(type="str"),
    endpoint=dict(type="str"),
    num_devices=dict(type="int"),
    device_type=dict(type="str"),
)
ARGUMENT_SPEC = dict(
    state=dict(type="str", required=True, choices=["checked", "started", "finished", "stopped"]),
    run_id=dict(type="str", required=True),
    run_dir=dict(type="path", required=True),
    tasks=dict(type="list", elements="dict", required=True, options=TASK_SPEC),
    cluster_spec=dict(type="dict"),
    program=dict(type="list", elements="str"),
    program_args=dict(type="list", elements="str", default=[]),
    result_flag=dict(type="str", default=""),
    environment=dict(type="dict", default={}),
    ready_timeout=dict(type="float", default=180.0),
    timeout=dict(type="float", default=1800.0),
    stall_timeout=dict(type="float", default=0.0),
    ps_exit_timeout=dict(type="float", default=0.0),
    grace_period=dict(type="float", default=10.0),
    max_runtime=dict(type="float", default=0.0),
    start=dict(type="bool", default=True),
    complete_results=dict(type="list", elements="raw"),
    log_tail_lines=dict(type="int", default=40),
    nic_sample_interval=dict(type="float", default=0.1),
    nic_window=dict(type="dict"),
    data_read_dir=dict(type="path"),
    data_read_files=dict(type="int", default=4),
    data_cache=dict(type="str", choices=["cold", "warm"]),
)
