"""The base class of the action plugins that run a stdlib-only module's code on the host without
AnsiballZ (plugins/action/tf_host_run.py, plugins/action/sweep_marker.py).

A module call runs AnsiballZ on the host (Ansible's module_utils unpacked and compiled,
``ansible.module_utils.basic`` imported): ~0.17 CPU-s on the host a call, several times what
these modules' own work costs. A plugin validates the arguments here with the module's spec,
then pipes a small program to the host's Python over the task's connection
(``dtfbench.launch.direct_call``, which the plugin names, since adapters import no stage: the
stdlib-only host code and the parameters) and returns what the module would. The module
(library/<name>.py, where the documentation lives) runs the same code, and runs instead when
the direct call does not apply: no pipelining (it is off, or the connection or become method
cannot pipe), become, async, delegation, a shell that is not POSIX, or no known Python on the
host yet (interpreter discovery is the module's).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any, ClassVar

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import UnsupportedError
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()


class HostAction(ActionBase):
    """Run module ``call``'s code on the host directly, or the module when that does not apply.
    A plugin's ``ActionModule`` sets ``call`` (its module's name, a key of ``direct_call.CALLS``),
    ``argument_spec`` (the module's) and ``direct_call`` (the module dtfbench.launch.direct_call);
    ``run`` calls it with the task's arguments; a plugin that adds arguments of its own calls
    ``call_on_host`` itself."""

    TRANSFERS_FILES = False

    call: ClassVar[str]
    argument_spec: ClassVar[dict[str, Any]]
    direct_call: ClassVar[ModuleType]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # The host code's zip is made with the plugin's class: Ansible's strategy loads the
        # class in ansible-playbook's own process before it forks a worker per host and task,
        # and every worker inherits the zip instead of making it again (~3.6 ms a host and call).
        direct_call = getattr(cls, "direct_call", None)
        if direct_call is not None:
            direct_call.payload()

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        result.update(self.call_on_host(self._task.args, task_vars))
        return result

    def call_on_host(self, args: Mapping[str, Any], task_vars: dict) -> dict:
        """The module's answer to `args` on this task's host."""
        host = task_vars.get("inventory_hostname")
        python, why_not = self._direct_python(task_vars)
        if python is None:
            display.vvv("%s: the module runs (%s)" % (self.call, why_not), host=host)
            return self._execute_module(module_name=self.call, module_args=dict(args), task_vars=task_vars)
        paths = self.direct_call.path_options(self.argument_spec)
        try:
            params = self._validated(args, paths)
        except AnsibleActionFail as error:
            return dict(failed=True, changed=False, msg=str(error))
        display.vvv("%s: direct call with %s (no AnsiballZ)" % (self.call, python), host=host)
        # `python - dtfbench-<call>`: the program comes on stdin; its argument names it in the
        # host's process table.
        command = self._connection._shell.build_module_command(
            self._compute_environment_string(), "#!" + python, "-", arg_path=self.direct_call.process_tag(self.call)
        ).strip()
        program = self.direct_call.script(self.call, params, self._play_context.check_mode, paths)
        done = self._low_level_execute_command(command, sudoable=False, in_data=program)
        output = self.direct_call.parse(done.get("stdout", ""))
        if output is None:
            return dict(
                failed=True,
                changed=False,
                rc=done.get("rc"),
                msg="%s gave no result on the host (exit %s) with %s: %s"
                % (self.call, done.get("rc"), python, (done.get("stderr") or done.get("stdout") or "").strip()[-2000:]),
            )
        for warning in output.pop(self.direct_call.WARNINGS_KEY, []):
            display.warning(warning)
        return output

    def _validated(self, args: Mapping[str, Any], paths: tuple[str, ...]) -> dict:
        """`args` checked against the module's spec, its defaults filled in; AnsibleActionFail
        with the module's message otherwise. The options of type path (`paths`) stay strings
        here: the program expands them on the host."""
        spec = {
            name: dict(option, type="str") if name in paths else option for name, option in self.argument_spec.items()
        }
        validation = ArgumentSpecValidator(spec).validate(dict(args))
        if len(validation.errors.errors):
            msg = validation.errors.msg
            if isinstance(validation.errors[0], UnsupportedError):
                msg = "Unsupported parameters for (%s) module: %s" % (self.call, msg)
            raise AnsibleActionFail(msg, obj=dict(args))
        return validation.validated_parameters

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
