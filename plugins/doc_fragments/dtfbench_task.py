# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""The options of a supervised task that tf_task and tf_host_run share, documented once.

Both modules run their tasks through the same task core (one supervisor per task), so these
options mean the same in both and have the same defaults. Referenced as
``extends_documentation_fragment: [dtfbench_task]`` (ansible.cfg: doc_fragment_plugins).
The options the two modules also share by name but not by meaning or default (state,
run_dir, ready_timeout, timeout) are documented in each module, which says why they differ.
"""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  environment:
    description:
      - Variables merged over the module's environment for the program (for example
        C(CUDA_VISIBLE_DEVICES), C(TF_CONFIG)). A value of C(null) removes the variable;
        booleans become C(true)/C(false), other values their string form.
      - M(tf_host_run) sets each task's C(CUDA_VISIBLE_DEVICES) from the task's entry (empty for
        a parameter server) over these.
    type: dict
    default: {}
  grace_period:
    description: Seconds between SIGTERM and SIGKILL when a task is stopped.
    type: float
    default: 10
  max_runtime:
    description:
      - The most seconds a task that the module starts may run. Its supervisor itself enforces it
        (SIGTERM to the task's process group, O(grace_period), SIGKILL) and records
        C(deadline_exceeded) in the exit status, so a task ends even when no controller is left
        to stop it (the host became unreachable, the playbook was killed).
      - V(0) means no limit.
    type: float
    default: 0
  log_tail_lines:
    description: How many lines of a task's log are returned (C(log_tail)) and quoted in failure messages.
    type: int
    default: 40
"""
