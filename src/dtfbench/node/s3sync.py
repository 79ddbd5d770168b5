"""Download an S3 prefix into a local directory: parallel, resumable, verified.

    python -m dtfbench s3sync s3://bucket/imagenet /mnt/local_ssd/imagenet [--workers 16] [--delete]

The dataset role's module (library/s3_dataset_sync.py) and the staging benchmark
(benchmarks/staging.py) both run this engine. No TensorFlow, only botocore (which comes
with boto3): it runs on the nodes with whatever interpreter has boto3.

How a sync goes:

1. One paginated ListObjectsV2 of the prefix (no HEAD per object) and one ``stat`` per
   local file: a re-sync with nothing to do costs a LIST and a directory scan, and writes
   nothing.
2. A local file counts as complete when its size is the object's size and the manifest
   (written by earlier syncs, see below) records the object's ETag for exactly this size
   and mtime. A file of the right size the manifest does not vouch for (a sync killed
   between the rename and the record, a file copied in by hand, a file edited in place) is
   hashed when the object's ETag is an MD5 (single-part upload) and kept only if it
   matches; otherwise it is downloaded again.
3. Every download goes to a temporary file in the destination directory, named
   ``.<name>.dtfbench-partial`` (hidden: it never matches ``train-*``/``validation-*``),
   checked while it streams (size, and the object's own full-object S3 checksum where it
   has one, of any algorithm botocore checks: CRC64NVME, CRC32C, CRC32, SHA-1/256/512,
   XXHASH64/3/128, or else S3's MD5 one, which botocore does not check; otherwise MD5
   against the ETag when the ETag is one, which an SSE-KMS object's is not) and renamed onto
   its final name: a final name only ever holds a whole, checked file.
   Temporary files left by a killed sync are removed by the next one.
4. Each completed file is appended to a journal (one JSON line, flushed), so a sync killed
   halfway keeps what it finished; at the end the journal is folded into the manifest.
5. Verification: every listed object has a local file of its size (and, for downloaded
   files, S3's checksum or the MD5 as in 3; download_checks counts which). The report
   gives files/bytes downloaded, skipped and deleted, seconds and MB/s.

A lock file keeps two syncs from writing into the same directory at once.
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import functools
import hashlib
import json
import os
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field

PARTIAL_SUFFIX = ".dtfbench-partial"
MANIFEST = ".dtfbench-s3sync-manifest.json"
JOURNAL = ".dtfbench-s3sync-journal"
LOCK = ".dtfbench-s3sync.lock"
# Reads of 1 MiB. 256 KiB, 4 MiB and readinto() into one reused buffer cost the same CPU
# within the noise (measured): urllib3's readinto() is a read() plus a copy.
CHUNK = 1024 * 1024
SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>
DEFAULT_WORKERS = 16


class SyncError(RuntimeError):
    """A sync that cannot be done or did not verify; the message says what and why."""


@dataclass(frozen=True)
class RemoteObject:
    key: str
    name: str  # path relative to the destination, with "/" separators
    size: int
    etag: str

    @property
    def md5(self) -> str | None:
        """The object's MD5 when its ETag is one (single-part, unencrypted-by-KMS uploads)."""
        etag = self.etag.strip('"')
        return etag if len(etag) == 32 and "-" not in etag else None


@dataclass
class Report:
    source: str
    dest: str
    files: int = 0
    bytes: int = 0
    downloaded_files: int = 0
    downloaded_bytes: int = 0
    skipped_files: int = 0
    skipped_bytes: int = 0
    hashed_files: int = 0
    # What checked each downloaded file's bytes, by name: an S3 checksum's algorithm
    # (CRC64NVME, CRC32C, CRC32, ...), "MD5" (the ETag), or "size" (neither applies).
    download_checks: dict = field(default_factory=dict)
    deleted: list = field(default_factory=list)
    partial_removed: list = field(default_factory=list)
    to_download: list = field(default_factory=list)
    seconds: float = 0.0
    mb_per_s: float = 0.0
    verified: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.downloaded_files or self.to_download or self.deleted or self.partial_removed)

    def as_dict(self) -> dict:
        out = asdict(self)
        out["changed"] = self.changed
        return out


def parse_s3_url(url: str) -> tuple[str, str]:
    """s3://bucket[/prefix] -> (bucket, prefix ending in "/" or empty)."""
    if not isinstance(url, str) or not url.startswith("s3://"):
        raise SyncError(f"source {url!r}: not an S3 URL; write it as s3://BUCKET/PREFIX")
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not bucket:
        raise SyncError(f"source {url!r}: no bucket name; write it as s3://BUCKET/PREFIX")
    prefix = prefix.strip("/")
    return bucket, (prefix + "/") if prefix else ""


class BadKey(SyncError):
    """An object key that cannot be a local file name under the destination."""


def _relative_name(key: str, prefix: str) -> str | None:
    name = key[len(prefix) :]
    if not name or name.endswith("/"):
        return None  # the prefix itself or a "directory" marker object
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts) or parts[-1].endswith(PARTIAL_SUFFIX):
        raise BadKey(f"object key {key!r} cannot be a local file name under the destination")
    return name


def list_remote(client, bucket: str, prefix: str, include: list[str] | None = None) -> dict[str, RemoteObject]:
    """Every object under the prefix whose base name matches one of `include` (all when empty).
    SyncError, before anything is downloaded, naming every key that cannot be a local file: those
    with an empty, '.' or '..' part, and a file that is also a folder of another key ('x' and 'x/y')."""
    found = {}
    bad = []
    paginator = client.get_paginator("list_objects_v2")
    # 1,000 keys per page is S3's maximum (and its default, said here for servers that differ):
    # ImageNet's 1,152 shards are two requests.
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": 1000}):
        for item in page.get("Contents", []):
            try:
                name = _relative_name(item["Key"], prefix)
            except BadKey:
                bad.append(item["Key"])  # every one is named at once, below
                continue
            if name is None:
                continue
            if include and not any(fnmatch.fnmatchcase(name.rsplit("/", 1)[-1], p) for p in include):
                continue
            found[name] = RemoteObject(item["Key"], name, int(item["Size"]), item.get("ETag", "").strip('"'))
    folders = {"/".join(name.split("/")[:i]) for name in found for i in range(1, name.count("/") + 1)}
    clashes = sorted(found[name].key for name in found if name in folders)
    if bad or clashes:
        problems = []
        if bad:
            problems.append(
                f"{len(bad)} object key(s) cannot be a local file name under the destination (an empty, '.' or '..' "
                f"part, or a name ending in {PARTIAL_SUFFIX}): {', '.join(map(repr, bad[:10]))}"
                + (f" and {len(bad) - 10} more" if len(bad) > 10 else "")
            )
        if clashes:
            problems.append(
                f"{len(clashes)} key(s) are both a file and the folder of other keys (a local file system cannot hold "
                f"both): {', '.join(map(repr, clashes[:10]))}"
                + (f" and {len(clashes) - 10} more" if len(clashes) > 10 else "")
            )
        raise SyncError(
            f"s3://{bucket}/{prefix}: "
            + "; ".join(problems)
            + "; nothing was downloaded: rename or remove them in the "
            "bucket, or narrow the prefix or include patterns"
        )
    return found


def partial_path(dest: str, name: str) -> str:
    head, _, base = name.rpartition("/")
    return os.path.join(dest, head, f".{base}{PARTIAL_SUFFIX}")


def _scan_local(dest: str) -> tuple[dict[str, os.stat_result], list[str]]:
    """Local regular files by relative name (our own bookkeeping files left out), and partial files."""
    files, partials = {}, []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(os.path.join(dest, rel_dir)) as entries:
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append(rel)
                elif entry.name.endswith(PARTIAL_SUFFIX):
                    partials.append(rel)
                elif entry.is_file(follow_symlinks=False) and not (
                    rel_dir == "" and entry.name in (MANIFEST, JOURNAL, LOCK)
                ):
                    files[rel] = entry.stat(follow_symlinks=False)
    return files, partials


def read_manifest(dest: str) -> dict[str, dict]:
    """What earlier syncs recorded: the manifest, then the journal lines written since."""
    records = {}
    try:
        with open(os.path.join(dest, MANIFEST)) as f:
            records.update(json.load(f).get("files", {}))
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(dest, JOURNAL)) as f:
            for line in f:
                try:
                    entry = json.loads(line)
                    records[entry["name"]] = entry["record"]
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a kill: that file is checked again
    except OSError:
        pass
    return records


def write_manifest(dest: str, records: dict[str, dict]) -> None:
    path = os.path.join(dest, MANIFEST)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"version": 1, "files": records}, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:
        os.unlink(os.path.join(dest, JOURNAL))
    except FileNotFoundError:
        pass


def _record(obj: RemoteObject, st: os.stat_result) -> dict:
    return {"etag": obj.etag, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def file_md5(path: str) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class Bandwidth:
    """A shared byte budget per second for every worker (0: unlimited)."""

    def __init__(self, bytes_per_s: int):
        self.rate = bytes_per_s
        self.lock = threading.Lock()
        self.next_free = time.monotonic()

    def take(self, nbytes: int) -> None:
        if self.rate <= 0:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_free)
            self.next_free = start + nbytes / self.rate
        delay = start - now
        if delay > 0:
            time.sleep(delay)


def download(
    client, bucket: str, obj: RemoteObject, dest: str, bandwidth: Bandwidth, verify_md5: bool = True
) -> tuple[os.stat_result, str]:
    """GET one object into its partial file, check it, rename it onto its final name.

    Returns the final file's stat and what checked its bytes (Report.download_checks' names). The
    object's directory must exist (the caller makes each one once, not once per file).
    S3's own checksum first: every GET asks for it (ask_for_s3_checksums()), and where the
    object has a full-object one (s3_checksum()) it is computed in the loop that writes the
    chunks and compared before the rename. A client that validates checksums itself
    (botocore's when_supported) hands over a body that fails its last read on a mismatch:
    that check is kept and no other made. Only without either is the MD5 computed (when the
    ETag is an MD5). No byte is hashed twice, none read twice.
    """
    from botocore.exceptions import FlexibleChecksumError
    from botocore.httpchecksum import StreamingChecksumBody

    final = os.path.join(dest, obj.name)
    tmp = partial_path(dest, obj.name)
    response = ask_for_s3_checksums(client).get_object(Bucket=bucket, Key=obj.key)
    body = response["Body"]
    digest, expected, by_etag = None, None, False
    if isinstance(body, StreamingChecksumBody):
        check = s3_checksum(response, computable=False)[0] or "S3 checksum"
    else:
        check, digest, expected = s3_checksum(response)
        if check is None:
            # An SSE-KMS object's ETag is no MD5 of its bytes, whatever it looks like (S3's
            # documentation): it would refuse every such object. Its size checks it.
            etag_is_md5 = obj.md5 and not str(response.get("ServerSideEncryption") or "").startswith("aws:kms")
            digest = hashlib.md5(usedforsecurity=False) if (verify_md5 and etag_is_md5) else None
            check = "MD5" if digest is not None else "size"
            expected = bytes.fromhex(obj.md5) if digest is not None else None
            by_etag = digest is not None
    written = 0
    try:
        with open(tmp, "wb") as f:
            try:
                while chunk := body.read(CHUNK):
                    bandwidth.take(len(chunk))
                    f.write(chunk)
                    if digest is not None:
                        digest.update(chunk)
                    written += len(chunk)
            except FlexibleChecksumError as err:
                raise SyncError(
                    f"{obj.key}: the bytes differ from the object's {check} checksum in S3 ({err})"
                ) from err
            f.flush()
            start_writeback(f.fileno())
        if written != obj.size:
            raise SyncError(f"{obj.key}: got {written} bytes, the listing says {obj.size}")
        if digest is not None and digest.digest() != expected:
            raise SyncError(f"{obj.key}: {_mismatch(check, digest.digest(), expected, by_etag)}")
        os.replace(tmp, final)
    except BaseException:
        body.close()
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return os.stat(final), check


def _mismatch(check: str, computed: bytes, stored: bytes, by_etag: bool) -> str:
    if by_etag:
        return f"MD5 {computed.hex()} differs from the ETag {stored.hex()}"
    return (
        f"the bytes differ from the object's {check} checksum in S3 "
        f"({base64.b64encode(computed).decode()} computed, {base64.b64encode(stored).decode()} stored)"
    )


class _Crc:
    """A CRC as a hashlib-like object: ``function(data, crc)`` -> crc, digested big-endian in
    ``size`` bytes (S3's encoding, before base64)."""

    def __init__(self, function, size: int):
        self.function, self.size, self.crc = function, size, 0

    def update(self, data: bytes) -> None:
        self.crc = self.function(data, self.crc)

    def digest(self) -> bytes:
        return self.crc.to_bytes(self.size, "big")


class _XXHash:
    """awscrt's XXHash as a hashlib-like object."""

    def __init__(self, xxhash):
        self.xxhash = xxhash

    def update(self, data: bytes) -> None:
        self.xxhash.update(data)

    def digest(self) -> bytes:
        return self.xxhash.finalize()


# awscrt's: the CRCs by their function and size, the XXHashes by their constructor.
_AWSCRT_CRCS = {"CRC32C": ("crc32c", 4), "CRC64NVME": ("crc64nvme", 8)}
_AWSCRT_XXHASHES = {"XXHASH64": "new_xxhash64", "XXHASH3": "new_xxhash3_64", "XXHASH128": "new_xxhash3_128"}


@functools.cache
def _crc32():
    """The fastest CRC32 at hand, as ``zlib.crc32(data, crc)``: isal's, else zlib's (the same
    values). Chosen once a process: a failed import searches sys.path again every time."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib.crc32
    return isal_zlib.crc32


def _s3_checksum_digest(algorithm: str):
    """A fresh digest of one of S3's checksum algorithms, or None where none is at hand here.

    The CRC32 is ISA-L's (the isal package, with the CPU's carry-less multiply) where isal is
    installed, zlib's (CPython's own) otherwise; both are several times awscrt's, which botocore
    would pick where awscrt is installed, with no setting to avoid it (speeds: docs/dataset.md).
    CRC32C, CRC64NVME (the CPU's CRC instructions) and the XXHashes are awscrt's, as botocore
    has them: without awscrt (the XXHashes: before awscrt 0.31.2) an object of theirs is
    checked as one with no S3 checksum. SHA-1, SHA-256 and SHA-512 are hashlib's.
    """
    if algorithm == "CRC32":
        return _Crc(_crc32(), 4)
    if algorithm in _AWSCRT_CRCS or algorithm in _AWSCRT_XXHASHES:
        try:
            from awscrt import checksums
        except ImportError:
            return None
        if algorithm in _AWSCRT_CRCS:
            function, size = _AWSCRT_CRCS[algorithm]
            return _Crc(getattr(checksums, function), size)
        new = getattr(getattr(checksums, "XXHash", None), _AWSCRT_XXHASHES[algorithm], None)
        return _XXHash(new()) if new is not None else None
    return hashlib.new(algorithm.lower(), usedforsecurity=False)


# The S3 checksum algorithms botocore checks, as GetObject's response names them ("Checksum" +
# algorithm), in its order of preference; a response carries one.
S3_CHECKSUMS = ("XXHASH128", "XXHASH3", "CRC64NVME", "XXHASH64", "CRC32C", "CRC32", "SHA1", "SHA256", "SHA512")
# And S3's MD5 one, which botocore does not check (it has no class for it): the engine checks it
# after all of those, before the ETag. It checks the bytes against what the uploader declared,
# where an ETag may look like an MD5 and be none (an SSE-KMS object's).
ENGINE_CHECKSUMS = S3_CHECKSUMS + ("MD5",)


def s3_checksum(response: dict, computable: bool = True):
    """(algorithm, a fresh digest of it, the stored value's bytes) of the full-object S3
    checksum a GET's response carries, or (None, None, None).

    None for an object without one, and for a multipart object's composite checksum (a
    checksum of its parts' checksums, "...-N", which the whole body cannot be checked
    against); with ``computable``, also for an algorithm with no implementation here
    (awscrt's without awscrt). Without ``computable`` the digest is None.
    """
    for algorithm in ENGINE_CHECKSUMS:
        value = response.get("Checksum" + algorithm)
        if not isinstance(value, str) or "-" in value:
            continue
        if not computable:
            return algorithm, None, None
        digest = _s3_checksum_digest(algorithm)
        if digest is not None:
            return algorithm, digest, base64.b64decode(value)
    return None, None, None


def _ask_for_checksum(params, **_):
    params["headers"]["x-amz-checksum-mode"] = "ENABLED"


def ask_for_s3_checksums(client):
    """Make each GetObject of this client ask S3 for the object's checksum (the header that
    ChecksumMode=ENABLED sends), without botocore's own validation of it: download() checks
    it, with a faster CRC32 than botocore's (_s3_checksum_digest). A client that validates
    by itself (botocore's when_supported) still does, and download() then leaves it to it.
    Returns the client; download() calls it for every GET (registering again is a no-op,
    ~7 us), so that any client it is given asks."""
    client.meta.events.register("before-call.s3.GetObject", _ask_for_checksum, unique_id="dtfbench-s3-checksum-mode")
    return client


class _Lock:
    """An exclusive flock on the destination's lock file, for the length of a sync."""

    def __init__(self, dest: str):
        self.path = os.path.join(dest, LOCK)

    def __enter__(self):
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise SyncError(f"another sync is writing into {os.path.dirname(self.path)}; wait for it to end") from None
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


def sync(
    client,
    source: str,
    dest: str,
    *,
    workers: int = DEFAULT_WORKERS,
    delete: bool = False,
    include: list[str] | None = None,
    verify_checksums: bool = False,
    verify_md5: bool = True,
    max_bandwidth: int = 0,
    check_mode: bool = False,
) -> Report:
    """Make `dest` hold exactly the objects under `source` (and nothing else, with `delete`)."""
    if workers < 1:
        raise SyncError(f"workers={workers}: give at least 1")
    bucket, prefix = parse_s3_url(source)
    started = time.monotonic()
    report = Report(source=source, dest=dest)
    if not os.path.isdir(dest):
        if check_mode:
            remote = list_remote(client, bucket, prefix, include)
            report.to_download = sorted(remote)
            report.files, report.bytes = len(remote), sum(o.size for o in remote.values())
            return report
        os.makedirs(dest, exist_ok=True)
    if check_mode:
        return _plan_only(client, bucket, prefix, dest, include, delete, verify_checksums, report)
    with _Lock(dest):
        return _sync_locked(
            client,
            bucket,
            prefix,
            dest,
            report,
            started,
            workers=workers,
            delete=delete,
            include=include,
            verify_checksums=verify_checksums,
            verify_md5=verify_md5,
            max_bandwidth=max_bandwidth,
        )


def _is_complete(obj: RemoteObject, st: os.stat_result | None, record: dict | None) -> bool | None:
    """True: complete; False: must be downloaded; None: right size, unknown content (hash it)."""
    if st is None or st.st_size != obj.size:
        return False
    if (
        record
        and record.get("etag") == obj.etag
        and record.get("size") == st.st_size
        and record.get("mtime_ns") == st.st_mtime_ns
    ):
        return True
    return None if obj.md5 else False


def _classify(remote, local, records, dest, verify_checksums):
    """Names to download, names to hash before deciding, names already complete."""
    fetch, check, complete = [], [], []
    for name, obj in remote.items():
        state = _is_complete(obj, local.get(name), records.get(name))
        if state is True and verify_checksums and obj.md5:
            state = None
        (complete if state else check if state is None else fetch).append(name)
    return fetch, check, complete


def _plan_only(client, bucket, prefix, dest, include, delete, verify_checksums, report):
    remote = list_remote(client, bucket, prefix, include)
    local, partials = _scan_local(dest)
    fetch, check, complete = _classify(remote, local, read_manifest(dest), dest, verify_checksums)
    fetch += [n for n in check if file_md5(os.path.join(dest, n)) != remote[n].md5]
    report.to_download = sorted(fetch)
    report.partial_removed = sorted(partials)
    report.deleted = sorted(set(local) - set(remote)) if delete else []
    report.files, report.bytes = len(remote), sum(o.size for o in remote.values())
    report.skipped_files = len(remote) - len(fetch)
    return report


def _sync_locked(
    client,
    bucket,
    prefix,
    dest,
    report,
    started,
    *,
    workers,
    delete,
    include,
    verify_checksums,
    verify_md5,
    max_bandwidth,
):
    remote = list_remote(client, bucket, prefix, include)
    local, partials = _scan_local(dest)
    # Leftovers of a killed sync: never whole files, whatever their size.
    for rel in partials:
        os.unlink(os.path.join(dest, rel))
    report.partial_removed = sorted(partials)
    recorded = read_manifest(dest)
    records = {n: r for n, r in recorded.items() if n in remote}
    fetch, check, complete = _classify(remote, local, records, dest, verify_checksums)

    if check or fetch:  # a re-sync with nothing to do starts no thread and writes no journal
        with _Journal(dest) as journal, ThreadPoolExecutor(max_workers=workers) as pool:

            def remember(name: str, st: os.stat_result) -> None:
                records[name] = _record(remote[name], st)
                journal.append(name, records[name])

            kept, mismatched = _hash_unvouched(pool, remote, dest, check, local, remember)
            report.hashed_files = len(check)
            complete += kept
            fetch += mismatched
            _make_directories(dest, fetch)
            _download_all(
                pool, client, bucket, remote, dest, fetch, Bandwidth(max_bandwidth), verify_md5, remember, report
            )

    report.skipped_files = len(complete)
    report.skipped_bytes = sum(remote[n].size for n in complete)
    if delete:
        for name in sorted(set(local) - set(remote)):
            os.unlink(os.path.join(dest, name))
            report.deleted.append(name)
    # One flush of the file system instead of an fsync per file (measured: up to 1 s per 300
    # small files on a busy disk): what the manifest vouches for is on disk before it is.
    # A killed process loses nothing either way (the page cache survives it); after a power
    # loss the journal may vouch for a file that did not reach the disk: re-run with
    # verify_checksums.
    if report.downloaded_files:
        flush_file_system(dest)
    # Nothing new to vouch for and no journal to fold in (a re-sync with nothing to do): the
    # manifest on disk is already right, and rewriting it would cost an fsync.
    if records != recorded or os.path.exists(os.path.join(dest, JOURNAL)):
        write_manifest(dest, records)
    verify(remote, dest)
    report.verified = True
    report.files, report.bytes = len(remote), sum(o.size for o in remote.values())
    report.seconds = round(time.monotonic() - started, 3)
    report.mb_per_s = round(report.downloaded_bytes / 1e6 / report.seconds, 2) if report.seconds > 0 else 0.0
    return report


class _Journal:
    """This sync's record of each file it finished, one flushed JSON line per file.

    A sync killed between two lines loses nothing it finished; one killed in the middle of a
    line leaves a cut line that read_manifest() ignores (that file is hashed next time).
    Only the thread that runs the sync appends (workers hand their results back to it).
    """

    def __init__(self, dest: str):
        self.path = os.path.join(dest, JOURNAL)

    def __enter__(self):
        self.file = open(self.path, "a")
        return self

    def __exit__(self, *exc):
        self.file.close()

    def append(self, name: str, record: dict) -> None:
        self.file.write(json.dumps({"name": name, "record": record}) + "\n")
        self.file.flush()


def _hash_unvouched(pool, remote, dest, check, local, remember) -> tuple[list[str], list[str]]:
    """Hash, in parallel, the files of the right size that no record vouches for.

    Returns (kept, to download): a file whose MD5 is its object's ETag is recorded and kept.
    """
    kept, mismatched = [], []
    for name, digest in zip(check, pool.map(lambda n: file_md5(os.path.join(dest, n)), check)):
        if digest == remote[name].md5:
            remember(name, local[name])
            kept.append(name)
        else:
            mismatched.append(name)
    return kept, mismatched


def _make_directories(dest: str, names: list[str]) -> None:
    """Each directory the downloads need, made once here rather than once per file in the workers."""
    for directory in sorted({os.path.dirname(n) for n in names} - {""}):
        os.makedirs(os.path.join(dest, directory), exist_ok=True)


def _download_all(pool, client, bucket, remote, dest, fetch, bandwidth, verify_md5, remember, report) -> None:
    """Download `fetch` in parallel, recording each file as it completes; every failure is reported together."""
    # Largest first: a big file started last would leave the other workers idle.
    fetch.sort(key=lambda n: -remote[n].size)
    futures = {pool.submit(download, client, bucket, remote[n], dest, bandwidth, verify_md5): n for n in fetch}
    errors = []
    for future in as_completed(futures):
        name = futures[future]
        try:
            st, check = future.result()
        except Exception as err:  # noqa: BLE001 - collected, reported together below
            errors.append(str(err) if isinstance(err, SyncError) else f"{remote[name].key}: {err}")
            continue
        remember(name, st)
        report.downloaded_files += 1
        report.downloaded_bytes += st.st_size
        report.download_checks[check] = report.download_checks.get(check, 0) + 1
    if errors:
        raise SyncError(f"{len(errors)} of {len(fetch)} downloads failed; a re-run resumes. First: {errors[0]}")


_sync_file_range = None


def start_writeback(fd: int) -> None:
    """Start writing a finished file's pages to disk, without waiting (sync_file_range(2) with
    SYNC_FILE_RANGE_WRITE): the disk writes while the other files download, and the sync's one
    flush at the end (flush_file_system) waits for the last files only (measured: 0.09 s ->
    0.015 s for 190 MB, docs/dataset.md). Nothing where the call does not exist."""
    global _sync_file_range
    if _sync_file_range is None:
        try:
            import ctypes

            call = ctypes.CDLL(None, use_errno=True).sync_file_range
            call.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
            _sync_file_range = call
        except (OSError, AttributeError):
            _sync_file_range = False
    if _sync_file_range:
        _sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)


def flush_file_system(path: str) -> None:
    """syncfs(2) of the file system holding `path` (only it, not every disk); sync(2) without it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(path, os.O_RDONLY)
        try:
            if libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    except (OSError, AttributeError):
        pass
    os.sync()


def verify(remote: dict[str, RemoteObject], dest: str) -> None:
    """Every listed object has a local file of its size (contents were checked on the way in)."""
    missing, wrong = [], []
    for name, obj in remote.items():
        try:
            size = os.stat(os.path.join(dest, name)).st_size
        except FileNotFoundError:
            missing.append(name)
            continue
        if size != obj.size:
            wrong.append(f"{name} ({size} bytes, expected {obj.size})")
    if missing or wrong:
        raise SyncError(
            f"verification failed in {dest}: {len(missing)} missing {missing[:3]}, "
            f"{len(wrong)} of the wrong size {wrong[:3]}; run the sync again"
        )


def client_config(workers: int):
    """One shared client's configuration for every worker thread.

    A connection per worker (botocore's default pool of 10 would cap them), standard retries,
    and no response checksum validated by botocore unless a request asks for it (ChecksumMode;
    botocore >= 1.36's default asks with every GET): download() asks for S3's checksum with
    the header alone and checks it itself (ask_for_s3_checksums).
    """
    from botocore.config import Config

    options = {"max_pool_connections": max(10, workers + 4), "retries": {"mode": "standard", "max_attempts": 5}}
    if "response_checksum_validation" in Config.OPTION_DEFAULTS:
        options["response_checksum_validation"] = "when_required"
    return Config(**options)


def skip_timestamp_parsing(client):
    """Leave LastModified as text in this client's responses.

    Parsing the 1,152 timestamps of ImageNet's listing is most of botocore's client-side
    cost of a LIST (measured: 0.18 s of CPU per 1,000-key page, 0.035 s without); the sync
    never reads them. The parser factory is per botocore session, and every client made
    here or by AnsibleAWSModule has a session of its own, so nothing else is affected.
    Without the (private) attribute the client is left as it is: slower, still correct.
    """
    factory = getattr(getattr(client, "_endpoint", None), "_response_parser_factory", None)
    if factory is not None and hasattr(factory, "set_parser_defaults"):
        factory.set_parser_defaults(timestamp_parser=str)
    return client


def make_client(workers: int, endpoint_url: str | None = None):
    """An S3 client from the standard environment (AWS_ENDPOINT_URL, credentials, region).

    botocore's own session, not boto3's: importing boto3 also imports s3transfer and
    multiprocessing, which the sync never uses (0.06-0.1 s of CPU in every
    `python -m dtfbench s3sync`, a re-sync with nothing to do included).
    """
    import botocore.session

    session = botocore.session.get_session()
    client = session.create_client("s3", endpoint_url=endpoint_url or None, config=client_config(workers))
    return skip_timestamp_parsing(client)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="dtfbench s3sync", description=__doc__.split("\n")[0])
    parser.add_argument("source", help="s3://bucket/prefix")
    parser.add_argument("dest", help="local directory")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--delete", action="store_true", help="remove local files not under the prefix")
    parser.add_argument("--include", action="append", default=[], help="base-name glob; repeatable (default: all)")
    parser.add_argument(
        "--verify-checksums", action="store_true", help="hash every local file, not only unvouched ones"
    )
    parser.add_argument(
        "--no-md5", action="store_true", help="do not hash downloads without an S3 checksum against MD5 ETags"
    )
    parser.add_argument("--max-bandwidth", type=int, default=0, help="bytes per second for all workers (0: unlimited)")
    parser.add_argument("--endpoint-url", default=None, help="default: AWS_ENDPOINT_URL or AWS")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    try:
        report = sync(
            make_client(args.workers, args.endpoint_url),
            args.source,
            args.dest,
            workers=args.workers,
            delete=args.delete,
            include=args.include,
            verify_checksums=args.verify_checksums,
            verify_md5=not args.no_md5,
            max_bandwidth=args.max_bandwidth,
            check_mode=args.dry_run,
        )
    except SyncError as err:
        print(f"dtfbench s3sync: {err}", file=sys.stderr)
        return 2
    print(json.dumps(report.as_dict()))
    return 0
