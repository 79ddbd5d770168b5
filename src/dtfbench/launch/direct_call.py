# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""tf_host_run without AnsiballZ: the program that runs one call on a host (controller side).

An Ansible module call runs AnsiballZ on the host: a Python that unpacks the module with
Ansible's module_utils (~650 KB of source, compiled on every call: zipimport keeps no
bytecode) and imports ``ansible.module_utils.basic``. That is ~0.17 CPU-s a call on the
host, five times what tf_host_run's own work costs when it starts a host's tasks, and on
a controller that starts many hosts it is most of what a launch pays beyond ``ssh``.

``script(params, check_mode)`` returns a small Python program instead: the stdlib-only
launch code (``launch/host_run.py``, ``task.py``, ``supervisor.py`` and ``linux/procfs.py``,
zipped under a package name of their own, ``PACKAGE``, so that a dtfbench installed on the
host cannot shadow them) and the call's validated parameters. Piped to the host's Python
(plugins/action/tf_host_run.py, the same pipelining Ansible uses for modules), it runs
``HostRun(params, check_mode, warn).run()`` and prints its result as one line of JSON with
the warnings under ``WARNINGS_KEY``; ``parse(stdout)`` reads it back. The program runs on
the host's Python (the oldest: pyproject.toml's [tool.dtfbench.oldest-python]); it exits as the module does when its standard
output is gone (an interrupted call: nobody reads the result any more).
"""

from __future__ import annotations

import base64
import io
import json
import os
import zipfile

PACKAGE = "dtfbench_tf_host_run"
WARNINGS_KEY = "_dtfbench_warnings"
# The program's argument (``python - dtfbench-tf_host_run``): what names it in ``ps``.
PROCESS_TAG = "dtfbench-tf_host_run"
# The launch code a call needs, relative to the dtfbench package (it imports nothing else).
FILES = (
    "contract/__init__.py",
    "contract/outcomes.py",
    "launch/__init__.py",
    "launch/controller_watch.py",
    "launch/host_run.py",
    "launch/nic_sampler.py",
    "launch/task.py",
    "launch/supervisor.py",
    "linux/__init__.py",
    "linux/procfs.py",
)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUNNER = r"""
import base64, json, os, sys, tempfile


# The launch code as a zip file to import from (its path, or None and why not): in the
# temporary folder, else in one with room. A full /tmp, where the run directories often are
# too, must not end the call without an answer; no partial file is left.
def unpack():
    data, problems = base64.b64decode(PAYLOAD), []
    for folder in (None, "/dev/shm", os.path.expanduser("~")):
        try:
            handle, path = tempfile.mkstemp(prefix="dtfbench-tf_host_run-", suffix=".zip", dir=folder)
        except OSError as error:
            problems.append("%s (%s)" % (folder or tempfile.gettempdir(), error.strerror))
            continue
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            return path, None
        except OSError as error:
            os.unlink(path)
            problems.append("%s (%s)" % (path, error.strerror))
    return None, "; ".join(problems)


def main():
    path, why = unpack()
    if path is None:
        msg = "tf_host_run cannot write its code to a temporary file on this host: %s; free some room in its temporary folder (TMPDIR)"
        sys.stdout.write(json.dumps(dict(failed=True, changed=False, msg=msg % why)) + "\n")
        return
    try:
        sys.path.insert(0, path)
        from {package}.launch.host_run import HostRun
        from {package}.launch.task import TaskError
    finally:
        os.unlink(path)  # everything is imported (the supervisor's source is read at import)
    params = json.loads(base64.b64decode(PARAMS).decode("utf-8"))
    # Option type "path", expanded here as the module would (on the host, not the controller).
    params["run_dir"] = os.path.expanduser(os.path.expandvars(params["run_dir"]))
    warnings = []
    try:
        result = HostRun(params, CHECK_MODE, warnings.append).run()
    except TaskError as error:
        result = dict(error.result, failed=True, msg=error.msg)
    result["{warnings}"] = warnings
    try:
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    except (IOError, OSError):
        os._exit(1)


main()
"""

_payload = None


def payload():
    """The zipped launch code (built once per process; fixed timestamps)."""
    global _payload
    if _payload is None:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(zipfile.ZipInfo(PACKAGE + "/__init__.py", (1980, 1, 1, 0, 0, 0)), "")
            for name in FILES:
                with open(os.path.join(_ROOT, name), "rb") as handle:
                    info = zipfile.ZipInfo("%s/%s" % (PACKAGE, name), (1980, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_DEFLATED
                    archive.writestr(info, handle.read())
        _payload = buffer.getvalue()
    return _payload


def script(params, check_mode):
    """The program (bytes) that runs one tf_host_run call with these validated params."""
    encoded = base64.b64encode(json.dumps(params).encode("utf-8")).decode("ascii")
    head = "PAYLOAD = %r\nPARAMS = %r\nCHECK_MODE = %r\n" % (
        base64.b64encode(payload()).decode("ascii"),
        encoded,
        bool(check_mode),
    )
    return (head + RUNNER.replace("{package}", PACKAGE).replace("{warnings}", WARNINGS_KEY)).encode("utf-8")


def parse(stdout):
    """The call's result from the program's output (its last JSON line), or None."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except ValueError:
                return None
            return result if isinstance(result, dict) else None
    return None
