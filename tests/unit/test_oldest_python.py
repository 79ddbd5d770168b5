"""The oldest Python of each part is stated once, in pyproject.toml's [tool.dtfbench.oldest-python];
ruff lints each part for it (target-version, per-file-target-version) and keeps pyupgrade out of
the parts older than ruff's oldest target."""

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
RUFF_OLDEST = (3, 7)


def config():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def version(text):
    return tuple(int(part) for part in text.split("."))


def ruff_target(text):
    major, minor = max(version(text), RUFF_OLDEST)
    return "py%d%d" % (major, minor)


def test_ruff_targets_follow_the_oldest_python():
    whole = config()
    oldest = dict(whole["tool"]["dtfbench"]["oldest-python"])
    ruff = whole["tool"]["ruff"]
    assert ruff["target-version"] == ruff_target(oldest.pop("default"))
    assert ruff.get("per-file-target-version", {}) == {glob: ruff_target(v) for glob, v in oldest.items()}


def test_no_pyupgrade_rewrite_where_ruff_cannot_target_the_python():
    whole = config()
    oldest = dict(whole["tool"]["dtfbench"]["oldest-python"])
    oldest.pop("default")
    ignores = whole["tool"]["ruff"]["lint"]["per-file-ignores"]
    without_upgrades = {glob for glob, rules in ignores.items() if "UP" in rules}
    assert without_upgrades == {glob for glob, v in oldest.items() if version(v) < RUFF_OLDEST}


def test_every_part_named_exists():
    oldest = config()["tool"]["dtfbench"]["oldest-python"]
    for glob in oldest:
        if glob != "default":
            assert list(ROOT.glob(glob)), "%s names no file" % glob
