"""The S3 sync engine's pure parts: URLs, key names, completeness, the manifest and journal."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
import zlib

import pytest

from dtfbench.node import s3sync
from dtfbench.node.s3sync import RemoteObject, SyncError
from dtfbench.workload.flags import train_files

MD5 = "9e107d9d372bb6826bd81d3542a419d6"


@pytest.mark.parametrize(
    "url, expected",
    [
        ("s3://bucket", ("bucket", "")),
        ("s3://bucket/", ("bucket", "")),
        ("s3://bucket/imagenet", ("bucket", "imagenet/")),
        ("s3://bucket/a/b/", ("bucket", "a/b/")),
    ],
)
def test_parse_s3_url(url, expected):
    assert s3sync.parse_s3_url(url) == expected


@pytest.mark.parametrize("url", ["bucket/prefix", "s3://", "s3:///prefix", "", None, "S3://bucket"])
def test_parse_s3_url_refuses_what_is_no_s3_location(url):
    with pytest.raises(SyncError, match="s3://BUCKET/PREFIX"):
        s3sync.parse_s3_url(url)


def test_md5_only_from_single_part_etags():
    assert RemoteObject("k", "k", 1, MD5).md5 == MD5
    assert RemoteObject("k", "k", 1, f'"{MD5}"').md5 == MD5
    assert RemoteObject("k", "k", 1, f"{MD5[:32]}-3").md5 is None
    assert RemoteObject("k", "k", 1, "").md5 is None


def test_partial_names_never_look_like_shards(tmp_path):
    for name in ("train-00000-of-01024", "validation-00127-of-00128", "sub/train-00001-of-00002"):
        path = s3sync.partial_path(str(tmp_path), name)
        base = os.path.basename(path)
        assert base.startswith(".") and base.endswith(s3sync.PARTIAL_SUFFIX)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").close()
    assert train_files(str(tmp_path)) == []  # the workload's own glob sees none of them


@pytest.mark.parametrize("key", ["p/../etc", "p/a//b", "p/./x", f"p/x{s3sync.PARTIAL_SUFFIX}"])
def test_keys_that_cannot_be_local_names_are_refused(key):
    with pytest.raises(SyncError, match="cannot be a local file name"):
        s3sync._relative_name(key, "p/")


def test_directory_markers_are_skipped():
    assert s3sync._relative_name("p/", "p/") is None
    assert s3sync._relative_name("p/sub/", "p/") is None
    assert s3sync._relative_name("p/sub/train-0", "p/") == "sub/train-0"


def test_completeness(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    st = os.stat(path)
    obj = RemoteObject("k", "f", 10, MD5)
    record = {"etag": MD5, "size": 10, "mtime_ns": st.st_mtime_ns}
    assert s3sync._is_complete(obj, st, record) is True
    assert s3sync._is_complete(obj, None, record) is False  # missing
    assert s3sync._is_complete(RemoteObject("k", "f", 11, MD5), st, record) is False  # wrong size
    assert s3sync._is_complete(obj, st, dict(record, mtime_ns=1)) is None  # touched: hash it
    assert s3sync._is_complete(obj, st, dict(record, etag="other")) is None  # object replaced
    assert s3sync._is_complete(obj, st, None) is None  # never recorded
    multipart = RemoteObject("k", "f", 10, "abc-2")
    assert s3sync._is_complete(multipart, st, None) is False  # nothing to hash against


def test_journal_lines_after_the_manifest_win_and_a_cut_line_is_ignored(tmp_path):
    s3sync.write_manifest(str(tmp_path), {"a": {"etag": "1", "size": 1, "mtime_ns": 1}})
    with open(tmp_path / s3sync.JOURNAL, "w") as f:
        f.write(json.dumps({"name": "a", "record": {"etag": "2", "size": 2, "mtime_ns": 2}}) + "\n")
        f.write(json.dumps({"name": "b", "record": {"etag": "3", "size": 3, "mtime_ns": 3}}) + "\n")
        f.write('{"name": "c", "rec')  # killed while writing
    records = s3sync.read_manifest(str(tmp_path))
    assert records == {"a": {"etag": "2", "size": 2, "mtime_ns": 2}, "b": {"etag": "3", "size": 3, "mtime_ns": 3}}
    s3sync.write_manifest(str(tmp_path), records)
    assert not (tmp_path / s3sync.JOURNAL).exists()
    assert s3sync.read_manifest(str(tmp_path)) == records


def test_a_missing_or_broken_manifest_is_empty(tmp_path):
    assert s3sync.read_manifest(str(tmp_path)) == {}
    (tmp_path / s3sync.MANIFEST).write_text("{not json")
    assert s3sync.read_manifest(str(tmp_path)) == {}


def test_scan_leaves_out_bookkeeping_and_finds_partials(tmp_path):
    for name in ("train-0", s3sync.MANIFEST, s3sync.JOURNAL, s3sync.LOCK, f".train-1{s3sync.PARTIAL_SUFFIX}"):
        (tmp_path / name).write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "train-2").write_text("x")
    files, partials = s3sync._scan_local(str(tmp_path))
    assert sorted(files) == ["sub/train-2", "train-0"]
    assert partials == [f".train-1{s3sync.PARTIAL_SUFFIX}"]


def test_bandwidth_limit_spreads_bytes_over_time():
    limit = s3sync.Bandwidth(1_000_000)
    started = time.monotonic()
    for _ in range(4):
        limit.take(100_000)
    assert time.monotonic() - started >= 0.29  # 400 kB at 1 MB/s, the first chunk free
    unlimited = s3sync.Bandwidth(0)
    started = time.monotonic()
    unlimited.take(10**9)
    assert time.monotonic() - started < 0.05


def test_the_engine_does_without_boto3():
    """boto3 imports s3transfer and multiprocessing, which the sync never uses: start-up time
    that every `python -m dtfbench s3sync`, a re-sync with nothing to do included, would pay."""
    code = "import sys; from dtfbench.node import s3sync; s3sync.make_client(4); print(sorted({'boto3', 's3transfer'} & set(sys.modules)))"
    env = dict(os.environ, AWS_DEFAULT_REGION="us-east-1", AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="y")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_client_validates_s3_checksums_only_on_request():
    config = s3sync.client_config(16)
    assert config.max_pool_connections >= 16
    assert config.response_checksum_validation == "when_required"  # botocore >= 1.36; download() checks it


def getobject_checksums():
    """The response checksums botocore checks for S3's GetObject: the model's algorithms that
    this botocore (with this awscrt) has an implementation of, and their classes."""
    import botocore.session
    from botocore import httpchecksum

    model = botocore.session.get_session().get_service_model("s3").operation_model("GetObject")
    return {
        algorithm: httpchecksum._CHECKSUM_CLS[algorithm.lower()]  # botocore's own table (test only)
        for algorithm in model.http_checksum["responseAlgorithms"]
        if algorithm.lower() in httpchecksum._CHECKSUM_CLS
    }


def test_the_engine_checks_every_s3_checksum_botocore_checks():
    """A new algorithm in botocore (S3 added the XXHashes and SHA-512 in 2025) is one the
    engine must check too, or such objects would silently fall back to their MD5 or size."""
    assert set(getobject_checksums()) == set(s3sync.S3_CHECKSUMS)


@pytest.mark.parametrize("algorithm", s3sync.S3_CHECKSUMS)
def test_the_engines_s3_checksums_are_botocores(algorithm):
    """Each full-object checksum the engine computes itself equals botocore's own (its
    classes, as a default client validates with them), chunk by chunk as a body streams."""
    reference = getobject_checksums()[algorithm]()
    chunks = [os.urandom(n) for n in (1, 7000, 65536, 3)]
    for chunk in chunks:
        reference.update(chunk)
    stored = reference.b64digest()

    found, digest, expected = s3sync.s3_checksum({f"Checksum{algorithm}": stored, "ChecksumType": "FULL_OBJECT"})
    for chunk in chunks:
        digest.update(chunk)
    assert (found, digest.digest()) == (algorithm, expected)


def test_s3s_md5_checksum_is_checked_after_every_one_botocore_checks():
    """botocore has no class for S3's MD5 checksum (ChecksumMD5): the engine checks it, and
    only where the response carries none of botocore's algorithms."""
    data = os.urandom(70000)
    stored = base64.b64encode(hashlib.md5(data).digest()).decode()
    found, digest, expected = s3sync.s3_checksum({"ChecksumMD5": stored, "ChecksumType": "FULL_OBJECT"})
    digest.update(data[:5])
    digest.update(data[5:])
    assert (found, digest.digest()) == ("MD5", expected)
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    assert s3sync.s3_checksum({"ChecksumMD5": stored, "ChecksumCRC32": crc})[0] == "CRC32"
    assert s3sync.s3_checksum({"ChecksumMD5": stored + "-2"}) == (None, None, None)


def test_a_composite_or_missing_s3_checksum_is_none():
    assert s3sync.s3_checksum({"ChecksumCRC32": "AAAAAA==-2", "ChecksumType": "COMPOSITE"}) == (None, None, None)
    assert s3sync.s3_checksum({"ETag": '"%s"' % MD5}) == (None, None, None)


def test_a_crc32_is_isals_where_isal_is_installed_and_zlibs_otherwise(monkeypatch):
    """ISA-L's CRC32 takes a fraction of zlib's CPU time (docs/dataset.md): the lock installs
    isal, and a node without it still checks its CRC32s, with zlib's, to the same values."""
    from isal import isal_zlib

    s3sync._crc32.cache_clear()  # chosen once a process: choose again with and without isal

    data = os.urandom(70000)
    stored = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    found, digest, expected = s3sync.s3_checksum({"ChecksumCRC32": stored})
    assert (found, digest.function) == ("CRC32", isal_zlib.crc32)
    digest.update(data[:5])
    digest.update(data[5:])
    assert digest.digest() == expected

    monkeypatch.setitem(sys.modules, "isal", None)
    s3sync._crc32.cache_clear()
    try:
        found, digest, expected = s3sync.s3_checksum({"ChecksumCRC32": stored})
        assert (found, digest.function) == ("CRC32", zlib.crc32)
        digest.update(data)
        assert digest.digest() == expected
    finally:
        s3sync._crc32.cache_clear()  # the next test chooses with isal again


def test_without_awscrt_only_its_algorithms_fall_back(monkeypatch):
    """CRC32C, CRC64NVME and the XXHashes need awscrt (as in botocore): without it such an
    object is checked as one without an S3 checksum; a CRC32 (isal's or zlib's) or a SHA still is."""
    monkeypatch.setitem(sys.modules, "awscrt", None)
    for algorithm in ("CRC32C", "CRC64NVME", "XXHASH64", "XXHASH3", "XXHASH128"):
        assert s3sync.s3_checksum({f"Checksum{algorithm}": "AAAAAA=="}) == (None, None, None)
    assert s3sync.s3_checksum({"ChecksumCRC32": "AAAAAA=="})[0] == "CRC32"
    assert s3sync.s3_checksum({"ChecksumSHA512": "AAAAAA=="})[0] == "SHA512"
