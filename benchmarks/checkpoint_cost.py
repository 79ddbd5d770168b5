#!/usr/bin/env python3
"""D3 and D4: what checkpoints cost (dtfbench.workload.checkpoints), measured side by side.

    .venv/bin/python benchmarks/checkpoint_cost.py [--baseline-ref REV] [--rounds 4] [--dir DIR]

D3, the save's rate: one process trains --model (default resnet50 at 64 px, batch 8: 25 M variables, ~0.2 GB
with the momentum slots; batches under 8 diverge at 64 px, batch norm over too few values) and
saves every --every steps into --dir, --saves times; then `dd` writes as many files of the
checkpoint's size into the same folder in the same pattern: the same pause between two writes
(the run's --every steps), the file two writes back deleted after each (the Saver keeps two).
Each side starts after a `sync`, and --d3-rounds rounds alternate them. Goal: the median save's
GB/s at least 0.8x the median `dd` write's. Why the pattern: on a disk whose writeback is still
busy with the last write, the next one waits (dirty-page throttling), so a `dd` run back to back
on a quiet disk measures another state than a save's; both are printed, with `conv=fdatasync`
beside (the disk's own rate).

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
import time
from pathlib import Path

from bench_env import RESULTS, ROOT, spread, write_json

sys.path.insert(0, str(ROOT / "src"))
from dtfbench.workload import checkpoints  # noqa: E402
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


def dd_rate(target: Path, size: int, sync: bool = False) -> float:
    """GB/s of `dd` writing `size` bytes (4 MiB blocks) to `target` (dd's own figure is rounded; time it here)."""
    count = max(1, size // (4 << 20))
    started = time.perf_counter()
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={target}", "bs=4M", f"count={count}", *(["conv=fdatasync"] if sync else [])],
        check=True, capture_output=True,
    )  # fmt: skip
    return count * (4 << 20) / 1e9 / (time.perf_counter() - started)


def dd_back_to_back(folder: Path, size: int, sync: bool) -> float:
    """GB/s of `dd` writing `size` bytes into `folder`, the median of three in a row."""
    target = folder / "dd-test"
    rates = []
    for _ in range(3):
        rates.append(dd_rate(target, size, sync))
        target.unlink()
    return statistics.median(rates)


def dd_like_saves(folder: Path, size: int, writes: int, pause: float) -> list[float]:
    """GB/s of each of `writes` dd writes of `size` bytes into `folder`, written as the Saver
    writes checkpoints: `pause` seconds apart, the file two writes back deleted after each."""
    rates = []
    for n in range(writes):
        rates.append(dd_rate(folder / f"dd-{n}", size))
        (folder / f"dd-{n - 2}").unlink(missing_ok=True)
        time.sleep(pause)
    for n in (writes - 2, writes - 1):
        (folder / f"dd-{n}").unlink(missing_ok=True)
    return rates


def remove_checkpoints(folder: Path) -> None:
    """The run's checkpoints and the Saver's state file, nothing else of --dir's."""
    for path in [*folder.glob(f"{checkpoints.PREFIX}-*"), folder / "checkpoint"]:
        path.unlink(missing_ok=True)


def measure_d3(args, folder: Path) -> dict:
    """D3: the saves' and the dd writes' GB/s, --d3-rounds rounds of each, alternating."""
    save_rates: list[float] = []
    dd_rates: list[float] = []
    size = 0
    for round_number in range(args.d3_rounds):
        os.sync()
        run = train(
            ROOT / "src",
            ["--model", args.model, "--image_size", str(args.image_size), "--batch_size", "8", "--optimizer", "momentum",
             "--num_warmup_batches", "1", "--num_batches", str(args.saves * args.every), "--checkpoint_every_steps",
             str(args.every), "--checkpoint_dir", str(folder)],  # TF's own thread counts, as a user runs it
        )  # fmt: skip
        saved = run["checkpoints"]
        size = int(saved["gb"] * 1e9)
        round_saves = [s["bytes"] / 1e9 / s["seconds"] for s in saved["each"]]
        remove_checkpoints(folder)  # dd starts from the folder as the run found it
        os.sync()
        round_dd = dd_like_saves(folder, size, len(round_saves), args.every * run["step_time"]["mean"])
        save_rates += round_saves
        dd_rates += round_dd
        print(
            f"D3 round {round_number + 1}: saves " + " ".join(f"{r:.2f}" for r in round_saves)
            + " GB/s; dd " + " ".join(f"{r:.2f}" for r in round_dd) + " GB/s", flush=True
        )  # fmt: skip
    os.sync()
    back_to_back = dd_back_to_back(folder, size, sync=False)
    durable = dd_back_to_back(folder, size, sync=True)
    save, raw = statistics.median(save_rates), statistics.median(dd_rates)
    return {
        "model": args.model,
        "checkpoint_gb": size / 1e9,
        "save_gb_per_s": save_rates,
        "dd_gb_per_s": dd_rates,
        "ratio": save / raw,
        "dd_back_to_back_gb_per_s": back_to_back,
        "dd_fdatasync_gb_per_s": durable,
        "ratio_to_back_to_back": save / back_to_back,
        "ratio_to_fdatasync": save / durable,
        "goal": 0.8,
    }


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
    parser.add_argument("--every", type=int, default=5, help="D3: a save every this many steps")
    parser.add_argument("--saves", type=int, default=4, help="D3: saves a run")
    parser.add_argument("--d3-rounds", type=int, default=3, help="D3: runs, each followed by its dd writes")
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
        d3 = result["d3"] = measure_d3(args, folder)
        print(
            f"D3: {args.model} checkpoint {d3['checkpoint_gb']:.3f} GB, median save "
            f"{statistics.median(d3['save_gb_per_s']):.3f} GB/s, median dd in the same pattern "
            f"{statistics.median(d3['dd_gb_per_s']):.3f} GB/s: ratio {d3['ratio']:.2f} (goal >= 0.8); dd back to back "
            f"{d3['dd_back_to_back_gb_per_s']:.3f} GB/s ({d3['ratio_to_back_to_back']:.2f}), with fdatasync "
            f"{d3['dd_fdatasync_gb_per_s']:.3f} GB/s ({d3['ratio_to_fdatasync']:.2f})"
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
