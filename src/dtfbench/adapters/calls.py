"""A computation's answer to Ansible, and the main() of a module that only computes.

Standard library only (modules import it as ``ansible.module_utils.dtfbench.adapters.calls``).
A module and its controller action plugin (``dtfbench.adapters.action``) answer alike: the
result's keys at the top, or under ``result_key``; a failure (one of ``errors``, the input's
own error type) as ``failed`` with its message (and the error's ``result`` dict, if any), returned and not raised, so that a task's
``failed_when`` sees it. A module that runs something (``run_main``) fails instead, with the
message and the result its error carries.
"""

import os
import sys


def answer(compute, params, errors, result_key=None):
    """The task result of ``compute(params)``: ``changed`` false and the computed keys (or the
    computed value under `result_key`), or ``failed`` with the message of one of `errors`."""
    try:
        computed = compute(params)
    except errors as error:
        # An error may carry what the answer shows beside the message (a refused estimate).
        return dict(getattr(error, "result", None) or {}, failed=True, changed=False, msg=str(error))
    if result_key is not None:
        return {"changed": False, result_key: computed}
    return dict(computed, changed=False)


def module_main(module_class, argument_spec, compute, errors, result_key=None, **spec_options):
    """A module's main(): its options checked against `argument_spec` (and `spec_options`, e.g.
    mutually_exclusive), then ``answer``; `module_class` is AnsibleModule."""
    module = module_class(argument_spec=argument_spec, supports_check_mode=True, **spec_options)
    result = answer(compute, module.params, errors, result_key)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


def run_main(module_class, argument_spec, run, errors):
    """The main() of a module that runs something and waits for it (tf_host_run, slurm_job):
    ``run(module)``'s result, or a failure with the message (``msg``) and ``result`` of one of
    `errors`. A failure nobody can read any more (the call was interrupted and writing it
    raises OSError) ends the process without a traceback (``exit_unread``)."""
    module = module_class(argument_spec=argument_spec, supports_check_mode=True)
    try:
        result = run(module)
    except errors as error:
        try:
            module.fail_json(msg=error.msg, **error.result)
        except OSError:  # an interrupted call: nobody reads the result any more
            exit_unread(1)
    module.exit_json(**result)


def exit_unread(status):
    """End a process whose output nobody reads any more, with `status` and no traceback.

    SystemExit, not os._exit: the callers' ``finally`` blocks run, among them AnsiballZ's,
    which removes the module's payload folder from the host's temporary folder (os._exit left
    one, ~160 KB, for each interrupted call). The standard streams go to /dev/null first, so
    that the exit's flush of what the broken pipe did not take neither fails nor prints.
    """
    null = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(null, stream.fileno())
        except (OSError, ValueError):  # a stream without a descriptor (replaced, closed)
            pass
    raise SystemExit(status)
