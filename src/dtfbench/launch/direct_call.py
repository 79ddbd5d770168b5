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
``sweep_marker.py`` and ``linux/`` (``read_throughput.py`` included), zipped under a package name of their own, ``PACKAGE``, so
that a dtfbench installed on the host cannot shadow them) and the call's validated parameters.
Piped to the host's Python (``dtfbench.adapters.host_action``, the same pipelining Ansible uses
for modules), it runs the call's entry (``CALLS``: ``direct_entry(params, check_mode, warn)``
of its module, which answers as the module would) and prints its result as one line of JSON
with the warnings under ``WARNINGS_KEY``; ``parse(stdout)`` reads it back. The host unpacks
the code once per version (``code_id()``) into its user's cache folder (``CACHE_FOLDER``) and
imports it from there, where Python keeps its bytecode; a zip in a temporary file is the
fallback. The program runs on
the host's Python (tf_host_run's code on the oldest: pyproject.toml's
[tool.dtfbench.oldest-python]); it exits as the module does when its standard output is gone
(an interrupted call: nobody reads the result any more).
"""

from __future__ import annotations

import base64
import hashlib
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
    "launch/port_claim.py",
    "launch/task.py",
    "launch/supervisor.py",
    "launch/sweep_marker.py",
    "linux/__init__.py",
    "linux/files.py",
    "linux/procfs.py",
    "linux/read_throughput.py",
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

# Where a host keeps the unpacked code, under its user's cache folder (XDG_CACHE_HOME, else
# ~/.cache): one folder per version of the code, named by CODE_ID.
CACHE_FOLDER = "dtfbench/host-code"
# A version's folder nobody has used for this long is removed when another version is unpacked.
UNUSED_FOR_S = 7 * 86400

RUNNER = r"""
import json, os, sys


# The code, unpacked once per version into a folder of this user's where Python keeps its
# bytecode: importing it from there costs ~0.07 CPU-s a call less than from a zip, whose
# modules (~3,000 lines) are compiled again by every call. None when that cannot be had (no
# home, a full disk, a folder others may write to): the call imports from a zip instead.
def cached_code():
    try:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), CACHE_FOLDER)
        if not os.path.isabs(root):
            return None  # no home (a relative XDG_CACHE_HOME is to be ignored, the spec says)
        folder = os.path.join(root, CODE_ID)
        if not os.path.isdir(folder):
            if not os.path.isdir(root):
                os.makedirs(root, 0o700)
            private(root)
            unpack_into(root, folder)
        private(folder)
        os.utime(folder, None)  # in use: not removed as unused
        return folder
    except (OSError, ValueError):
        return None


def private(path):
    import stat

    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise OSError("%s: not a folder of this user's alone" % path)


# Unpacked beside the final folder, on the disk, and renamed onto it: a version's folder is
# whole or absent, a crash included (another call that got there first wins). Then the
# versions unused for a while, and what a killed call left, are removed.
def unpack_into(root, folder):
    import base64, io, shutil, tempfile, time, zipfile

    staging = tempfile.mkdtemp(prefix=".new-", dir=root)
    try:
        archive = zipfile.ZipFile(io.BytesIO(base64.b64decode(PAYLOAD)))
        archive.extractall(staging)
        for name in archive.namelist():
            with open(os.path.join(staging, name), "rb") as written:
                os.fsync(written.fileno())
        try:
            os.rename(staging, folder)
        except OSError:
            if not os.path.isdir(folder):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    now = time.time()
    for name in os.listdir(root):
        path = os.path.join(root, name)
        try:
            age = now - os.lstat(path).st_mtime
        except OSError:
            continue
        if name != CODE_ID and (age > UNUSED_FOR_S or (name.startswith(".new-") and age > 3600)):
            shutil.rmtree(path, ignore_errors=True)


# The launch code as a zip file to import from (its path, or None and why not): in the
# temporary folder, else in one with room. A full /tmp, where the run directories often are
# too, must not end the call without an answer; no partial file is left.
def unpack():
    import base64, tempfile

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


def entry_from(path):
    sys.path.insert(0, path)
    try:
        from {package}.{module} import direct_entry
    except Exception:
        # A damaged copy (a crash while it was written): forget what it loaded.
        sys.path.remove(path)
        for name in [n for n in sys.modules if n == "{package}" or n.startswith("{package}.")]:
            del sys.modules[name]
        raise
    return direct_entry


def main():
    direct_entry, folder = None, cached_code()
    if folder is not None:
        try:
            direct_entry = entry_from(folder)
        except Exception:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)  # the next call unpacks it again
    if direct_entry is None:
        path, why = unpack()
        if path is None:
            msg = "{call} cannot write its code to a temporary file on this host: %s; free some room in its temporary folder (TMPDIR)"
            sys.stdout.write(json.dumps(dict(failed=True, changed=False, msg=msg % why)) + "\n")
            return
        try:
            direct_entry = entry_from(path)
        finally:
            os.unlink(path)  # everything is imported (the supervisor's source is read at import)
    params = json.loads(PARAMS)
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


def code_id():
    """The name of this version of the code on a host: its payload's digest."""
    return hashlib.sha256(payload()).hexdigest()[:24]


def script(call, params, check_mode, paths=()):
    """The program (bytes) that runs one `call` (a key of CALLS) with these validated params;
    `paths`: the options it expands on the host (``path_options`` of the module's spec)."""
    module = CALLS[call]
    # ASCII JSON as a Python string literal: the host decodes it with json alone.
    head = (
        "PAYLOAD = %r\nCODE_ID = %r\nCACHE_FOLDER = %r\nUNUSED_FOR_S = %r\nPARAMS = %r\nCHECK_MODE = %r\nPATHS = %r\n"
        % (
            base64.b64encode(payload()).decode("ascii"),
            code_id(),
            CACHE_FOLDER,
            UNUSED_FOR_S,
            json.dumps(params),
            bool(check_mode),
            tuple(paths),
        )
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
