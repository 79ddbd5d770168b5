# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""Host-side modules without AnsiballZ: the program that runs one call on a host (controller side).

An Ansible module call runs AnsiballZ on the host: a Python that unpacks the module with
Ansible's module_utils (~650 KB of source, compiled on every call: zipimport keeps no
bytecode) and imports ``ansible.module_utils.basic``. That is ~0.17 CPU-s a call on the
host, five times what tf_host_run's own work costs when it starts a host's tasks, and on
a controller that starts many hosts it is most of what a launch pays beyond ``ssh``.

``script(call, params, check_mode)`` returns a small Python program instead: the stdlib-only
host code (``FILES``: ``launch/host_run.py``, ``task.py``, ``supervisor.py``,
``sweep_marker.py`` and ``linux/``, zipped under a package name of their own, ``PACKAGE``, so
that a dtfbench installed on the host cannot shadow them) and the call's validated parameters.
Piped to the host's Python (``dtfbench.adapters.host_action``, the same pipelining Ansible uses
for modules), it runs the call's entry (``CALLS``: ``direct_entry(params, check_mode, warn)``
of its module, which answers as the module would) and prints its result as one line of JSON
with the warnings under ``WARNINGS_KEY``; ``parse(stdout)`` reads it back. The program runs on
the host's Python (tf_host_run's code on the oldest: pyproject.toml's
[tool.dtfbench.oldest-python]); it exits as the module does when its standard output is gone
(an interrupted call: nobody reads the result any more).
"""

from __future__ import annotations

import base64
import io
import json
import os
import zipfile

PACKAGE = "dtfbench_tf_host_run"
WARNINGS_KEY = "_dtfbench_warnings"
# The host code the calls need, relative to the dtfbench package (it imports nothing else).
FILES = (
    "contract/__init__.py",
    "contract/outcomes.py",
    "launch/__init__.py",
    "launch/controller_watch.py",
    "launch/host_run.py",
    "launch/nic_sampler.py",
    "launch/task.py",
    "launch/supervisor.py",
    "launch/sweep_marker.py",
    "linux/__init__.py",
    "linux/files.py",
    "linux/procfs.py",
)
# Each call: the module of its entry, ``direct_entry(params, check_mode, warn)``.
CALLS = {
    "tf_host_run": "launch.host_run",
    "sweep_marker": "launch.sweep_marker",
}


def path_options(spec):
    """The options of type "path" of an argument spec: the program expands them on the host, as
    the module would (not on the controller), so the controller checks them as strings."""
    return tuple(name for name, option in spec.items() if option.get("type") == "path")


def process_tag(call):
    """The program's argument (``python - dtfbench-tf_host_run``): what names it in ``ps``."""
    return "dtfbench-" + call


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
            handle, path = tempfile.mkstemp(prefix="dtfbench-{call}-", suffix=".zip", dir=folder)
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
        msg = "{call} cannot write its code to a temporary file on this host: %s; free some room in its temporary folder (TMPDIR)"
        sys.stdout.write(json.dumps(dict(failed=True, changed=False, msg=msg % why)) + "\n")
        return
    try:
        sys.path.insert(0, path)
        from {package}.{module} import direct_entry
    finally:
        os.unlink(path)  # everything is imported (the supervisor's source is read at import)
    params = json.loads(base64.b64decode(PARAMS).decode("utf-8"))
    # Options of type "path", expanded here as the module would (on the host, not the controller).
    for name in PATHS:
        if params.get(name) is not None:
            params[name] = os.path.expanduser(os.path.expandvars(params[name]))
    warnings = []
    result = direct_entry(params, CHECK_MODE, warnings.append)
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


def script(call, params, check_mode, paths=()):
    """The program (bytes) that runs one `call` (a key of CALLS) with these validated params;
    `paths`: the options it expands on the host (``path_options`` of the module's spec)."""
    module = CALLS[call]
    encoded = base64.b64encode(json.dumps(params).encode("utf-8")).decode("ascii")
    head = "PAYLOAD = %r\nPARAMS = %r\nCHECK_MODE = %r\nPATHS = %r\n" % (
        base64.b64encode(payload()).decode("ascii"),
        encoded,
        bool(check_mode),
        tuple(paths),
    )
    runner = RUNNER.replace("{package}", PACKAGE).replace("{module}", module).replace("{call}", call)
    return (head + runner.replace("{warnings}", WARNINGS_KEY)).encode("utf-8")


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
