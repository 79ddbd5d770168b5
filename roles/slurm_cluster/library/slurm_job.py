#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_job
short_description: Submit one dtfbench batch job (once per run directory), wait for it, collect its results
description:
  - A run directory names one job. The first call submits O(script) with C(sbatch --parsable)
    and records the job id in C(job.json) of O(run_dir); a later call finds it there and does
    not submit again, so running twice changes nothing. A job that ended in a failure state is
    submitted anew when O(resubmit_failed) is true (a resumed sweep retries failed runs).
  - Waits by polling C(scontrol show job) every O(poll_interval) seconds (no accounting
    database needed) until the job is in a final state, for at most O(timeout) seconds (queue
    time included); then cancels the job (O(cancel_on_timeout)). A job the controller has
    already forgotten (older than C(MinJobAge)) is judged by the exit status its batch script
    left in the job directory.
  - Collects what the job wrote into its directory C(<run_dir>/job-<id>/) -
    C(layout.json) (the layout the job computed on its allocation with dtfbench's layout code, C(dtfbench_layout.py))
    and each worker's C(worker-<i>.json) - and adds the job id and node list to every
    worker result.
  - Fails only when the scheduler cannot be used (sbatch refuses the job, scontrol keeps
    failing); a job that fails is a success of this module with RV(failure) saying why.
  - While it waits, it watches its controller. On Ctrl-C or SIGTERM passed on to the module, a
    SIGHUP, or the hang-up of its standard output (the SSH channel of a controller that went
    away), it cancels the job (C(scancel)), waits for the job to leave the queue and fails
    with C(interrupted), so that an interrupted sweep never leaves a job training.
  - O(state=cancelled) cancels the job that O(run_dir) submitted, if it is still queued or
    running, with the Slurm client environment (C(SLURM_*)) it was submitted with; the
    watchdog of an interrupted ansible-playbook (C(playbooks/stop-interrupted.yml)) uses it.
version_added: "0.1.0"
author: dtfbench developers
options:
  run_dir:
    description: The run's directory (shared with the compute nodes); holds the script and C(job.json).
    type: path
    required: true
  state:
    description:
      - C(submitted) submits the run's job once and, with O(wait), waits for it and collects its results.
      - C(cancelled) cancels the run's job if it is still queued or running and waits (at most 60 s)
        for the scheduler to end it; nothing to cancel (no job, or it has ended) changes nothing.
    type: str
    choices: [submitted, cancelled]
    default: submitted
  script:
    description: The batch script; default C(<run_dir>/job.sbatch).
    type: path
  wait:
    description: Wait for the job to end and collect its results. False returns after submitting.
    type: bool
    default: true
  poll_interval:
    description: Seconds between two C(scontrol show job).
    type: float
    default: 2.0
  timeout:
    description: Seconds to wait for the job to end, its time in the queue included.
    type: float
    default: 86400
  cancel_on_timeout:
    description: Cancel (C(scancel)) a job still queued or running at O(timeout).
    type: bool
    default: true
  resubmit_failed:
    description: Submit anew when the run's last job ended in a failure state; false returns its outcome again.
    type: bool
    default: true
  output_lines:
    description: Lines of the end of the job's output quoted in RV(failure).
    type: int
    default: 30
  layout:
    description:
      - The layout request (C(gpus), C(num_ps), C(devices_per_worker), C(ps_on_worker_nodes),
        C(ps_port_base), C(worker_port_base), C(devices_per_node), C(device_type)), used to
        compute the layout on the job's nodes with the same code when the job wrote none
        (it failed before).
    type: dict
    default: {}
notes:
  - Supports check mode (reports whether it would submit; submits nothing).
"""

EXAMPLES = r"""
- name: Submit the run's job and wait for it
  slurm_job:
    run_dir: /scratch/snx3000/me/dtfbench/runs/sweep1-01
    poll_interval: 2
    timeout: 7200
  register: job

- name: Cancel the run's job, if it still runs
  slurm_job:
    run_dir: /scratch/snx3000/me/dtfbench/runs/sweep1-01
    state: cancelled
"""

RETURN = r"""
job_id:
  description: The Slurm job id (empty with O(state=cancelled) when the run directory submitted none).
  returned: success
  type: str
  sample: "4711"
cancelled:
  description: Whether this call cancelled the job (O(state=cancelled)).
  returned: success
  type: bool
submitted:
  description: Whether this call submitted the job.
  returned: success
  type: bool
state:
  description: The job's state (C(COMPLETED), C(FAILED), C(TIMEOUT), C(CANCELLED), ...; C(PENDING)/C(RUNNING) with O(wait=false)).
  returned: success
  type: str
  sample: COMPLETED
exit_code:
  description: Slurm's ExitCode (status:signal).
  returned: success
  type: str
  sample: "0:0"
reason:
  description: Slurm's Reason of the job.
  returned: success
  type: str
  sample: None
nodelist:
  description: The job's node list in Slurm's notation.
  returned: success
  type: str
  sample: nid0[0012-0015]
nodes:
  description: The node list expanded.
  returned: success
  type: list
  elements: str
job_dir:
  description: The job's directory (layout, task logs, worker results).
  returned: success
  type: str
output:
  description: The job's output file.
  returned: success
  type: str
failure:
  description: Empty when the job completed; else why it failed, with the end of its output.
  returned: success
  type: str
layout:
  description: The layout the job used (C(layout.json)), or computed on its nodes; null when it got none.
  returned: success
  type: dict
workers:
  description: One entry per worker result found, C({task_index, result}), in task order; each result carries C(slurm_job_id) and C(slurm_nodelist).
  returned: success
  type: list
  elements: dict
data_read:
  description:
    - "Every node's read test of the data, C({node: result}), where the job ran one (the slurm_cluster
      role's O(slurm_cluster_data_read_dir)): C(data_read-<node>.json) in the job's folder, the JSON of
      C(dtfbench read_throughput) - C(mb_per_s), C(bytes), C(seconds), C(files), C(direct), C(filesystem),
      C(cache) - or C(data_dir) and C(error) where the read failed. Empty without a read test."
  returned: success
  type: dict
staging:
  description:
    - "Every node's staging of the dataset, C({node: report}), where the job staged one (the slurm_cluster
      role's O(slurm_cluster_stage_source)): C(staging-<node>.json) in the job's folder, the JSON of the
      dataset_stage module's engine - C(copied_files), C(copied_bytes), C(seconds), C(already_staged), ... -
      or C(error) where it failed. Empty without a staging."
  returned: success
  type: dict
nic:
  description:
    - "Every node's NIC bytes over the workers' measured window, C({node: figures}): what each node's
      NIC sampler (C(nic-<node>.samples) in the job's folder) counted on the interface that carries its
      TF address - C(status) C(ok) with C(rx_bytes), C(tx_bytes), C(seconds), C(rx_bytes_per_s),
      C(tx_bytes_per_s), C(interface); or C(status) C(unknown) with C(reason)."
  returned: success
  type: dict
elapsed:
  description: Seconds this call waited.
  returned: success
  type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.adapters.calls import run_main
from ansible.module_utils.dtfbench.launch.slurm_job import ARGUMENT_SPEC, JobError, slurm_job


def main():
    # The logic lives in src/dtfbench/launch/slurm_job.py (tested there without Ansible).
    run_main(
        AnsibleModule,
        ARGUMENT_SPEC,
        lambda module: slurm_job(module.params, module.check_mode, module.run_command, module.get_bin_path),
        JobError,
    )


if __name__ == "__main__":
    main()
