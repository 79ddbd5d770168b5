#!/usr/bin/env python3
"""The controller's cost per host as the hosts grow: a run's launch on 4, 16 and 64 test-bed hosts.

    .venv/bin/python benchmarks/controller_scaling.py [--hosts 4,16,64] [--repeats N] [--forks N] [--lock FILE]

For each host count N a test bed of N hosts comes up (tests/testbed/testbed.py: network
namespaces with their own sshd, real SSH), and the run's launch of run-benchmark.yml, the
tf_cluster role (layout, check, start and wait, stop: one tf_host_run call per host and
phase), runs one PS and one worker per host, alternately on 1 host and on all N. The tasks
are tests/testbed/barrier_task.py: they listen as TF servers do and the workers wait at a
start barrier for every worker, as TF's do; nothing heavy is imported, so what is measured
is the launch.

Per run: the controller's CPU-seconds (ansible-playbook and everything it starts, plus the
SSH master connections it opens, which detach from it; every run opens them anew) and the
playbook's wall time. The controller's cost per host at N is
(CPU(N) - CPU(1)) / (N - 1), with the 1-host run of the same lock hold as the baseline
(ansible-playbook's own start, the inventory and the play are the same for any N). Goal
(issue #19): the cost per host at the largest N within 1.2x of that at the smallest.
Each task's time (ansible.posix.profile_tasks) and the controller's CPU per task
(benchmarks/callback_plugins/cpu_per_task.py) are kept per run, to show where a growth is.

Each host count holds --lock on its own (default $DTFBENCH_LOCK). A run that fails is
printed, kept in the JSON (``failed_runs``, with its whole output in a log file) and left out
of the medians. Results: printed, and written to results/benchmarks/controller_scaling.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bench_env import RESULTS, ROOT, ansible_env, callbacks_with, held, timed_run, write_json  # noqa: E402

from dtfbench.linux import procfs  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "testbed"))
import testbed  # noqa: E402

TASK_PROGRAM = ROOT / "tests" / "testbed" / "barrier_task.py"
PLAYBOOK = """
- name: One run's launch (the tf_cluster role), one PS and one worker per host
  hosts: tf_nodes
  gather_facts: false
  tasks:
    - name: Run the cluster
      ansible.builtin.include_role:
        name: tf_cluster
      vars:
        tf_cluster_program: ["{{{{ dtfbench_python }}}}", "{program}"]
        tf_cluster_program_args: [--barrier_timeout, "{barrier_timeout}"]
        tf_cluster_run_id: "{run_id}"
        tf_cluster_gpus: {hosts}
        tf_cluster_num_ps: {hosts}
        tf_cluster_ps_exit_timeout: 0
        tf_cluster_grace_period: 2
        tf_cluster_ready_timeout: 120
        tf_cluster_timeout: 300
"""
SMALL_REPEATS, LARGE_REPEATS = 5, 2
PROFILE_LINE = re.compile(r"^(?P<task>.+?) -{3,} (?P<seconds>\d+\.\d+)s\s*$")


def subset_inventory(state: dict, count: int, path: Path) -> Path:
    """The test bed's inventory with its first `count` hosts only."""
    inventory = yaml.safe_load((Path(state["dir"]) / "hosts.yml").read_text())
    group = inventory["all"]["children"]["tf_nodes"]
    keep = [n["name"] for n in state["nodes"][:count]]
    group["hosts"] = {name: group["hosts"][name] for name in keep}
    path.write_text(yaml.safe_dump(inventory))
    return path


def ssh_masters(state: dict) -> list[int]:
    return testbed.ssh_clients_of(Path(state["dir"]), state["public_net"])


def one_run(
    state: dict, workdir: Path, inventory: Path, hosts: int, run_no: int, env: dict, barrier_timeout: float
) -> dict:
    run_id = f"controller-scaling-{hosts}-{run_no}-{os.getpid()}"
    book = workdir / f"{run_id}.yml"
    book.write_text(PLAYBOOK.format(run_id=run_id, program=TASK_PROGRAM, hosts=hosts, barrier_timeout=barrier_timeout))
    testbed.kill_all(lambda: ssh_masters(state))  # every run opens its connections
    cpu_file = workdir / f"{run_id}.cpu.json"
    env = dict(env, DTFBENCH_CPU_PER_TASK=str(cpu_file))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    nodes_before = sum(testbed.cpu_seconds(state).values())
    done, wall = timed_run(["ansible-playbook", "-i", str(inventory), str(book)], env, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    masters = sum(procfs.cpu_seconds(pid) or 0.0 for pid in ssh_masters(state))
    nodes_cpu = sum(testbed.cpu_seconds(state).values()) - nodes_before
    if done.returncode != 0:
        # Kept, and left out of the medians: the JSON says which run failed and why.
        failed_log = workdir.parent / f"controller-scaling-failed-{hosts}-{run_no}.log"
        failed_log.write_text(done.stdout + done.stderr)
        errors = [line for line in done.stdout.splitlines() if "[ERROR]" in line][:3]
        print(
            f"the launch on {hosts} hosts failed (wall {wall:.1f} s; whole output {failed_log}): "
            + " | ".join(errors)[:1500],
            flush=True,
        )
        return {
            "hosts": hosts,
            "failed": " | ".join(errors) or "exit %d" % done.returncode,
            "log": str(failed_log),
            "wall_s": wall,
            "load_avg_1min": round(os.getloadavg()[0], 2),
        }
    tasks = {}
    for line in done.stdout.splitlines():
        match = PROFILE_LINE.match(line.strip())
        if match:
            tasks[match["task"].strip()] = float(match["seconds"])
    children = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "hosts": hosts,
        "wall_s": wall,
        "controller_cpu_s": children + masters,
        "ssh_masters_cpu_s": masters,
        "nodes_cpu_s": nodes_cpu,
        "task_s": tasks,
        # The controller's CPU per task (benchmarks/callback_plugins/cpu_per_task.py), in order.
        "task_cpu_s": json.loads(cpu_file.read_text()) if cpu_file.exists() else None,
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }


def measure(count: int, args, env: dict) -> dict:
    """1-host and `count`-host runs, alternately, on one test bed of `count` hosts."""
    directory = args.dir
    testbed.down(directory)
    up_started = time.monotonic()
    state = testbed.up(directory, hosts=count)
    up_s = time.monotonic() - up_started
    workdir = Path(tempfile.mkdtemp(prefix="controller-scaling-"))
    samples: dict[str, list[dict]] = {"1": [], str(count): []}
    try:
        inventories = {1: subset_inventory(state, 1, workdir / "hosts-1.yml"), count: Path(state["dir"]) / "hosts.yml"}
        # Small counts get more runs: (CPU(N) - CPU(1)) / (N - 1) divides their noise by little.
        repeats = args.repeats or (SMALL_REPEATS if count <= 16 else LARGE_REPEATS)
        for run_no in range(repeats):
            for hosts in (1, count):
                result = one_run(state, workdir, inventories[hosts], hosts, run_no, env, args.barrier_timeout)
                samples[str(hosts)].append(result)
                if "failed" in result:
                    continue
                print(
                    f"{count:>3} hosts bed, {hosts:>3} in the run: wall {result['wall_s']:.2f} s, controller CPU "
                    f"{result['controller_cpu_s']:.2f} s (of it ssh masters {result['ssh_masters_cpu_s']:.2f}), "
                    f"nodes {result['nodes_cpu_s']:.1f} s, load {result['load_avg_1min']}",
                    flush=True,
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        testbed.down(directory)
    ok = {key: [s for s in runs if "failed" not in s] for key, runs in samples.items()}
    if not all(ok.values()):
        raise SystemExit(
            f"no run on {count} hosts (or on 1) succeeded: {[s.get('failed') for r in samples.values() for s in r]}"
        )
    med = {
        key: {
            field: statistics.median(s[field] for s in runs) for field in ("wall_s", "controller_cpu_s", "nodes_cpu_s")
        }
        for key, runs in ok.items()
    }
    one, many = med["1"], med[str(count)]
    return {
        "hosts": count,
        "testbed_up_s": up_s,
        "median": med,
        "samples": samples,
        "failed_runs": [s for runs in samples.values() for s in runs if "failed" in s],
        "controller_cpu_s_per_host": (many["controller_cpu_s"] - one["controller_cpu_s"]) / (count - 1),
        "controller_cpu_s_per_host_all_in": many["controller_cpu_s"] / count,
        "wall_s": many["wall_s"],
        "wall_s_1_host": one["wall_s"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", default="4,16,64", help="host counts, comma-separated (each > 1)")
    parser.add_argument(
        "--repeats",
        type=int,
        help=f"runs of each size per host count (median; default {SMALL_REPEATS} up to 16 hosts, {LARGE_REPEATS} above)",
    )
    parser.add_argument(
        "--barrier-timeout", type=float, default=60.0, help="seconds a worker waits at the start barrier for the others"
    )
    parser.add_argument(
        "--lock",
        default=os.environ.get("DTFBENCH_LOCK"),
        help="flock this file around each host count (the machine's heavy lock; default $DTFBENCH_LOCK)",
    )
    parser.add_argument(
        "--forks",
        type=int,
        help="Ansible's forks for the runs (default: ansible.cfg's); below the host count, "
        "the role starts every host's tasks first, then waits",
    )
    parser.add_argument("--dir", type=Path, default=Path("/tmp/dtfbench-controller-scaling"))
    parser.add_argument("--output", type=Path, default=RESULTS / "controller_scaling.json")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.hosts.split(",")]
    if any(c < 2 for c in counts):
        parser.error(f"--hosts {args.hosts}: every count must be at least 2 (the 1-host run is the baseline)")

    env = ansible_env()
    env["ANSIBLE_CALLBACKS_ENABLED"] = callbacks_with("ansible.posix.profile_tasks", "cpu_per_task")
    env["ANSIBLE_CALLBACK_PLUGINS"] = os.pathsep.join(
        str(path) for path in (ROOT / "plugins" / "callback", Path(__file__).resolve().parent / "callback_plugins")
    )
    env["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "all"
    forks = args.forks or int(re.search(r"^forks\s*=\s*(\d+)", (ROOT / "ansible.cfg").read_text(), re.M).group(1))
    env["ANSIBLE_FORKS"] = str(forks)
    results = []
    for count in counts:
        with held(args.lock):
            results.append(measure(count, args, env))
    first, last = results[0], results[-1]
    report = {
        "benchmark": "controller_scaling",
        "what": (
            "one run's launch (roles/tf_cluster: layout, check, start and wait, stop), 1 PS + 1 worker per "
            "test-bed host, barrier stand-in tasks (tests/testbed/barrier_task.py); controller CPU-seconds "
            "(ansible-playbook, its children, its SSH masters) and wall time"
        ),
        "forks": forks,
        "per_host_count": results,
        "controller_cpu_s_per_host": {str(r["hosts"]): r["controller_cpu_s_per_host"] for r in results},
        "wall_s": {str(r["hosts"]): r["wall_s"] for r in results},
        "ratio": last["controller_cpu_s_per_host"] / first["controller_cpu_s_per_host"],
        "ratio_hosts": [first["hosts"], last["hosts"]],
        "goal": 1.2,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    write_json(args.output, report)
    for r in results:
        print(
            f"{r['hosts']:>3} hosts: controller {r['controller_cpu_s_per_host']:.3f} CPU-s per host "
            f"((CPU({r['hosts']}) {r['median'][str(r['hosts'])]['controller_cpu_s']:.1f} s - CPU(1) "
            f"{r['median']['1']['controller_cpu_s']:.1f} s) / {r['hosts'] - 1}); launch wall {r['wall_s']:.1f} s "
            f"(1 host {r['wall_s_1_host']:.1f} s)"
        )
    print(f"per-host cost at {last['hosts']} / at {first['hosts']}: {report['ratio']:.2f} (goal <= 1.2); forks {forks}")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
