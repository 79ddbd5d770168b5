# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""tf_host_run without AnsiballZ: the same call for a fifth of the host's CPU.

A module call runs AnsiballZ on the host (Ansible's module_utils unpacked and compiled,
``ansible.module_utils.basic`` imported): ~0.17 CPU-s on the host per call, where starting a
host's tasks costs ~0.03 of its own; the launch pays it once per host. This plugin validates
the arguments here with the module's spec, then pipes a small program to the host's Python
over the task's connection (src/dtfbench/launch/direct_call.py: the stdlib-only launch code
and the parameters) and returns what the module would. The module (library/tf_host_run.py,
where the documentation lives) and this plugin run the same code: dtfbench.launch.host_run.

The module runs instead when the direct call does not apply: no pipelining (it is off, or
the connection or become method cannot pipe), become, async, delegation, a shell that is
not POSIX, or no known Python on the host yet (interpreter discovery is the module's).
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.launch import direct_call
from dtfbench.launch.host_run_spec import ARGUMENT_SPEC

display = Display()

# On the controller run_dir is a plain string; the program expands it on the host ("path").
_SPEC = dict(ARGUMENT_SPEC, run_dir=dict(ARGUMENT_SPEC["run_dir"], type="str"))


class ActionModule(ActionBase):
    """Run tf_host_run's code on the host directly, or the module when that does not apply."""

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        python, why_not = self._direct_python(task_vars)
        if python is None:
            display.vvv("tf_host_run: the module runs (%s)" % why_not, host=task_vars.get("inventory_hostname"))
            result.update(self._execute_module(module_name="tf_host_run", task_vars=task_vars))
            return result
        try:
            _, params = self.validate_argument_spec(argument_spec=_SPEC)
        except AnsibleActionFail as error:
            result.update(failed=True, changed=False, msg=str(error))
            return result
        display.vvv(
            "tf_host_run: direct call with %s (no AnsiballZ)" % python, host=task_vars.get("inventory_hostname")
        )
        # `python - dtfbench-tf_host_run`: the program comes on stdin; its argument names it
        # in the host's process table.
        command = self._connection._shell.build_module_command(
            self._compute_environment_string(), "#!" + python, "-", arg_path=direct_call.PROCESS_TAG
        ).strip()
        done = self._low_level_execute_command(
            command, sudoable=False, in_data=direct_call.script(params, self._play_context.check_mode)
        )
        output = direct_call.parse(done.get("stdout", ""))
        if output is None:
            result.update(
                failed=True,
                changed=False,
                rc=done.get("rc"),
                msg="tf_host_run gave no result on the host (exit %s) with %s: %s"
                % (done.get("rc"), python, (done.get("stderr") or done.get("stdout") or "").strip()[-2000:]),
            )
            return result
        for warning in output.pop(direct_call.WARNINGS_KEY, []):
            display.warning(warning)
        result.update(output)
        return result

    def _direct_python(self, task_vars):
        """(the host's Python, None) for a direct call, or (None, why the module runs)."""
        if self._task.async_val:
            return None, "async"
        if self._task.delegate_to:
            return None, "delegated"
        if self._play_context.become:
            return None, "become"
        if getattr(self._connection._shell, "SHELL_FAMILY", "") != "sh":
            return None, "not a POSIX shell"
        if not self._is_pipelining_enabled("new"):
            return None, "no pipelining"
        python = task_vars.get("ansible_python_interpreter")
        if python is not None:
            python = self._templar.template(python)
        if not python or str(python).startswith("auto"):
            python = task_vars.get("ansible_facts", {}).get("discovered_interpreter_python")
        if not python:
            return None, "the host's Python is not known yet"
        return str(python), None
