"""A memory cgroup of a test's own, so that a test that runs out of memory on purpose cannot
take more of the machine than its limit.

``memory_cgroup(limit_mib)`` (a context manager) makes a new memory cgroup with that limit and
no swap: under cgroup v2 where v2 has the memory controller (``memory.max``,
``memory.swap.max``), else under this process's own cgroup v1 memory cgroup
(``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes`` where swap is accounted). It yields
a ``MemoryCgroup``: ``path``, and ``join``, a Popen ``preexec_fn`` that moves the child into the
cgroup before it executes its program, so that the program and everything it starts are in the
cgroup from their start (a limit set later misses what already runs). On leaving, every process
still in it (all of them the test's) is SIGKILLed and the cgroup removed. Skips the test where
there is no writable memory controller (not root, no cgroup memory controller).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class MemoryCgroup:
    path: Path
    limit_mib: int

    def join(self) -> None:
        """preexec_fn: this (child) process joins the cgroup ('0' is the writer itself)."""
        with open(self.path / "cgroup.procs", "w") as handle:
            handle.write("0")

    def pids(self) -> list[int]:
        return [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]


def _mounts():
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            tail = fields[fields.index("-") + 1 :]
            yield fields[4], tail[0], tail[2].split(",")


def _create(name: str, limit_mib: int) -> Path:
    limit = str(limit_mib * 1024 * 1024)
    for point, fstype, _ in _mounts():
        if fstype == "cgroup2" and "memory" in Path(point, "cgroup.controllers").read_text().split():
            path = Path(point, name)
            path.mkdir()
            (path / "memory.max").write_text(limit)
            if (path / "memory.swap.max").exists():
                (path / "memory.swap.max").write_text("0")
            return path
    for point, fstype, options in _mounts():
        if fstype == "cgroup" and "memory" in options:
            own = next(
                line.split(":", 2)[2].strip()
                for line in Path("/proc/self/cgroup").read_text().splitlines()
                if "memory" in line.split(":", 2)[1].split(",")
            )
            parent = Path(point, own.lstrip("/"))
            path = (parent if parent.is_dir() else Path(point)) / name
            path.mkdir()
            (path / "memory.limit_in_bytes").write_text(limit)
            if (path / "memory.memsw.limit_in_bytes").exists():
                (path / "memory.memsw.limit_in_bytes").write_text(limit)
            return path
    pytest.skip("no cgroup memory controller here (v2 or v1) to limit the test's memory")


@contextlib.contextmanager
def memory_cgroup(limit_mib: int):
    if os.geteuid() != 0:
        pytest.skip("making a memory cgroup needs root")
    try:
        path = _create(f"dtfbench-oom-test-{uuid.uuid4().hex[:8]}", limit_mib)
    except OSError as error:
        pytest.skip(f"cannot make a memory cgroup here: {error}")
    cgroup = MemoryCgroup(path, limit_mib)
    try:
        yield cgroup
    finally:
        deadline = time.time() + 30
        while cgroup.pids() and time.time() < deadline:
            for pid in cgroup.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        path.rmdir()
