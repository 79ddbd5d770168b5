#!/usr/bin/env python3
"""Build the dtfbench wheel reproducibly, on the controller; print {"changed", "wheel"} as JSON.

Builds from a clean copy of pyproject.toml, README.md and src/ (a stale build/ folder in the
checkout can smuggle deleted modules into a wheel) with SOURCE_DATE_EPOCH fixed, so the same
sources give the same bytes. The wheel replaces the one in --out only when its bytes differ:
"changed" is then true, and the copy to the nodes changes only then too.
"""

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile

# Fixed, not the files' mtimes: a fresh checkout must give the same wheel as an old one.
SOURCE_DATE_EPOCH = "315532800"  # 1980-01-01, the earliest date a zip entry can hold
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", required=True, help="the repository root (pyproject.toml)")
    parser.add_argument("--out", required=True, help="folder that keeps the built wheel")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dtfbench-wheel-") as tmp:
        source = os.path.join(tmp, "source")
        os.makedirs(source)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(os.path.join(args.project, name), source)
        shutil.copytree(os.path.join(args.project, "src"), os.path.join(source, "src"), ignore=IGNORE)
        built = os.path.join(tmp, "wheels")
        env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH, PIP_DISABLE_PIP_VERSION_CHECK="1")
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                               "--wheel-dir", built, source], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(json.dumps({"failed": True, "msg": "pip wheel failed: " + (proc.stderr or proc.stdout)[-2000:]}))
            return 1
        (name,) = [n for n in os.listdir(built) if n.endswith(".whl")]
        target = os.path.join(args.out, name)
        changed = not (os.path.exists(target) and filecmp.cmp(os.path.join(built, name), target, shallow=False))
        if changed:
            shutil.copyfile(os.path.join(built, name), target + ".tmp")
            os.replace(target + ".tmp", target)
    print(json.dumps({"changed": changed, "wheel": target}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
