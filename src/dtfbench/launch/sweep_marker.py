# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""Which sweeps run on a host now: one marker file per sweep in the host's run root.

Two sweeps on the same hosts at once slow each other's runs down, and nothing in a run's
figures shows it. So each sweep writes ``<run root>/_sweeps/<sweep id>--<controller host>--<pid>.json``
on every host before its first run and removes it after its last; a host's other markers are the
sweeps that started there and have not ended. The sweep writes its own marker first and reads the
others after, so of two sweeps that start together at least the later one sees the other.

A marker outlives a controller that was killed. Only the controller can tell (the pid is of
ansible-playbook, on the controller): a marker of the same controller machine whose process is
gone, or is another process now (its start time differs), is stale and removed
(plugins/action/sweep_marker.py). A marker of another controller stays until its sweep ends.

The host side (``present``, ``absent``) runs in the module library/sweep_marker.py; the
controller side (``controller_identity``, ``stale``) in its action plugin.
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import time

from ..linux import procfs
from ..linux.files import write_atomic
from .task import unsafe_dir_path

MARKER_DIR = "_sweeps"
SUFFIX = ".json"


# The options of sweep_marker (library/sweep_marker.py documents them; plugins/action/sweep_marker.py
# adds `controller`, and `remove` for a second call).
ARGUMENT_SPEC = {
    "sweep_id": {"type": "str", "required": True},
    "run_root": {"type": "path", "required": True},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "controller": {"type": "dict", "required": True},
    "remove": {"type": "list", "elements": "str", "default": []},
}


class MarkerError(Exception):
    """A marker folder that cannot be made or is unsafe: the message says what to fix."""


def direct_entry(params: dict, check_mode: bool, warn=None) -> dict:
    """One call as the module answers it (also the direct call's entry, launch/direct_call.py)."""
    try:
        if params["state"] == "present":
            return present(params["run_root"], params["sweep_id"], params["controller"], params["remove"], check_mode)
        return absent(params["run_root"], params["sweep_id"], params["controller"], check_mode)
    except MarkerError as error:
        return {"failed": True, "changed": False, "msg": str(error)}


def controller_identity(pid: int | None = None) -> dict:
    """This controller: its host name, the pid of ansible-playbook (the parent of the Ansible
    worker that runs the action plugin) with that process's start time, and the time now."""
    pid = os.getppid() if pid is None else pid
    fields = procfs.stat_fields(pid) or []
    return {
        "host": socket.gethostname(),
        "pid": pid,
        "pid_started": fields[19] if len(fields) > 19 else "",
        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def stale(marker: dict, controller: dict) -> bool:
    """Whether a marker's sweep has ended without removing it: its controller is this machine
    and its ansible-playbook is gone (or the pid is another process now)."""
    theirs = marker.get("controller") or {}
    if theirs.get("host") != controller.get("host"):
        return False
    try:
        pid = int(theirs.get("pid"))
    except (TypeError, ValueError):
        return True
    if not procfs.alive(pid):
        return True
    fields = procfs.stat_fields(pid) or []
    started = fields[19] if len(fields) > 19 else ""
    return bool(theirs.get("pid_started")) and started != theirs.get("pid_started")


def _safe_name(text) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", str(text))


def marker_name(sweep_id: str, controller: dict) -> str:
    return "%s--%s--%s%s" % (_safe_name(sweep_id), _safe_name(controller["host"]), int(controller["pid"]), SUFFIX)


def marker_dir(run_root: str) -> str:
    return os.path.join(run_root, MARKER_DIR)


def _safe_dir(folder: str) -> list[str]:
    """Create the marker folder one level at a time and check its whole path (as tf_task
    checks a run directory): a folder someone else may write could swap the markers. Returns
    the folders this call created, outermost first."""
    uid = os.geteuid()
    created: list[str] = []
    why = unsafe_dir_path(folder, uid)
    if why is None and not os.path.isdir(folder):
        parts = [part for part in folder.split("/") if part]
        for depth in range(1, len(parts) + 1):
            path = "/" + "/".join(parts[:depth])
            try:
                os.mkdir(path, 0o755)
                created.append(path)
            except OSError as error:
                if error.errno != errno.EEXIST:
                    _remove_folders(created)
                    raise MarkerError(f"cannot create the sweep marker folder {folder}: {error.strerror}") from None
        why = unsafe_dir_path(folder, uid)
    if why is not None:
        raise MarkerError(
            f"the sweep marker folder {folder} is unsafe: {why}; remove or fix that (chown/chmod go-w), "
            f"or choose a dtfbench_run_root on a path that only this user and root can write"
        )
    return created


def _remove_folders(created: list[str]) -> None:
    """Remove the folders a call created (innermost first) where they are still empty."""
    for path in reversed(created):
        try:
            os.rmdir(path)
        except OSError:
            return


def _others(folder: str, own: str) -> list[dict]:
    found = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return found
    for name in names:
        if name == own or not name.endswith(SUFFIX) or name.startswith("."):
            continue
        path = os.path.join(folder, name)
        text = procfs.read(path)
        try:
            marker = json.loads(text) if text else None
        except ValueError:
            marker = None
        if isinstance(marker, dict):
            found.append(dict(marker, file=name, path=path))
    return found


def present(run_root: str, sweep_id: str, controller: dict, remove=(), check_mode: bool = False) -> dict:
    """Write this sweep's marker (unless check_mode), remove the named stale ones, and return
    {changed, marker, removed, others}: the other sweeps' markers found on this host."""
    folder = marker_dir(run_root)
    own = marker_name(sweep_id, controller)
    path = os.path.join(folder, own)
    removed = []
    changed = False
    if not check_mode:
        created = _safe_dir(folder)
        document = {"sweep_id": sweep_id, "controller": controller, "run_root": run_root}
        try:
            changed = write_atomic(path, json.dumps(document, sort_keys=True) + "\n")
        except OSError as error:
            # The marker only warns other sweeps: a disk that refuses it (full, read-only) is
            # the runs' to report, each with its own message; nothing of the marker is left.
            _remove_folders(created)
            return {
                "changed": False,
                "marker": None,
                "removed": [],
                "others": _others(folder, own),
                "unwritten": f"{path}: {error.strerror}",
            }
        for name in remove:
            name = os.path.basename(str(name))
            if name == own or not name.endswith(SUFFIX):
                continue
            try:
                os.unlink(os.path.join(folder, name))
                removed.append(name)
                changed = True
            except OSError:
                pass
    return {"changed": changed, "marker": path, "removed": removed, "others": _others(folder, own)}


def absent(run_root: str, sweep_id: str, controller: dict, check_mode: bool = False) -> dict:
    """Remove this sweep's marker (its sweep ended): {changed, marker}."""
    path = os.path.join(marker_dir(run_root), marker_name(sweep_id, controller))
    exists = os.path.lexists(path)
    if exists and not check_mode:
        try:
            os.unlink(path)
        except OSError as error:
            if error.errno != errno.ENOENT:
                raise MarkerError(f"cannot remove the sweep marker {path}: {error.strerror}") from None
    if not check_mode:
        try:
            # The folder too, once no sweep's marker is left in it: the run root holds runs.
            os.rmdir(marker_dir(run_root))
        except OSError:
            pass
    return {"changed": exists, "marker": path}
