#!/usr/bin/env python3
"""How the launch scales with the number of hosts: start time on 16 test-bed hosts / on 1.

    .venv/bin/python benchmarks/launch_scaling.py [--hosts 16] [--repeats 3] [--lock FILE] [--cpu-split]

Brings up the multi-host test bed (tests/testbed/testbed.py: network namespaces with their
own sshd, reached over real SSH), then, for 1 host and for all hosts, starts the cluster of
the layout with the module the tf_cluster role starts runs with (library/tf_host_run.py,
state=started: one call per host starts all its tasks, PSs first, and returns once every
one listens), one PS and one worker per host, and takes the time from the first remote
task until every task listens.
Prints the ratio and writes results/benchmarks/launch_scaling.json. Goal: <= 1.5.

Right after each launch, the same tasks start through a bare fan-out on the same hosts
(benchmarks/bare_fanout.py: ``xargs -P <hosts>`` of ``ssh host bash -s``, each writing the
same supervisor, starting the host's tasks under it and waiting for their ports), cold or
warm as the launch was. Ours / bare on all hosts is issue #19's figure (goal <= 1.5): what
the launch adds to what any launch of supervised tasks over ssh pays, on the same machine.

The tasks are this very file in its `--job_name` mode: a process that takes the cluster
flags, listens on its endpoint and sleeps. It imports nothing heavy, so the measurement is
the launch machinery (Ansible's fan-out over SSH, the tf_task module on each host, the
process start, the readiness check) and not TensorFlow's ~10 s import, which a real
task adds on top, in parallel on every host.

--cpu-split: one more warm start of all hosts each way, under ``perf record -a``, and whose CPU
each took over its timed window (benchmarks/cpu_split.py): the controller, its workers, the ssh
clients, the hosts' sshd and shells, and the hosts' Python processes by generation (ours: the
host code, the supervisors it forks, their programs; the bare fan-out: the supervisors, their
programs).

Two numbers per host count, each the median of --repeats runs:
  cold  the SSH connections to the hosts are opened by the launch itself (no ControlPersist
        master is left from an earlier run): what a user's first launch costs;
  warm  the connections exist (a ping ran before): the launch alone.
Neither includes ansible-playbook's own start-up, reading the inventory or computing the
layout (the same for any number of hosts); `playbook_wall_s` is the whole command, for
reference. All hosts share this machine's cores (the controller, 16 sshds, the modules
and the tasks): on real hosts the per-host work runs on each host's own CPU.
"""

from __future__ import annotations

import sys

# ---- the task: `launch_scaling.py --job_name ps|worker --task_index N --ps_hosts ... --worker_hosts ...`
if "--job_name" in sys.argv:
    import signal
    import socket
    import time

    def _flag(name: str, default: str = "") -> str:
        args = sys.argv[1:]
        for i, arg in enumerate(args):
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
        return default

    job, index = _flag("--job_name"), int(_flag("--task_index", "0"))
    endpoint = _flag(f"--{job}_hosts").split(",")[index]
    host, port = endpoint.rsplit(":", 1)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = socket.create_server((host, int(port)), backlog=16)
    while True:  # accept readiness probes until stopped
        connection, _ = server.accept()
        connection.close()
        time.sleep(0)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from bench_env import RESULTS, ROOT, ansible_env, held, timed_run, write_json  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "testbed"))
import bare_fanout  # noqa: E402
import cpu_split  # noqa: E402
import testbed  # noqa: E402
from bare_launcher import node_specs  # noqa: E402

from dtfbench.plan.layout import compute_layout  # noqa: E402

PLAYBOOK = """
- name: Time the start of one PS and one worker per host
  hosts: tf_nodes
  gather_facts: false
  vars:
    tf_cluster_run_id: "{run_id}"
    tf_cluster_run_dir: "{{{{ dtfbench_run_root }}}}/{run_id}"
    tf_cluster_program: ["{{{{ dtfbench_python }}}}", "{script}"]
    tf_cluster_my_tasks: "{{{{ tf_cluster_layout.hosts[inventory_hostname] | default([]) }}}}"
  tasks:
    - name: Open the SSH connections first (warm runs only)
      ansible.builtin.ping:
      when: {warm}

    - name: Compute the layout
      tf_cluster_spec:
        hosts: "{{{{ groups['tf_nodes'] | tf_node_specs(hostvars) }}}}"
        gpus: {gpus}
        num_ps: {gpus}
      run_once: true
      delegate_to: localhost
      register: tf_cluster_layout

    - name: Note the start
      ansible.builtin.set_fact:
        launch_t0: "{{{{ now().timestamp() }}}}"
      run_once: true
      delegate_to: localhost

    - name: Start every task of the host and wait until they listen
      tf_host_run:
        state: started
        run_id: "{{{{ tf_cluster_run_id }}}}"
        run_dir: "{{{{ tf_cluster_run_dir }}}}"
        tasks: "{{{{ tf_cluster_my_tasks }}}}"
        cluster_spec: "{{{{ tf_cluster_layout.cluster_spec }}}}"
        program: "{{{{ tf_cluster_program }}}}"
        ready_timeout: 60
      when: tf_cluster_my_tasks | length > 0

    - name: Report the time
      ansible.builtin.debug:
        msg: "LAUNCH_SCALING {{{{ {{'seconds': now().timestamp() - launch_t0 | float, 't0': launch_t0 | float, 'tasks': tf_cluster_layout.tasks | length}} | to_json }}}}"
      run_once: true

    - name: Stop every task
      tf_host_run:
        state: stopped
        run_id: "{{{{ tf_cluster_run_id }}}}"
        run_dir: "{{{{ tf_cluster_run_dir }}}}"
        tasks: "{{{{ tf_cluster_my_tasks }}}}"
        grace_period: 2

    - name: Remove the run's files
      ansible.builtin.file:
        path: "{{{{ tf_cluster_run_dir }}}}"
        state: absent
"""


def kill_ssh_masters(state: dict) -> None:
    testbed.kill_all(lambda: testbed.ssh_clients_of(Path(state["dir"]), state["public_net"]))


def one_run(state: dict, workdir: Path, hosts: int, warm: bool, run_no: int | str, env: dict) -> dict:
    run_id = f"launch-scaling-{hosts}-{'warm' if warm else 'cold'}-{run_no}-{os.getpid()}"
    book = workdir / f"{run_id}.yml"
    book.write_text(PLAYBOOK.format(run_id=run_id, script=Path(__file__).resolve(), gpus=hosts, warm=str(warm).lower()))
    if not warm:
        kill_ssh_masters(state)
    limit = "tf_nodes" if hosts > 1 else "node01"
    nodes_before = sum(testbed.cpu_seconds(state).values())
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done, wall = timed_run(
        ["ansible-playbook", "-i", str(Path(state["dir"]) / "hosts.yml"), "--limit", limit, str(book)], env, timeout=600
    )
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    controller_cpu = (children_after.ru_utime + children_after.ru_stime) - (
        children_before.ru_utime + children_before.ru_stime
    )
    nodes_cpu = sum(testbed.cpu_seconds(state).values()) - nodes_before
    if done.returncode != 0:
        failed_log = workdir.parent / f"launch-scaling-failed-{hosts}.log"
        failed_log.write_text(done.stdout + done.stderr)
        raise SystemExit(
            f"launch with {hosts} hosts failed (whole output: {failed_log}):\n{done.stdout[-4000:]}\n"
            f"{done.stderr[-2000:]}"
        )
    # The callback folds a long message over lines at its spaces: one space for each fold again.
    measured = json.loads(re.search(r"LAUNCH_SCALING (\{.*?\})", " ".join(done.stdout.split())).group(1))
    return {
        "seconds": measured["seconds"],
        "t0": measured["t0"],
        "tasks": measured["tasks"],
        "playbook_wall_s": wall,
        # CPU of the whole playbook run: ansible-playbook and its children on the controller
        # (not the detached ControlPersist masters), and the nodes' processes (their cgroups).
        "controller_cpu_s": controller_cpu,
        "nodes_cpu_s": nodes_cpu,
        "load_avg_1min": os.getloadavg()[0],
    }


def bare_run(state: dict, workdir: Path, hosts: int, warm: bool, run_no: int | str, spans: list | None = None) -> dict:
    """The same start through the bare fan-out (benchmarks/bare_fanout.py); `spans`: see bare_fanout.launch."""
    run_id = f"bare-{hosts}-{'warm' if warm else 'cold'}-{run_no}-{os.getpid()}"
    if not warm:
        kill_ssh_masters(state)
    layout = compute_layout(node_specs(state, hosts), hosts, hosts)
    control_dir = workdir / "ssh"
    control_dir.mkdir(exist_ok=True)
    seconds = bare_fanout.launch(
        state, layout, [state["python"], str(Path(__file__).resolve())], run_id, control_dir, workdir, warm, spans
    )
    return {"seconds": seconds, "tasks": len(layout["tasks"]), "load_avg_1min": os.getloadavg()[0]}


def summarize(samples: dict[str, list[dict]], n: int, repeats: int) -> dict:
    """The medians, the ratios and the CPU split of the samples (one dict per run)."""

    def median(key: str, field: str) -> float:
        return statistics.median(s[field] for s in samples[key])

    report = {
        "benchmark": "launch_scaling",
        "what": (
            "time from the first remote task until every task listens, library/tf_host_run.py state=started, "
            "1 PS + 1 worker per host, tiny listener program (no TensorFlow), test-bed hosts over SSH"
        ),
        "hosts": [1, n],
        "repeats": repeats,
        "start_s": {"1": median("1-cold", "seconds"), str(n): median(f"{n}-cold", "seconds")},
        "start_warm_s": {"1": median("1-warm", "seconds"), str(n): median(f"{n}-warm", "seconds")},
        "playbook_wall_s": {"1": median("1-cold", "playbook_wall_s"), str(n): median(f"{n}-cold", "playbook_wall_s")},
        # CPU of the whole playbook (start, stop, clean up), cold runs: where the time goes
        # when every host's work shares this machine's cores.
        "playbook_cpu_s": {
            "controller": {"1": median("1-cold", "controller_cpu_s"), str(n): median(f"{n}-cold", "controller_cpu_s")},
            "nodes": {"1": median("1-cold", "nodes_cpu_s"), str(n): median(f"{n}-cold", "nodes_cpu_s")},
        },
        "load_avg_1min": {key: [round(s["load_avg_1min"], 1) for s in runs] for key, runs in samples.items()},
        "samples": samples,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "goal": 1.5,
    }
    # How busy the machine's cores were over the whole playbook: near 1, the launch waited
    # for CPU, not for anything the orchestration serialises; the extra hosts' work (per
    # host below) is what a real cluster runs on each host's own cores.
    cores = os.cpu_count() or 1
    cpu = report["playbook_cpu_s"]
    report["cpu_utilisation"] = {
        key: round((cpu["controller"][key] + cpu["nodes"][key]) / (report["playbook_wall_s"][key] * cores), 3)
        for key in ("1", str(n))
    }
    report["cpu_s_per_extra_host"] = {
        part: round((cpu[part][str(n)] - cpu[part]["1"]) / max(n - 1, 1), 3) for part in ("controller", "nodes")
    }
    report["bare_start_s"] = {"1": median("bare-1-cold", "seconds"), str(n): median(f"bare-{n}-cold", "seconds")}
    report["bare_start_warm_s"] = {"1": median("bare-1-warm", "seconds"), str(n): median(f"bare-{n}-warm", "seconds")}
    # Issue #19: ours against the bare fan-out on the same hosts, the same run (goal <= 1.5).
    report["ratio_to_bare"] = report["start_s"][str(n)] / report["bare_start_s"][str(n)]
    report["ratio_to_bare_warm"] = report["start_warm_s"][str(n)] / report["bare_start_warm_s"][str(n)]
    report["bare_ratio"] = report["bare_start_s"][str(n)] / report["bare_start_s"]["1"]
    report["ratio"] = report["start_s"][str(n)] / report["start_s"]["1"]
    report["ratio_warm"] = report["start_warm_s"][str(n)] / report["start_warm_s"]["1"]
    report["ratio_playbook_wall"] = report["playbook_wall_s"][str(n)] / report["playbook_wall_s"]["1"]
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--lock",
        default=os.environ.get("DTFBENCH_LOCK"),
        help="flock this file for the whole run (the machine's heavy lock; default $DTFBENCH_LOCK)",
    )
    parser.add_argument("--dir", type=Path, default=Path("/tmp/dtfbench-launch-scaling"))
    parser.add_argument("--output", type=Path, default=RESULTS / "launch_scaling.json")
    parser.add_argument(
        "--cpu-split",
        action="store_true",
        help="then one warm start each way under perf record -a: whose CPU each start took (needs perf)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cpu_split:
        cpu_split.perf()  # before the test bed comes up: no perf, one clear error
    with held(args.lock):
        return measure(args)


def split_run(state: dict, workdir: Path, hosts: int, env: dict) -> dict:
    """One warm start of all hosts each way under perf: CPU-seconds by role over each timed window."""
    ours_data, bare_data = workdir / "ours.perf", workdir / "bare.perf"
    with cpu_split.recording(ours_data):
        ours = one_run(state, workdir, hosts, True, "split", env)
    spans: list = []
    with cpu_split.recording(bare_data):
        bare = bare_run(state, workdir, hosts, True, "split", spans)
    sshds = {node["sshd_pid"] for node in state["nodes"] if node.get("sshd_pid")}
    split = {
        "ours": cpu_split.split(cpu_split.script(ours_data), ours["t0"], ours["t0"] + ours["seconds"], sshds),
        "bare": cpu_split.split(cpu_split.script(bare_data), *spans[0], sshds),
    }
    return {
        "hosts": hosts,
        "perf_rate_hz": cpu_split.RATE,
        "seconds": {"ours": ours["seconds"], "bare": bare["seconds"]},
        "cpu_s": {side: {role: round(value, 3) for role, value in sorted(cpu.items())} for side, cpu in split.items()},
    }


def print_split(split: dict) -> None:
    roles = sorted(set(split["cpu_s"]["ours"]) | set(split["cpu_s"]["bare"]))
    n = split["hosts"]
    print(
        f"whose CPU a warm start of {n} hosts took (perf, {split['perf_rate_hz']} Hz a core): "
        f"ours {split['seconds']['ours']:.2f} s, bare {split['seconds']['bare']:.2f} s; CPU-s (ms a host)"
    )
    for role in roles + ["all"]:
        cells = []
        for side in ("ours", "bare"):
            cpu = split["cpu_s"][side]
            value = sum(cpu.values()) if role == "all" else cpu.get(role, 0.0)
            cells.append(f"{value:6.2f} ({1000 * value / n:4.0f})")
        print(f"  {role:<34} ours {cells[0]}   bare {cells[1]}")
    print(
        "  Python generations: ours 1 the host code, 2 the supervisors (its forks), 3 their programs (PS, worker;"
        " the NIC sampler a fork of its supervisor);"
        " bare 1 the supervisors, 2 their programs (PS, worker)"
    )


def measure(args) -> int:
    env = ansible_env()

    testbed.down(args.dir)
    state = testbed.up(args.dir, hosts=args.hosts)
    workdir = Path(tempfile.mkdtemp(prefix="launch-scaling-"))
    samples: dict[str, list[dict]] = {}
    try:
        for run_no in range(args.repeats):
            # Alternate, so that a change in the machine's load hits both sides alike.
            for hosts in (1, args.hosts):
                for warm in (False, True):
                    key = f"{hosts}-{'warm' if warm else 'cold'}"
                    result = one_run(state, workdir, hosts, warm, run_no, env)
                    samples.setdefault(key, []).append(result)
                    print(
                        f"{key:>9}: start {result['seconds']:.2f} s ({result['tasks']} tasks), "
                        f"playbook {result['playbook_wall_s']:.2f} s, CPU controller "
                        f"{result['controller_cpu_s']:.1f} s + nodes {result['nodes_cpu_s']:.1f} s, "
                        f"load {result['load_avg_1min']:.1f}",
                        flush=True,
                    )
                    # The bare fan-out right after, on the same hosts, the same way (cold or warm).
                    bare = bare_run(state, workdir, hosts, warm, run_no)
                    samples.setdefault(f"bare-{key}", []).append(bare)
                    print(
                        f"{'bare-' + key:>14}: start {bare['seconds']:.2f} s ({bare['tasks']} tasks), "
                        f"load {bare['load_avg_1min']:.1f}",
                        flush=True,
                    )
        split = split_run(state, workdir, args.hosts, env) if args.cpu_split else None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        testbed.down(args.dir)

    n = args.hosts
    report = summarize(samples, n, args.repeats)
    if split is not None:
        report["cpu_split"] = split
    write_json(args.output, report)
    cpu = report["playbook_cpu_s"]
    print(
        f"start of all tasks, {n} hosts / 1 host: {report['ratio']:.2f} cold "
        f"({report['start_s'][str(n)]:.2f} s / {report['start_s']['1']:.2f} s), "
        f"{report['ratio_warm']:.2f} warm ({report['start_warm_s'][str(n)]:.2f} s / "
        f"{report['start_warm_s']['1']:.2f} s); whole playbook {report['ratio_playbook_wall']:.2f}; goal <= 1.5"
    )
    print(
        f"against the bare fan-out (xargs -P ssh, the same supervisor, waiting for the ports), {n} hosts: "
        f"{report['ratio_to_bare']:.2f} cold ({report['start_s'][str(n)]:.2f} s / {report['bare_start_s'][str(n)]:.2f} s), "
        f"{report['ratio_to_bare_warm']:.2f} warm ({report['start_warm_s'][str(n)]:.2f} s / "
        f"{report['bare_start_warm_s'][str(n)]:.2f} s); goal <= 1.5; the bare fan-out's own {n}/1: "
        f"{report['bare_ratio']:.2f} cold"
    )
    print(
        f"CPU of a whole playbook, 1 host: controller {cpu['controller']['1']:.1f} s + nodes {cpu['nodes']['1']:.1f} s; "
        f"{n} hosts: controller {cpu['controller'][str(n)]:.1f} s + nodes {cpu['nodes'][str(n)]:.1f} s "
        f"(all on this machine's {os.cpu_count()} cores)"
    )
    busy = report["cpu_utilisation"]
    extra = report["cpu_s_per_extra_host"]
    print(
        f"cores busy over the playbook: {busy['1']:.0%} with 1 host, {busy[str(n)]:.0%} with {n}; each extra host "
        f"costs controller {extra['controller']:.2f} + node {extra['nodes']:.2f} CPU-s"
    )
    if split is not None:
        print_split(split)
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
