"""The sync engine (src/dtfbench/node/s3sync.py) against a real moto S3 server.

Full sync, a sync SIGKILLed in the middle of a transfer then resumed, local files truncated
or corrupted, files removed remotely, a lost manifest, multipart ETags, and the cost of a
re-sync with nothing to do for ImageNet's 1,152 shards.
"""

from __future__ import annotations

import base64
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
from botocore.httpchecksum import Crc32Checksum, CrtCrc32cChecksum, CrtCrc64NvmeChecksum

from dtfbench.node import s3sync
from dtfbench.workload.flags import train_files

BUCKET = "dtfbench-data"
SOURCE = f"s3://{BUCKET}/imagenet"
BOTOCORE_CHECKSUMS = {"CRC32": Crc32Checksum, "CRC32C": CrtCrc32cChecksum, "CRC64NVME": CrtCrc64NvmeChecksum}


@pytest.fixture
def s3(moto):
    session = boto3.session.Session(
        aws_access_key_id=moto.env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=moto.env["AWS_SECRET_ACCESS_KEY"],
        region_name=moto.env["AWS_REGION"],
    )
    # botocore's default since 1.36, said: this client validates S3's checksum of every GET.
    config = Config(max_pool_connections=32, response_checksum_validation="when_supported")
    client = session.client("s3", endpoint_url=moto.endpoint, config=config)
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


def put_with(client, key: str, data: bytes, **checksum) -> None:
    client.put_object(Bucket=BUCKET, Key=f"imagenet/{key}", Body=data, **checksum)


@pytest.fixture
def s3_no_checksum(moto, s3):
    """A client that sends no checksum with a PUT (botocore < 1.36's way, and other S3 tools'):
    its objects have an MD5 ETag (single part) and no S3 checksum."""
    return boto3.client(
        "s3",
        endpoint_url=moto.endpoint,
        aws_access_key_id=moto.env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=moto.env["AWS_SECRET_ACCESS_KEY"],
        region_name=moto.env["AWS_REGION"],
        config=Config(request_checksum_calculation="when_required"),
    )


def engine_client(moto, monkeypatch):
    """The engine's own client (s3sync.make_client), and the checksums botocore computes over
    GET bodies to validate them against S3's (their classes' names), seen through botocore's
    public event hooks, which get each response as the engine does. With the engine's client
    botocore validates none: the engine checks S3's checksum itself (s3sync.s3_checksum)."""
    for name, value in moto.env.items():
        monkeypatch.setenv(name, value)
    client = s3sync.make_client(4)
    validated = []

    def after_get(parsed, **_):
        checksum = getattr(parsed.get("Body"), "checksum", None)  # a StreamingChecksumBody's
        if checksum is not None:
            validated.append(type(checksum).__name__)

    client.meta.events.register("after-call.s3.GetObject", after_get)
    return client, validated


def test_s3_checksum_first_and_md5_only_for_objects_without_one(moto, s3, s3_no_checksum, tmp_path, monkeypatch):
    """CRC32, CRC32C and CRC64NVME objects are checked by their S3 checksum while they stream
    and by no MD5 (by the engine, or by botocore where the client validates by itself); an
    object with an MD5 ETag and no checksum by its MD5; a multipart object without a
    full-object checksum (a composite one, or none) by its size."""
    objects = {f"train-{i:05d}-of-00006": os.urandom(20_000 + i) for i in range(6)}
    names = sorted(objects)
    for name, algorithm in zip(names, ["CRC32", "CRC32C", "CRC64NVME"]):
        put_with(s3, name, objects[name], ChecksumAlgorithm=algorithm)
    put_with(s3, names[3], objects[names[3]])  # boto3's default: a CRC32
    put_with(s3_no_checksum, names[4], objects[names[4]])
    put_with(s3_no_checksum, names[5], objects[names[5]])
    big = os.urandom(6 * 1024 * 1024)
    (tmp_path / "big").write_bytes(big)
    multipart = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
    s3.upload_file(str(tmp_path / "big"), BUCKET, "imagenet/validation-00000-of-00002", Config=multipart)
    s3_no_checksum.upload_file(str(tmp_path / "big"), BUCKET, "imagenet/validation-00001-of-00002", Config=multipart)
    # s3transfer's multipart upload stores a checksum of the parts' checksums (moto's GET says it).
    composite = s3.get_object(Bucket=BUCKET, Key="imagenet/validation-00000-of-00002", ChecksumMode="ENABLED")
    composite["Body"].close()
    assert composite["ChecksumCRC32"].endswith("-2"), composite
    client, validated = engine_client(moto, monkeypatch)

    report = s3sync.sync(client, SOURCE, str(tmp_path / "data"))
    assert report.verified and report.downloaded_files == 8
    assert report.download_checks == {"CRC32": 2, "CRC32C": 1, "CRC64NVME": 1, "MD5": 2, "size": 2}
    # The engine checked the S3 checksums itself (its CRC32, isal's or zlib's, is faster than awscrt's); botocore
    # validated none of them, so no byte was hashed twice.
    assert validated == []
    assert local_digests(tmp_path / "data") == {
        **digests(objects),
        "validation-00000-of-00002": hashlib.md5(big).hexdigest(),
        "validation-00001-of-00002": hashlib.md5(big).hexdigest(),
    }

    # --no-md5 leaves the S3 checksums as they are and checks the MD5-only objects by size.
    assert s3sync.sync(client, SOURCE, str(tmp_path / "no-md5"), verify_md5=False).download_checks == {
        "CRC32": 2,
        "CRC32C": 1,
        "CRC64NVME": 1,
        "size": 4,
    }


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME"])
@pytest.mark.parametrize("checked_by", ["engine", "botocore"])
def test_bytes_that_differ_from_the_objects_crc_never_get_a_shard_name(
    moto, s3, tmp_path, monkeypatch, algorithm, checked_by
):
    """An object whose stored bytes no longer match its CRC (what a corruption on the server's
    side looks like: moto keeps the checksum a PUT declares) while its MD5 ETag matches
    them: only the CRC can catch it. The download fails, nothing carries the shard's name,
    the other files are kept and vouched for, and a re-sync fetches only that one. Checked
    by the engine with its client, and by botocore with a default boto3 client (which
    validates S3's checksum of every GET by itself, botocore's when_supported)."""
    objects = shard_set(4, 30_000)
    put_objects(s3, objects)
    bad = "train-00002-of-00004"
    other = bytearray(objects[bad])
    other[100] ^= 0xFF
    put_with(s3, bad, objects[bad], ChecksumAlgorithm=algorithm, **{f"Checksum{algorithm}": s3_b64(algorithm, other)})
    dest = tmp_path / "data"
    if checked_by == "engine":
        client, found_by = engine_client(moto, monkeypatch)[0], "computed"
    else:
        # botocore's check alone: the engine computes no checksum of its own beside it.
        client, found_by = s3, "Expected checksum"
        monkeypatch.setattr(s3sync, "_s3_checksum_digest", lambda algorithm: pytest.fail("hashed twice"))

    with pytest.raises(
        s3sync.SyncError, match=f"1 of 4 downloads failed.*{bad}: .*{algorithm} checksum.*{found_by}"
    ) as failed:
        s3sync.sync(client, SOURCE, str(dest))
    assert str(failed.value).count(bad) == 1, failed.value
    assert sorted(p.name for p in dest.iterdir() if not p.name.startswith(".")) == sorted(set(objects) - {bad})
    assert not list(dest.glob(f"*{s3sync.PARTIAL_SUFFIX}"))
    assert bad not in s3sync.read_manifest(str(dest))

    put_with(s3, bad, objects[bad], ChecksumAlgorithm=algorithm)  # repaired
    again = s3sync.sync(client, SOURCE, str(dest))
    assert (again.downloaded_files, again.skipped_files, again.download_checks) == (1, 3, {algorithm: 1})
    assert local_digests(dest) == digests(objects)


def test_an_sse_kms_objects_etag_is_not_taken_for_its_md5(moto, s3, s3_no_checksum, tmp_path):
    """S3 documents that an SSE-KMS object's ETag is no MD5 of its bytes (moto's still is):
    such an object without an S3 checksum is checked by its size, where checking the ETag as
    an MD5 would refuse every one of them on S3; the same object unencrypted by its MD5."""
    objects = shard_set(2, 20_000)
    names = sorted(objects)
    s3_no_checksum.put_object(
        Bucket=BUCKET, Key=f"imagenet/{names[0]}", Body=objects[names[0]], ServerSideEncryption="aws:kms"
    )
    put_with(s3_no_checksum, names[1], objects[names[1]])
    done = s3sync.sync(s3, SOURCE, str(tmp_path / "data"))
    assert done.download_checks == {"size": 1, "MD5": 1}
    assert local_digests(tmp_path / "data") == digests(objects)


@pytest.mark.parametrize("client_kind", ["engine", "default boto3"])
def test_bytes_that_differ_from_the_objects_s3_md5_never_get_a_shard_name(moto, s3, tmp_path, monkeypatch, client_kind):
    """S3's MD5 checksum (ChecksumMD5), which botocore does not check, is checked by the
    engine with either client: an object whose stored MD5 checksum no longer matches its
    bytes is refused although its ETag (an MD5 of the bytes) matches them."""
    objects = shard_set(3, 30_000)
    put_objects(s3, objects)
    bad = "train-00001-of-00003"
    other = bytearray(objects[bad])
    other[100] ^= 0xFF

    def md5_b64(data):
        return base64.b64encode(hashlib.md5(bytes(data)).digest()).decode()

    put_with(s3, bad, objects[bad], ChecksumAlgorithm="MD5", ChecksumMD5=md5_b64(other))
    client = engine_client(moto, monkeypatch)[0] if client_kind == "engine" else s3
    dest = tmp_path / "data"

    with pytest.raises(s3sync.SyncError, match=f"1 of 3 downloads failed.*{bad}: .*MD5 checksum in S3.*computed"):
        s3sync.sync(client, SOURCE, str(dest))
    assert sorted(p.name for p in dest.iterdir() if not p.name.startswith(".")) == sorted(set(objects) - {bad})
    assert bad not in s3sync.read_manifest(str(dest))

    put_with(s3, bad, objects[bad], ChecksumAlgorithm="MD5", ChecksumMD5=md5_b64(objects[bad]))  # repaired
    again = s3sync.sync(client, SOURCE, str(dest))
    assert (again.downloaded_files, again.skipped_files, again.download_checks) == (1, 2, {"MD5": 1})
    assert local_digests(dest) == digests(objects)


def test_a_download_asks_for_the_s3_checksum_with_any_client(moto, s3, tmp_path, monkeypatch):
    """download() on its own, with a client the engine did not make (the module's own, from
    AnsibleAWSModule, with the engine's configuration): the object's CRC32 is still what
    checks it, not its MD5."""
    put_with(s3, "train-00000-of-00001", os.urandom(50_000), ChecksumAlgorithm="CRC32")
    for name, value in moto.env.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", config=s3sync.client_config(4))
    remote = s3sync.list_remote(client, BUCKET, "imagenet/")
    dest = tmp_path / "data"
    dest.mkdir()

    _, check = s3sync.download(client, BUCKET, remote["train-00000-of-00001"], str(dest), s3sync.Bandwidth(0))

    assert check == "CRC32"


def page_cache_state(path: Path) -> dict[str, int]:
    """cachestat(2) of a whole file (Linux 6.5+): its pages in the page cache, dirty ones (not
    yet sent to the disk) and ones being written."""
    import ctypes

    class Range(ctypes.Structure):
        _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]

    class Stat(ctypes.Structure):
        _fields_ = [(name, ctypes.c_uint64) for name in ("cache", "dirty", "writeback", "evicted", "recently_evicted")]

    libc = ctypes.CDLL(None, use_errno=True)
    stat = Stat()
    with open(path, "rb") as f:
        if libc.syscall(451, f.fileno(), ctypes.byref(Range(0, 0)), ctypes.byref(stat), 0) != 0:  # SYS_cachestat
            pytest.skip(f"no cachestat(2) here: {os.strerror(ctypes.get_errno())}")
    return {name: getattr(stat, name) for name in ("cache", "dirty", "writeback")}


def test_each_download_is_sent_to_the_disk_as_it_completes(moto, s3, tmp_path, monkeypatch):
    """A finished download's pages go to the disk while the others download (the sync's flush
    at the end then waits for the last files only): none of its pages is left dirty. Without
    the writeback the kernel holds them for 30 s (vm.dirty_expire_centisecs)."""
    data = os.urandom(8 * 1024 * 1024)
    put_with(s3, "train-00000-of-00001", data)
    client, _ = engine_client(moto, monkeypatch)
    remote = s3sync.list_remote(client, BUCKET, "imagenet/")
    dest = tmp_path / "data"
    dest.mkdir()

    st, _ = s3sync.download(client, BUCKET, remote["train-00000-of-00001"], str(dest), s3sync.Bandwidth(0))

    state = page_cache_state(dest / "train-00000-of-00001")
    assert st.st_size == len(data)
    assert state["dirty"] == 0, f"pages of the download still dirty after it completed: {state}"


def s3_b64(algorithm: str, data: bytes) -> str:
    """S3's checksum of `data` as botocore computes it (its own classes, not the engine's)."""
    checksum = BOTOCORE_CHECKSUMS[algorithm]()
    checksum.update(bytes(data))
    return checksum.b64digest()


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


def test_every_bad_key_is_named_at_once_and_nothing_is_downloaded(s3, tmp_path):
    """Issue #56, case 10: six bad keys took six runs to find, and a key that is both a file and a
    folder ('x' and 'x/y') gave a raw [Errno 21] and a false "a re-run resumes"."""
    bad = [f"sub/../escape{i}" for i in range(3)] + ["a//b", "./dot", "c/./d"]
    put_objects(s3, {**shard_set(2, 100), **{k: b"x" for k in bad}, "x": b"file", "x/y": b"below"})
    dest = tmp_path / "data"
    with pytest.raises(s3sync.SyncError) as refused:
        s3sync.sync(s3, SOURCE, str(dest))
    text = str(refused.value)
    assert "6 object key(s) cannot be a local file name" in text
    assert all(repr(f"imagenet/{k}") in text for k in bad), text
    assert "1 key(s) are both a file and the folder of other keys" in text and "'imagenet/x'" in text
    assert "nothing was downloaded" in text and "re-run resumes" not in text
    assert not dest.exists() or not any(p.name.startswith("train-") for p in dest.iterdir())


def run_cli(moto, *args, **kwargs):
    env = dict(os.environ, **moto.env)
    return subprocess.Popen(
        [sys.executable, "-m", "dtfbench", "s3sync", *args],
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
    whole = train_files(str(dest))  # exactly what the workload would read
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
