#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: benchmark_plan
short_description: Validate a benchmark sweep and expand it into runs before anything starts
description:
  - Takes the sweep request of C(run-benchmark.yml) (each axis one value, a list or a comma
    string) and the TF nodes of the inventory, checks every value, computes the cluster
    layout of every configuration, and returns the list of runs (configuration x repetition).
  - Any problem is one error naming the input, what is wrong and how to fix it, so that a
    sweep whose largest point does not fit the inventory fails before its first run.
  - Runs on the controller. Changes nothing but a test write to O(results_db) (see there).
version_added: "0.1.0"
author: dtfbench developers
options:
  hosts:
    description:
      - The TF nodes in inventory order, as for M(tf_cluster_spec).
    type: list
    elements: dict
    required: true
  gpus:
    description: Devices to use in total; an integer, a list or a comma string (C(1,2,4)).
    type: raw
    required: true
  model:
    description: Model name(s), see C(dtfbench.plan.catalog.MODELS).
    type: raw
    default: small_cnn
  batch_size:
    description: Batch size per device; one value or a list.
    type: raw
    default: 32
  variable_update:
    description: C(parameter_server), C(distributed_replicated), C(collective_all_reduce); one or a list.
    type: raw
    default: parameter_server
  num_ps:
    description:
      - Parameter servers; one value or a list. Omitted, the study's sweep from 1 to the
        number of workers (0 for C(collective_all_reduce)).
      - C(auto) - the study's sweep, narrowed count by count while the sweep runs (RV(adaptive),
        C(python -m dtfbench adaptive_sweep)); O(gpus) must go up.
    type: raw
  num_ps_auto_keep:
    description:
      - With O(num_ps=auto), the best PS counts kept per variable update at each GPU count, each with its
        neighbours in the study's list (default 1).
    type: raw
  stop_below_efficiency:
    description:
      - Above 0 and at most 1. Makes the sweep adaptive (RV(adaptive)) - it stops before a GPU count once the
        best configuration of the count below has an efficiency under this. O(gpus) must go up.
    type: raw
  min_doubling_gain:
    description:
      - ">= 0. As O(stop_below_efficiency), for the best configuration's gain per doubling of the GPUs."
    type: raw
  rank_by:
    description:
      - What O(num_ps=auto), O(stop_below_efficiency) and O(min_doubling_gain) rank configurations by -
        V(images_per_sec) (omitted, the default) or V(time_to_accuracy) (needs O(target_accuracy)) - the
        efficiency of the time to the target (its seconds times the GPUs, against the smallest count's), and the
        PS counts predicted to reach it first.
    type: raw
  image_size:
    description: Image size in pixels for every model; 0 for each model's default. Checked against each model's minimum.
    type: int
    default: 0
  data:
    description: C(synthetic), C(real) or C(both).
    type: raw
    default: synthetic
  data_dir:
    description:
      - Directory of ImageNet TFRecords on the nodes; required for real data. Several, comma-separated, are a
        sweep axis of the real-data runs (each run then has its own C(data_dir)); C(data_dirs) lists them.
    type: str
  repetitions:
    description: Repetitions of each configuration (the study used 5).
    type: int
    default: 5
  warmup_steps:
    description: Warm-up steps, not measured (the study used 10).
    type: int
    default: 10
  steps:
    description: Measured steps (the study used 100).
    type: int
    default: 100
  devices_per_worker:
    description: Devices each worker drives (8 for one worker per p2.8xlarge node).
    type: int
    default: 1
  ps_on_worker_nodes:
    description: Run parameter servers on the worker nodes (the study's best setting).
    type: bool
    default: true
  sweep_id:
    description:
      - Identifier of this sweep (letters, digits, C(.), C(_), C(-)); run ids are derived
        from it and from a digest of each run's configuration. Giving the id of an earlier
        sweep resumes it, see O(results_db).
    type: str
    required: true
  results_db:
    description:
      - The results store. Runs of this sweep already recorded there as ok are returned with
        C(done=true), so that re-running an interrupted sweep runs only what is missing.
      - Checked before anything starts - an existing store must be SQLite of this project's schema,
        pass C(PRAGMA quick_check) and take a write (one row of its C(meta) table); a new one must be
        creatable (a probe database beside it, written and removed); its file system needs 1 MB free.
    type: path
  sweep_extend:
    description:
      - Allow a resume (O(sweep_id) of a sweep recorded in O(results_db)) to ask for another configuration than
        the recorded one; its new runs join that sweep. Without it such a resume fails, showing both.
    type: bool
    default: false
  workload:
    description:
      - What each run measures. V(ours) - C(python -m dtfbench train). C(tf_cnn_benchmarks@REF) - the
        original C(scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py) of tensorflow/benchmarks at the git
        branch, tag or commit REF (no spaces, no C(..), not starting with C(-)).
      - With C(tf_cnn_benchmarks) the models are its own of 2017 (alexnet, googlenet, inception3,
        inception4, lenet, overfeat, resnet50, resnet101, resnet152, trivial, vgg11, vgg16, vgg19),
        O(variable_update) is C(parameter_server) or C(distributed_replicated), O(image_size) must be 0,
        O(warmup_steps) at least 1, and each run gets its flags in RV(runs[].workload_args).
      - V(cscs2017) (or C(cscs2017@REF)) - the study's own copy of tf_cnn_benchmarks, with the same checks.
    type: str
    default: ours
  eval_every_steps:
    description:
      - Held-out top-1 and top-5 on the C(validation-*) shards of O(data_dir) every N measured steps and after the
        last. Needs O(data=real) and a workload that can evaluate (V(ours)); omitted or empty, no evaluation.
        A run with it is another run than one without (its id, the sweep's configuration).
    type: raw
  target_accuracy:
    description:
      - Time to accuracy - each run trains until an evaluation's top-1 reaches this fraction (above 0, at most 1),
        or O(max_epochs), and records when. Needs O(eval_every_steps). Omitted or empty, runs of a fixed length.
    type: raw
  max_epochs:
    description: With O(target_accuracy), the most epochs a run trains before it gives up (not converged).
    type: raw
  optimizer:
    description:
      - The optimizer of the runs (V(sgd) or V(momentum), workload V(ours)); a comma list or a list is a sweep axis.
        Omitted, the workload's own.
    type: raw
  learning_rate:
    description:
      - The learning rate of the runs for one device's batch (above 0, workload V(ours)); a comma list or a list is a
        sweep axis. Omitted, the workload's own.
    type: raw
  lr_scaling:
    description:
      - How the learning rate follows the images an update averages - V(none), or V(linear) (Goyal et al. 2017);
        a comma list or a list is a sweep axis. Omitted, the workload's own (none).
    type: raw
  warmup_epochs:
    description:
      - With O(lr_scaling=linear), the epochs over which the rate rises from O(learning_rate) to the scaled one
        (O(data=real)). Omitted, no warm-up.
    type: raw
  sync:
    description:
      - Synchronous (V(true)) or asynchronous (V(false)) updates in the PS modes, or both (V(true,false), a sweep
        axis); omitted, the workload's own (synchronous). V(collective_all_reduce) is always synchronous (refused
        with V(false) alone).
    type: raw
  cache:
    description:
      - The page cache of O(data_dir)'s C(train-*) and C(validation-*) files at each real-data run's start - V(cold)
        (dropped) or V(warm) (read in), or both (V(cold,warm), a sweep axis); omitted, left as it is. Refused
        without real data. Each run gets C(cache); the launcher sets it on every node after its read test.
    type: raw
  background_io:
    description:
      - Nodes of the inventory that read each real-data run's O(data_dir) while it measures (C(dtfbench
        background_read)), as another job's load on a shared file system; a list with V(none) is a sweep axis
        (V(none,node04) - the runs with and without it). The nodes named run no task of the sweep. Each run gets
        C(background_io), a configuration key; the reader's MB/s during the run is recorded with it. SSH launcher
        and real data only.
    type: raw
  background_io_mb_per_s:
    description: The background reader's bound in MB/s; omitted, as fast as the storage gives.
    type: raw
  input_format:
    description:
      - How O(data_dir) holds the records - V(tfrecord) (ImageNet's shards, the default) or V(lmdb) (the same
        records, one C(.lmdb) file a shard, from C(dtfbench tfrecords --format lmdb)), or both (V(tfrecord,lmdb), a
        sweep axis). A configuration key; refused without real data, and for a workload that reads TFRecords only.
    type: raw
  data_staging:
    description:
      - V(copy) - every node copies O(data_dir)'s dataset to O(stage_dir) (node-local disk) before the first run,
        checked and timed (M(dataset_stage)), and the runs read the copy (each run's C(data_dir) is O(stage_dir)).
        RV(staging) says from where to where. Refused without real data, with several O(data_dir)s, or without
        O(stage_dir).
    type: str
    default: none
    choices: [none, copy]
  stage_dir:
    description: The node-local folder O(data_staging=copy) copies into; absolute, and apart from O(data_dir).
    type: str
  checkpoint_every_steps:
    description:
      - Worker 0 saves the variables into O(checkpoint_dir) every N measured steps (every worker in
        V(collective_all_reduce)), timed; each run gets C(checkpoint_every_steps), a configuration key. Refused for
        a workload that does not time its checkpoints, and without O(checkpoint_dir).
    type: raw
  checkpoint_every_secs:
    description: The same every S seconds; refused with V(collective_all_reduce) (its workers save at one step).
    type: raw
  checkpoint_dir:
    description: The absolute folder on the nodes the checkpoints go to; every run of the sweep saves there.
    type: str
  extra_args:
    description:
      - Flags every run's command line ends with (a system profile's C(extra_args)), e.g.
        C([--num_intra_threads, "1"]). A list of strings or numbers; anything else is refused by name.
    type: raw
    default: []
  left_out:
    description:
      - The group's hosts that ansible-playbook's C(--limit) took out of the play (not in O(hosts)); an error
        about too few hosts names them.
    type: list
    elements: str
    default: []
  check_only:
    description:
      - Look at O(results_db) without writing (ansible-playbook C(--check)) - a store that does not exist yet is
        checked by the permissions of its nearest existing folder, and no folder or probe is made.
    type: bool
    default: false
  launcher:
    description:
      - How the runs will be started (C(ssh) or C(slurm)); the benchmark role's setting, which it needs before the
        plan. Omitted, C(ssh).
    type: str
    choices: [ssh, slurm]
  submit:
    description:
      - Whether the runs will run. V(false) only writes a Slurm job's scripts, so it is refused with
        the C(ssh) launcher, and with an adaptive sweep (O(num_ps=auto), O(stop_below_efficiency),
        O(min_doubling_gain)), which chooses each GPU count's runs from what the smaller counts measured.
        Omitted, V(true).
    type: bool
  tf_modules:
    description:
      - The environment modules a Slurm job loads. When one of them names a TensorFlow version
        (C(TensorFlow/1.1.0-...)), a workload that cannot run on it is refused, naming both and the fix -
        V(ours) on TensorFlow 1.x, V(cscs2017) on TensorFlow 2.
    type: list
    elements: str
    default: []
  ps_port_base:
    description:
      - Port of the first parameter server on a host, as M(tf_cluster_spec)'s - the launcher's (the benchmark
        role passes the tf_cluster role's C(tf_cluster_ps_port_base) where given). Every run's C(layout) is
        computed with it.
    type: int
    default: 2230
  worker_port_base:
    description: Port of the first worker on a host, as O(ps_port_base) (C(tf_cluster_worker_port_base)).
    type: int
    default: 2220
  step_timeout:
    description:
      - The run's C(step_timeout) in seconds, checked here - a whole number above 0. Not part of the plan's
        runs; the resolved timeouts are returned as RV(timeouts).
    type: raw
    default: 120
  startup_timeout:
    description: The run's C(startup_timeout) in seconds, checked as O(step_timeout).
    type: raw
    default: 300
  ready_timeout:
    description: The run's C(ready_timeout) in seconds, checked as O(step_timeout).
    type: raw
    default: 180
  run_timeout:
    description: The run's C(run_timeout) in seconds, checked as O(step_timeout).
    type: raw
    default: 1800
notes:
  - Supports check mode (it changes nothing in any mode).
"""

EXAMPLES = r"""
- name: Plan a sweep over 1, 2 and 4 GPUs with the study's PS sweep
  benchmark_plan:
    hosts: "{{ groups['tf_nodes'] | tf_node_specs(hostvars) }}"
    gpus: "1,2,4"
    model: inception3
    batch_size: 64
    repetitions: 5
    sweep_id: "{{ sweep_id }}"
  run_once: true
  delegate_to: localhost
  register: plan
"""

RETURN = r"""
sweep_id:
  description: The sweep's identifier.
  returned: success
  type: str
  sample: 20261122T101500-a1b2
total_runs:
  description: Number of runs in the sweep.
  returned: success
  type: int
  sample: 4
pending_runs:
  description: Runs not yet recorded as ok in O(results_db).
  returned: success
  type: int
  sample: 4
runs:
  description:
    - One entry per run, in execution order. C(workload) is V(ours) or C(tf_cnn_benchmarks@REF);
      with the latter, C(workload_args) holds the run's tf_cnn_benchmarks flags (after the cluster flags).
    - C(layout) is the run's cluster layout on O(hosts) with O(ps_port_base) and O(worker_port_base), as
      M(tf_cluster_spec) returns it; the SSH launcher (the tf_cluster role) runs it as it is, computing none
      again. A Slurm job computes its own on the nodes it gets (known only inside the job).
    - C(launch) is what the launcher runs, resolved by the workload's contract (C(dtfbench.plan.workloads))
      - C(args), the command line after the cluster flags (O(extra_args) last); C(stall_timeout), the
      seconds a task's heartbeat may stand still (0 where the workload beats none); C(ps_exit_timeout),
      the seconds its PSs get to exit by themselves (0 where they never do).
  returned: success
  type: list
  elements: dict
  sample:
    - {index: 1, run_id: 20261122T101500-a1b2-1-3f9c2a1e, image_size: null, gpus: 1, num_workers: 1, num_ps: 1,
       model: small_cnn, batch_size: 32, variable_update: parameter_server, data: synthetic,
       repetition: 1, devices_per_worker: 1, ps_on_worker_nodes: true, warmup_steps: 10, steps: 100,
       workload: ours, done: false, worker_nodes: 1,
       launch: {args: [--variable_update, parameter_server, --model, small_cnn, --batch_size, "32", --num_gpus, "1",
                       --num_warmup_batches, "10", --num_batches, "100", --step_timeout, "120",
                       --startup_timeout, "300"],
                stall_timeout: 120, ps_exit_timeout: 60}}
program:
  description:
    - How the nodes start the workload - C(argv) after the node's Python (null where the program is
      fetched at a git ref, C(fetch) true, and the role sets it on each node), and C(venv), whether it
      runs in the project's virtualenv or on the node's own Python (a TF module's).
  returned: success
  type: dict
  sample: {argv: [-m, dtfbench, train], fetch: false, venv: true}
capabilities:
  description:
    - What the workload can run - C(models), C(variable_updates), C(data), C(data_formats),
      C(image_size), C(evaluation), C(timeouts) (the run timeouts it takes as flags), C(heartbeat),
      C(ps_exits) and C(tf_majors).
  returned: success
  type: dict
  sample: {models: [inception3, resnet50], variable_updates: [parameter_server], data: [synthetic, real],
           data_formats: [tfrecord], image_size: true, evaluation: false, timeouts: [step_timeout, startup_timeout],
           heartbeat: true, ps_exits: true, tf_majors: [2]}
sweep_config:
  description: The sweep's configuration, as recorded with its runs (a resume must ask for the same).
  returned: success
  type: dict
  sample: {gpus: [1, 2], model: [small_cnn], batch_size: [32], num_ps: [1], repetitions: 3}
data_dirs:
  description: Every data location the real-data runs read (the dataset check looks in each); empty without real data.
  returned: success
  type: list
  elements: str
  sample: [/mnt/lustre/imagenet, /mnt/local_ssd/imagenet]
staging:
  description: With O(data_staging=copy), C(source) (O(data_dir)) and C(target) (O(stage_dir)); else null.
  returned: success
  type: dict
  sample: {source: /scratch/shared/imagenet, target: /mnt/local_ssd/imagenet}
background_io:
  description:
    - With O(background_io), C(hosts) (the nodes that read beside the runs and run no task), C(axis) (each run's
      value, V(null) for the runs without) and C(mb_per_s) (the bound; V(null) - none); V(null) otherwise.
  returned: success
  type: dict
checkpoint_dir:
  description: With O(checkpoint_every_steps) or O(checkpoint_every_secs), the folder worker 0 saves into; else null.
  returned: success
  type: str
  sample: /mnt/local_ssd/checkpoints
notes:
  description: What the plan changed in the request, to tell the user (repeated values folded).
  returned: success
  type: list
  elements: str
  sample: ["model=resnet50,resnet50 repeats resnet50: each configuration runs once per repetition ..."]
adaptive:
  description:
    - Null for a sweep that runs every planned run. Else the settings of an adaptive sweep - C(num_ps_auto),
      C(num_ps_auto_keep), C(stop_below_efficiency), C(min_doubling_gain) - for C(python -m dtfbench adaptive_sweep),
      which chooses each GPU count's runs among RV(runs) while the sweep runs.
  returned: success
  type: dict
  sample: {num_ps_auto: true, num_ps_auto_keep: null, stop_below_efficiency: 0.5, min_doubling_gain: null}
timeouts:
  description: The run timeouts in seconds, as given or by default, that the launchers apply to every run.
  returned: success
  type: dict
  sample: {step_timeout: 120, startup_timeout: 300, ready_timeout: 180, run_timeout: 1800}
workload:
  description:
    - The workload - C(name) (V(ours) or C(tf_cnn_benchmarks)), C(ref) (null for ours), C(label)
      (as the runs carry it) and C(notes) (what differs from a run of ours, to tell the user).
  returned: success
  type: dict
  sample: {name: tf_cnn_benchmarks, ref: master, label: tf_cnn_benchmarks@master, notes: []}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.adapters.calls import module_main
from ansible.module_utils.dtfbench.plan.sweep import ARGUMENT_SPEC, PlanError
from ansible.module_utils.dtfbench.results.sweep_resume import plan_from_params


# plugins/action/benchmark_plan.py computes the same on the controller without a module process (the
# project's ansible.cfg enables it); this module is what runs elsewhere.
def main():
    module_main(AnsibleModule, ARGUMENT_SPEC, plan_from_params, (PlanError,))


if __name__ == "__main__":
    main()
