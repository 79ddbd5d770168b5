#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)


DOCUMENTATION = r"""
---
module: tf_host_run
short_description: Run one host's part of a TensorFlow cluster run in one call per phase
description:
  - Drives all the tasks (parameter servers and workers) that one host runs in one run of a
    cluster layout (M(tf_cluster_spec)'s C(hosts[<host>])), with the process model of
    M(tf_task) (a supervisor per task, exit status recorded, clean stopping), in three calls
    instead of a dozen M(tf_task) calls per host - on a controller that fans out to many
    hosts, each module call costs CPU on both sides, so the number of calls per run is what
    the orchestration overhead scales with.
  - O(state=checked) changes nothing. It reports whether this host's part of the run
    already completed (the C(<run_dir>/complete) marker that O(state=stopped) writes, with
    the stored worker results) and which of the host's ports already accept connections
    (another program, or a stale task, holds them). The caller decides, across hosts, that
    no host starts anything while any port is taken.
  - O(state=started) starts every task of the host at once (parameter servers first, no
    waiting in between - a worker waits for its parameter servers itself) and returns once
    every task accepts connections on its port. It fails fast, with the log tail, when a
    task exits before its port is ready, and after O(ready_timeout). A task that already
    runs is not started again.
  - O(state=finished) does what O(state=started) does, then waits until every worker of the
    host has exited (or O(timeout) passes) and returns each worker's exit status and result
    file. It fails at the first failure it sees - a worker that exits non-zero or is
    killed, or a parameter server of this host that dies while its workers run - with that
    task's message and the time it ended (C(failed_at)), so that the caller can tell the
    cause of a failed run from its consequences on other hosts. A host with no workers
    returns once its parameter servers listen.
  - A frozen task (stopped by SIGSTOP, stuck in the kernel) cannot end by its own timeouts.
    With O(stall_timeout), O(state=finished) watches each task's heartbeat, the file
    C(<run_dir>/<name>.heartbeat) whose path the program finds in C(DTFBENCH_TASK_HEARTBEAT)
    and whose mtime it moves while it runs (dtfbench's workload does, every second). A task
    whose heartbeat stands still for O(stall_timeout) is stopped and the call fails naming
    it (C(frozen)), with the time its heartbeat last moved as C(failed_at) - the cause, ahead
    of its peers' timeouts. A program that keeps no heartbeat is bounded by O(timeout) only.
  - A task whose program ended while its supervisor does not record it (the supervisor is
    stopped) is judged by the program's own exit status, read from C(/proc) while the
    program is a zombie, after 2 s - a worker that finished is not a timeout.
  - O(state=stopped) gives the parameter servers up to O(ps_exit_timeout) to exit by
    themselves (ours do once every worker is done), writes the C(complete) marker when
    O(complete_results) is given, then stops every task of the host (SIGTERM to each task's
    process group, SIGKILL after O(grace_period)). It reports the tasks that had ended by
    themselves with a failure before they were stopped (C(died)), which names a parameter
    server that died on a host without workers. A disk too full for the marker is a warning
    (naming the path and what to free), not a failure, since the results are the controller's already.
  - While O(state=started) and O(state=finished) wait, they watch the controller that waits on
    them. When it goes away - SIGINT, SIGTERM or SIGHUP to this process (Ctrl-C reaches a
    local connection's module that way), or the hang-up of the module's standard output (a
    closed SSH channel, a dead Ansible worker) - every task of the host is stopped at once
    and the call fails with C(interrupted). O(state=stopped) then skips the rest of its wait
    for the parameter servers, and completes the stop.
version_added: "0.3.0"
author:
  - dtfbench developers
options:
  state:
    description:
      - The phase of the run to carry out on this host. Unlike M(tf_task)'s O(state), which is
        the state of one task, a phase has no default - each call names the one it does.
    type: str
    choices: [checked, started, finished, stopped]
    required: true
  run_id:
    description: The run's id; a task's name is C(<run_id>-<job>-<task_index>).
    type: str
    required: true
  run_dir:
    description: This run's directory on the host (pid, log, exit and result files, the marker).
    type: path
    required: true
  tasks:
    description:
      - This host's tasks, as M(tf_cluster_spec) returns them in C(hosts[<host>]).
    type: list
    elements: dict
    required: true
    suboptions:
      job:
        description: C(ps) or C(worker).
        type: str
        required: true
        choices: [ps, worker]
      task_index:
        description: The task's index in its job.
        type: int
        required: true
      address:
        description: The address the task listens on (the host's private address).
        type: str
        required: true
      port:
        description: The task's TCP port.
        type: int
        required: true
      cuda_visible_devices:
        description: The task's C(CUDA_VISIBLE_DEVICES) (empty for a parameter server).
        type: str
        default: ""
      host:
        description: The inventory host (as M(tf_cluster_spec) returns it; not used).
        type: str
      endpoint:
        description: C(address:port) (as M(tf_cluster_spec) returns it; not used).
        type: str
      num_devices:
        description: Devices of the task (as M(tf_cluster_spec) returns it; not used).
        type: int
      device_type:
        description: C(gpu) or C(cpu) (as M(tf_cluster_spec) returns it; not used).
        type: str
  cluster_spec:
    description:
      - "The run's cluster, C({ps: [host:port, ...], worker: [host:port, ...]}), passed to every
        task as C(--ps_hosts) and C(--worker_hosts) with C(--job_name) and C(--task_index)."
      - Required with O(state=started) and O(state=finished).
    type: dict
  program:
    description:
      - The program to run, as an argv prefix (for example C([python, -m, dtfbench, train])); the
        cluster flags, the result flag and O(program_args) follow it.
      - Required with O(state=started) and O(state=finished).
    type: list
    elements: str
  program_args:
    description: Arguments after the cluster flags, the same for every task.
    type: list
    elements: str
    default: []
  result_flag:
    description:
      - The program's flag that names a worker's JSON result file (for example
        C(--result_file)); the module passes C(<run_dir>/worker-<index>.json) with it and reads
        the file back. Empty - the program writes no result file.
    type: str
    default: ""
  ready_timeout:
    description:
      - Seconds every task gets to accept connections on its port.
      - Longer than M(tf_task)'s default (120), which is for one task - here all the tasks of
        the host start at once - and the same as the benchmark's C(ready_timeout).
    type: float
    default: 180.0
  timeout:
    description:
      - Seconds the workers get to finish, counted after they are ready (O(state=finished)).
      - The benchmark's C(run_timeout), the limit of one measured run; M(tf_task)'s default
        (3600) is for any program.
    type: float
    default: 1800.0
  stall_timeout:
    description:
      - Seconds a task's heartbeat may stand still before O(state=finished) takes the task as
        frozen, stops it and fails naming it. C(0) - never (the tasks are bounded by
        O(timeout) only).
      - The benchmark's C(step_timeout) for dtfbench's workload, whose peers give up on a
        frozen task after that long.
    type: float
    default: 0.0
  ps_exit_timeout:
    description: Seconds the parameter servers get to exit by themselves before they are stopped (O(state=stopped)).
    type: float
    default: 0.0
  start:
    description:
      - With O(state=finished), C(false) starts nothing and waits for the tasks that an
        earlier O(state=started) call of the same run started; a task that ended meanwhile
        is collected (its exit status and result), not started again, and one that was never
        started is a failure.
      - For a run on more hosts than Ansible's C(forks), as the tf_cluster role does then. A
        O(state=finished) call holds its fork until the host's workers end, and the workers
        wait for every other worker at TF's start barrier, so the hosts beyond the first
        C(forks) would not start before the barrier gives up. Starting every host first
        (O(state=started) returns once its tasks listen) and then waiting avoids that.
    type: bool
    default: true
  complete_results:
    description:
      - With O(state=stopped), mark this host's part of the run complete, storing these worker
        results in C(<run_dir>/complete) for O(state=checked) to give back. Omit it when the
        host's part failed.
    type: list
    elements: raw
  nic_sample_interval:
    description:
      - Seconds between two samples of the NIC sampler, which O(state=started) and
        O(state=finished) (with O(start=true)) start before the host's tasks, as one more task
        (C(<run_id>-nic-<job>-<index>), after the host's first task) - the bytes in and out of
        the interface that carries the tasks' address, from C(/proc/net/dev), into
        C(<run_dir>/nic-<job>-<index>.samples) - and O(state=stopped) stops. C(0) starts none.
      - A sampler that cannot start or measure never fails the call; the host's figures are
        then C(unknown), with why.
    type: float
    default: 0.1
  nic_window:
    description:
      - With O(state=stopped), the workers' measured window, C({start, end}) in epoch seconds
        (from the first worker's first measured step to the last worker's last), over which C(nic)
        gives this host's bytes. Omitted, C(nic) is C(unknown).
    type: dict
  data_read_dir:
    description:
      - With O(state=checked), a data directory whose raw read rate the check measures, before
        anything of the run starts (a sequential read of its first O(data_read_files) C(train-*)
        shards, with C(O_DIRECT) where the file system allows it), the rate that explains a
        real-data run's throughput (C(data_read) in the results). Omitted, nothing is read.
      - A read that fails (no shards, no access) never fails the call; C(data_read) says why.
    type: path
  data_read_files:
    description: "With O(data_read_dir), how many shards the check reads (at most 512 MB in all)."
    type: int
    default: 4
  data_cache:
    description:
      - With O(data_read_dir), the page cache the run starts with, set after the read (docs/storage.md).
        V(cold) drops the pages of every C(train-*) and C(validation-*) file (C(posix_fadvise(DONTNEED))),
        V(warm) reads them all once. Omitted, the cache is left as it is.
      - Either way C(data_read.cache) says how much of the dataset is in the page cache when the run starts.
    type: str
    choices: [cold, warm]
extends_documentation_fragment:
  - dtfbench_task
notes:
  - Supports check mode. O(state=checked) reports as always; the other states only report
    what they would do.
  - With the project's action plugins (C(ansible.cfg)), the action plugin of the same name
    validates the options on the controller and runs this module's code on the host without
    AnsiballZ when pipelining is on (a fifth of the host's CPU per call); the module runs
    without pipelining, with become, async or delegation, or before the host's Python is known.
  - The direct call keeps its code on the host, once per version, in the user's cache folder
    (C($XDG_CACHE_HOME/dtfbench/host-code), by default C(~/.cache/dtfbench/host-code)), where
    Python keeps its bytecode; versions unused for a week are removed. Where that folder
    cannot be written, or others may write to it, the code is imported from a temporary zip.
seealso:
  - module: tf_task
  - module: tf_cluster_spec
"""

EXAMPLES = r"""
- name: Check this host's part of the run
  tf_host_run:
    state: checked
    run_id: "{{ run_id }}"
    run_dir: "/tmp/dtfbench/runs/{{ run_id }}"
    tasks: "{{ layout.hosts[inventory_hostname] }}"
  register: check

- name: Start this host's tasks and wait for its workers
  tf_host_run:
    state: finished
    run_id: "{{ run_id }}"
    run_dir: "/tmp/dtfbench/runs/{{ run_id }}"
    tasks: "{{ layout.hosts[inventory_hostname] }}"
    cluster_spec: "{{ layout.cluster_spec }}"
    program: ["{{ dtfbench_python }}", -m, dtfbench, train]
    program_args: [--model, trivial, --num_batches, "100"]
    result_flag: --result_file
    timeout: 1800
  register: host_run

- name: Stop this host's tasks and mark its part complete
  tf_host_run:
    state: stopped
    run_id: "{{ run_id }}"
    run_dir: "/tmp/dtfbench/runs/{{ run_id }}"
    tasks: "{{ layout.hosts[inventory_hostname] }}"
    ps_exit_timeout: 60
    complete_results: "{{ host_run.workers | map(attribute='result') | list }}"
"""

RETURN = r"""
complete:
  description: Whether this host's part of the run completed earlier (the marker exists).
  returned: when O(state=checked)
  type: bool
stored_results:
  description: The worker results stored in the marker when it was written.
  returned: when O(state=checked) and C(complete) is true
  type: list
  elements: raw
run_dir:
  description:
    - The run directory (absolute), and O(run_id), for a controller that has to stop the run
      later (the callback plugin C(dtfbench_interrupt)).
  returned: when O(state=checked)
  type: str
run_id:
  description: O(run_id).
  returned: when O(state=checked)
  type: str
busy:
  description: The host's ports that already accept connections, one entry per task.
  returned: when O(state=checked)
  type: list
  elements: dict
  contains:
    job:
      description: The task's job.
      type: str
    task_index:
      description: The task's index.
      type: int
    address:
      description: The address probed.
      type: str
    port:
      description: The port that is taken.
      type: int
    pids:
      description: Pids that listen on the port (best effort).
      type: list
      elements: int
    msg:
      description: One line naming the port, the task that wants it and who holds it.
      type: str
data_read:
  description:
    - The raw read rate of O(data_read_dir) - C(mb_per_s), C(bytes), C(seconds), C(files),
      C(direct) (whether the read bypassed the page cache) and C(data_dir) - or C(data_dir) and
      C(error) where the read failed.
    - C(filesystem), the file system under O(data_read_dir) (C(fs_type), C(source), C(mount_point), C(network)),
      and C(cache), the page cache after O(data_cache) (C(setting), C(files), C(bytes), C(seconds), and
      C(resident), the fraction of the dataset's pages in memory), or C(setting) and C(error).
  returned: when O(state=checked) and O(data_read_dir) is given
  type: dict
room_problem:
  description:
    - Null, or one line saying that the disk of O(run_dir) has less room than a run needs
      (1 MB, for its logs, exit records, results and marker), with the path, the room left and
      what to free. The caller starts nothing then, as for a busy port.
  returned: when O(state=checked)
  type: str
tasks:
  description: Per task, what the phase did (name, pid, ready, started, ended exit record).
  returned: when O(state=started), O(state=finished) or O(state=stopped)
  type: list
  elements: dict
workers:
  description:
    - Per worker of this host, in task order - C(task_index), C(rc), C(signal_name),
      C(runtime), C(result) (the parsed result file, or null) and C(log_tail).
  returned: when O(state=finished)
  type: list
  elements: dict
failed_at:
  description: When the failed task ended (seconds since the epoch), or when the failure was seen.
  returned: failure of O(state=started) or O(state=finished)
  type: float
frozen:
  description: The names of the tasks that the call stopped because their heartbeat stood still (O(stall_timeout)).
  returned: failure of O(state=finished) for that reason
  type: list
  elements: str
interrupted:
  description: True when the call stopped the host's tasks because the controller went away.
  returned: failure of O(state=started) or O(state=finished) for that reason
  type: bool
died:
  description:
    - Tasks that had ended by themselves with a non-zero exit or a signal before
      O(state=stopped) stopped the rest - C(name), C(msg), C(ended).
  returned: when O(state=stopped)
  type: list
  elements: dict
nic:
  description:
    - This host's NIC bytes over O(nic_window) - C(status) C(ok) with C(interface), C(address),
      C(rx_bytes), C(tx_bytes), C(seconds), C(rx_bytes_per_s), C(tx_bytes_per_s), C(samples),
      C(interval); or C(status) C(unknown) with C(reason).
  returned: when O(state=stopped)
  type: dict
"""
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.adapters.calls import run_main
from ansible.module_utils.dtfbench.launch.host_run import HostRun
from ansible.module_utils.dtfbench.launch.host_run_spec import ARGUMENT_SPEC
from ansible.module_utils.dtfbench.launch.task import TaskError


def main():
    # The spec lives beside the code (the action plugin validates with it too).
    run_main(
        AnsibleModule,
        ARGUMENT_SPEC,
        lambda module: HostRun(module.params, module.check_mode, module.warn).run(),
        TaskError,
    )


if __name__ == "__main__":
    main()
