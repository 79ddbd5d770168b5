#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)


DOCUMENTATION = r"""
---
module: tf_task
short_description: Start, wait for and stop one TensorFlow task process (parameter server or worker)
description:
  - Manages one long-running program on the target host - a TensorFlow parameter server or
    worker (C(python -m dtfbench train --job_name ps ...)), or any program of the user that
    takes the cluster flags - the way the 2017 study's launchers did with bash and screen, but
    with readiness, exit status and clean stopping.
  - O(state=started) starts the program detached, through a small supervisor (a fork of the
    module's process, named C(tf_task-superv) in the process table; the leader of a new
    session and process group; stdin C(/dev/null); stdout and stderr to
    C(<run_dir>/<name>.log); its pid in C(<run_dir>/<name>.pid)). The supervisor runs the
    program as its child, waits for it and writes its exit status (exit code or signal)
    atomically to C(<run_dir>/<name>.exit), so that O(state=finished) can report it later
    without being the program's parent. The module returns once O(port) accepts TCP
    connections on O(ready_host), fails fast with the log tail when the program exits before
    that, and after O(ready_timeout) stops the whole process group and fails.
  - O(state=finished) waits until the program exits (or O(timeout) passes) and returns its exit
    code, the parsed O(result_file) and the tail of its log. A non-zero exit or a signal fails
    the task. Waiting changes nothing, so C(changed) is always false.
  - O(state=stopped) sends SIGTERM to the process group (and to every process that carries the
    task's environment marker, which also finds descendants that moved to another process
    group or session), then SIGCONT so that a stopped process acts on it, waits up to
    O(grace_period), then sends SIGKILL, and checks that none of them remain.
  - Every program started by this module carries C(DTFBENCH_TF_TASK=<run_dir>/<name>) in its
    environment; a live pid file is trusted only when that process is this task's supervisor
    (its name in C(/proc/<pid>/comm), and its standard output this task's log), so stale pid
    files and reused pids are harmless.
  - The program also finds C(DTFBENCH_TASK_HEARTBEAT=<run_dir>/<name>.heartbeat) in its
    environment - a file whose mtime it may move while it runs, which M(tf_host_run) watches
    (its O(stall_timeout)) to tell a frozen task.
version_added: "0.1.0"
author: dtfbench developers
options:
  name:
    description:
      - Unique id of the task on the host, for example C(run-20260101-ps-0). Names the pid, log
        and exit files. Letters, digits, C(.), C(_), C(-), C(+), C(@); it must start with a letter
        or digit.
    type: str
    required: true
  argv:
    description:
      - The full command line of the program, for example
        C([/opt/venv/bin/python, -m, dtfbench, train, --job_name, ps, --task_index, "0", ...]).
      - The first element is looked up in the PATH of the task's environment when it has no
        C(/), else taken relative to O(chdir).
      - Required when O(state=started); ignored otherwise.
    type: list
    elements: str
  chdir:
    description:
      - Working directory of the program; defaults to O(run_dir).
      - A relative O(result_file) is taken relative to it.
    type: path
  run_dir:
    description:
      - Directory of C(<name>.pid), C(<name>.log) and C(<name>.exit); created when missing.
        Use one per run.
    type: path
    required: true
  state:
    description:
      - V(started) - the program runs and O(port) is ready (idempotent). With
        O(wait_ready=false) it returns as soon as the program is spawned.
      - V(ready) - wait until an already started task accepts connections on O(port); never
        starts anything, and fails with the log tail when the task has exited. Together with
        O(wait_ready=false) this starts many tasks at once and then waits for all of them.
      - V(finished) - wait for the program to exit and report how it went.
      - V(stopped) - no process of the task remains (idempotent).
    type: str
    choices: [started, ready, finished, stopped]
    default: started
  wait_ready:
    description:
      - With O(state=started), wait until O(port) accepts connections before returning.
        V(false) returns right after the spawn; follow with O(state=ready).
    type: bool
    default: true
  port:
    description:
      - TCP port the program listens on. With O(state=started) the module returns once a
        connection to O(ready_host):O(port) succeeds; without it, right after the start.
      - Before starting, the module fails when the port already accepts connections (another
        process, perhaps a stale task, would answer instead of the new one).
    type: int
  ready_host:
    description: Address to connect to for the readiness check.
    type: str
    default: 127.0.0.1
  ready_timeout:
    description:
      - Seconds to wait for O(port) with O(state=started). When they pass, the task's process
        group is stopped (SIGTERM, O(grace_period), SIGKILL) and the module fails.
      - The default is for one task. M(tf_host_run)'s is longer (180), as it starts all the
        tasks of a host at once, and is the benchmark's C(ready_timeout).
    type: float
    default: 120
  timeout:
    description:
      - Seconds O(state=finished) waits for the program to exit.
      - The default is for any program, however long it runs. M(tf_host_run)'s is the
        benchmark's C(run_timeout) (1800), the limit of one measured run.
    type: float
    default: 3600
  stop_on_timeout:
    description:
      - With O(state=finished), stop the task when O(timeout) passes (before failing). Leave it
        V(false) to stop it in a playbook's C(always:) section instead.
    type: bool
    default: false
  result_file:
    description:
      - JSON file the program writes (for example C(--result_file) of C(python -m dtfbench train)).
        With O(state=finished) it is returned parsed as RV(result); a non-zero exit reports its
        C(reason) (or C(error), C(message)) key.
      - Relative paths are taken relative to O(chdir) (or O(run_dir)).
    type: path
attributes:
  check_mode:
    support: full
    description:
      - V(started) and V(stopped) report whether they would change something and act on
        nothing. V(finished) does not wait; it reports the current state.
  diff_mode:
    support: none
    description: Nothing to diff.
notes:
  - Only Linux (it reads C(/proc)). The supervisor is a fork of the module's Python process;
    its command line and environment in C(/proc) are the module's.
  - The processes are detached from the Ansible connection. A host whose logind kills a
    user's processes at logout (C(KillUserProcesses=yes)) needs lingering for that user.
  - A descendant that both leaves the process group and clears its environment cannot be
    found by O(state=stopped).
  - The supervisor ignores SIGTERM, SIGINT and SIGHUP sent to it alone (it records them and
    keeps waiting for the program, whose exit status it then writes); stop a task through its
    process group, as O(state=stopped) does.
extends_documentation_fragment:
  - dtfbench_task
seealso:
  - module: tf_cluster_spec
"""

EXAMPLES = r"""
- name: Start parameter server 0 and wait until it listens
  tf_task:
    name: "{{ run_id }}-ps-0"
    run_dir: "/tmp/dtfbench/{{ run_id }}"
    argv:
      - /opt/dtfbench/venv/bin/python
      - -m
      - dtfbench
      - train
      - --job_name=ps
      - --task_index=0
      - "--ps_hosts={{ layout.cluster_spec.ps | join(',') }}"
      - "--worker_hosts={{ layout.cluster_spec.worker | join(',') }}"
    environment:
      CUDA_VISIBLE_DEVICES: ""
    port: 2230
    ready_timeout: 180
    state: started

- name: Run the workers, collect their results, always stop everything
  block:
    - name: Wait for worker 0
      tf_task:
        name: "{{ run_id }}-worker-0"
        run_dir: "/tmp/dtfbench/{{ run_id }}"
        result_file: worker-0.json
        timeout: 1800
        state: finished
      register: worker0
  always:
    - name: Stop the parameter server
      tf_task:
        name: "{{ run_id }}-ps-0"
        run_dir: "/tmp/dtfbench/{{ run_id }}"
        grace_period: 10
        state: stopped
"""

RETURN = r"""
name:
  description: The task id (O(name)).
  returned: always
  type: str
  sample: run-20260101-ps-0
state:
  description: The requested state.
  returned: always
  type: str
  sample: started
pid:
  description:
    - Pid of the supervisor, which is also the process group id of the task; C(null) when
      nothing runs (or would run, in check mode).
  returned: always
  type: int
  sample: 12345
running:
  description: Whether the task runs when the module returns (or would, in check mode).
  returned: always
  type: bool
pid_file:
  description: Path of the pid file.
  returned: always
  type: str
  sample: /tmp/dtfbench/run1/run1-ps-0.pid
log_file:
  description: Path of the log file (stdout and stderr of the program).
  returned: always
  type: str
  sample: /tmp/dtfbench/run1/run1-ps-0.log
exit_file:
  description: Path of the exit-status file written by the supervisor.
  returned: always
  type: str
  sample: /tmp/dtfbench/run1/run1-ps-0.exit
cmd:
  description: The program's command line (the running one when already started).
  returned: when O(state=started)
  type: list
  elements: str
ready:
  description: Whether O(port) accepted a connection (V(true) when no O(port) was given).
  returned: when O(state=started)
  type: bool
ready_after:
  description: Seconds from the start (or from the module's call when already running) until ready.
  returned: when O(state=started) and ready
  type: float
  sample: 9.7
rc:
  description: Exit code of the program; C(null) when it was killed by a signal or is still running.
  returned: when O(state=finished), and on failure when known
  type: int
  sample: 0
signal:
  description: Number of the signal that killed the program, else C(null).
  returned: when O(state=finished), and on failure when known
  type: int
  sample: 15
signal_name:
  description: Name of RV(signal), for example C(SIGTERM).
  returned: when O(state=finished), and on failure when known
  type: str
exit:
  description:
    - The exit-status record - C(rc), C(signal), C(signal_name), C(pid) (the program),
      C(supervisor_pid), C(started), C(ended) (epoch seconds), C(duration), C(argv), C(error)
      (when the program could not be executed), C(stopped_by) (written by O(state=stopped)
      when the supervisor itself had to be killed), C(deadline_exceeded) (true when the
      supervisor ended the program at O(max_runtime)), C(oom_killed) and C(oom_evidence) (true,
      and why, when the kernel's OOM killer ended the program, seen by its memory cgroup's
      C(oom_kill) count rising while it ran or by the kernel log naming its pid).
  returned: when the task has exited
  type: dict
result:
  description: The parsed O(result_file), or C(null) when none was given or the file is missing.
  returned: when O(state=finished)
  type: raw
  sample: {"schema": 1, "status": "ok", "images_per_sec": 123.4}
log_tail:
  description: The last O(log_tail_lines) lines of the log.
  returned: when O(state=finished), and on failure
  type: list
  elements: str
elapsed:
  description: Seconds the module waited (for the exit, readiness or the stop).
  returned: always
  type: float
  sample: 42.1
runtime:
  description: Seconds the program ran (from its exit record).
  returned: when the task has exited
  type: float
leftover:
  description:
    - Pids of processes the program left behind (they carry the task's environment marker)
      after it exited; stop them with O(state=stopped).
  returned: when O(state=finished) and the task has exited
  type: list
  elements: int
timed_out:
  description: Whether O(timeout) passed before the program exited.
  returned: when O(state=finished)
  type: bool
terminated:
  description: Pids that received SIGTERM.
  returned: when O(state=stopped) or when the module stopped the task after a failure
  type: list
  elements: int
killed:
  description: Pids that were still alive after O(grace_period) and received SIGKILL.
  returned: when O(state=stopped) or when the module stopped the task after a failure
  type: list
  elements: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.launch.task import TaskError, TfTask


def main():
    module = AnsibleModule(argument_spec=TfTask.argument_spec, required_if=TfTask.required_if, supports_check_mode=True)
    try:
        result = TfTask(module.params, module.check_mode, module.warn).run()
    except TaskError as error:
        module.fail_json(msg=error.msg, **error.result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
