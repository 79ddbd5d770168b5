"""Staging a dataset to node-local disk (dtfbench.node.stage_data): real files, real kills, a real
small file system for the room check."""

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dtfbench.node import stage_data
from dtfbench.node.stage_data import StageError, stage

ROOT = Path(__file__).resolve().parents[2]
SLURM_COPY = ROOT / "roles" / "slurm_cluster" / "files" / "dtfbench_stage_data.py"


def dataset(folder, sizes, checksums=True, extra=("README", ".hidden")):
    """Shards train-* (and one validation-*) of the given sizes, SHA256SUMS, and files that are not the dataset."""
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"train-{i:05d}-of-{len(sizes) - 1:05d}" for i in range(len(sizes) - 1)] + ["validation-00000-of-00001"]
    for index, (name, size) in enumerate(zip(names, sizes)):
        (folder / name).write_bytes(bytes([index % 251]) * size)
        os.utime(folder / name, ns=(1_600_000_000_000_000_000 + index, 1_600_000_000_000_000_000 + index))
    for name in extra:
        (folder / name).write_text("not the dataset")
    if checksums:
        (folder / "SHA256SUMS").write_text(
            "".join(f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}\n" for n in names)
        )
    return names


def test_a_staging_copies_the_dataset_checked_and_a_second_copies_nothing(tmp_path):
    names = dataset(tmp_path / "shared", [3 << 20, 1 << 20, 5000, 0])
    report = stage(tmp_path / "shared", tmp_path / "local")
    assert sorted(os.listdir(tmp_path / "local")) == sorted([*names, "SHA256SUMS", stage_data.LOCK])
    for name in names:
        source, copy = (tmp_path / "shared" / name).stat(), (tmp_path / "local" / name).stat()
        assert (copy.st_size, copy.st_mtime_ns) == (source.st_size, source.st_mtime_ns)
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "shared" / name).read_bytes()
    total = (3 << 20) + (1 << 20) + 5000 + (tmp_path / "shared" / "SHA256SUMS").stat().st_size
    assert report["files"] == 5 and report["bytes"] == total
    assert (report["copied_files"], report["copied_bytes"], report["skipped_files"]) == (5, total, 0)
    assert report["checksummed_files"] == 4 and report["checksums"] == "SHA256SUMS"
    assert report["already_staged"] is False and report["mb_per_s"] > 0
    assert report["source_filesystem"]["fs_type"] and report["target_filesystem"]["mount_point"]
    again = stage(tmp_path / "shared", tmp_path / "local")
    assert again["already_staged"] is True
    assert (again["copied_files"], again["copied_bytes"], again["skipped_bytes"]) == (0, 0, total)
    # A source file that changed (size or time) is staged again, alone.
    (tmp_path / "shared" / names[1]).write_bytes(b"x" * 10)
    (tmp_path / "shared" / "SHA256SUMS").write_text(
        (tmp_path / "shared" / "SHA256SUMS")
        .read_text()
        .replace(hashlib.sha256(bytes([1]) * (1 << 20)).hexdigest(), hashlib.sha256(b"x" * 10).hexdigest())
    )
    third = stage(tmp_path / "shared", tmp_path / "local")
    assert (third["copied_files"], third["checksummed_files"]) == (2, 1)  # the shard and SHA256SUMS
    assert (tmp_path / "local" / names[1]).read_bytes() == b"x" * 10


def test_a_copy_that_does_not_match_its_checksum_never_gets_its_name(tmp_path):
    names = dataset(tmp_path / "shared", [1 << 20, 2000])
    sums = tmp_path / "shared" / "SHA256SUMS"
    sums.write_text(sums.read_text().replace(hashlib.sha256(bytes([0]) * (1 << 20)).hexdigest(), "0" * 64))
    with pytest.raises(StageError) as error:
        stage(tmp_path / "shared", tmp_path / "local")
    assert str(error.value).startswith(f"{tmp_path / 'shared' / names[0]} did not stage: SHA-256 ")
    assert f"SHA256SUMS says {'0' * 64}" in str(error.value)
    left = os.listdir(tmp_path / "local")
    assert names[0] not in left and not [n for n in left if n.endswith(stage_data.PARTIAL_SUFFIX)], left


def test_a_staging_killed_mid_file_resumes_without_a_corrupt_file(tmp_path):
    """The kernel kills the copy in the middle of its third file (SIGXFSZ, at a limit on the size of
    any file it writes; Python ignores the signal unless told otherwise); the next staging removes
    the partial file, keeps the two it finished and copies the rest."""
    names = dataset(tmp_path / "shared", [1 << 20, 1 << 20, 4 << 20, 1 << 20], checksums=False)
    limit = 2 << 20

    def small_files_only():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    killable = (
        "import runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_DFL); "
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    args = [str(SLURM_COPY), str(tmp_path / "shared"), str(tmp_path / "local"), "--workers", "1"]
    killed = subprocess.run(
        [sys.executable, "-c", killable, *args],
        preexec_fn=small_files_only,
        capture_output=True,
        timeout=60,
    )
    assert killed.returncode == -signal.SIGXFSZ, killed
    left = sorted(os.listdir(tmp_path / "local"))
    assert left == sorted([names[0], names[1], f".{names[2]}{stage_data.PARTIAL_SUFFIX}", stage_data.LOCK]), left
    assert (tmp_path / "local" / f".{names[2]}{stage_data.PARTIAL_SUFFIX}").stat().st_size == limit
    resumed = stage(tmp_path / "shared", tmp_path / "local")
    assert resumed["partial_removed"] == [f".{names[2]}{stage_data.PARTIAL_SUFFIX}"]
    assert (resumed["skipped_files"], resumed["copied_files"]) == (2, 2)
    for name in names:
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "shared" / name).read_bytes()


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "dtfbench-test", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_target_without_room_is_refused_before_anything_is_copied(tmp_path, small_disk):
    dataset(tmp_path / "shared", [3 << 20, 2 << 20])
    with pytest.raises(StageError) as error:
        stage(tmp_path / "shared", small_disk / "imagenet")
    assert str(error.value).startswith(f"the staging target {small_disk / 'imagenet'} has 0.00 GB free")
    assert "the dataset needs 0.01 GB more there" in str(error.value) and "give stage_dir a folder with room" in str(
        error.value
    )
    assert os.listdir(small_disk / "imagenet") == [stage_data.LOCK]


def test_bad_sources_are_named_with_the_fix(tmp_path):
    with pytest.raises(StageError, match=r"cannot list the staging source .*/nowhere: No such file or directory"):
        stage(tmp_path / "nowhere", tmp_path / "local")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StageError, match=r"holds no dataset files \(train-\*, validation-\*\): point data_dir"):
        stage(tmp_path / "empty", tmp_path / "local")
    dataset(tmp_path / "shared", [10, 10])
    with pytest.raises(StageError, match="the staging target is the source itself"):
        stage(tmp_path / "shared", tmp_path / "shared" / ".")
    (tmp_path / "shared" / "SHA256SUMS").write_text("abc  train-00000-of-00001\n")
    with pytest.raises(StageError, match=r"SHA256SUMS, line 1, is not sha256sum's"):
        stage(tmp_path / "shared", tmp_path / "local")
    assert not (tmp_path / "local").exists()


def test_check_mode_says_what_it_would_copy_and_writes_nothing(tmp_path):
    dataset(tmp_path / "shared", [1000, 2000])
    report = stage(tmp_path / "shared", tmp_path / "local", check_mode=True)
    assert (report["copied_files"], report["already_staged"]) == (3, False)
    assert not (tmp_path / "local").exists()


def test_the_slurm_jobs_copy_runs_as_a_file_and_prints_one_json_object(tmp_path):
    dataset(tmp_path / "shared", [1000, 2000])
    done = subprocess.run(
        [sys.executable, str(SLURM_COPY), str(tmp_path / "shared"), str(tmp_path / "local")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["copied_files"] == 3 and report["target_filesystem"]["fs_type"], report
    failed = subprocess.run(
        [sys.executable, str(SLURM_COPY), str(tmp_path / "nowhere"), str(tmp_path / "local")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 1 and json.loads(failed.stdout)["error"].startswith("cannot list the staging source")


def test_a_write_that_fails_leaves_no_partial_file_and_names_the_file(tmp_path):
    names = dataset(tmp_path / "shared", [1 << 20, 3 << 20], checksums=False)

    def small_files_only():  # writes past 2 MiB fail with EFBIG (Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))

    failed = subprocess.run(
        [sys.executable, str(SLURM_COPY), str(tmp_path / "shared"), str(tmp_path / "local"), "--workers", "1"],
        preexec_fn=small_files_only,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 1, failed
    assert json.loads(failed.stdout)["error"] == (
        f"{tmp_path / 'shared' / names[1]} did not stage into {tmp_path / 'local'}: File too large"
    )
    assert sorted(os.listdir(tmp_path / "local")) == sorted([names[0], stage_data.LOCK])


def test_the_slurm_jobs_copy_runs_alone_on_the_oldest_python(tmp_path):
    """A Slurm job runs dtfbench_stage_data.py beside dtfbench_procfs.py, without dtfbench (the
    study's TF 1.1 module: Python 3.6)."""
    import shutil

    from test_storage_record import oldest_python

    for name in ("dtfbench_stage_data.py", "dtfbench_procfs.py"):
        shutil.copy(SLURM_COPY.parent / name, tmp_path / name)
    dataset(tmp_path / "shared", [1000, 2000])
    done = subprocess.run(
        [oldest_python(), str(tmp_path / "dtfbench_stage_data.py"), str(tmp_path / "shared"), str(tmp_path / "local")],
        capture_output=True, text=True, timeout=60, cwd="/", env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["copied_files"] == 3 and report["checksummed_files"] == 2
    assert report["target_filesystem"]["mount_point"], report
