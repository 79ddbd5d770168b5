"""Atomic, change-aware file writes: a reader, or a writer killed half-way, never sees half a file.

Standard library only, for old targets' Python (the task core uses it; the oldest: pyproject.toml's
[tool.dtfbench.oldest-python]).
"""

from __future__ import absolute_import, division, print_function

import os
import stat


def write_atomic(path, data, mode=None):
    """Write `data` (bytes or text, UTF-8) to `path` through a temporary file renamed over it.

    Returns False, and writes nothing, when the file already holds exactly `data` (and has
    `mode`, when one is given), so a rebuild of unchanged output touches no file; True when
    it wrote. The parent folders are created. `mode` (e.g. 0o600) is set on the file before
    it appears under its name.
    """
    path = str(path)
    payload = data.encode("utf-8") if not isinstance(data, bytes) else data
    try:
        with open(path, "rb") as handle:
            same = handle.read() == payload
        if same and (mode is None or stat.S_IMODE(os.stat(path).st_mode) == mode):
            return False
    except (IOError, OSError):
        pass
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, ".%s.tmp-%d" % (os.path.basename(path), os.getpid()))
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666 if mode is None else mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)  # the umask may have masked bits of it
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise
    return True


def discard(tmp):
    """Remove the temporary file `tmp` of a write that failed, where it is there: a failed write
    (a full disk, a kill) leaves nothing behind, and the write's own error is the one raised."""
    try:
        os.unlink(tmp)
    except OSError:
        pass
