"""The life cycle both cluster harnesses share: claim, plan, state, down, leftovers, status.

The multi-host test bed (tests/testbed/testbed.py) and the Slurm test cluster
(tests/slurm/slurm_testcluster.py) are the same kind of thing: a set of network namespaces on
a bridge of their own, in an address range X they claim, recorded in ``<dir>/state.json``
before anything it names exists, and taken down by that file alone. What differs is what
they build on it (sshd hosts, or slurmd nodes with a controller). A ``NetnsCluster``
describes one kind (its name prefix, candidate ranges, networks, bridge) and does the steps
that are the same for both:

- ``new_directory``: the directory an ``up`` builds in, refused when it holds one already;
- ``plan`` (the state's common fields) and ``claim`` (the first free range, claimed by
  creating its bridge);
- ``load_state``;
- ``down``: nothing when there is no state, only the files while it was still claiming,
  otherwise the harness's own ``take_down`` first;
- ``leftovers``: the namespaces and links of its prefix (while no later claim holds the
  range: ``reclaimed``), the processes that name its directories, its state file;
- ``status``: the state, with what the harness adds about its processes.

Reached, like netns_harness.py, through a file link in each harness's folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import netns_harness as nh


@dataclass(frozen=True)
class NetnsCluster:
    what: str  # what it is, for messages: "test bed", "Slurm test cluster"
    prefix: str  # of every name it creates: <prefix><X>-...
    candidates: tuple[int, ...]  # the X it may claim, in order
    networks: Callable[[int], list[str]]  # the networks of X
    bridge_key: str  # the state's key of the bridge whose creation claims X
    error: type[Exception]  # what its errors are raised as
    cleanup_hint: str  # what to remove by hand when state.json is broken

    def prefix_of(self, x: int) -> str:
        return f"{self.prefix}{x}-"

    def range_is_free(self, x: int, links: set[str], namespaces: set[str], used: list) -> bool:
        return nh.range_is_free(self.prefix_of(x), self.networks(x), links, namespaces, used)

    def load_state(self, directory: Path) -> dict | None:
        return nh.load_state(directory, self.cleanup_hint)

    def new_directory(self, directory: Path | str, mode: int, size_word: str = "nodes") -> Path:
        """`directory` resolved and created with `mode`; an error when it holds one already."""
        directory = Path(directory).resolve()
        existing = self.load_state(directory) if directory.exists() else None
        if existing is not None:
            raise self.error(
                f"{directory} already holds a {self.what} ({existing['prefix']}, "
                f"{len(existing['nodes'])} {size_word}): run `down --dir {directory}` first"
            )
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, mode)
        return directory

    def plan(self, directory: Path, x: int, **fields) -> dict:
        """The state of range X before anything exists (status "claiming"), with the harness's `fields`."""
        return {
            "schema": 1,
            "dir": str(directory),
            "x": x,
            "prefix": f"{self.prefix}{x}",
            "status": "claiming",
            **fields,
        }

    def claim(self, plan_of: Callable[[int], dict]) -> dict:
        """The first free range, claimed by creating its bridge; its state (status "building")."""
        state = nh.claim_range(self.candidates, self.prefix_of, self.networks, plan_of, self.bridge_key)
        if state is None:
            ranges = " + ".join(self.networks("X"))  # the networks' pattern, 10.213.X.0/24
            raise self.error(f"no free address range {ranges} left on this machine")
        return state

    def down(
        self,
        directory: Path | str,
        take_down: Callable[[Path, dict], None],
        remove_files: Callable[[Path, dict | None], None],
    ) -> bool:
        """Remove everything the harness in `directory` created. Idempotent; True if it found one.

        A state still "claiming" never got its bridge: whatever carries the prefix belongs to
        someone else, so only the files go."""
        directory = Path(directory).resolve()
        state = self.load_state(directory) if directory.exists() else None
        if state is None:
            remove_files(directory, None)
            return False
        if state.get("status") != "claiming":
            take_down(directory, state)
        remove_files(directory, state)
        return True

    def reclaimed(self, state: dict) -> bool:
        """True when another claim holds `state`'s range now: its bridge exists, under another
        index than the one this claim made. A claim needs every name of the range free, so
        then nothing named by the prefix is this one's (another lane's `up` may take a range
        the moment a `down` released it)."""
        index = state.get("claim_ifindex")
        now = nh.link_index(state[self.bridge_key]) if index is not None else None
        return now is not None and now != index

    def leftovers(self, prefix: str, markers: Iterable[str], files: Iterable[Path], names: bool = True) -> list[str]:
        """What of one still exists: namespaces and links named `prefix`-* (unless not `names`:
        the range is another's now), live processes (not this one or its ancestors) with an
        argument that is a marker or a path under one, files."""
        found = nh.prefixed_leftovers(prefix + "-") if names else []
        markers = [str(marker).rstrip("/") for marker in markers]
        spare = nh.ancestors()
        for pid in nh.all_pids():
            if pid in spare:
                continue
            argv = nh.cmdline(pid)
            if any(arg == m or m + "/" in arg for m in markers for arg in argv) and nh.alive(pid):
                found.append(f"process {pid}: {' '.join(argv)}")
        found += [f"file {path}" for path in files if Path(path).exists()]
        return found

    def status(self, directory: Path | str, add: Callable[[dict], None]) -> dict | None:
        """The state in `directory` (None when there is none), with what `add` puts in it."""
        directory = Path(directory).resolve()
        state = self.load_state(directory) if directory.exists() else None
        if state is not None:
            add(state)
        return state
