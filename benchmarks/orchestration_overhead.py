#!/usr/bin/env python3
"""P1 orchestration overhead: wall time of a whole sweep / the training time the workers report.

    .venv/bin/python benchmarks/orchestration_overhead.py [--hosts 4] [--repetitions 5] [--steps 300]
    .venv/bin/python benchmarks/orchestration_overhead.py --study   # InceptionV3, 10 + 100 steps

Brings up the multi-host test bed (tests/testbed/testbed.py, real SSH), runs
``run-benchmark.yml`` exactly as a user would (gpus = --hosts, one CPU worker per host,
1 PS, --repetitions runs of one configuration), and divides the playbook's wall time by
the sum over runs of the training time the workers themselves report (per run the longest
worker's ``wall_time.run``: warm-up + measured steps, what the study's method pays for).

It also splits the overhead, per run, into the TF start of the tasks (``wall_time.import``
+ ``wall_time.session_ready``: Python and TensorFlow import, servers, session, start
barrier, all inside the tasks) and the rest, which is the orchestration proper (Ansible's
fan-out, the tf_host_run module calls, recording). Goal (issue #9): ratio <= 1.15.

Everything shares this machine's cores: on one 2-core machine four hosts' TF imports run
one after the other, so the TF start dominates; the orchestration part is the number the
project controls. Results: printed, and written to results/benchmarks/orchestration_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench_env import ROOT, ansible_env  # noqa: E402
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "testbed"))
import testbed  # noqa: E402

from dtfbench.results import store  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300, help="measured steps per run (plus --warmup-steps)")
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--model", default="trivial")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--study", action="store_true",
                        help="the study's workload: inception3 (InceptionV3), 10 warm-up + 100 measured steps, at the smallest "
                             "image size InceptionV3 takes (75 px; CPU only) and --batch-size")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/dtfbench-orchestration"))
    parser.add_argument("--output", type=Path, default=None,
                        help="default results/benchmarks/orchestration_overhead.json "
                             "(orchestration_overhead_study.json with --study)")
    args = parser.parse_args(argv)
    if args.study:
        args.model, args.image_size, args.warmup_steps, args.steps = "inception3", 75, 10, 100
    if args.output is None:
        name = "orchestration_overhead_study.json" if args.study else "orchestration_overhead.json"
        args.output = ROOT / "results" / "benchmarks" / name

    env = ansible_env()
    sweep_id = f"p1-{uuid.uuid4().hex[:8]}"
    db = args.dir.with_name(args.dir.name + "-results.sqlite")
    if db.exists():
        db.unlink()

    args.output.parent.mkdir(parents=True, exist_ok=True)
    testbed.down(args.dir)
    state = testbed.up(args.dir, hosts=args.hosts)
    try:
        started = time.monotonic()
        done = subprocess.run(
            ["ansible-playbook", "run-benchmark.yml", "-i", str(args.dir / "hosts.yml"), "-e", "system=testbed",
             "-e", f"gpus={args.hosts}", "-e", "num_ps=1", "-e", f"model={args.model}", "-e", f"batch_size={args.batch_size}",
             "-e", f"image_size={args.image_size}", "-e", f"repetitions={args.repetitions}",
             "-e", f"warmup_steps={args.warmup_steps}",
             "-e", f"steps={args.steps}", "-e", f"sweep_id={sweep_id}", "-e", f"results_db={db}"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
        wall = time.monotonic() - started
        # The playbook's own output, for a per-task breakdown (ANSIBLE_CALLBACKS_ENABLED=
        # ansible.posix.profile_tasks adds each task's time to it).
        args.output.with_suffix(".log").write_text(done.stdout + done.stderr)
    finally:
        testbed.down(args.dir)
    if done.returncode != 0:
        raise SystemExit(f"the sweep failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")

    runs = store.runs(store.connect(db), "sweep_id = ?", (sweep_id,))
    failed = [r for r in runs if r["status"] != "ok"]
    if failed or len(runs) != args.repetitions:
        raise SystemExit(f"expected {args.repetitions} ok runs, got {len(runs)} ({len(failed)} failed)")
    per_run = []
    for run in runs:
        walls = [w["wall_time"] for w in run["worker_results"]]
        per_run.append({
            "run_id": run["run_id"],
            "training_s": max(w["run"] for w in walls),
            "tf_start_s": max((w.get("import") or 0) + (w.get("session_ready") or 0) for w in walls),
            "images_per_sec": run["images_per_sec"],
        })
    training = sum(r["training_s"] for r in per_run)
    tf_start = sum(r["tf_start_s"] for r in per_run)
    report = {
        "benchmark": "orchestration_overhead",
        "what": (f"run-benchmark.yml wall time / sum of the workers' training time, {args.hosts} test-bed hosts, "
                 f"{args.repetitions} repetitions, model {args.model} at {args.image_size} px, batch {args.batch_size}, "
                 f"{args.steps} + {args.warmup_steps} steps"),
        "playbook_wall_s": wall,
        "training_s": training,
        "ratio": wall / training,
        "goal": 1.15,
        "tf_start_s": tf_start,
        "orchestration_s": wall - training - tf_start,
        "ratio_without_tf_start": (wall - tf_start) / training,
        "workload": {"model": args.model, "image_size": args.image_size, "batch_size": args.batch_size,
                     "warmup_steps": args.warmup_steps, "steps": args.steps},
        "runs": per_run,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "hosts": len(state["nodes"])},
    }
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"sweep wall {wall:.1f} s / training {training:.1f} s = {report['ratio']:.2f} (goal <= 1.15)")
    print(f"  of the {wall - training:.1f} s outside training: TF start in the tasks {tf_start:.1f} s, "
          f"orchestration {report['orchestration_s']:.1f} s "
          f"({report['orchestration_s'] / args.repetitions:.1f} s per run); "
          f"without the TF start the ratio is {report['ratio_without_tf_start']:.2f}")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
