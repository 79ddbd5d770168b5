# -*- coding: utf-8 -*-
"""Raw read throughput of a data directory: a dd-like sequential read of a few shards.

    python -m dtfbench read_throughput /mnt/local_ssd/imagenet [--files 4] [--max-mb 512]

The later study explains real-data throughput with exactly this number: how fast one node
can read its dataset before TensorFlow's input pipeline is involved. The shards are read
with O_DIRECT where the filesystem allows it (the device, not the page cache); elsewhere
(tmpfs, overlay) the file's cached pages are dropped first with posix_fadvise(DONTNEED)
and the read is buffered, and ``direct: false`` says so. Prints one JSON object:
{"mb_per_s", "bytes", "seconds", "files", "direct", "data_dir", "filesystem"}; ``filesystem`` is
the file system under data_dir (dtfbench.linux.procfs.mount_of: type, source, mount point),
where the run's storage is recorded from (docs/storage.md). Standard library only, and
the nodes' oldest Python: tf_host_run's check (launch/host_run.py) measures it before a run,
and a Slurm job's copy (``dtfbench_read_throughput.py``, beside ``dtfbench_procfs.py``) on
every node of the job before its tasks start. It lives in linux/, the floor every stage may
import (the launch stage's check included); ``dtfbench.node.read_throughput`` is the same code
under its former name.

``--cache cold|warm`` then sets the page cache for the run (docs/storage.md): cold drops the
pages of every dataset file (``train-*``, ``validation-*``) with posix_fadvise(DONTNEED), warm
reads them all once. Either way (and with no setting) ``cache`` says how much of the dataset
is in the page cache when the run starts: ``{"setting", "files", "bytes", "resident",
"seconds"}``, ``resident`` the fraction of its pages in memory (mincore(2)).
"""

from __future__ import absolute_import, division, print_function

import argparse
import ctypes
import ctypes.util
import functools
import json
import mmap
import os
import sys
import time

BLOCK = 4 << 20  # 4 MiB reads, aligned for O_DIRECT (a multiple of any logical block size)
# The files of a dataset (ImageNet's TFRecord names): what the page cache setting covers.
DATASET_PATTERNS = ("train-*", "validation-*")
CACHE_SETTINGS = ("cold", "warm")


def shards(data_dir, pattern, count):
    """The first `count` shards by name (None: all): the same ones on every node and every run."""
    import glob

    found = sorted(p for p in glob.glob(os.path.join(glob.escape(str(data_dir)), pattern)) if os.path.isfile(p))
    return found if count is None else found[:count]


def _read_direct(path, limit, buffer):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        total = 0
        while total < limit:
            got = os.readv(fd, [buffer])
            if got <= 0:
                break
            total += got
        return total
    finally:
        os.close(fd)


def _read_buffered(path, limit):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        total = 0
        while total < limit:
            chunk = os.read(fd, BLOCK)
            if not chunk:
                break
            total += len(chunk)
        return total
    finally:
        os.close(fd)


def measure(data_dir, pattern="train-*", files=4, max_bytes=512 << 20):
    """The read's figures (the docstring's JSON object); raises OSError (FileNotFoundError
    where the directory holds no shard)."""
    paths = shards(data_dir, pattern, files)
    if not paths:
        raise FileNotFoundError("no %s files in %s" % (pattern, data_dir))
    buffer = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
    direct = hasattr(os, "O_DIRECT")
    total = 0
    started = time.perf_counter()
    for path in paths:
        left = max_bytes - total
        if left <= 0:
            break
        if direct:
            try:
                total += _read_direct(path, left, buffer)
                continue
            except OSError:  # EINVAL: this filesystem has no O_DIRECT (tmpfs, some overlays)
                direct = False
        total += _read_buffered(path, left)
    seconds = time.perf_counter() - started
    return {
        "data_dir": str(data_dir),
        "files": len(paths),
        "bytes": total,
        "seconds": round(seconds, 6),
        "mb_per_s": round(total / 1e6 / seconds, 3) if seconds > 0 else None,
        "direct": direct,
    }


def dataset_files(data_dir):
    found = []
    for pattern in DATASET_PATTERNS:
        found += shards(data_dir, pattern, None)
    return found


@functools.lru_cache(maxsize=None)
def _libc():
    """The C library's mmap, mincore and munmap, typed for ctypes (loaded once)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _resident_pages(fd, size):
    """(pages of the file in the page cache, pages): mincore(2) over a read-only mapping."""
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    if not pages:
        return 0, 0
    libc = _libc()
    address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap: %s" % os.strerror(ctypes.get_errno()))
    try:
        vector = ctypes.create_string_buffer(pages)
        if libc.mincore(address, size, vector) != 0:
            raise OSError(ctypes.get_errno(), "mincore: %s" % os.strerror(ctypes.get_errno()))
        # mincore sets the lowest bit of a page's byte where it is resident; the rest are 0.
        return pages - vector.raw[:pages].count(b"\0"), pages
    finally:
        libc.munmap(address, size)


def page_cache(data_dir, setting=None):
    """Set the page cache of data_dir's dataset files (cold, warm, or None: leave it) and say
    how much of it is resident now: {setting, files, bytes, resident, seconds}; raises OSError."""
    started = time.perf_counter()
    paths = dataset_files(data_dir)
    resident = pages = total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            total += size
            if setting == "cold":
                # DONTNEED keeps dirty pages: a dataset written moments ago (a fresh staging, a
                # test) is written back first, or it would stay cached.
                try:
                    os.fdatasync(fd)
                except OSError:  # EINVAL: a file that cannot be synced (nothing to write back)
                    pass
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            elif setting == "warm":
                while os.read(fd, BLOCK):
                    pass
            here, count = _resident_pages(fd, size)
        finally:
            os.close(fd)
        resident, pages = resident + here, pages + count
    return {
        "setting": setting,
        "files": len(paths),
        "bytes": total,
        "resident": round(resident / pages, 6) if pages else None,
        "seconds": round(time.perf_counter() - started, 6),
    }


def _sibling(name):
    """The module of the file `name`.py beside this one (dtfbench.linux.procfs as a Slurm job copies it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measured(data_dir, pattern="train-*", files=4, max_bytes=512 << 20, cache=None):
    """measure()'s figures, or {data_dir, error} where the read failed (no shards, no access):
    the answer of the command and of tf_host_run's check, which never fail for it. Both say
    which file system data_dir is on, and with what in its page cache the run starts (the
    `cache` setting applied after the read, which drops its own pages)."""
    try:
        from .procfs import mount_of
    except (ImportError, ValueError):  # run as a file of its own (a Slurm job's copy): procfs's copy beside it
        mount_of = _sibling("dtfbench_procfs").mount_of

    try:
        result = measure(data_dir, pattern, files, max_bytes)
    except OSError as err:
        result = {"data_dir": str(data_dir), "error": str(err)}
    result["filesystem"] = mount_of(data_dir)
    try:
        result["cache"] = page_cache(data_dir, cache)
    except OSError as err:
        result["cache"] = {"setting": cache, "error": str(err)}
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(prog="dtfbench read_throughput", description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--pattern", default="train-*")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--max-mb", type=int, default=512)
    parser.add_argument("--cache", choices=CACHE_SETTINGS, help="then drop (cold) or read (warm) the dataset's pages")
    args = parser.parse_args(argv)
    result = measured(args.data_dir, args.pattern, args.files, args.max_mb << 20, args.cache)
    print(json.dumps(result))
    return 1 if "error" in result else 0


if __name__ == "__main__":  # a Slurm job's copy, run as a program
    sys.exit(main())
