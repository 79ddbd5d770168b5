"""The sync engine (src/dtfbench/node/s3sync.py) against a real moto S3 server.

Full sync, a sync SIGKILLed in the middle of a transfer then resumed, local files truncated
or corrupted, files removed remotely, a lost manifest, multipart ETags, and the cost of a
re-sync with nothing to do for ImageNet's 1,152 shards.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from dtfbench.node import s3sync
from dtfbench.workload.flags import tfrecord_files

BUCKET = "dtfbench-data"
SOURCE = f"s3://{BUCKET}/imagenet"


@pytest.fixture
def s3(moto):
    session = boto3.session.Session(
        aws_access_key_id=moto.env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=moto.env["AWS_SECRET_ACCESS_KEY"],
        region_name=moto.env["AWS_REGION"],
    )
    client = session.client("s3", endpoint_url=moto.endpoint, config=Config(max_pool_connections=32))
    client.create_bucket(Bucket=BUCKET)
    return client


def put_objects(s3, objects: dict[str, bytes]) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda kv: s3.put_object(Bucket=BUCKET, Key=f"imagenet/{kv[0]}", Body=kv[1]), objects.items()))


def shard_set(count: int, size: int, split: str = "train") -> dict[str, bytes]:
    return {f"{split}-{i:05d}-of-{count:05d}": os.urandom(size) for i in range(count)}


def local_digests(dest: Path) -> dict[str, str]:
    return {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in dest.iterdir() if not p.name.startswith(".")}


def digests(objects: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.md5(data).hexdigest() for name, data in objects.items()}


def test_full_sync_then_nothing_to_do(s3, tmp_path):
    objects = {**shard_set(20, 50_000), **shard_set(3, 20_000, "validation")}
    put_objects(s3, objects)
    dest = tmp_path / "data"

    first = s3sync.sync(s3, SOURCE, str(dest), workers=4)
    assert first.verified and first.changed
    assert (first.downloaded_files, first.skipped_files, first.files) == (23, 0, 23)
    assert first.downloaded_bytes == first.bytes == 20 * 50_000 + 3 * 20_000
    assert first.mb_per_s > 0
    assert local_digests(dest) == digests(objects)

    manifest_written = (dest / s3sync.MANIFEST).stat().st_mtime_ns
    second = s3sync.sync(s3, SOURCE, str(dest), workers=4)
    assert not second.changed and second.verified
    assert (second.downloaded_files, second.skipped_files, second.hashed_files) == (0, 23, 0)
    assert second.skipped_bytes == first.bytes
    # Nothing to do writes nothing: no journal, the manifest as it was (no rewrite, no fsync).
    assert (dest / s3sync.MANIFEST).stat().st_mtime_ns == manifest_written
    assert not (dest / s3sync.JOURNAL).exists()


def test_check_mode_changes_nothing(s3, tmp_path):
    put_objects(s3, shard_set(5, 1000))
    dest = tmp_path / "data"
    planned = s3sync.sync(s3, SOURCE, str(dest), check_mode=True)
    assert planned.changed and len(planned.to_download) == 5 and not dest.exists()
    s3sync.sync(s3, SOURCE, str(dest))
    (dest / "train-00001-of-00005").write_bytes(b"short")
    planned = s3sync.sync(s3, SOURCE, str(dest), check_mode=True)
    assert planned.to_download == ["train-00001-of-00005"]
    assert (dest / "train-00001-of-00005").read_bytes() == b"short"


def test_include_patterns_select_by_base_name(s3, tmp_path):
    put_objects(s3, {**shard_set(3, 100), **shard_set(2, 100, "validation"), "README.txt": b"x"})
    report = s3sync.sync(s3, SOURCE, str(tmp_path), include=["train-*", "validation-*"])
    assert report.files == 5 and not (tmp_path / "README.txt").exists()


def test_truncated_and_corrupted_files_are_downloaded_again(s3, tmp_path):
    objects = shard_set(6, 40_000)
    put_objects(s3, objects)
    s3sync.sync(s3, SOURCE, str(tmp_path))
    names = sorted(objects)
    with open(tmp_path / names[0], "r+b") as f:  # truncated: a size mismatch
        f.truncate(1000)
    with open(tmp_path / names[1], "r+b") as f:  # same size, one byte flipped in place
        f.seek(123)
        byte = f.read(1)
        f.seek(123)
        f.write(bytes([byte[0] ^ 0xFF]))

    report = s3sync.sync(s3, SOURCE, str(tmp_path))
    assert report.downloaded_files == 2 and report.hashed_files == 1 and report.verified
    assert local_digests(tmp_path) == digests(objects)


def test_a_lost_manifest_costs_hashing_not_downloading(s3, tmp_path):
    objects = shard_set(8, 10_000)
    put_objects(s3, objects)
    s3sync.sync(s3, SOURCE, str(tmp_path))
    (tmp_path / s3sync.MANIFEST).unlink()
    report = s3sync.sync(s3, SOURCE, str(tmp_path))
    assert (report.downloaded_files, report.hashed_files, report.skipped_files) == (0, 8, 8)
    assert not report.changed


def test_multipart_etag_without_a_record_is_downloaded_again(s3, tmp_path):
    data = os.urandom(6 * 1024 * 1024)
    source = tmp_path / "big"
    source.write_bytes(data)
    s3.upload_file(
        str(source),
        BUCKET,
        "imagenet/train-00000-of-00001",
        Config=TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024),
    )
    assert "-" in s3.head_object(Bucket=BUCKET, Key="imagenet/train-00000-of-00001")["ETag"]
    dest = tmp_path / "data"
    assert s3sync.sync(s3, SOURCE, str(dest)).downloaded_files == 1
    assert s3sync.sync(s3, SOURCE, str(dest)).downloaded_files == 0  # the manifest vouches for it
    (dest / s3sync.MANIFEST).unlink()
    again = s3sync.sync(s3, SOURCE, str(dest))
    assert again.downloaded_files == 1 and again.hashed_files == 0  # no MD5 to check it against
    assert (dest / "train-00000-of-00001").read_bytes() == data


def test_s3_checksums_are_asked_for_only_where_no_md5_checks_the_bytes(moto, s3, tmp_path, monkeypatch):
    """Our MD5 checks single-part objects; botocore's CRC on top would hash every byte twice.
    A multipart object (no MD5 in its ETag), and every object without MD5 checking, asks for
    S3's own checksum, which botocore then validates."""
    put_objects(s3, shard_set(2, 1000))
    source = tmp_path / "big"
    source.write_bytes(os.urandom(6 * 1024 * 1024))
    s3.upload_file(
        str(source),
        BUCKET,
        "imagenet/train-00099-of-00100",
        Config=TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024),
    )
    for name, value in moto.env.items():
        monkeypatch.setenv(name, value)
    client = s3sync.make_client(4)
    asked = {}
    client.meta.events.register(
        "provide-client-params.s3.GetObject",
        lambda params, **_: asked.update({params["Key"].rsplit("/", 1)[-1]: params.get("ChecksumMode")}),
    )

    assert s3sync.sync(client, SOURCE, str(tmp_path / "md5")).downloaded_files == 3
    assert asked == {"train-00000-of-00002": None, "train-00001-of-00002": None, "train-00099-of-00100": "ENABLED"}
    asked.clear()
    assert s3sync.sync(client, SOURCE, str(tmp_path / "no-md5"), verify_md5=False).downloaded_files == 3
    assert set(asked.values()) == {"ENABLED"}


def test_remote_removals_are_deleted_only_when_asked(s3, tmp_path):
    objects = shard_set(4, 1000)
    put_objects(s3, objects)
    s3sync.sync(s3, SOURCE, str(tmp_path))
    s3.delete_object(Bucket=BUCKET, Key="imagenet/train-00003-of-00004")

    kept = s3sync.sync(s3, SOURCE, str(tmp_path))
    assert not kept.changed and (tmp_path / "train-00003-of-00004").exists()
    removed = s3sync.sync(s3, SOURCE, str(tmp_path), delete=True)
    assert removed.changed and removed.deleted == ["train-00003-of-00004"]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == sorted(objects)[:3]
    assert "train-00003-of-00004" not in json.loads((tmp_path / s3sync.MANIFEST).read_text())["files"]


def test_bad_source_and_workers_are_refused(s3, tmp_path):
    for bad in ("bucket/prefix", "s3://", "https://x/y"):
        with pytest.raises(s3sync.SyncError, match="s3://BUCKET/PREFIX"):
            s3sync.sync(s3, bad, str(tmp_path))
    with pytest.raises(s3sync.SyncError, match="workers=0"):
        s3sync.sync(s3, SOURCE, str(tmp_path), workers=0)


def run_cli(moto, *args, **kwargs):
    env = dict(os.environ, **moto.env)
    return subprocess.Popen(
        [sys.executable, "-m", "dtfbench.s3sync", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_a_sync_killed_mid_transfer_resumes_and_never_shows_a_partial_file(s3, moto, tmp_path):
    objects = {**shard_set(12, 200_000), "train-00099-of-00100": os.urandom(6_000_000)}
    put_objects(s3, objects)
    dest = tmp_path / "data"
    # 2 MB/s in all: the large object (first, largest first) takes ~3 s, long enough to be
    # caught half-written.
    proc = run_cli(moto, SOURCE, str(dest), "--workers", "2", "--max-bandwidth", "2000000")
    partial = dest / f".train-00099-of-00100{s3sync.PARTIAL_SUFFIX}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = [p for p in dest.glob("train-*")] if dest.exists() else []
        if partial.exists() and partial.stat().st_size > 1_000_000 and len(done) >= 2:
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail(f"never caught the sync mid-transfer: {proc.communicate()}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    # What a killed sync leaves: whole files under their final names, the rest hidden.
    assert 0 < partial.stat().st_size < 6_000_000
    whole = tfrecord_files(str(dest))  # exactly what the workload would read
    assert 2 <= len(whole) < len(objects)
    for path in whole:
        assert hashlib.md5(Path(path).read_bytes()).hexdigest() == hashlib.md5(objects[Path(path).name]).hexdigest()

    resumed = run_cli(moto, SOURCE, str(dest), "--workers", "4")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    report = json.loads(out)
    assert report["verified"] and partial.name in report["partial_removed"]
    assert report["skipped_files"] >= len(whole) - 1  # one may have been renamed but not yet recorded: hashed
    assert report["downloaded_files"] + report["skipped_files"] == len(objects)
    assert not partial.exists()
    assert local_digests(dest) == digests(objects)


def test_two_syncs_into_one_directory_are_refused(s3, tmp_path):
    put_objects(s3, shard_set(2, 100))
    import fcntl

    with open(tmp_path / s3sync.LOCK, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(s3sync.SyncError, match="another sync"):
            s3sync.sync(s3, SOURCE, str(tmp_path))


def test_noop_resync_of_1152_shards_costs_one_listing(moto, s3, tmp_path):
    """The goal is < 2 s of wall time (benchmarks/staging.py measures it). Here: a re-sync
    with nothing to do makes only the LIST requests (no HEAD, no GET), and adds < 0.5 s of
    wall time and < 1 s of CPU to that LIST on this (shared, 2-core) machine."""
    objects = {**shard_set(1024, 64), **shard_set(128, 64, "validation")}
    put_objects(s3, objects)
    dest = tmp_path / "imagenet"
    client = s3sync.skip_timestamp_parsing(s3)
    assert s3sync.sync(client, SOURCE, str(dest), workers=16).downloaded_files == 1152
    calls = []
    client.meta.events.register("before-call.s3.*", lambda model, **kw: calls.append(model.name))

    wall, cpu = time.monotonic(), time.process_time()
    report = s3sync.sync(client, SOURCE, str(dest), workers=16)
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    assert (report.skipped_files, report.downloaded_files, report.hashed_files) == (1152, 0, 0)
    assert calls == ["ListObjectsV2", "ListObjectsV2"]  # 1,152 keys: two pages of at most 1,000

    listing = time.monotonic()
    s3sync.list_remote(client, BUCKET, "imagenet/")
    listing = time.monotonic() - listing
    assert wall - listing < 0.5, f"re-sync {wall:.2f} s, of which the LIST alone {listing:.2f} s"
    assert cpu < 1.0, f"a re-sync with nothing to do used {cpu:.2f} s of CPU"
