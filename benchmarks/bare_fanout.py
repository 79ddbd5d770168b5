"""The bare fan-out: the P2 baseline (benchmarks/launch_scaling.py).

Starts the same per-host tasks as the launch (library/tf_host_run.py state=started) with
nothing but a parallel ``ssh`` fan-out: ``xargs -P <hosts>`` runs one ``ssh host bash -s``
per host, whose script writes the task supervisor that the module forks
(src/dtfbench/launch/supervisor.py) to the run directory, starts each of the host's tasks
under it as a program (PSs first, each in a session of its own, as the module does) and waits until
every task's port accepts a connection (bash's /dev/tcp, polled every 0.05 s; the module
polls every 0.1 s). The time is from the fan-out's start until every ssh has returned.

No module, no Python on the host besides the tasks, no checks of leftovers, ports or
run directory ownership, no failure handling: what any launch that starts supervised
tasks over ssh pays. The connections are multiplexed as Ansible's are (ControlPersist).
"""

from __future__ import annotations

import base64
import shlex
import subprocess
import time
from pathlib import Path

from bare_launcher import ssh_base

from dtfbench.launch import supervisor as task_supervisor
from dtfbench.launch.host_run import task_argv

SUPERVISOR_NAME = "tf_task_supervisor.py"
SUPERVISOR_SOURCE = Path(task_supervisor.__file__).read_text()


def host_script(
    tasks: list[dict], cluster_spec: dict, program: list[str], run_dir: str, run_id: str, python: str
) -> str:
    """The bash script one host runs: write the supervisor, start its tasks, wait for their ports."""
    supervisor = f"{run_dir}/{SUPERVISOR_NAME}"
    lines = [
        "set -e",
        f"mkdir -p -m 700 {shlex.quote(run_dir)}",
        f"echo {base64.b64encode(SUPERVISOR_SOURCE.encode()).decode()} | base64 -d > {shlex.quote(supervisor)}",
    ]
    ordered = sorted(tasks, key=lambda t: (t["job"] != "ps", t["task_index"]))
    for task in ordered:
        base = f"{run_dir}/{run_id}-{task['job']}-{task['task_index']}"
        argv = [python, supervisor, task_supervisor.PROGRAM_TAG, base, base + ".exit", "--"] + task_argv(
            program, task, cluster_spec, []
        )
        lines.append(
            f"CUDA_VISIBLE_DEVICES={shlex.quote(task['cuda_visible_devices'])} setsid "
            + " ".join(shlex.quote(a) for a in argv)
            + f" > {shlex.quote(base + '.log')} 2>&1 < /dev/null & echo $! > {shlex.quote(base + '.pid')}"
        )
    for task in ordered:
        lines.append(f"until (exec 3<>/dev/tcp/{task['address']}/{task['port']}) 2>/dev/null; do sleep 0.05; done")
    return "\n".join(lines) + "\n"


def stop_script(tasks: list[dict], run_dir: str, run_id: str) -> str:
    """SIGTERM each task's process group (its supervisor leads it), then remove the run directory."""
    lines = []
    for task in tasks:
        pid_file = shlex.quote(f"{run_dir}/{run_id}-{task['job']}-{task['task_index']}.pid")
        lines.append(f"kill -TERM -- -$(cat {pid_file}) 2>/dev/null || true")
    lines.append("sleep 0.5")  # not timed: the stop only clears the way for the next run
    lines.append(f"rm -rf {shlex.quote(run_dir)}")
    return "\n".join(lines) + "\n"


def fan_out(
    state: dict, scripts: dict[str, str], control_dir: Path, workdir: Path, parallel: int, spans: list | None = None
) -> float:
    """Run each host's script over ssh, `parallel` at once through xargs -P; the wall time.
    `spans`: where to note the fan-out's (start, end) as time.time() gives them."""
    public = {n["name"]: n["public_ip"] for n in state["nodes"]}
    listing = []
    for host, script in scripts.items():
        path = workdir / f"{host}.sh"
        path.write_text(script)
        listing.append(f"{public[host]} {path}\n")
    ssh = " ".join(shlex.quote(a) for a in ssh_base(state, control_dir))
    started, started_at = time.monotonic(), time.time()
    done = subprocess.run(
        ["xargs", "-P", str(parallel), "-L", "1", "sh", "-c", f'exec {ssh} "$0" bash -s < "$1"'],
        input="".join(listing),
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.monotonic() - started
    if spans is not None:
        spans.append((started_at, started_at + wall))
    if done.returncode != 0:
        raise SystemExit(f"the bare fan-out failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return wall


def launch(
    state: dict,
    layout: dict,
    program: list[str],
    run_id: str,
    control_dir: Path,
    workdir: Path,
    warm: bool,
    spans: list | None = None,
) -> float:
    """Start every task of the layout with the bare fan-out, wait for every port, stop them; the start's time.

    warm: the ssh connections are opened first (untimed), as the warm runs of ours do with a ping.
    spans: where to note the start's (start, end) on time.time()'s clock.
    """
    if warm:
        fan_out(state, {host: "true\n" for host in layout["hosts"]}, control_dir, workdir, len(layout["hosts"]))
    run_dir = f"{state['ssd_mount']}/dtfbench-bare/{run_id}"
    python = state["python"]
    starts = {
        host: host_script(tasks, layout["cluster_spec"], program, run_dir, run_id, python)
        for host, tasks in layout["hosts"].items()
    }
    seconds = fan_out(state, starts, control_dir, workdir, len(starts), spans)
    fan_out(
        state,
        {host: stop_script(tasks, run_dir, run_id) for host, tasks in layout["hosts"].items()},
        control_dir,
        workdir,
        len(starts),
    )
    return seconds
