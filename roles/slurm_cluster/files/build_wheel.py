#!/usr/bin/env python3
"""Build the dtfbench wheel of a checkout on the controller, once per source state.

    build_wheel.py PROJECT_DIR [--cache DIR]

Prints one JSON line: {"wheel": path, "digest": sha256 of the sources, "built": bool}.
The digest covers pyproject.toml, README.md, LICENSE* and every file under src/ (caches and
egg-info left out); a wheel of the same digest in the cache is reused, so the wheel a login
node gets changes only when the sources do. The sources are copied to a temporary directory
first: the build writes nothing into the checkout.
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
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}


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
        base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check",
                "--wheel-dir", str(dist)]
        # Without build isolation when the build backend is here (no network needed).
        done = subprocess.run(base + ["--no-build-isolation", str(tree)], capture_output=True, text=True)
        if done.returncode != 0:
            done = subprocess.run(base + [str(tree)], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"build_wheel.py: pip wheel failed: {done.stderr.strip() or done.stdout.strip()}")
        wheels = sorted(dist.glob("*.whl"))
        if len(wheels) != 1:
            raise SystemExit(f"build_wheel.py: expected one wheel, got {[w.name for w in wheels]}")
        out.mkdir(parents=True, exist_ok=True)
        staged = out / (wheels[0].name + ".tmp")
        shutil.copy2(wheels[0], staged)
        final = out / wheels[0].name
        os.replace(staged, final)
        return final


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    default_cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "dtfbench" / "wheels"
    parser.add_argument("--cache", type=Path, default=default_cache)
    args = parser.parse_args()
    project = args.project.resolve()
    if not (project / "pyproject.toml").is_file():
        raise SystemExit(f"build_wheel.py: {project} has no pyproject.toml")
    files = sources(project)
    key = digest(project, files)
    out = args.cache / key
    existing = sorted(out.glob("*.whl")) if out.is_dir() else []
    built = not existing
    wheel = build(project, files, out) if built else existing[0]
    print(json.dumps({"wheel": str(wheel), "digest": key, "built": built}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
