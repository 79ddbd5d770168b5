#!/usr/bin/env python3
"""Build the dtfbench wheel of a checkout on the controller, once per state of its sources.

    build_wheel.py PROJECT_DIR [--cache DIR]

Prints one JSON line: {"wheel": path, "digest": sha256 of the sources, "built": bool}; on a
failure {"failed": true, "msg": ..., "built": false, "wheel": ""} and exit status 1.

The one builder of the roles that install dtfbench (tf_virtualenv on the nodes, slurm_cluster
on a login node):

- The digest covers pyproject.toml (setup.cfg, setup.py), README.md, LICENSE* and every file
  under src/ (caches and egg-info left out). A wheel of the same digest in the cache
  (<cache>/<digest>/) is reused without building: "built" is false, and the copy to the
  nodes changes nothing.
- Otherwise the sources are copied to a temporary directory (a stale build/ folder in the
  checkout cannot smuggle deleted modules in, and the build writes nothing into the
  checkout) and built with SOURCE_DATE_EPOCH fixed, so the same sources give the same bytes
  on any controller and in any checkout, old or fresh.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TOP_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "README.md", "LICENSE", "LICENSE.txt")
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
# Fixed, not the files' mtimes: a fresh checkout must give the same wheel as an old one.
SOURCE_DATE_EPOCH = "315532800"  # 1980-01-01, the earliest date a zip entry can hold


class BuildError(Exception):
    pass


def sources(project: Path) -> list[Path]:
    found = [project / name for name in TOP_FILES if (project / name).is_file()]
    for root, dirs, files in os.walk(project / "src"):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                found.append(Path(root) / name)
    return found


def digest(project: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for path in files:
        h.update(str(path.relative_to(project)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def build(project: Path, files: list[Path], out: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="dtfbench-wheel-") as tmp:
        tree = Path(tmp) / "src-tree"
        for path in files:
            target = tree / path.relative_to(project)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        dist = Path(tmp) / "dist"
        env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH, PIP_DISABLE_PIP_VERSION_CHECK="1")
        base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dist)]
        # Without build isolation when the build backend is here (no network needed).
        done = subprocess.run(base + ["--no-build-isolation", str(tree)], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            done = subprocess.run(base + [str(tree)], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise BuildError(f"pip wheel failed: {(done.stderr.strip() or done.stdout.strip())[-2000:]}")
        wheels = sorted(dist.glob("*.whl"))
        if len(wheels) != 1:
            raise BuildError(f"expected one wheel, got {[w.name for w in wheels]}")
        out.mkdir(parents=True, exist_ok=True)
        staged = out / (wheels[0].name + ".tmp")
        shutil.copyfile(wheels[0], staged)
        final = out / wheels[0].name
        os.replace(staged, final)
        return final


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path, help="the checkout (its pyproject.toml and src/)")
    default_cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dtfbench" / "wheels"
    parser.add_argument(
        "--cache",
        type=Path,
        default=default_cache,
        help=f"folder of the built wheels, one folder per digest (default {default_cache})",
    )
    args = parser.parse_args()
    project = args.project.resolve()
    try:
        if not (project / "pyproject.toml").is_file():
            raise BuildError(f"{project} has no pyproject.toml: PROJECT_DIR must be a dtfbench checkout")
        files = sources(project)
        key = digest(project, files)
        out = args.cache / key
        existing = sorted(out.glob("*.whl")) if out.is_dir() else []
        built = not existing
        wheel = build(project, files, out) if built else existing[0]
    except (BuildError, OSError) as err:
        print(json.dumps({"failed": True, "msg": f"build_wheel.py: {err}", "built": False, "wheel": ""}))
        return 1
    print(json.dumps({"wheel": str(wheel), "digest": key, "built": built}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
