"""Whose CPU a start costs: every process on the machine sampled by ``perf record -a``, each sample
put to its process's place in the process tree (``launch_scaling.py --cpu-split``).

On one machine the test bed's hosts, their sshd, the controller and the tasks share the cores,
so a start's wall time follows the CPU it costs. perf samples every core at a fixed rate
(cpu-clock); its FORK and COMM events name each process's parent at the fork and its command, so
a process that has ended, or whose parent has (a task's supervisor outlives the call that
started it), is still placed. On a host (below its sshd) the Python processes are counted by
generation: ours runs the host code (1), which forks the supervisors (2, named SUPERVISOR_COMM),
which start the programs (3: the PS and the worker, and the NIC sampler, a fork of its
supervisor); the bare fan-out's bash starts the supervisors (1), which start the programs (2).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from dtfbench.launch.task import SUPERVISOR_COMM

RATE = 2000  # samples a second and core
CONTROLLER = "ansible-playboo"  # ansible-playbook's command name (the kernel keeps 15 characters)

_FORK = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
_COMM = re.compile(r"PERF_RECORD_COMM(?: exec)?: (.*):(\d+)/(\d+)$")
_SAMPLE = re.compile(r"^\s*(.*?)\s+(\d+)/(\d+)\s+(\d+\.\d+):\s+(?:\d+\s+)?cpu-clock")


def perf() -> str:
    found = shutil.which("perf")
    if found is None:
        raise SystemExit("--cpu-split needs perf (Debian: apt-get install linux-perf); run without it otherwise")
    return found


@contextmanager
def recording(path: Path):
    """``perf record -a`` over the block, on the realtime clock (so that samples compare with
    time.time()). It starts a second before the block: perf first notes every running process."""
    process = subprocess.Popen(
        # cpu-clock: a sample every 1/RATE s of a core's time (perf's default, cycles, counts
        # cycles where the machine has hardware counters: no fixed time a sample).
        [perf(), "record", "-e", "cpu-clock", "-a", "-F", str(RATE), "--clockid", "realtime", "-o", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (path.exists() and path.stat().st_size) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    if process.poll() is not None:
        raise SystemExit(f"perf record ended at once: {process.stderr.read().strip()[-1000:]}")
    try:
        yield
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(60)


def script(path: Path) -> list[str]:
    """The recording's samples and task events, as ``perf script`` prints them."""
    done = subprocess.run(
        [perf(), "script", "-i", str(path), "--show-task-events", "-F", "comm,pid,tid,time,event"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def _python(name: str) -> bool:
    """A Python process: an interpreter, or a fork of one that named itself a supervisor."""
    return name.startswith("python") or name == SUPERVISOR_COMM


def role(chain: list[str], on_host: bool) -> str:
    """What a process is, from its command names (the machine's first process's to its own) and
    whether it descends from a test-bed host's sshd."""
    own = chain[-1]
    if on_host:
        if own == "sshd":
            return "hosts: sshd"
        below = chain[len(chain) - chain[::-1].index("sshd") :]
        generation = sum(1 for name in below if _python(name))
        if _python(own) and generation:
            return "hosts: Python, generation %d" % generation
        return "hosts: shell and tools"
    if own == "ssh":
        return "ssh clients"
    if CONTROLLER in chain:
        first = chain.index(CONTROLLER)
        if own == CONTROLLER:
            return "controller: ansible-playbook" if first == len(chain) - 1 else "controller: its workers"
        return "controller: other"
    if "xargs" in chain:
        return "controller: xargs"
    return "other"


def split(lines: list[str], start: float, end: float, host_sshds: set[int], rate: int = RATE) -> Counter:
    """CPU-seconds by ``role`` of the samples taken from ``start`` to ``end`` (time.time());
    `host_sshds`: the pids of the test bed's sshd daemons (a benchmark run from an ssh login has
    an sshd of its own above the controller)."""
    parent: dict[int, int] = {}
    name: dict[int, str] = {}
    cpu: Counter = Counter()
    for line in lines:
        fork = _FORK.search(line)
        if fork:
            child, child_tid, mother, _ = map(int, fork.groups())
            if child == child_tid and child not in parent:
                parent[child] = mother
                name[child] = name.get(mother, "?")
            continue
        comm = _COMM.search(line)
        if comm:
            if comm.group(2) == comm.group(3):
                name[int(comm.group(2))] = comm.group(1)
            continue
        sample = _SAMPLE.match(line)
        if not sample or not start <= float(sample.group(4)) <= end:
            continue
        pid = int(sample.group(2))
        if pid == 0:
            continue  # idle
        chain, seen = [], []
        while pid not in seen:
            seen.append(pid)
            chain.append(sample.group(1) if not chain else name.get(pid, "?"))  # its name when sampled
            if pid not in parent:
                break
            pid = parent[pid]
        cpu[role(chain[::-1], any(pid in host_sshds for pid in seen))] += 1.0 / rate
    if not cpu:
        raise SystemExit("perf recorded no cpu-clock sample between %.3f and %.3f" % (start, end))
    return cpu
