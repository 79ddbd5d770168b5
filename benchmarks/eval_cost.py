"""A3, the cost of evaluation: images/sec with held-out evaluation once an epoch, against without.

    PYTHONPATH=src python benchmarks/eval_cost.py [--rounds 4 --epochs 10 --model lenet ...]

One process of our workload (``--variable_update independent``) trains LeNet on the digits
(``dtfbench tfrecords --dataset digits``, made once in a temporary folder) for --epochs epochs,
with ``--eval_during_training_every_n_steps`` set to one epoch's steps, and the same run
without it. Each evaluation reads ``--eval_share`` of an epoch's images from the held-out split
(``--num_eval_batches``): 0.039 by default, ImageNet's proportion (50,000 validation images to
1,281,167 training ones), which the goal is about. The digits hold out a quarter of their
training set, so evaluating all of it once an epoch costs about a quarter of a forward pass per
training image, some 8% of the time whatever the code does: ``--eval_share 0`` measures that. The two sides take turns, each going first in
half of the rounds (ABBA), so both meet the same load from the rest of the machine. The figure
is images/sec as the workload reports it: over the measured window, which holds the
evaluations' pauses (the steps' own times do not). Ratio: with / without, of the rounds'
means (goal: >= 0.95, issue 53), with each round's ratio and the seconds the evaluations took.

Writes results/benchmarks/eval_cost.json. DTFBENCH_LOCK / --lock: flock that file around the run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_env import RESULTS, ROOT, held, write_json

GOAL = 0.95
RESULT_PREFIX = "DTFBENCH_RESULT "
TRAIN_IMAGES = 1433  # the digits' training split (dtfbench.workload.tfrecords)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=4, help="rounds of one run each way (even: each side first half)")
    p.add_argument("--epochs", type=int, default=10, help="training epochs a run")
    p.add_argument("--model", default="lenet")
    p.add_argument("--image_size", type=int, default=32)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument(
        "--eval_share",
        type=float,
        default=50000 / 1281167,
        help="held-out images an evaluation reads, as a share of an epoch's (0: the whole split)",
    )
    p.add_argument("--lock", default=os.environ.get("DTFBENCH_LOCK"), help="flock this file around the run")
    p.add_argument("--output", default=str(RESULTS / "eval_cost.json"))
    return p.parse_args(argv)


def env():
    out = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), out.get("PYTHONPATH", "")) if p)
    return out


def make_digits(folder: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "dtfbench", "tfrecords", "--dataset", "digits", "--output_dir", str(folder)],
        check=True,
        capture_output=True,
        env=env(),
    )


def eval_batches(args) -> int:
    """--num_eval_batches for --eval_share (0: the whole split)."""
    return 0 if not args.eval_share else max(1, round(args.eval_share * TRAIN_IMAGES / args.batch_size))


def train(args, data_dir: Path, steps: int, every: int | None) -> dict:
    argv = [
        sys.executable, "-m", "dtfbench", "train", "--variable_update", "independent",
        "--model", args.model, "--image_size", str(args.image_size), "--batch_size", str(args.batch_size),
        "--num_classes", "11", "--optimizer", "momentum", "--learning_rate", "0.01", "--weight_decay", "0",
        "--data_dir", str(data_dir), "--num_warmup_batches", "10", "--num_batches", str(steps),
        "--display_every", str(steps), "--num_intra_threads", "1", "--num_inter_threads", "1",
        "--gpu_sample_interval", "0",
    ]  # fmt: skip
    if every:
        argv += ["--eval_during_training_every_n_steps", str(every), "--num_eval_batches", str(eval_batches(args))]
    done = subprocess.run(argv, capture_output=True, text=True, env=env(), timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"eval_cost: a run failed ({done.returncode}): {done.stderr[-2000:]}")
    (line,) = [x for x in done.stdout.splitlines() if x.startswith(RESULT_PREFIX)]
    return json.loads(line[len(RESULT_PREFIX) :])


def main(argv=None) -> int:
    args = parse_args(argv)
    every = max(1, TRAIN_IMAGES // args.batch_size)  # one epoch's steps
    steps = every * args.epochs
    rounds = []
    with held(args.lock), tempfile.TemporaryDirectory(prefix="dtfbench-eval-cost-") as tmp:
        data_dir = Path(tmp) / "digits"
        make_digits(data_dir)
        for index in range(args.rounds):
            order = ("with", "without") if index % 4 in (0, 3) else ("without", "with")
            figures = {}
            for side in order:
                result = train(args, data_dir, steps, every if side == "with" else None)
                figures[side] = result
            with_eval, without = figures["with"], figures["without"]
            rounds.append(
                {
                    "first": order[0],
                    "with_images_per_sec": with_eval["images_per_sec"],
                    "without_images_per_sec": without["images_per_sec"],
                    "ratio": with_eval["images_per_sec"] / without["images_per_sec"],
                    "eval_seconds": with_eval["accuracy"]["eval_seconds"],
                    "evaluations": len(with_eval["accuracy"]["curve"]),
                    "top1": with_eval["accuracy"]["top1"],
                }
            )
            print(
                f"round {index + 1} ({order[0]} first): with {rounds[-1]['with_images_per_sec']:.1f}, without "
                f"{rounds[-1]['without_images_per_sec']:.1f} images/sec, ratio {rounds[-1]['ratio']:.3f} "
                f"({rounds[-1]['evaluations']} evaluations, {rounds[-1]['eval_seconds']:.2f} s; top-1 "
                f"{rounds[-1]['top1']:.4f})",
                flush=True,
            )
    ratio = statistics.fmean(r["with_images_per_sec"] for r in rounds) / statistics.fmean(
        r["without_images_per_sec"] for r in rounds
    )
    summary = {
        "benchmark": "eval_cost",
        "goal": GOAL,
        "ratio": ratio,
        "meets_goal": ratio >= GOAL,
        "settings": {**vars(args), "steps": steps, "eval_every_steps": every, "num_eval_batches": eval_batches(args)},
        "rounds": rounds,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }
    out = write_json(args.output, summary)
    share = f"{args.eval_share:.3f} of an epoch's images" if args.eval_share else "the whole held-out split"
    print(
        f"A3 evaluation once an epoch ({share}): {ratio:.3f} of the images/sec without (goal >= {GOAL}); "
        f"{'meets' if ratio >= GOAL else 'misses'} the goal. {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
