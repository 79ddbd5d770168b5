# -*- coding: utf-8 -*-
"""Stage a dataset from a shared file system to node-local disk: timed, verified, resumable.

    python dtfbench_stage_data.py SOURCE TARGET [--workers 4]    (a Slurm job's copy)
    python -m dtfbench.node.stage_data SOURCE TARGET

What users of a shared parallel file system do before training (Summitdev's GPFS to NVMe, Piz
Daint's $SCRATCH to /dev/shm): copy the dataset's files (``train-*``, ``validation-*``, and a
``SHA256SUMS`` beside them where the source has one) to a node-local folder, and read it there.
The Summitdev study asks whether the copy is worth it; the copy's time is what this measures,
per node, for the report to set against the time the runs save (docs/storage.md).

How a staging goes:

1. One listing of SOURCE and one ``stat`` per file on each side. A file in TARGET of the
   source's size and modification time (set from the source's after each copy, as ``cp -a``
   and rsync do; rsync's quick check) is staged already and left alone: a second staging of
   the same dataset copies nothing and says ``already_staged``.
2. Before any byte is copied, TARGET's free room is checked against what is still to copy.
3. Each file is copied (``--workers`` files at once) to a hidden temporary name in TARGET
   (``.NAME.dtfbench-partial``, which never matches ``train-*``), flushed to the disk
   (fsync: the final name must survive a crash, not just an interrupt), checked and renamed
   onto its final name; so a final name only ever holds a whole, checked file, and a staging
   killed halfway resumes with the files it finished. Temporary files of a killed staging are
   removed by the next one.
4. Checked: every file's size, and, where SOURCE has a ``SHA256SUMS`` (``sha256sum``'s
   format; ``dtfbench tfrecords`` writes one), the SHA-256 of each file copied, computed while
   it streams. A mismatch fails the staging and leaves no final name for that file.

A lock file (flock) makes a second staging into the same TARGET wait for the first. Prints one
JSON object: the files and bytes (copied, already staged), seconds, MB/s, what was checked, and
the file system of each side (dtfbench.linux.procfs.mount_of). Standard library only, and the
nodes' oldest Python: the dataset_stage module runs it over SSH, and a Slurm job's copy
(``dtfbench_stage_data.py``, beside ``dtfbench_procfs.py``) runs it on every node of the job.
"""

from __future__ import absolute_import, division, print_function

import argparse
import errno
import fcntl
import fnmatch
import hashlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# The files of a dataset (ImageNet's TFRecord names), and its checksums where it has them.
DATASET_PATTERNS = ("train-*", "validation-*")
CHECKSUMS = "SHA256SUMS"
PARTIAL_SUFFIX = ".dtfbench-partial"
LOCK = ".dtfbench-stage.lock"
CHUNK = 1 << 20
DEFAULT_WORKERS = 4
# Room kept free on the target beyond the dataset (a full local disk fails the runs' logs).
RESERVE_BYTES = 64 << 20


class StageError(RuntimeError):
    """A staging that cannot be done or did not verify; the message says what and the fix."""


def partial_path(target, name):
    return os.path.join(target, "." + name + PARTIAL_SUFFIX)


def read_checksums(source):
    """{file name: SHA-256 hex} from SOURCE/SHA256SUMS (``sha256sum`` output), {} without one."""
    path = os.path.join(source, CHECKSUMS)
    try:
        with open(path, "r") as handle:
            lines = handle.read().splitlines()
    except (IOError, OSError) as error:
        if error.errno == errno.ENOENT:
            return {}
        raise StageError("cannot read %s: %s" % (path, error)) from None
    sums = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        digest, _, name = line.partition(" ")
        name = name[1:] if name[:1] in (" ", "*") else name
        if len(digest) != 64 or not name or "/" in name:
            raise StageError(
                "%s, line %d, is not sha256sum's '<64 hex digits>  <file name>': %r (fix or remove the file)"
                % (path, number, line[:120])
            )
        sums[name] = digest.lower()
    return sums


def source_files(source, patterns=DATASET_PATTERNS):
    """[(name, os.stat_result)] of SOURCE's dataset files (and its SHA256SUMS), by name."""
    try:
        names = os.listdir(source)
    except OSError as error:
        raise StageError(
            "cannot list the staging source %s: %s (data_dir must be the shared copy of the dataset, on every node)"
            % (source, error.strerror or error)
        ) from None
    found = []
    for name in sorted(names):
        if name != CHECKSUMS and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        status = os.stat(os.path.join(source, name))
        if os.path.isfile(os.path.join(source, name)):
            found.append((name, status))
    if not any(name != CHECKSUMS for name, _ in found):
        raise StageError(
            "the staging source %s holds no dataset files (%s): point data_dir at the dataset"
            % (source, ", ".join(patterns))
        )
    return found


def is_staged(source_status, target_path):
    """Whether target_path is a whole copy of the file: its size and modification time."""
    try:
        status = os.stat(target_path)
    except OSError:
        return False
    # Exact: a node-local target (ext4, xfs, tmpfs) keeps the nanoseconds the copy set.
    return status.st_size == source_status.st_size and status.st_mtime_ns == source_status.st_mtime_ns


def free_bytes(folder):
    status = os.statvfs(folder)
    return status.f_bavail * status.f_frsize


def copy_file(source, target, name, status, digest):
    """Copy one file to its temporary name, check it, and rename it onto its final name."""
    temporary = partial_path(target, name)
    checker = hashlib.sha256() if digest else None
    copied = 0
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    try:
        with open(os.path.join(source, name), "rb", buffering=0) as reader:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                while True:
                    got = reader.readinto(buffer)
                    if not got:
                        break
                    chunk = view[:got]
                    if checker is not None:
                        checker.update(chunk)
                    while chunk:
                        chunk = chunk[os.write(descriptor, chunk) :]
                    copied += got
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
    except OSError as error:
        _remove(temporary)  # a full disk, a source gone: no partial file stays behind
        raise StageError(
            "%s did not stage into %s: %s" % (os.path.join(source, name), target, error.strerror or error)
        ) from None
    problem = None
    if copied != status.st_size:
        problem = "%d bytes read, the source's size is %d (did it change while it was copied?)" % (
            copied,
            status.st_size,
        )
    elif checker is not None and checker.hexdigest() != digest:
        problem = "SHA-256 %s, %s says %s" % (checker.hexdigest(), CHECKSUMS, digest)
    if problem:
        _remove(temporary)
        raise StageError(
            "%s did not stage: %s. The source's copy or its %s is wrong: fix it, then stage again"
            % (os.path.join(source, name), problem, CHECKSUMS)
        )
    os.utime(temporary, ns=(status.st_atime_ns, status.st_mtime_ns))
    os.rename(temporary, os.path.join(target, name))
    return copied


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _mount_of(path):
    """The file system under `path` (dtfbench.linux.procfs.mount_of), None where it cannot say."""
    try:
        from ..linux.procfs import mount_of
    except (ImportError, ValueError):  # run as a file of its own (a Slurm job's copy): procfs's copy beside it
        import importlib.util

        here = os.path.dirname(os.path.abspath(__file__))
        spec = importlib.util.spec_from_file_location("dtfbench_procfs", os.path.join(here, "dtfbench_procfs.py"))
        procfs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(procfs)
        mount_of = procfs.mount_of
    try:
        return mount_of(path)
    except Exception:  # the record is a nicety: the staging stands without it
        return None


def _lock(target):
    descriptor = os.open(os.path.join(target, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(descriptor, fcntl.LOCK_EX)  # a second staging waits for the first, then finds it done
    return descriptor


def stage(source, target, workers=DEFAULT_WORKERS, check_mode=False, patterns=DATASET_PATTERNS):
    """Make TARGET hold a checked copy of SOURCE's dataset files; returns the report (a dict)."""
    source, target = os.path.abspath(source), os.path.abspath(target)
    if source == target:
        raise StageError("the staging target is the source itself (%s): give stage_dir a node-local folder" % source)
    started = time.time()
    files = source_files(source, patterns)
    sums = read_checksums(source)
    try:
        if not check_mode:
            os.makedirs(target)
    except OSError as error:
        if error.errno != errno.EEXIST or not os.path.isdir(target):
            raise StageError("cannot make the staging target %s: %s" % (target, error.strerror or error)) from None
    lock = None if check_mode else _lock(target)
    try:
        partial_removed = []
        if os.path.isdir(target):
            for name in sorted(os.listdir(target)):
                if name.startswith(".") and name.endswith(PARTIAL_SUFFIX) and not check_mode:
                    os.unlink(os.path.join(target, name))
                    partial_removed.append(name)
        todo = [(n, s) for n, s in files if not is_staged(s, os.path.join(target, n))]
        needed = sum(s.st_size for _, s in todo)
        total = sum(s.st_size for _, s in files)
        room = free_bytes(target if os.path.isdir(target) else os.path.dirname(target))
        if needed + RESERVE_BYTES > room:
            raise StageError(
                "the staging target %s has %.2f GB free; the dataset needs %.2f GB more there (%.2f GB in all, "
                "and %d MB kept free): free room, or give stage_dir a folder with room"
                % (target, room / 1e9, needed / 1e9, total / 1e9, RESERVE_BYTES >> 20)
            )
        copied = 0
        if todo and not check_mode:
            copying_started = time.time()
            with ThreadPoolExecutor(max_workers=max(1, int(workers))) as pool:
                futures = [pool.submit(copy_file, source, target, n, s, sums.get(n)) for n, s in todo]
                try:
                    for future in futures:
                        copied += future.result()
                except BaseException:
                    for future in futures:
                        future.cancel()
                    raise
            copy_seconds = time.time() - copying_started
        else:
            copy_seconds = 0.0
        if not check_mode:
            missing = [n for n, s in files if not is_staged(s, os.path.join(target, n))]
            if missing:
                raise StageError(
                    "%d file(s) of %s are not in %s after the staging (%s): stage again"
                    % (len(missing), source, target, ", ".join(missing[:5]))
                )
        seconds = time.time() - started
        return {
            "source": source,
            "target": target,
            "files": len(files),
            "bytes": total,
            "copied_files": len(todo),
            "copied_bytes": copied if not check_mode else needed,
            "skipped_files": len(files) - len(todo),
            "skipped_bytes": total - needed,
            "checksummed_files": sum(1 for n, _ in todo if n in sums),
            "checksums": CHECKSUMS if sums else None,
            "already_staged": not todo,
            "partial_removed": partial_removed,
            "seconds": round(seconds, 6),
            "copy_seconds": round(copy_seconds, 6),
            "mb_per_s": round(copied / copy_seconds / 1e6, 3) if copied and copy_seconds > 0 else None,
            "source_filesystem": _mount_of(source),
            "target_filesystem": _mount_of(target) if os.path.isdir(target) else None,
            "node": os.uname()[1],
        }
    finally:
        if lock is not None:
            os.close(lock)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="dtfbench_stage_data.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    args = parser.parse_args(argv)
    try:
        result = stage(args.source, args.target, args.workers)
    except (StageError, OSError) as error:
        result = {"source": args.source, "target": args.target, "node": os.uname()[1], "error": str(error)}
    print(json.dumps(result))
    return 1 if "error" in result else 0


if __name__ == "__main__":  # a Slurm job's copy, run as a program
    sys.exit(main())
