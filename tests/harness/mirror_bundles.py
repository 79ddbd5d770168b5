"""Where the git bundles of the mirrors are: this machine's copies of GitHub (tests and benchmarks never fetch it).

For the tests (the mirror_bundle fixture) and the benchmarks (benchmarks/workload_vs_tf_cnn.py) alike.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

MIRRORS_ENV = "DTFBENCH_MIRRORS"


def mirror_places(root: Path) -> list[Path]:
    """The folders that may hold the bundles, first first: $DTFBENCH_MIRRORS, else ../shared/mirrors
    beside the checkout `root` or beside its main worktree (a linked worktree has none of its own)."""
    places = [Path(os.environ[MIRRORS_ENV])] if os.environ.get(MIRRORS_ENV) else []
    common = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--path-format=absolute", "--git-common-dir"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    for base in [root] + ([Path(common).parent] if common else []):
        places.append(base.parent / "shared" / "mirrors")
    return places


def find_bundle(name: str, places: list[Path]) -> Path | None:
    """The bundle `name` in the first of `places` that holds it; None where none does."""
    return next((place / name for place in places if (place / name).is_file()), None)
