#!/usr/bin/env python3
"""Where a sweep's time goes between its tasks: a timeline from inside ansible-playbook.

    .venv/bin/python benchmarks/task_timeline.py [--hosts 4] [--repetitions 1] [--steps 100]

Brings up the multi-host test bed (tests/testbed/testbed.py) and runs one trivial sweep of
run-benchmark.yml on it with benchmarks/timeline_site/ on ansible-playbook's PYTHONPATH, which
logs, for every worker (a fork per task and host), when it started, when its task's action
began, when it sent its first command to the host and when its result was ready. Beside it,
the TF tasks' own start and end times from their exit records on the hosts.

Printed: every task (its start from the playbook's first, the gap since the task before it
ended, how long it took, on how many hosts), then for every run how long after the task
before its start-and-wait ended each host's first TF task started, split into the controller's
part (until the worker sent its command) and the host's (docs/performance.md, P1: "Where ours'
time goes"). Written to results/benchmarks/task_timeline.json, the playbook's output beside it
(.log). profile_tasks gives the tasks'
times alone; this adds the inside of the start-and-wait task.

--profile-workers: every worker also runs under cProfile with a CPU clock, and the CPU of the
workers is printed by task (per worker) and by function (the most costly across all workers).
The profiler about doubles what it measures and slows the timeline down: read the shares, and
take the timeline from a run without it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench_env import RESULTS, ROOT, ansible_env, held, testbed_sweep_command, write_json

sys.path.insert(0, str(ROOT / "tests" / "testbed"))
import testbed  # noqa: E402

from dtfbench.results import store  # noqa: E402

SITE = Path(__file__).resolve().parent / "timeline_site"
START_AND_WAIT = "tf_cluster : Start this host's tasks and wait for its workers to finish"


def tasks_of(events: list[dict]) -> list[dict]:
    """Consecutive workers of the same task (its uuid) are one task: its start, end and hosts."""
    by_pid: dict[int, dict] = {}
    tasks: list[dict] = []
    for event in events:
        if event["event"] == "worker":
            if not tasks or tasks[-1]["uuid"] != event["uuid"]:
                tasks.append(
                    {
                        "task": event["task"],
                        "uuid": event["uuid"],
                        "start": event["time"],
                        "end": event["time"],
                        "hosts": [],
                    }
                )
            tasks[-1]["hosts"].append(event["host"])
            by_pid[event["pid"]] = {"task": tasks[-1], "host": event["host"]}
        elif event["pid"] in by_pid:
            worker = by_pid[event["pid"]]
            worker.setdefault(event["event"], event["time"])  # the first send counts
            worker["task"]["end"] = max(worker["task"]["end"], event["time"])
    for worker in by_pid.values():
        worker["task"].setdefault("workers", {})[worker["host"]] = worker
    return tasks


def wait_before(tasks: list[dict], started: float) -> tuple[dict, dict] | None:
    """The start-and-wait task that began last before `started` (a run's first TF task), and the
    task before it; None when there is none (the run never reached its start)."""
    pairs = [(b, t) for b, t in zip(tasks, tasks[1:]) if t["task"] == START_AND_WAIT and t["start"] <= started]
    return pairs[-1] if pairs else None


def tf_starts(bed: Path, run_id: str) -> dict[str, float]:
    """Each host's first TF task's start (its exit records, on the host's own local SSD)."""
    starts = {}
    for node in sorted((bed / "nodes").iterdir()):
        run_dir = node / "local_ssd" / "dtfbench" / "runs" / run_id
        records = [json.loads(p.read_text()) for p in run_dir.glob("*.exit") if "-nic-" not in p.name]
        if records:
            starts[node.name] = min(r["started"] for r in records)
    return starts


def all_delays(report_runs: list[dict]) -> list[float]:
    return [h["tf_start_after_s"] for r in report_runs for h in r["hosts"].values()]


def worker_profiles(folder: Path, events: list[dict], top: int = 15) -> dict:
    """The workers' CPU (their cProfile files in `folder`, named by pid) by task and by function."""
    task_of = {e["pid"]: e["task"] for e in events if e["event"] == "worker"}
    by_task: dict[str, list[float]] = {}
    every = None
    for path in sorted(folder.glob("*.prof")):
        stats = pstats.Stats(str(path))
        by_task.setdefault(task_of.get(int(path.stem), "?"), []).append(stats.total_tt)
        every = stats if every is None else every.add(stats)
    total = sum(sum(cpu) for cpu in by_task.values()) or 1.0
    tasks = [
        {"task": task, "workers": len(cpu), "cpu_s": round(sum(cpu), 4), "share": round(sum(cpu) / total, 4)}
        for task, cpu in sorted(by_task.items(), key=lambda item: -sum(item[1]))
    ]
    functions = []
    if every is not None:
        rows = sorted(every.stats.items(), key=lambda item: -item[1][2])[:top]
        for (file, line, name), (_, calls, own, cumulative, _) in rows:
            functions.append(
                {
                    "function": f"{Path(file).name}:{line}({name})",
                    "calls": calls,
                    "own_s": round(own, 4),
                    "cumulative_s": round(cumulative, 4),
                }
            )
    return {"cpu_s": round(total, 3), "tasks": tasks, "functions": functions}


def print_worker_profiles(profiles: dict) -> None:
    print(f"the workers' CPU under cProfile (about twice their real CPU): {profiles['cpu_s']:.2f} s")
    print(f"{'CPU s':>7} {'share':>6} {'workers':>7} {'ms each':>8}  task")
    for task in profiles["tasks"]:
        each = 1000 * task["cpu_s"] / task["workers"]
        print(f"{task['cpu_s']:7.3f} {task['share']:6.1%} {task['workers']:7d} {each:8.1f}  {task['task']}")
    print(f"{'own s':>7} {'calls':>8}  function (the most costly in all workers)")
    for row in profiles["functions"]:
        print(f"{row['own_s']:7.3f} {row['calls']:8d}  {row['function']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/dtfbench-timeline"))
    parser.add_argument("--lock", default=os.environ.get("DTFBENCH_LOCK", ""))
    parser.add_argument("--output", type=Path, default=RESULTS / "task_timeline.json")
    parser.add_argument(
        "--profile-workers",
        action="store_true",
        help="run every worker under cProfile (CPU clock) and print the workers' CPU by task and function",
    )
    args = parser.parse_args(argv)

    sweep_id = f"timeline-{uuid.uuid4().hex[:8]}"
    args.output.parent.mkdir(parents=True, exist_ok=True)
    output = args.output.with_suffix(".log")  # the playbook's own output
    with tempfile.TemporaryDirectory(prefix="dtfbench-timeline-") as scratch, held(args.lock):
        log, db = Path(scratch) / "timeline.jsonl", Path(scratch) / "results.sqlite"
        env = ansible_env()
        env.update(
            DTFBENCH_TIMELINE=str(log), PYTHONPATH=os.pathsep.join(filter(None, [str(SITE), env.get("PYTHONPATH")]))
        )
        profiles_dir = Path(scratch) / "profiles"
        if args.profile_workers:
            profiles_dir.mkdir()
            env["DTFBENCH_WORKER_PROFILES"] = str(profiles_dir)
        testbed.down(args.dir)
        testbed.up(args.dir, hosts=args.hosts)
        try:
            # Into a file, and waited for as a process: its pipes would stay open until the
            # interrupt watchdog, which inherits them, ended too.
            with output.open("w") as out:
                launched = time.time()  # the events' clock
                process = subprocess.Popen(
                    # P1's trivial sweep (benchmarks/orchestration_overhead.py's defaults).
                    testbed_sweep_command(
                        args.dir / "hosts.yml",
                        hosts=args.hosts,
                        sweep_id=sweep_id,
                        results_db=db,
                        model="trivial",
                        batch_size=8,
                        image_size=32,
                        repetitions=args.repetitions,
                        warmup_steps=10,
                        steps=args.steps,
                        network_probe="false",
                    ),
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
                try:
                    returncode = process.wait(timeout=3600)
                except subprocess.TimeoutExpired:
                    process.kill()
                    raise
                exited = time.time()
            if returncode != 0:
                raise SystemExit(f"the sweep failed (its output: {output}):\n{output.read_text()[-4000:]}")
            events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
            runs = [r["run_id"] for r in store.runs(store.connect(db), "sweep_id = ?", (sweep_id,))]
            starts = {run_id: tf_starts(args.dir, run_id) for run_id in runs}
            profiles = worker_profiles(profiles_dir, events) if args.profile_workers else None
        finally:
            testbed.down(args.dir)
    load = round(os.getloadavg()[0], 2)
    if not events:
        raise SystemExit(f"no timeline in {log}: {SITE}/sitecustomize.py was not loaded by ansible-playbook")

    tasks = tasks_of(events)
    first = tasks[0]["start"]
    imported = next((e["time"] for e in events if e["event"] == "imported"), None)
    at_exit = next((e["time"] for e in events if e["event"] == "exit"), None)
    # ansible-playbook's own start and end: the process until its first task's first worker, and
    # from its last task's end until it exited (its atexit hooks ran that much before: the rest is
    # the interpreter's finalization).
    before_first = {
        "process_s": round(first - launched, 3),
        "python_and_ansible_s": round(imported - launched, 3) if imported else None,
        "inventory_and_playbook_s": round(first - imported, 3) if imported else None,
    }
    last = max(t["end"] for t in tasks)
    after_last = round(exited - last, 3)
    to_atexit = round(at_exit - last, 3) if at_exit else None
    split = (
        f" (Python and Ansible {before_first['python_and_ansible_s']:.3f} s, then the inventory, the playbook "
        f"and its roles {before_first['inventory_and_playbook_s']:.3f} s)"
        if imported
        else ""
    )
    print(
        f"ansible-playbook: {before_first['process_s']:.3f} s before its first task{split}; "
        f"{after_last:.3f} s after its last to its exit"
        + (f" (its atexit hooks at {to_atexit:.3f} s)" if to_atexit is not None else "")
    )
    print(f"{'start':>8} {'gap':>6} {'took':>7} hosts  task")
    for before, task in zip([None] + tasks, tasks):
        gap = task["start"] - before["end"] if before else 0.0
        print(
            f"{task['start'] - first:8.3f} {gap:6.3f} {task['end'] - task['start']:7.3f} {len(task['hosts']):5d}  {task['task']}"
        )
    report_runs = []
    for run_id in runs:
        found = wait_before(tasks, min(starts[run_id].values())) if starts[run_id] else None
        if found is None:
            print(f"run {run_id}: no TF task started (no exit records on the hosts)")
            continue
        before, wait = found
        hosts = {}
        for host, started in sorted(starts[run_id].items()):
            worker = wait["workers"].get(host, {})
            hosts[host] = {
                "tf_start_after_s": round(started - before["end"], 3),
                "controller_s": round(worker["send"] - before["end"], 3) if "send" in worker else None,
                "host_s": round(started - worker["send"], 3) if "send" in worker else None,
            }
        report_runs.append({"run_id": run_id, "hosts": hosts})
        delays = [h["tf_start_after_s"] for h in hosts.values()]
        print(
            f"run {run_id}: the TF tasks started {min(delays):.2f}-{max(delays):.2f} s after the task before "
            "its start-and-wait ended; the controller's part (until the command went) and the host's: "
            + ", ".join(f"{name} {h['controller_s']}+{h['host_s']}" for name, h in hosts.items())
        )
    outside = sum(t["end"] - t["start"] for t in tasks if t["task"] != START_AND_WAIT)
    gaps = sum(t["start"] - b["end"] for b, t in zip(tasks, tasks[1:]))
    print(f"tasks other than the wait {outside:.2f} s, gaps between tasks {gaps:.2f} s")
    if profiles:
        print_worker_profiles(profiles)
    report = {
        "benchmark": "task_timeline",
        "hosts": args.hosts,
        "repetitions": args.repetitions,
        "tasks": [
            {k: (round(v - first, 4) if k in ("start", "end") else v) for k, v in t.items() if k != "workers"}
            for t in tasks
        ],
        "runs": report_runs,
        "before_first_task": before_first,
        "after_last_task_s": after_last,
        "after_last_task_to_atexit_s": to_atexit,
        "outside_wait_s": round(outside, 3),
        "gaps_s": round(gaps, 3),
        "median_tf_start_after_s": statistics.median(every) if (every := all_delays(report_runs)) else None,
        "load_avg_1min": load,
        "worker_profiles": profiles,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "hosts": args.hosts},
    }
    write_json(args.output, report, say="written to")
    return 0


if __name__ == "__main__":
    sys.exit(main())
