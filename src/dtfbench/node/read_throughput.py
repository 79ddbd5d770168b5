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
the nodes' oldest Python: tf_host_run's check (launch/host_run.py) measures it before a run.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import mmap
import os
import time

BLOCK = 4 << 20  # 4 MiB reads, aligned for O_DIRECT (a multiple of any logical block size)


def shards(data_dir, pattern, count):
    """The first `count` shards by name: the same ones on every node and every run."""
    import glob

    found = sorted(p for p in glob.glob(os.path.join(glob.escape(str(data_dir)), pattern)) if os.path.isfile(p))
    return found[:count]


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


def measured(data_dir, pattern="train-*", files=4, max_bytes=512 << 20):
    """measure()'s figures, or {data_dir, error} where the read failed (no shards, no access):
    the answer of the command and of tf_host_run's check, which never fail for it. Both say
    which file system data_dir is on."""
    from ..linux.procfs import mount_of

    try:
        result = measure(data_dir, pattern, files, max_bytes)
    except OSError as err:
        result = {"data_dir": str(data_dir), "error": str(err)}
    result["filesystem"] = mount_of(data_dir)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(prog="dtfbench read_throughput", description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--pattern", default="train-*")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--max-mb", type=int, default=512)
    args = parser.parse_args(argv)
    result = measured(args.data_dir, args.pattern, args.files, args.max_mb << 20)
    print(json.dumps(result))
    return 1 if "error" in result else 0
