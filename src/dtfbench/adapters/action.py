"""The base class of the controller action plugins (plugins/action/).

A plan, a layout or a cost is computed from the task's options alone and touches no node, so
it runs in ansible-playbook's Python, without a module process per call (a fork, a connection
and a Python that unpacks the module, for milliseconds of work). A plugin names its argument
spec (shared with its module in library/, where its documentation lives), the computation and
its error types; validation and the answer are the same for all of them
(``dtfbench.adapters.calls.answer``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from .calls import answer


class ControllerAction(ActionBase):
    """Validate the options with ``argument_spec`` (and ``spec_options``), then answer with
    ``compute(params)``. A plugin's ``ActionModule`` subclasses it and sets ``argument_spec``,
    ``compute`` (a staticmethod), ``errors`` and, to nest the result under one key, ``result_key``;
    ``plain_params`` gives compute the options as plain JSON types, as a command line's JSON
    would (not Ansible's string and mapping subclasses), for code that stores them; ``shown``
    prints the answer as ``debug`` does (a debug task after it would cost the play a task)."""

    TRANSFERS_FILES = False
    _requires_connection = False

    argument_spec: ClassVar[dict[str, Any]]
    spec_options: ClassVar[Mapping[str, Any]] = {}
    errors: ClassVar[tuple[type[Exception], ...]]
    result_key: ClassVar[str | None] = None
    plain_params: ClassVar[bool] = False
    shown: ClassVar[bool] = False

    @staticmethod
    def compute(params: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        try:
            _, params = self.validate_argument_spec(argument_spec=self.argument_spec, **self.spec_options)
        except AnsibleActionFail as error:
            result.update(failed=True, changed=False, msg=str(error))
            return result
        if self.plain_params:
            params = json.loads(json.dumps(params))
        result.update(answer(self.compute, params, self.errors, self.result_key))
        if self.shown:
            result["_ansible_verbose_always"] = True
        return result
