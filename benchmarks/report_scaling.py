#!/usr/bin/env python3
"""`report table`'s cost against the runs it reads: the same configurations, 10 times the runs.

    .venv/bin/python benchmarks/report_scaling.py [--configs 40] [--small 200] [--large 2000]

Two synthetic stores of one model's sweep (GPU counts x PS counts x two variable updates),
one with --small runs and one with --large, the repetitions making the difference. Times
`python -m dtfbench report table` on each, in a fresh process, best of --rounds, and prints the
ratio large/small: a table whose cost follows the configurations, not the runs, stays near 1
(the scaling model is fitted once per sweep group and GPU count, on the summaries, not once
per configuration on the raw runs, which made it 10x). Writes results/benchmarks/report_scaling.json.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_env import RESULTS, write_json

from dtfbench.results import store


def configurations(count: int) -> list[dict]:
    axes = itertools.product(
        (1, 2, 4, 8, 16, 32), (1, 2, 3, 4, 5, 6, 7, 8), ("parameter_server", "distributed_replicated")
    )
    return [dict(gpus=g, num_ps=p, variable_update=v) for g, p, v in itertools.islice(axes, count)]


def make_store(path: Path, configs: list[dict], runs: int) -> None:
    conn = store.connect(path)
    repetitions = -(-runs // len(configs))
    added = 0
    with conn:
        for repetition in range(1, repetitions + 1):
            for index, config in enumerate(configs):
                if added == runs:
                    break
                gpus = config["gpus"]
                rate = 100.0 * gpus * (0.9 ** (gpus.bit_length() - 1)) * (1 + 0.01 * (repetition % 5))
                store.add_run(
                    conn,
                    dict(
                        run_id=f"bench-{index}-{repetition}",
                        sweep_id="bench",
                        system="local",
                        model="resnet50",
                        batch_size=32,
                        data="synthetic",
                        num_workers=gpus,
                        repetition=repetition,
                        status="ok",
                        images_per_sec=rate,
                        images_per_sec_per_worker=[rate / gpus] * gpus,
                        hosts=[f"node{i:02d}" for i in range(max(1, gpus // 8))],
                        **config,
                    ),
                )
                added += 1
    conn.close()


def time_table(db: Path, rounds: int) -> float:
    best = None
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "dtfbench", "report", "table", "--db", str(db)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        took = time.perf_counter() - started
        best = took if best is None else min(best, took)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for option, default in {"--configs": 40, "--small": 200, "--large": 2000, "--rounds": 3}.items():
        parser.add_argument(option, type=int, default=default)
    args = parser.parse_args()
    configs = configurations(args.configs)
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp) / "small.sqlite", Path(tmp) / "large.sqlite"
        make_store(small, configs, args.small)
        make_store(large, configs, args.large)
        t_small, t_large = time_table(small, args.rounds), time_table(large, args.rounds)
    result = dict(
        configurations=len(configs),
        runs=dict(small=args.small, large=args.large),
        seconds=dict(small=round(t_small, 3), large=round(t_large, 3)),
        ratio_large_to_small=round(t_large / t_small, 2),
    )
    write_json(RESULTS / "report_scaling.json", result)
    print(
        f"report table, {len(configs)} configurations: {args.small} runs {t_small:.2f} s, "
        f"{args.large} runs {t_large:.2f} s, ratio {t_large / t_small:.2f} (runs x{args.large / args.small:g})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
