"""The bare launcher: the study's method over plain ssh, with nothing of ours around it.

The P1 baseline (benchmarks/orchestration_overhead.py). For each run of a sweep it does what
the study's launch scripts did, minus their sleeps:
  - start every PS and worker of the run's layout at once, each over its own plain ``ssh``
    (PSs first), with the same program, flags and environment as run-benchmark.yml gives
    them (dtfbench layout computes the same layout as the tf_cluster_spec task);
  - wait for the workers' ssh sessions to end, then for the PSs (ours exit by themselves
    once every worker is done; one that has not after ``ps_exit_timeout`` is killed);
  - read each worker's figure from its output (the ``DTFBENCH_RESULT {...}`` line).
No module, no supervisor, no readiness checks, no results store: what is left is what any
launcher pays (ssh, the processes, TensorFlow's own start and the training).

The connections are multiplexed as Ansible's are (ansible.cfg: ControlMaster=auto,
ControlPersist=60s), so the transport is the same on both sides.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
import uuid
from pathlib import Path

from dtfbench.launch.host_run import task_argv  # the command line tf_host_run gives a task
from dtfbench.plan.layout import compute_layout
from dtfbench.workload.benchmark_output import RESULT_PREFIX


def ssh_base(state: dict, control_dir: Path) -> list[str]:
    """ssh with the test bed's key and known hosts, multiplexed like ansible.cfg's ssh_args."""
    directory = Path(state["dir"])
    return [
        "ssh",
        "-i",
        str(directory / "id_ed25519"),
        "-o",
        f"UserKnownHostsFile={directory / 'known_hosts'}",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "PasswordAuthentication=no",
        "-o",
        "BatchMode=yes",
        "-o",
        "ControlMaster=auto",
        "-o",
        "ControlPersist=60s",
        "-o",
        f"ControlPath={control_dir}/%C",
        "-l",
        "root",
    ]


def node_specs(state: dict, count: int) -> list[dict]:
    """The first `count` test-bed hosts as the layout takes them (tf_node_specs' view)."""
    return [
        {"name": n["name"], "address": n["private_ip"], "devices": state["devices"], "device_type": "cpu"}
        for n in state["nodes"][:count]
    ]


def remote_command(argv: list[str], cuda_visible_devices: str, pid_file: str) -> str:
    """The shell's pid into `pid_file` (for a stop), then exec the program in its environment."""
    return (
        f"mkdir -p {shlex.quote(str(Path(pid_file).parent))} && echo $$ > {shlex.quote(pid_file)} && "
        f"exec env CUDA_VISIBLE_DEVICES={shlex.quote(cuda_visible_devices)} " + " ".join(shlex.quote(a) for a in argv)
    )


def one_run(
    state: dict,
    hosts: int,
    num_ps: int,
    program: list[str],
    program_args: list[str],
    control_dir: Path,
    ps_exit_timeout: float = 60.0,
    timeout: float = 1800.0,
) -> dict:
    """One run of the study's method; returns its wall time and the workers' results."""
    started = time.monotonic()
    run_dir = f"/mnt/local_ssd/dtfbench-bare/{uuid.uuid4().hex[:8]}"  # each node's own disk
    layout = compute_layout(node_specs(state, hosts), hosts, num_ps)
    public = {n["name"]: n["public_ip"] for n in state["nodes"]}
    base = ssh_base(state, control_dir)
    sessions = []
    for task in layout["tasks"]:  # PSs first, then workers (the layout's order)
        command = remote_command(
            task_argv(program, task, layout["cluster_spec"], program_args),
            task["cuda_visible_devices"],
            f"{run_dir}/{task['job']}-{task['task_index']}.pid",
        )
        process = subprocess.Popen(
            base + [public[task["host"]], command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        sessions.append((task, process))
    results, failures = [], []
    deadline = time.monotonic() + timeout
    for task, process in sessions:
        if task["job"] != "worker":
            continue
        out, err = process.communicate(timeout=max(deadline - time.monotonic(), 1))
        lines = [line for line in out.splitlines() if line.startswith(RESULT_PREFIX)]
        if process.returncode != 0 or not lines:
            failures.append(f"worker {task['task_index']} on {task['host']}: rc {process.returncode}: {err[-500:]}")
            continue
        results.append(json.loads(lines[-1][len(RESULT_PREFIX) :]))
    for task, process in sessions:
        if task["job"] != "ps":
            continue
        try:
            process.communicate(timeout=ps_exit_timeout)
        except subprocess.TimeoutExpired:  # stop it as the study's scripts did: kill it on its host
            pid_file = shlex.quote(f"{run_dir}/ps-{task['task_index']}.pid")
            subprocess.run(
                base + [public[task["host"]], f"kill -TERM $(cat {pid_file})"], capture_output=True, timeout=30
            )
            process.kill()
            process.communicate()
            failures.append(f"ps {task['task_index']} on {task['host']} did not exit within {ps_exit_timeout} s")
    wall = time.monotonic() - started
    rates = [float(r["images_per_sec"]) for r in results if r.get("status") == "ok"]
    return {
        "wall_s": wall,
        "ok": not failures and len(rates) == layout["num_workers"],
        "failures": failures,
        "images_per_sec": sum(rates) if rates else None,
        "training_s": max((r.get("wall_time") or {}).get("run") or 0 for r in results) if results else None,
    }


def sweep(
    state: dict,
    hosts: int,
    num_ps: int,
    repetitions: int,
    program: list[str],
    program_args: list[str],
    control_dir: Path,
) -> dict:
    """`repetitions` runs back to back, as a sweep of one configuration; fails on a failed run."""
    started = time.monotonic()
    runs = []
    for _ in range(repetitions):
        run = one_run(state, hosts, num_ps, program, program_args, control_dir)
        if not run["ok"]:
            raise SystemExit("a bare run failed: " + "; ".join(run["failures"]))
        runs.append(run)
    return {"wall_s": time.monotonic() - started, "runs": runs}
