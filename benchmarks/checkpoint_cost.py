#!/usr/bin/env python3
"""D3 and D4: what checkpoints cost (dtfbench.workload.checkpoints), measured side by side.

    .venv/bin/python benchmarks/checkpoint_cost.py [--baseline-ref REV] [--rounds 4] [--dir DIR]

D3, the save's rate: one process trains --model (default resnet50 at 64 px, batch 8: 25 M variables, ~0.2 GB
with the momentum slots; batches under 8 diverge at 64 px, batch norm over too few values) and
saves every --every steps into --dir; its saves' GB/s (bytes over seconds, from its result)
against the raw write rate of the same folder, measured right after (the median of three) by
`dd` writing a file of the checkpoint's size, with the same durability as TF's save (none forced:
`dd` without fsync; the figure with `conv=fdatasync` is printed beside). Goal: at least 0.8x.

D4, no cost when off: images/sec of ours with checkpoints and the storage record off (the code
as it is) against --baseline-ref (by default the tree before them, found in git's history,
checked out with `git worktree`), in one interleaved run: the two take turns, each round in the
other order. Goal: at least 0.99x.

Writes results/benchmarks/checkpoint_cost.json.
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


def train(src: Path, args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, "-m", "dtfbench", "train", "--variable_update", "independent", *args],
        capture_output=True, text=True, env=env, timeout=1800,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"train failed ({done.returncode}): {done.stderr[-3000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith(RESULT_PREFIX))
    return json.loads(line[len(RESULT_PREFIX) :])


BEFORE_CHECKPOINTS = "before-checkpoints"


def revision_before_checkpoints() -> str:
    """The parent of the commit that added dtfbench.workload.checkpoints: today's tree without them."""
    added = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--diff-filter=A", "--format=%H", "--", "src/dtfbench/workload/checkpoints.py"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    if not added:
        raise SystemExit("--baseline-ref: no commit added src/dtfbench/workload/checkpoints.py here; give a revision")
    return f"{added[-1]}^"


def dd_rate(folder: Path, size: int, sync: bool) -> float:
    """GB/s of dd writing `size` bytes into `folder` (dd's own figure is rounded; time it here)."""
    import time

    target = folder / "dd-test"
    count = max(1, size // (4 << 20))
    started = time.perf_counter()
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={target}", "bs=4M", f"count={count}", *(["conv=fdatasync"] if sync else [])],
        check=True, capture_output=True,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    target.unlink()
    return count * (4 << 20) / 1e9 / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline-ref",
        default=BEFORE_CHECKPOINTS,
        help="the tree D4 compares with (a git revision; default: the one before checkpoints were added); "
        "empty: skip D4",
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="the checkpoint folder (default: a new one under /tmp)")
    parser.add_argument("--output", type=Path, default=RESULTS / "checkpoint_cost.json")
    args = parser.parse_args()
    if args.baseline_ref == BEFORE_CHECKPOINTS:
        args.baseline_ref = revision_before_checkpoints()
    threads = ["--num_intra_threads", "1", "--num_inter_threads", "1"]
    result: dict = {}

    folder = args.dir or Path(tempfile.mkdtemp(prefix="dtfbench-ckpt-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        saved = train(
            ROOT / "src",
            ["--model", args.model, "--image_size", str(args.image_size), "--batch_size", "8", "--optimizer", "momentum",
             "--num_warmup_batches", "1", "--num_batches", str(2 * args.every), "--checkpoint_every_steps",
             str(args.every), "--checkpoint_dir", str(folder)],  # TF's own thread counts, as a user runs it
        )["checkpoints"]  # fmt: skip
        size = int(saved["gb"] * 1e9)
        # Three of each, the median: the first write after training pays for the checkpoints'
        # own dirty pages still being written back (a lone dd read 0.32 GB/s, the next 1.3).
        raw = statistics.median(dd_rate(folder, size, sync=False) for _ in range(3))
        durable = statistics.median(dd_rate(folder, size, sync=True) for _ in range(3))
        result["d3"] = {
            "model": args.model,
            "checkpoint_gb": saved["gb"],
            "saves": saved["saves"],
            "save_seconds": [s["seconds"] for s in saved["each"]],
            "save_gb_per_s": saved["gb_per_s"],
            "dd_gb_per_s": raw,
            "dd_fdatasync_gb_per_s": durable,
            "ratio": saved["gb_per_s"] / raw,
            "ratio_to_fdatasync": saved["gb_per_s"] / durable,
            "goal": 0.8,
        }
        print(
            f"D3: {args.model} checkpoint {saved['gb']:.3f} GB, saves {saved['gb_per_s']:.3f} GB/s; dd into the same "
            f"folder {raw:.3f} GB/s (with fdatasync {durable:.3f}): ratio {result['d3']['ratio']:.2f} (goal >= 0.8; "
            f"against dd with fdatasync {result['d3']['ratio_to_fdatasync']:.2f})"
        )
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)

    if args.baseline_ref:
        baseline = Path(tempfile.mkdtemp(prefix="dtfbench-baseline-"))
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(baseline), args.baseline_ref],
                       check=True, capture_output=True)  # fmt: skip
        try:
            run = ["--model", "small_cnn", "--image_size", "32", "--batch_size", "16", "--num_warmup_batches", "10",
                   "--num_batches", "200", *threads]  # fmt: skip
            rates: dict[str, list[float]] = {"current": [], "baseline": []}
            for round_number in range(args.rounds):
                order = ("current", "baseline") if round_number % 2 == 0 else ("baseline", "current")
                for side in order:
                    src = ROOT / "src" if side == "current" else baseline / "src"
                    rate = train(src, run)["images_per_sec"]
                    rates[side].append(rate)
                    print(f"round {round_number + 1} {side:8s} {rate:8.1f} images/sec", flush=True)
            paired = [c / b for c, b in zip(rates["current"], rates["baseline"])]
            result["d4"] = {
                "baseline_ref": args.baseline_ref,
                "current": rates["current"],
                "baseline": rates["baseline"],
                "ratio": statistics.median(rates["current"]) / statistics.median(rates["baseline"]),
                "paired": spread(paired),
                "goal": 0.99,
            }
            print(
                f"D4: checkpoints off / {args.baseline_ref}: {result['d4']['ratio']:.3f} (paired rounds "
                f"{min(paired):.3f}-{max(paired):.3f}; goal >= 0.99)"
            )
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)], capture_output=True
            )

    write_json(args.output, result, say="written:")
    return 0


if __name__ == "__main__":
    sys.exit(main())
