"""What the benchmarks share: the project root, ansible-playbook's environment and a timed run of it,
free ports, the lock, the order of the sides in each round (a Williams design), writing the JSON."""

from __future__ import annotations

import configparser
import fcntl
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "benchmarks"


def ansible_env() -> dict[str, str]:
    """This interpreter's bin (the project's .venv) first on PATH, the project's ansible.cfg."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    return env


def callbacks_with(*extra: str) -> str:
    """ANSIBLE_CALLBACKS_ENABLED for a benchmark's playbook: the project's (ansible.cfg), then `extra`."""
    config = configparser.ConfigParser()
    config.read(ROOT / "ansible.cfg")
    enabled = [c.strip() for c in config["defaults"]["callbacks_enabled"].split(",")]
    return ",".join(enabled + list(extra))


def spread(values) -> dict[str, float]:
    """The median of `values` and their range: {"median", "min", "max"}."""
    values = list(values)
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def timed_run(argv: list[str], env: dict, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    """Run `argv` (an ansible-playbook command) in the project root, its output captured as text:
    (the finished process, its wall seconds). A failed run is returned, not raised: each benchmark
    says what failed its own way."""
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


def playbook_sweep(inventory: Path, settings: dict, what: str, *args: str, timeout: float = 7200) -> float:
    """ansible-playbook run-benchmark.yml on `inventory` (then `args`: --limit ...) with `settings` as
    -e's, as a user runs it; its wall seconds. Exits naming `what`, with the output's end, if it fails."""
    argv = ["ansible-playbook", "run-benchmark.yml", "-i", str(inventory), *args]
    argv += [arg for key, value in settings.items() for arg in ("-e", f"{key}={value}")]
    done, wall = timed_run(argv, ansible_env(), timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(
            f"{what}: ansible-playbook exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
        )
    return wall


def testbed_sweep_command(inventory: Path, *, hosts: int, sweep_id: str, results_db: Path, **settings) -> list[str]:
    """ansible-playbook run-benchmark.yml on the test bed as a user runs it: one CPU worker a host
    (gpus = hosts), one PS, then `settings` (model, sizes, repetitions, steps, network_probe), each
    as -e name=value (P1's sweep, benchmarks/orchestration_overhead.py; its timeline,
    benchmarks/task_timeline.py)."""
    extra = dict(system="testbed", gpus=hosts, num_ps=1, **settings, sweep_id=sweep_id, results_db=results_db)
    return ["ansible-playbook", "run-benchmark.yml", "-i", str(inventory)] + [
        arg for name, value in extra.items() for arg in ("-e", f"{name}={value}")
    ]


def free_ports(count: int) -> list[int]:
    """`count` loopback ports that were free a moment ago (bound together, so all distinct)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@contextmanager
def held(lock_path: str | None):
    """flock `lock_path` (the machine's heavy lock) for the block; nothing when it is empty."""
    if not lock_path:
        yield
        return
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def williams_rows(n: int) -> list[list[int]]:
    """One whole cycle of a Williams design for n sides (engines, launchers), a row (an order of
    0..n-1) a round: n rows, twice that for an odd n."""
    first = [0] + [(k + 1) // 2 if k % 2 else n - k // 2 for k in range(1, n)]  # 0, 1, n-1, 2, n-2, ...
    rows = [[(j + r) % n for j in first] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return rows


def cycle_length(count: int) -> int:
    """The rounds of one whole cycle of orders() for `count` sides."""
    return len(williams_rows(count))


def orders(names: list[str], rounds: int):
    """(round, its order of `names`) for each round: the rows of a Williams design, a Latin
    square balanced for the one that ran just before. Over len(names) rounds each name runs
    once in every position; over a whole cycle (cycle_length) each runs right after every
    other one equally often. For two sides, they take turns going first. A rotation alone (round
    r starting with the r-th) put each engine of P3's after the same one in every round:
    measured, the engine after s5cmd took up to 0.3 CPU-s more than the same code after itself
    (benchmarks/staging.py)."""
    rows = williams_rows(len(names))
    for round_no in range(rounds):
        yield round_no, [names[i] for i in rows[round_no % len(rows)]]


def write_json(path: Path | str, report: dict, *, sort_keys: bool = False, say: str = "") -> Path:
    """`report` as indented JSON at `path` (its folder made if need be), replaced in one step so that
    a reader never finds half a file (a benchmark that rewrites it as it goes); returns the path.
    With `say` ("written to"), prints it and the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, sort_keys=sort_keys) + "\n")
    os.replace(tmp, path)
    if say:
        print(f"{say} {path}")
    return path
