#!/usr/bin/env python3
"""D1 staging: our stager (dtfbench.node.stage_data) against `cp -a` of the same tree, side by side.

    .venv/bin/python benchmarks/stage_copy.py [--shards 16] [--shard-mb 64] [--rounds 6]
                                              [--source-root DIR] [--target-root DIR]

One dataset (--shards files of --shard-mb MB of random bytes, named as ImageNet's TFRecord
shards, with a SHA256SUMS as `dtfbench tfrecords` writes one) in --source-root (default: under
results/benchmarks, the project's disk), copied into an empty folder of --target-root (default
/dev/shm: node-local memory, as a Slurm job stages to). Each round every side copies the whole
tree once, the sides in a Williams order (benchmarks/bench_env.py), each from a cold page cache
(every source file's pages dropped with posix_fadvise(DONTNEED) first), and each timed until
its bytes are durable on the target:

  ours         the stager as the playbooks run it (SHA-256 of every copy checked against
               SHA256SUMS, fsync of each file before its rename), in this process
  ours-sizes   the same without SHA256SUMS (sizes checked only): the cost of the checksums
  cp-a         `cp -a SOURCE TARGET`, then `sync -f TARGET` (the same durability as ours)
  cp-a-nosync  `cp -a` alone: its bytes may still be in the page cache when it returns

The goal (issue 55, D1): ours at least 0.9x cp-a's throughput (MB/s, median over the rounds;
and the paired ratio round by round, the sides having run seconds apart). Writes
results/benchmarks/stage_copy.json. What a shared file system's link adds (NFS under tbf) is
the test bed's to measure; this is the copy's own cost against the copy users write by hand.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_env import RESULTS, ROOT, orders, spread, write_json

sys.path.insert(0, str(ROOT / "src"))
from dtfbench.node import read_throughput, stage_data  # noqa: E402

SIDES = ("ours", "ours-sizes", "cp-a", "cp-a-nosync")


def make_dataset(folder: Path, shards: int, shard_mb: int) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    sums, total = [], 0
    for index in range(shards):
        name = f"train-{index:05d}-of-{shards:05d}"
        data = os.urandom(shard_mb << 20)
        (folder / name).write_bytes(data)
        sums.append(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
        total += len(data)
    (folder / stage_data.CHECKSUMS).write_text("".join(sums))
    return total


def drop_source_pages(folder: Path) -> None:
    read_throughput.page_cache(str(folder), "cold")
    for path in folder.iterdir():  # SHA256SUMS too (page_cache covers the shards)
        with open(path, "rb") as handle:
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def copy(side: str, source: Path, sizes_only: Path, target: Path) -> float:
    """Seconds until the side's copy of the tree is durable in `target` (which must not exist)."""
    started = time.perf_counter()
    if side == "ours":
        stage_data.stage(str(source), str(target))
    elif side == "ours-sizes":
        stage_data.stage(str(sizes_only), str(target))
    else:
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)
        if side == "cp-a":
            subprocess.run(["sync", "-f", str(target)], check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--shard-mb", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--source-root", type=Path, default=RESULTS)
    parser.add_argument("--target-root", type=Path, default=Path("/dev/shm"))
    parser.add_argument("--output", type=Path, default=RESULTS / "stage_copy.json")
    args = parser.parse_args()

    args.source_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="dtfbench-stage-src-", dir=args.source_root))
    targets = Path(tempfile.mkdtemp(prefix="dtfbench-stage-dst-", dir=args.target_root))
    try:
        source = work / "dataset"
        total = make_dataset(source, args.shards, args.shard_mb)
        # The same files without SHA256SUMS (hard links: no second copy on the disk).
        sizes_only = work / "sizes-only"
        sizes_only.mkdir()
        for path in source.iterdir():
            if path.name != stage_data.CHECKSUMS:
                os.link(path, sizes_only / path.name)
        seconds: dict[str, list[float]] = {side: [] for side in SIDES}
        for round_number, order in orders(list(SIDES), args.rounds):
            for side in order:
                target = targets / f"{side}-{round_number}"
                drop_source_pages(source)
                took = copy(side, source, sizes_only, target)
                seconds[side].append(took)
                shutil.rmtree(target)
                print(f"round {round_number} {side:12s} {took:7.3f} s {total / took / 1e6:8.1f} MB/s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(targets, ignore_errors=True)

    rate = {side: [total / s / 1e6 for s in values] for side, values in seconds.items()}
    paired = [c / o for o, c in zip(seconds["ours"], seconds["cp-a"])]  # ours' MB/s over cp-a's, per round
    result = {
        "bytes": total,
        "shards": args.shards,
        "shard_mb": args.shard_mb,
        "rounds": args.rounds,
        "source_root": str(args.source_root),
        "target_root": str(args.target_root),
        "mb_per_s": {side: spread(v) for side, v in rate.items()},
        "ratio_ours_to_cp_a": statistics.median(rate["ours"]) / statistics.median(rate["cp-a"]),
        "ratio_ours_to_cp_a_paired": spread(paired),
        "ratio_ours_to_cp_a_nosync": statistics.median(rate["ours"]) / statistics.median(rate["cp-a-nosync"]),
        "ratio_sizes_only_to_cp_a": statistics.median(rate["ours-sizes"]) / statistics.median(rate["cp-a"]),
        "goal": 0.9,
    }
    result["met"] = bool(result["ratio_ours_to_cp_a"] >= 0.9)
    print()
    for side in SIDES:
        m = result["mb_per_s"][side]
        print(f"{side:12s} median {m['median']:8.1f} MB/s (range {m['min']:.1f}-{m['max']:.1f})")
    paired_range = result["ratio_ours_to_cp_a_paired"]
    print(
        f"D1: ours / cp -a (+sync) = {result['ratio_ours_to_cp_a']:.3f} (paired per round: median "
        f"{paired_range['median']:.3f}, {paired_range['min']:.3f}-{paired_range['max']:.3f}); goal >= 0.9: "
        f"{'met' if result['met'] else 'NOT met'}. ours / cp -a without sync: {result['ratio_ours_to_cp_a_nosync']:.3f}; "
        f"sizes only / cp -a: {result['ratio_sizes_only_to_cp_a']:.3f}"
    )
    write_json(args.output, result, say="written:")
    return 0


if __name__ == "__main__":
    sys.exit(main())
