#!/usr/bin/env python3
"""D2: images/sec of ours reading LMDB against reading TFRecords of the same images, side by side.

    .venv/bin/python benchmarks/input_format.py [--model trivial] [--rounds 4] [--shards 8]
                                                [--images-per-shard 256] [--image-size 64]

One synthetic ImageNet-format set (`dtfbench tfrecords`: real JPEGs of --image-size, about) is
written twice into one folder, as TFRecord shards and as LMDB files (`--format lmdb`: the same
records). Each round one `dtfbench train` process reads each (`--input_format tfrecord|lmdb`), the
two in turn, each round in the other order; the same model, batch, steps and threads. The default
model, trivial, leaves the input pipeline (read, JPEG decode, crop, batch) as the bottleneck: the
strictest comparison; a real model's step hides the read (give --model resnet50 to see it).

The goal (issue 55, D2): LMDB at least 0.95x TFRecords (median images/sec over the rounds, and the
paired ratio round by round). The Summitdev study found the two under 1% apart (its Fig. 10).
Writes results/benchmarks/input_format.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_env import RESULTS, ROOT, spread, write_json

sys.path.insert(0, str(ROOT / "src"))
from dtfbench.workload.benchmark_output import RESULT_PREFIX  # noqa: E402

FORMATS = ("tfrecord", "lmdb")


def dtfbench(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-m", "dtfbench", *args], capture_output=True, text=True, env=env,
                          timeout=1800)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"dtfbench {args[0]} failed ({done.returncode}): {done.stderr[-3000:]}")
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="trivial")
    counts = {
        "--rounds": 4,
        "--shards": 8,
        "--images-per-shard": 256,
        "--image-size": 64,
        "--batch-size": 32,
        "--steps": 100,
    }
    for option, default in counts.items():
        parser.add_argument(option, type=int, default=default)
    parser.add_argument("--output", type=Path, default=RESULTS / "input_format.json")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dtfbench-formats-"))
    try:
        made = ["--output_dir", str(folder), "--shards", str(args.shards), "--images_per_shard",
                str(args.images_per_shard), "--image_size", str(args.image_size)]  # fmt: skip
        for fmt in FORMATS:
            dtfbench("tfrecords", *made, "--format", fmt)
        run = ["train", "--variable_update", "independent", "--model", args.model, "--image_size",
               str(args.image_size), "--batch_size", str(args.batch_size), "--num_warmup_batches", "10",
               "--num_batches", str(args.steps), "--data_dir", str(folder)]  # fmt: skip
        rates: dict[str, list[float]] = {fmt: [] for fmt in FORMATS}
        for round_number in range(args.rounds):
            for fmt in FORMATS if round_number % 2 == 0 else FORMATS[::-1]:
                out = dtfbench(*run, "--input_format", fmt).stdout
                line = next(x for x in out.splitlines() if x.startswith(RESULT_PREFIX))
                rate = json.loads(line[len(RESULT_PREFIX) :])["images_per_sec"]
                rates[fmt].append(rate)
                print(f"round {round_number + 1} {fmt:8s} {rate:8.1f} images/sec", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    paired = [lm / tf for lm, tf in zip(rates["lmdb"], rates["tfrecord"])]
    ratio = statistics.median(rates["lmdb"]) / statistics.median(rates["tfrecord"])
    result = {
        "model": args.model,
        "images": args.shards * args.images_per_shard,
        "image_size": args.image_size,
        "batch_size": args.batch_size,
        "rates": rates,
        "ratio": ratio,
        "paired": spread(paired),
        "goal": 0.95,
    }
    print(
        f"D2: LMDB / TFRecords = {ratio:.3f} ({args.model}; paired rounds {min(paired):.3f}-{max(paired):.3f}); "
        f"goal >= 0.95: {'met' if ratio >= 0.95 else 'not met'}"
    )
    write_json(args.output, result, say="written:")
    return 0


if __name__ == "__main__":
    sys.exit(main())
