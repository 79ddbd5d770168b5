#!/usr/bin/env python3
"""P1 orchestration overhead: a sweep's wall time against a bare launcher's, and against the training time.

    .venv/bin/python benchmarks/orchestration_overhead.py [--hosts 4] [--repetitions 3] [--steps 100] [--rounds 2]
    .venv/bin/python benchmarks/orchestration_overhead.py --study   # InceptionV3, 10 + 100 steps, 1 run a sweep
    [--lock /tmp/dtfbench-heavy.lock]   # flock it around each round (default $DTFBENCH_LOCK)

Brings up the multi-host test bed (tests/testbed/testbed.py, real SSH) and, in each of
--rounds rounds, runs the same sweep twice on the same hosts, one after the other (ours first
in odd rounds, the bare launcher first in even ones):
  ours  ``run-benchmark.yml`` exactly as a user would (gpus = --hosts, one CPU worker per
        host, 1 PS, --repetitions runs of one configuration);
  bare  benchmarks/bare_launcher.py: the study's method over plain ssh with nothing around
        it (every PS and worker of the same layout started at once with the same flags,
        wait for the workers, then the PSs, read the workers' figures; no sleeps).
The ratio of the two sides' wall times (summed over rounds) is what the orchestration adds
to what any launcher pays (ssh, the processes, TF's own start, the training), measured in
the same run on the same machine: goal (issue #31) <= 1.15 with short runs, <= 1.05 with the
study's workload (--study). Each side's images/sec (mean
per run, summed over workers) shows that both measure the same thing.

The older figure is printed too: our wall time / the sum over runs of the training time the
workers report (per run the longest worker's ``wall_time.run``), goal (issue #9) <= 1.15,
with the TF start of the tasks (``wall_time.import`` + ``wall_time.session_ready``) split off.

Each round (test bed up, both sides, test bed down) holds --lock on its own. Results:
printed, and written to results/benchmarks/orchestration_overhead.json (the playbook's
output beside it, ``.log``).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import uuid
from functools import partial
from pathlib import Path

import yaml
from bench_env import RESULTS, ROOT, ansible_env, held, orders, testbed_sweep_command, timed_run, write_json  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "testbed"))
import bare_launcher  # noqa: E402
import testbed  # noqa: E402

from dtfbench.results import store  # noqa: E402

# The workload's settings a sweep of ours takes from the options (-e NAME=VALUE each).
SWEEP_SETTINGS = ("model", "batch_size", "image_size", "repetitions", "warmup_steps", "steps")
# Issue #31's goals for ours / bare: short runs (the trivial model) and the study's workload.
GOAL_SHORT = 1.15
GOAL_STUDY = 1.05


def ours_sweep(args, inventory: Path, db: Path, env: dict, log: Path) -> dict:
    """One run-benchmark.yml sweep (--repetitions runs of one configuration): wall time and per-run figures."""
    sweep_id = f"p1-{uuid.uuid4().hex[:8]}"
    workload = {name: getattr(args, name) for name in SWEEP_SETTINGS}
    # The link probe (on by default) is a measurement the bare launcher does not make: its cost
    # is N2's figure, off here unless asked for (--network-probe).
    probe = "true" if args.network_probe else "false"
    command = testbed_sweep_command(
        inventory, hosts=args.hosts, sweep_id=sweep_id, results_db=db, **workload, network_probe=probe
    )
    done, wall = timed_run(command, env, timeout=3600)
    # The playbook's own output, for a per-task breakdown (ANSIBLE_CALLBACKS_ENABLED=
    # ansible.posix.profile_tasks adds each task's time to it).
    with log.open("a") as handle:
        handle.write(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"the sweep failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    runs = store.runs(store.connect(db), "sweep_id = ?", (sweep_id,))
    failed = [r for r in runs if r["status"] != "ok"]
    if failed or len(runs) != args.repetitions:
        raise SystemExit(f"expected {args.repetitions} ok runs, got {len(runs)} ({len(failed)} failed)")
    per_run = []
    for run in runs:
        walls = [w["wall_time"] for w in run["worker_results"]]
        per_run.append(
            {
                "run_id": run["run_id"],
                "training_s": max(w["run"] for w in walls),
                "tf_start_s": max((w.get("import") or 0) + (w.get("session_ready") or 0) for w in walls),
                "images_per_sec": run["images_per_sec"],
            }
        )
    return {"wall_s": wall, "runs": per_run}


def train_args(args) -> list[str]:
    """The workload's flags as roles/benchmark/tasks/run.yml builds them for this sweep (system=testbed)."""
    testbed_profile = yaml.safe_load((ROOT / "playbooks" / "vars" / "systems" / "testbed.yml").read_text())
    return [
        "--variable_update",
        "parameter_server",
        "--model",
        args.model,
        "--batch_size",
        str(args.batch_size),
        "--num_gpus",
        "1",
        "--num_warmup_batches",
        str(args.warmup_steps),
        "--num_batches",
        str(args.steps),
        "--step_timeout",
        "120",
        "--startup_timeout",
        "300",
        "--image_size",
        str(args.image_size),
    ] + [str(a) for a in testbed_profile["system_defaults"].get("extra_args", [])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument(
        "--repetitions",
        type=int,
        default=None,
        help="runs per sweep (default 3; 1 with --study, whose runs take ~3 min each here)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="rounds of (our sweep, the bare launcher's sweep), one after the other (default 2)",
    )
    parser.add_argument("--steps", type=int, default=100, help="measured steps per run (plus --warmup-steps)")
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--model", default="trivial")
    parser.add_argument(
        "--network-probe",
        action="store_true",
        help="let ours probe the links before each sweep (the default of a sweep)",
    )
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--study",
        action="store_true",
        help="the study's workload: inception3 (InceptionV3), 10 warm-up + 100 measured steps, at the smallest "
        "image size InceptionV3 takes (75 px; CPU only) and --batch-size",
    )
    parser.add_argument(
        "--lock",
        default=os.environ.get("DTFBENCH_LOCK"),
        help="flock this file around each round (the machine's heavy lock; default $DTFBENCH_LOCK)",
    )
    parser.add_argument("--dir", type=Path, default=Path("/tmp/dtfbench-orchestration"))
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="default results/benchmarks/orchestration_overhead.json (orchestration_overhead_study.json with --study)",
    )
    args = parser.parse_args(argv)
    if args.study:
        args.model, args.image_size, args.warmup_steps, args.steps = "inception3", 75, 10, 100
    if args.repetitions is None:
        args.repetitions = 1 if args.study else 3
    if args.output is None:
        name = "orchestration_overhead_study.json" if args.study else "orchestration_overhead.json"
        args.output = RESULTS / name

    env = ansible_env()
    db = args.dir.with_name(args.dir.name + "-results.sqlite")
    if db.exists():
        db.unlink()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    log = args.output.with_suffix(".log")
    log.write_text("")
    program = [testbed.default_python(), "-m", "dtfbench", "train"]
    rounds = []
    for number, order in orders(["ours", "bare"], args.rounds):
        # Each round under the lock on its own (both sides on the same hosts): the two sides of a
        # round see the same machine. The side that goes first alternates from round to round
        # (ours first in odd rounds), so that neither always meets the freshly started test bed.
        with held(args.lock):
            testbed.down(args.dir)
            state = testbed.up(args.dir, hosts=args.hosts)
            control_dir = Path(tempfile.mkdtemp(prefix="p1-bare-ssh-"))
            try:
                sides = {
                    "ours": partial(ours_sweep, args, args.dir / "hosts.yml", db, env, log),
                    "bare": partial(
                        bare_launcher.sweep,
                        state,
                        args.hosts,
                        1,
                        args.repetitions,
                        program,
                        train_args(args),
                        control_dir,
                    ),
                }
                measured = {side: sides[side]() for side in order}
                ours, bare = measured["ours"], measured["bare"]
            finally:
                testbed.down(args.dir)
                shutil.rmtree(control_dir, ignore_errors=True)
        rounds.append({"ours": ours, "bare": bare, "first": order[0], "load_avg_1min": round(os.getloadavg()[0], 2)})
        print(
            f"round {number + 1} ({order[0]} first): ours {ours['wall_s']:.1f} s, bare {bare['wall_s']:.1f} s "
            f"({ours['wall_s'] / bare['wall_s']:.2f}), load {rounds[-1]['load_avg_1min']}",
            flush=True,
        )

    per_run = [run for r in rounds for run in r["ours"]["runs"]]
    bare_runs = [run for r in rounds for run in r["bare"]["runs"]]
    wall = sum(r["ours"]["wall_s"] for r in rounds)
    bare_wall = sum(r["bare"]["wall_s"] for r in rounds)
    training = sum(r["training_s"] for r in per_run)
    tf_start = sum(r["tf_start_s"] for r in per_run)
    n_runs = len(per_run)
    report = {
        "benchmark": "orchestration_overhead",
        "what": (
            f"run-benchmark.yml wall time / the bare launcher's (plain ssh, the study's method, no sleeps) "
            f"and / the workers' training time; {args.hosts} test-bed hosts, {args.rounds} rounds of a sweep of "
            f"{args.repetitions} repetitions each side, model {args.model} at {args.image_size} px, "
            f"batch {args.batch_size}, {args.steps} + {args.warmup_steps} steps"
        ),
        "playbook_wall_s": wall,
        "bare_wall_s": bare_wall,
        "ratio_to_bare": wall / bare_wall,
        "goal_to_bare": GOAL_STUDY if args.study else GOAL_SHORT,
        "images_per_sec": {
            "ours": statistics.mean(r["images_per_sec"] for r in per_run),
            "bare": statistics.mean(r["images_per_sec"] for r in bare_runs),
        },
        "training_s": training,
        "ratio": wall / training,
        "goal": 1.15,
        "tf_start_s": tf_start,
        "orchestration_s": wall - training - tf_start,
        "ratio_without_tf_start": (wall - tf_start) / training,
        "workload": {
            "model": args.model,
            "image_size": args.image_size,
            "batch_size": args.batch_size,
            "warmup_steps": args.warmup_steps,
            "steps": args.steps,
        },
        "repetitions": args.repetitions,
        "network_probe": args.network_probe,
        "rounds": [
            {
                "ours_wall_s": r["ours"]["wall_s"],
                "bare_wall_s": r["bare"]["wall_s"],
                "first": r["first"],
                "load_avg_1min": r["load_avg_1min"],
            }
            for r in rounds
        ],
        "runs": per_run,
        "bare_runs": bare_runs,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "hosts": args.hosts},
    }
    write_json(args.output, report)
    rates = report["images_per_sec"]
    print(
        f"sweep wall, ours {wall:.1f} s / bare launcher {bare_wall:.1f} s = {report['ratio_to_bare']:.2f} "
        f"(goal <= {report['goal_to_bare']:.2f}); images/sec per run, ours {rates['ours']:.1f}, bare {rates['bare']:.1f}"
    )
    print(f"sweep wall {wall:.1f} s / training {training:.1f} s = {report['ratio']:.2f} (goal <= 1.15)")
    print(
        f"  of the {wall - training:.1f} s outside training: TF start in the tasks {tf_start:.1f} s, "
        f"orchestration {report['orchestration_s']:.1f} s "
        f"({report['orchestration_s'] / n_runs:.1f} s per run); "
        f"without the TF start the ratio is {report['ratio_without_tf_start']:.2f}"
    )
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
