"""scripts/build_wheel.py, the one wheel builder of the tf_virtualenv and slurm_cluster roles.

Same sources give the same bytes (whatever the files' mtimes: an old checkout and a fresh
clone), a wheel of the same sources is reused without building, and changed sources give a
new one. Real pip builds of a copy of this project.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILDER = ROOT / "scripts" / "build_wheel.py"


def copy_project(target: Path, mtime: float | None = None) -> Path:
    target.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, target / name)
    shutil.copytree(ROOT / "src", target / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    if mtime is not None:
        for path in [target, *target.rglob("*")]:
            os.utime(path, (mtime, mtime))
    return target


def build(project: Path, cache: Path) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, str(BUILDER), str(project), "--cache", str(cache)], capture_output=True, text=True, timeout=300
    )
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def test_same_sources_same_bytes_reused_and_changed_sources_rebuilt(tmp_path):
    old = copy_project(tmp_path / "old-checkout", mtime=1_000_000_000)
    fresh = copy_project(tmp_path / "fresh-clone", mtime=1_700_000_000)

    rc, first = build(old, tmp_path / "cache-a")
    assert rc == 0 and first["built"], first
    rc, other = build(fresh, tmp_path / "cache-b")
    assert rc == 0 and other["built"] and other["digest"] == first["digest"]
    assert Path(first["wheel"]).read_bytes() == Path(other["wheel"]).read_bytes()

    rc, again = build(fresh, tmp_path / "cache-a")
    assert rc == 0 and not again["built"] and again["wheel"] == first["wheel"]

    (fresh / "src" / "dtfbench" / "__init__.py").write_text('"""changed"""\n__version__ = "0.1.0"\n')
    rc, changed = build(fresh, tmp_path / "cache-a")
    assert rc == 0 and changed["built"] and changed["digest"] != first["digest"]
    assert Path(changed["wheel"]).read_bytes() != Path(first["wheel"]).read_bytes()


def test_a_folder_that_is_no_checkout_is_one_clear_error(tmp_path):
    rc, result = build(tmp_path, tmp_path / "cache")
    assert rc == 1 and result["failed"] and not result["built"]
    assert "has no pyproject.toml" in result["msg"] and str(tmp_path) in result["msg"]
    assert not (tmp_path / "cache").exists()
