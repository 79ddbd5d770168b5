"""A1 and A2: our workload's held-out accuracy and time to accuracy against a plain Keras model.fit.

    PYTHONPATH=src python benchmarks/accuracy_vs_keras.py [--rounds 8 --epochs 6 --target 0.95 ...]

One process each side, on the digits (``dtfbench tfrecords --dataset digits``, made once in a
temporary folder), with the same network (``dtfbench.workload.models.build_model``, the
Keras twin of our LeNet, its weights' shapes checked against ours by
tests/workload/test_cnn_models_match.py), the same input pipelines
(``dtfbench.workload.data.real_dataset`` for training, ``dtfbench.workload.evaluation.eval_input``
for the held-out split), optimizer (momentum), learning rate, batch and weight decay (none).
Both train on whole images (--augmentation none): the Inception-style random crop of an 8x8
digit moves the held-out top-1 by 10 points from one epoch to the next, more than the goals'
margins. Round k seeds both sides with k.

- A1, correctness: after --epochs epochs, the held-out top-1 of each side, the mean over the
  rounds; goal: ours within 1 point of Keras'. The difference's 95% CI (Welch's t) says whether
  the rounds settle it: the whole interval inside +-1 point, or outside.
- A2, speed: time to --target top-1, evaluating once an epoch on both sides, evaluation on the
  clock (ours: ``--stop_at_top_1_accuracy``; Keras: ``model.fit`` with its validation data and
  a callback that stops at the target), from the first training step to the end of the
  evaluation that reached it; goal: ours / Keras <= 1.05, of the rounds' means (each side
  first in half the rounds), with the paired rounds' geometric mean ratio and its 95% CI, and
  each side's coefficient of variation of time to accuracy over the rounds.

Writes results/benchmarks/accuracy_vs_keras.json. DTFBENCH_LOCK / --lock: flock that file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_env import RESULTS, ROOT, held, write_json

RESULT_PREFIX = "DTFBENCH_RESULT "
KERAS_PREFIX = "KERAS_RESULT "
TRAIN_IMAGES = 1433  # the digits' training split (dtfbench.workload.tfrecords)
NUM_CLASSES = 11  # labels 1..10
A1_POINTS = 0.01
A2_GOAL = 1.05


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=8, help="rounds of each side (even: each side first in half)")
    p.add_argument("--epochs", type=int, default=6, help="A1: the epochs both sides train")
    p.add_argument("--target", type=float, default=0.95, help="A2: the held-out top-1 both sides train to")
    p.add_argument("--max_epochs", type=int, default=20, help="A2: the cap")
    p.add_argument("--model", default="lenet")
    p.add_argument("--image_size", type=int, default=32)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=0.01)
    p.add_argument(
        "--augmentation",
        default="none",
        choices=("none", "inception"),
        help="the training pipeline's --augmentation on both sides (none: the whole digit, a quieter measure)",
    )
    p.add_argument("--lock", default=os.environ.get("DTFBENCH_LOCK"), help="flock this file around the run")
    p.add_argument("--output", default=str(RESULTS / "accuracy_vs_keras.json"))
    p.add_argument("--keras_child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--data_dir", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--stop_at", type=float, default=0.0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def env():
    out = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), out.get("PYTHONPATH", "")) if p)
    return out


def steps_per_epoch(args):
    return -(-TRAIN_IMAGES // args.batch_size)


# --- the Keras side (a child process) -------------------------------------------------------


def keras_child(args):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(args.seed)
    import keras

    from dtfbench.workload import data, evaluation
    from dtfbench.workload.flags import train_files
    from dtfbench.workload.models import build_model

    model = build_model(args.model, args.image_size, NUM_CLASSES, "NHWC")
    model.compile(
        optimizer=keras.optimizers.SGD(args.learning_rate, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="top1")],
    )
    train = data.real_dataset(
        tf,
        train_files(args.data_dir),
        args.batch_size,
        args.image_size,
        NUM_CLASSES,
        "NHWC",
        0,
        1,
        args.augmentation,
    )
    held_out, _ = evaluation.eval_input(
        tf, evaluation.eval_files(args.data_dir), args.batch_size, args.image_size, NUM_CLASSES, "NHWC"
    )
    validation_steps = -(-364 // args.batch_size)
    curve = []

    class Clock(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.started = time.monotonic()

        def on_epoch_end(self, epoch, logs=None):
            curve.append({"epoch": epoch + 1, "top1": logs["val_top1"], "seconds": time.monotonic() - self.started})
            if args.stop_at and logs["val_top1"] >= args.stop_at:
                self.model.stop_training = True

    epochs = args.max_epochs if args.stop_at else args.epochs
    model.fit(
        train,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch(args),
        validation_data=held_out,
        validation_steps=validation_steps,
        callbacks=[Clock()],
        verbose=0,
    )
    reached = [p for p in curve if args.stop_at and p["top1"] >= args.stop_at]
    print(
        KERAS_PREFIX
        + json.dumps(
            {
                "top1": curve[-1]["top1"],
                "curve": curve,
                "time_to_target": reached[0]["seconds"] if reached else None,
                "epochs_to_target": reached[0]["epoch"] if reached else None,
            }
        ),
        flush=True,
    )


# --- the two sides ----------------------------------------------------------------------------


def run_keras(args, data_dir, seed, stop_at=0.0):
    argv = [sys.executable, __file__, "--keras_child", "--data_dir", str(data_dir), "--seed", str(seed)]
    argv += ["--stop_at", str(stop_at), "--epochs", str(args.epochs), "--max_epochs", str(args.max_epochs)]
    argv += ["--model", args.model, "--image_size", str(args.image_size), "--batch_size", str(args.batch_size)]
    argv += ["--learning_rate", str(args.learning_rate), "--augmentation", args.augmentation]
    done = subprocess.run(argv, capture_output=True, text=True, env=env(), timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"accuracy_vs_keras: the Keras side failed: {done.stderr[-2000:]}")
    (line,) = [x for x in done.stdout.splitlines() if x.startswith(KERAS_PREFIX)]
    return json.loads(line[len(KERAS_PREFIX) :])


def run_ours(args, data_dir, seed, stop_at=0.0):
    per_epoch = steps_per_epoch(args)
    argv = [
        sys.executable, "-m", "dtfbench", "train", "--variable_update", "independent",
        "--model", args.model, "--image_size", str(args.image_size), "--batch_size", str(args.batch_size),
        "--num_classes", str(NUM_CLASSES), "--optimizer", "momentum", "--learning_rate", str(args.learning_rate),
        "--weight_decay", "0", "--data_dir", str(data_dir), "--num_warmup_batches", "0",
        "--display_every", str(per_epoch), "--num_intra_threads", "1", "--num_inter_threads", "1",
        "--gpu_sample_interval", "0", "--eval_during_training_every_n_steps", str(per_epoch),
        "--augmentation", args.augmentation, "--tf_random_seed", str(seed),
    ]  # fmt: skip
    if stop_at:
        argv += ["--stop_at_top_1_accuracy", str(stop_at), "--num_epochs", str(args.max_epochs)]
        argv += ["--num_batches", str(per_epoch * args.max_epochs)]
    else:
        argv += ["--num_batches", str(per_epoch * args.epochs)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env(), timeout=1800)
    if done.returncode != 0 and "diverged:" in done.stderr:
        # A loss that became NaN is a result (momentum at this rate, now and then): the round counts
        # it, and leaves the pair out of A1 and A2 (a paired comparison needs both sides).
        return {"diverged": done.stderr.strip().splitlines()[-1]}
    if done.returncode != 0:
        raise SystemExit(f"accuracy_vs_keras: our side failed: {done.stderr[-2000:]}")
    (line,) = [x for x in done.stdout.splitlines() if x.startswith(RESULT_PREFIX)]
    return json.loads(line[len(RESULT_PREFIX) :])["accuracy"]


def cv(values):
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else None


def score(rounds):
    """A1: the rounds' mean top-1 each side, their difference and its 95% CI (Welch's t); A2:
    the ratio of the mean times to target (the goal's figure) and the paired rounds' geometric
    mean ratio with its 95% CI; each side's coefficient of variation of time to target."""
    from scipy import stats

    diverged = sum(1 for r in rounds if r.get("ours_diverged"))
    rounds = [r for r in rounds if not r.get("ours_diverged")]
    ours = [r["ours_top1"] for r in rounds]
    keras = [r["keras_top1"] for r in rounds]
    difference = statistics.fmean(ours) - statistics.fmean(keras)
    a1 = {"ours_top1": statistics.fmean(ours), "keras_top1": statistics.fmean(keras), "difference": difference,
          "goal": A1_POINTS, "meets_goal": abs(difference) <= A1_POINTS, "ci95": None}  # fmt: skip
    if len(rounds) > 1 and (statistics.pstdev(ours) or statistics.pstdev(keras)):
        low, high = stats.ttest_ind(ours, keras, equal_var=False).confidence_interval(0.95)
        # Settled: the whole interval on one side of the goal (inside +-1 point, or outside it).
        low, high = float(low), float(high)  # numpy scalars: JSON takes Python's
        a1.update(ci95=[low, high], settled=-A1_POINTS <= low and high <= A1_POINTS or abs(difference) - (high - low) / 2 > A1_POINTS)  # fmt: skip
    timed = [r for r in rounds if r["ours_time_to_target"] and r["keras_time_to_target"]]
    ours_t = [r["ours_time_to_target"] for r in timed]
    keras_t = [r["keras_time_to_target"] for r in timed]
    ratio = statistics.fmean(ours_t) / statistics.fmean(keras_t) if timed else None
    a2 = {"ratio": ratio, "rounds_reached": len(timed), "goal": A2_GOAL,
          "meets_goal": ratio is not None and ratio <= A2_GOAL,
          "ours_cv": cv(ours_t), "keras_cv": cv(keras_t), "paired_ratio": None, "paired_ratio_ci95": None}  # fmt: skip
    if len(timed) > 1:
        logs = [math.log(o / k) for o, k in zip(ours_t, keras_t)]
        interval = stats.t.interval(0.95, len(logs) - 1, loc=statistics.fmean(logs), scale=stats.sem(logs))
        a2.update(
            paired_ratio=math.exp(statistics.fmean(logs)), paired_ratio_ci95=[math.exp(float(x)) for x in interval]
        )
    return {"a1": a1, "a2": a2, "ours_diverged_rounds": diverged}


def lines(summary, args):
    a1, a2 = summary["a1"], summary["a2"]
    ci = a1["ci95"]
    interval = f", 95% CI {ci[0] * 100:+.1f} to {ci[1] * 100:+.1f}" if ci else ""
    yield (
        f"A1 top-1 after {args.epochs} epochs: ours {a1['ours_top1']:.4f}, keras {a1['keras_top1']:.4f} "
        f"({a1['difference'] * 100:+.1f} points{interval}; goal within {A1_POINTS * 100:.0f})"
    )
    ratio = "-" if a2["ratio"] is None else f"{a2['ratio']:.3f}"
    paired = ""
    if a2["paired_ratio"] is not None:
        low, high = a2["paired_ratio_ci95"]
        paired = f"; paired rounds {a2['paired_ratio']:.3f}, 95% CI {low:.3f}-{high:.3f}"
    yield (
        f"A2 time to top-1 {args.target:g}: ours / keras {ratio}{paired} ({a2['rounds_reached']} of "
        f"{len(summary['rounds']) - summary['ours_diverged_rounds']} rounds reached it on both sides; goal <= {A2_GOAL})"
    )
    rounds = [r for r in summary["rounds"] if not r.get("ours_diverged")]
    if summary["ours_diverged_rounds"]:
        yield f"  ours diverged (loss NaN) in {summary['ours_diverged_rounds']} of {len(summary['rounds'])} rounds: left out of A1 and A2"
    for side in ("ours", "keras"):
        epochs = [r[f"{side}_epochs_to_target"] for r in rounds if r[f"{side}_epochs_to_target"]]
        per_epoch = statistics.fmean(r[f"{side}_seconds_per_epoch"] for r in rounds)
        yield (
            f"  {side}: {statistics.fmean(epochs) if epochs else float('nan'):.2f} epochs to {args.target:g} "
            f"(mean), {per_epoch:.2f} s an epoch with its evaluation"
        )
    if a2["ours_cv"] is not None:
        yield (
            f"time to top-1 {args.target:g}, CV over {a2['rounds_reached']} runs: ours {a2['ours_cv'] * 100:.1f}%, "
            f"keras {a2['keras_cv'] * 100:.1f}%"
        )


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.keras_child:
        keras_child(args)
        return 0
    rounds = []
    with held(args.lock), tempfile.TemporaryDirectory(prefix="dtfbench-accuracy-") as tmp:
        data_dir = Path(tmp) / "digits"
        subprocess.run(
            [sys.executable, "-m", "dtfbench", "tfrecords", "--dataset", "digits", "--output_dir", str(data_dir)],
            check=True,
            capture_output=True,
            env=env(),
        )
        for index in range(args.rounds):
            first_ours = index % 4 in (0, 3)
            sides = {}
            for side in ("ours", "keras") if first_ours else ("keras", "ours"):
                if side == "ours":
                    sides["ours"] = (run_ours(args, data_dir, index), run_ours(args, data_dir, index, args.target))
                else:
                    sides["keras"] = (
                        run_keras(args, data_dir, index),
                        run_keras(args, data_dir, index, args.target),
                    )
            (ours_fixed, ours_tta), (keras_fixed, keras_tta) = sides["ours"], sides["keras"]
            diverged = ours_fixed.get("diverged") or ours_tta.get("diverged")
            if diverged:
                rounds.append({"first": "ours" if first_ours else "keras", "ours_diverged": diverged})
                print(f"round {index + 1}: ours {diverged}", flush=True)
                continue
            rounds.append(
                {
                    "first": "ours" if first_ours else "keras",
                    "ours_top1": ours_fixed["top1"],
                    "keras_top1": keras_fixed["top1"],
                    "ours_time_to_target": ours_tta.get("time_to_target"),
                    "keras_time_to_target": keras_tta["time_to_target"],
                    # What a time to target is made of: the epochs it took and how long an epoch
                    # (training and its evaluation) took, from the runs of a fixed length.
                    "ours_epochs_to_target": ours_tta.get("epochs_to_target"),
                    "keras_epochs_to_target": keras_tta["epochs_to_target"],
                    "ours_seconds_per_epoch": ours_fixed["curve"][-1]["wall_seconds"] / args.epochs,
                    "keras_seconds_per_epoch": keras_fixed["curve"][-1]["seconds"] / args.epochs,
                }
            )
            r = rounds[-1]
            print(
                f"round {index + 1}: top-1 after {args.epochs} epochs ours {r['ours_top1']:.4f}, keras "
                f"{r['keras_top1']:.4f}; seconds to {args.target:g}: ours {r['ours_time_to_target']}, "
                f"keras {r['keras_time_to_target']}",
                flush=True,
            )
    summary = {
        "benchmark": "accuracy_vs_keras",
        **score(rounds),
        "settings": vars(args),
        "rounds": rounds,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }
    out = write_json(args.output, summary)
    for line in lines(summary, args):
        print(line)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
