"""The direct call's code on the host: unpacked once per version into the user's cache folder,
where Python keeps its bytecode (launch/direct_call.py, ``cached_code``).

Importing the host code from a zip compiles its ~3,000 lines on every call; from the cache
the second call loads bytecode. Each test runs the real program the action plugin pipes to a
host (a ``checked`` call, which starts nothing) with the cache in a folder of its own
(XDG_CACHE_HOME), on the controller's Python and on the TF 1.1 nodes' (3.6): a call on a
fresh host, a call that finds the cache, a cache others may write to, a damaged copy, calls
that race to unpack, old versions, and a cache that cannot be written.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dtfbench.launch import direct_call
from dtfbench.launch.host_run_spec import ARGUMENT_SPEC


@pytest.fixture(params=["controller", "tf1"])
def python(request):
    """The host's Python: this one, and the oldest the host code runs on (the TF 1.1 nodes')."""
    return sys.executable if request.param == "controller" else request.getfixturevalue("tf1_python")


def call(
    python: str, tmp_path: Path, cache: Path | str, *flags: str, cwd: Path | None = None
) -> tuple[dict | None, str]:
    """One `checked` call of tf_host_run on this machine as a host, with XDG_CACHE_HOME=cache,
    in the folder cwd: (its result, stderr)."""
    params = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    params.update(state="checked", run_id="r1", run_dir=str(tmp_path / "runs" / "r1"), tasks=[])
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a host's Python keeps bytecode unless told not to
    done = subprocess.run(
        [python, *flags, "-", direct_call.process_tag("tf_host_run")],
        input=direct_call.script("tf_host_run", params, False, direct_call.path_options(ARGUMENT_SPEC)),
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )
    return direct_call.parse(done.stdout.decode()), done.stderr.decode()


def version_folder(cache: Path) -> Path:
    return cache / direct_call.CACHE_FOLDER / direct_call.code_id()


def host_run_origin(stderr: str) -> str:
    """Where `python -v` says launch/host_run's code came from ("" when from no file)."""
    found = re.search(r"^# code object from '?(\S*/launch/(?:__pycache__/)?host_run\.[^'\s]*)'?$", stderr, re.M)
    return found.group(1) if found else ""


def assert_answers(result: dict | None, stderr: str) -> None:
    assert result is not None and not result.get("failed"), stderr[-2000:]
    assert result["room_problem"] is None, result


def test_the_second_call_loads_bytecode_from_the_cache(python, tmp_path):
    cache = tmp_path / "cache"
    result, stderr = call(python, tmp_path, cache)
    assert_answers(result, stderr)
    folder = version_folder(cache)
    code = folder / direct_call.PACKAGE / "launch" / "host_run.py"
    assert code.read_bytes() == (Path(direct_call.__file__).parent / "host_run.py").read_bytes()
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert list((folder / direct_call.PACKAGE / "launch" / "__pycache__").glob("host_run.*.pyc"))
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no staging folder left

    result, stderr = call(python, tmp_path, cache, "-v")
    assert_answers(result, stderr)
    assert host_run_origin(stderr).startswith(str(folder / direct_call.PACKAGE / "launch" / "__pycache__")), stderr


def test_a_folder_others_may_write_to_is_never_imported_from(python, tmp_path):
    cache = tmp_path / "cache"
    folder = version_folder(cache)
    planted = folder / direct_call.PACKAGE / "launch"
    planted.mkdir(parents=True)
    (folder / direct_call.PACKAGE / "__init__.py").write_text("")
    (planted / "__init__.py").write_text("")
    (planted / "host_run.py").write_text("def direct_entry(params, check_mode, warn):\n    return {'planted': True}\n")
    folder.chmod(0o777)

    result, stderr = call(python, tmp_path, cache, "-v")

    assert_answers(result, stderr)
    assert "planted" not in result
    assert not host_run_origin(stderr).startswith(str(folder)), stderr
    assert (planted / "host_run.py").exists()  # not ours to remove


def test_a_damaged_copy_is_replaced(python, tmp_path):
    cache = tmp_path / "cache"
    assert_answers(*call(python, tmp_path, cache))
    code = version_folder(cache) / direct_call.PACKAGE / "launch" / "host_run.py"
    code.write_text(code.read_text()[:5000] + "\n)(\n")  # damaged on the disk
    for pyc in code.parent.glob("__pycache__/host_run.*.pyc"):
        pyc.unlink()

    assert_answers(*call(python, tmp_path, cache))  # from a zip, the damaged copy removed
    assert_answers(*call(python, tmp_path, cache))  # unpacked again
    assert code.read_bytes() == (Path(direct_call.__file__).parent / "host_run.py").read_bytes()


def test_calls_that_race_to_unpack_all_answer_and_leave_one_copy(tmp_path):
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: call(sys.executable, tmp_path, cache), range(6)))
    for result, stderr in answers:
        assert_answers(result, stderr)
    assert [p.name for p in (cache / direct_call.CACHE_FOLDER).iterdir()] == [direct_call.code_id()]


def test_versions_unused_for_a_week_and_leftover_staging_are_removed(tmp_path):
    cache = tmp_path / "cache"
    root = cache / direct_call.CACHE_FOLDER
    week_ago = time.time() - direct_call.UNUSED_FOR_S - 60
    old, recent, staging = root / "0ld", root / "rec3nt", root / ".new-killed"
    for folder in (old, recent, staging):
        folder.mkdir(parents=True, mode=0o700)
    os.utime(old, (week_ago, week_ago))
    os.utime(staging, (time.time() - 7200, time.time() - 7200))

    assert_answers(*call(sys.executable, tmp_path, cache))

    assert sorted(p.name for p in root.iterdir()) == sorted([recent.name, direct_call.code_id()])


def test_a_cache_that_cannot_be_written_still_gets_an_answer(tmp_path):
    cache = tmp_path / "not-a-folder"
    cache.write_text("")  # XDG_CACHE_HOME names a file: nothing can be made under it
    assert_answers(*call(sys.executable, tmp_path, cache))
    assert cache.read_text() == ""


def test_a_relative_cache_folder_is_not_used(tmp_path):
    """XDG_CACHE_HOME must be absolute (a relative one is ignored): nothing is written under
    the folder the call happens to run in."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    assert_answers(*call(sys.executable, tmp_path, "relative-cache", cwd=workdir))
    assert list(workdir.iterdir()) == []
