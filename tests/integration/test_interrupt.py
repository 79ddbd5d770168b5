"""Ctrl-C, SIGTERM or SIGKILL of ansible-playbook in the middle of a sweep (#21, item 1).

run-benchmark.yml runs in the background in a session of its own, like a command in a
terminal; once a run's worker trains, one of:
- SIGINT to its process group (what Ctrl-C does),
- SIGTERM to ansible-playbook,
- SIGKILL to its process group (the controller dies without any cleanup),
- SIGHUP to its process group (a lost terminal or controller SSH session).
Then, on the local system and on a 2-host test bed: no TF process or supervisor of the sweep
is left within BOUND seconds; the interrupted run is recorded as failed, reason
`interrupted: ...`; every earlier run stays; the user sees one line naming the run and the
command that resumes the sweep, and that command resumes it.

The Ansible workers that wait on the hosts have sessions of their own, so that a signal
reaches only ansible-playbook; what stops the tasks is the callback plugin dtfbench_interrupt's
watchdog and tf_host_run's own watch of its controller (library/tf_host_run.py).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
import uuid

import pytest
from digits_dataset import make_digits
from playbook_harness import extra_vars, run_playbook, small_run, start_playbook, strict_inventory_env
from testbed_fixtures import module_testbed

from dtfbench.launch.task import SUPERVISOR_COMM
from dtfbench.linux import procfs
from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

BOUND = 15.0  # seconds from the signal to no task of the run on any host
FAST = small_run(steps=None, repetitions=None)
SIGNALS = {
    "ctrl_c": (signal.SIGINT, True),
    "sigterm": (signal.SIGTERM, False),
    "sigkill": (signal.SIGKILL, True),
    "sighup": (signal.SIGHUP, True),
}


def _as_in_a_terminal() -> None:
    """The child's SIGHUP as a terminal's session has it: the default (this test may run
    under nohup, whose ignored SIGHUP every child inherits, and the sighup case would then
    test nothing)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


STARTED: list[Sweep] = []


@pytest.fixture(autouse=True)
def no_sweep_outlives_its_test():
    """A failed test leaves nothing behind: the next tests use the same local ports."""
    yield
    while STARTED:
        sweep = STARTED.pop()
        if sweep.process.poll() is None:
            os.killpg(sweep.process.pid, signal.SIGKILL)
            sweep.process.wait()
        for pid in procfs.pids():
            if pid != os.getpid() and (
                sweep.sweep_id in " ".join(procfs.cmdline(pid))
                or sweep.sweep_id.encode() in b"\0".join(procfs.environ(pid))
            ):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


class Sweep:
    """run-benchmark.yml in the background, as a user's command in a terminal."""

    def __init__(self, env, tmp_path, run_roots, *args):
        self.sweep_id = f"intr-{uuid.uuid4().hex[:8]}"
        self.db = tmp_path / "results.sqlite"
        self.run_roots = run_roots
        self.log = open(tmp_path / "playbook.log", "w+")
        self.process = start_playbook(
            "run-benchmark.yml",
            *FAST,
            *args,
            *extra_vars(sweep_id=self.sweep_id, results_db=self.db),
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=_as_in_a_terminal,
        )
        STARTED.append(self)

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def wait_until_training(self, index: int, timeout: float = 300) -> None:
        """Until a worker of the sweep's run number `index` reports its first measured steps."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for root in self.run_roots:
                for log in root.glob(f"{self.sweep_id}-{index}-*/*-worker-*.log"):
                    if "\timages/sec: " in log.read_text(errors="replace"):
                        return
            assert self.process.poll() is None, self.output()[-4000:]
            time.sleep(0.3)
        raise AssertionError(f"run {index} never trained:\n{self.output()[-4000:]}")

    def interrupt(self, how: str, live_processes) -> float:
        """Send the signal; returns the seconds until no task of the sweep was left."""
        signum, to_group = SIGNALS[how]
        sent = time.monotonic()
        (os.killpg if to_group else os.kill)(self.process.pid, signum)
        while tasks_of(self.sweep_id, live_processes) and time.monotonic() - sent < 120:
            time.sleep(0.1)
        return time.monotonic() - sent

    def interrupted_line(self, timeout: float = 120) -> str:
        """The watchdog's line (after SIGTERM or SIGKILL it comes after ansible-playbook ended)."""
        self.process.wait(timeout=timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = [line for line in self.output().splitlines() if line.startswith("dtfbench: interrupted by ")]
            if lines:
                assert len(lines) == 1, lines
                return lines[0]
            time.sleep(0.5)
        raise AssertionError(f"no 'dtfbench: interrupted' line:\n{self.output()[-4000:]}")

    def runs(self) -> list[dict]:
        return store.runs(store.connect(self.db), "sweep_id = ?", (self.sweep_id,))


def tasks_of(sweep_id: str, live_processes) -> list[str]:
    return [p for p in live_processes(sweep_id) if "dtfbench train" in p or SUPERVISOR_COMM in p]


def assert_interrupted(sweep: Sweep, took: float, live_processes, earlier: int) -> str:
    assert tasks_of(sweep.sweep_id, live_processes) == [], sweep.output()[-4000:]
    print(f"{sweep.sweep_id}: no task left {took:.1f} s after the signal")
    assert took <= BOUND, f"tasks were left {took:.1f} s after the interrupt (bound {BOUND} s)"
    line = sweep.interrupted_line()
    runs = sweep.runs()
    assert [r["status"] for r in runs] == ["ok"] * earlier + ["failed"], runs
    last = runs[-1]
    assert last["reason"].startswith("interrupted: "), last["reason"]
    assert f"run {last['run_id']}" in line and "recorded as failed (interrupted)" in line, line
    assert "stopped its tasks on " in line, line
    assert line.endswith(f"-e sweep_id={sweep.sweep_id}") and "Resume with: ansible-playbook " in line, line
    return line


def local_sweep(tmp_path, *args) -> Sweep:
    root = tmp_path / "runs"
    return Sweep(
        None,
        tmp_path,
        [root],
        "-e",
        "gpus=1",
        "-e",
        "num_ps=1",
        "-e",
        f"dtfbench_run_root={root}",
        *args,
    )


def test_ctrl_c_stops_records_keeps_and_resumes(tmp_path, live_processes):
    # Two runs: the first finishes and is recorded, Ctrl-C comes while the second trains.
    # 400 steps of the trivial model take ~10 s here (~25 ms a step): the signal, sent at the
    # second run's first measured steps, comes long before that run could end.
    sweep = local_sweep(tmp_path, "-e", "repetitions=2", "-e", "steps=400")
    sweep.wait_until_training(2)
    took = sweep.interrupt("ctrl_c", live_processes)
    line = assert_interrupted(sweep, took, live_processes, earlier=1)
    assert sweep.process.returncode == 99  # ansible-playbook's code for "User interrupted execution"
    # The line comes before ansible-playbook returns: the user's prompt follows it.
    assert sweep.output().rstrip().splitlines()[-1] == line
    first = sweep.runs()[0]

    resume = shlex.split(line.split("Resume with: ", 1)[1])
    again = run_playbook(*resume[1:])
    assert again.returncode == 0, again.stdout[-3000:]
    assert "1 of 2 runs to do" in " ".join(again.stdout.split()), again.stdout[-3000:]
    runs = sweep.runs()
    assert [(r["repetition"], r["status"]) for r in runs] == [(1, "ok"), (2, "failed"), (2, "ok")]
    assert runs[0]["id"] == first["id"] and runs[0]["images_per_sec"] == first["images_per_sec"]


def test_ctrl_c_during_the_final_summary_offers_no_resume(tmp_path, live_processes):
    """Every run is recorded when the summary starts: Ctrl-C there stops nothing, records nothing
    and offers no resume of a finished sweep, without a traceback (issue 30)."""
    sweep = local_sweep(tmp_path, "-e", "repetitions=1", "-e", "steps=2")
    deadline = time.monotonic() + 300
    while "TASK [benchmark : Summarise the sweep" not in sweep.output():
        assert sweep.process.poll() is None and time.monotonic() < deadline, sweep.output()[-4000:]
        time.sleep(0.02)
    os.killpg(sweep.process.pid, signal.SIGINT)
    line = sweep.interrupted_line()
    output = sweep.output()
    assert "Traceback" not in output and "AssertionError" not in output, output[-4000:]
    assert "Resume with" not in output, output[-4000:]
    assert sweep.process.returncode == -signal.SIGINT  # as a mid-summary Ctrl-C of any program: 130 in a shell
    assert [r["status"] for r in sweep.runs()] == ["ok"]
    assert tasks_of(sweep.sweep_id, live_processes) == []
    assert line == (
        f"dtfbench: interrupted by Ctrl-C (SIGINT) to ansible-playbook after every run of sweep {sweep.sweep_id} "
        f"was recorded in {sweep.db}: nothing to stop or resume"
    ), output[-4000:]


@pytest.mark.parametrize("how", ["sigterm", "sigkill", "sighup"])
def test_sigterm_sigkill_or_sighup_of_the_controller_stops_and_records(how, tmp_path, live_processes):
    sweep = local_sweep(tmp_path, "-e", "repetitions=1", "-e", "steps=1000000")
    sweep.wait_until_training(1)
    took = sweep.interrupt(how, live_processes)
    assert_interrupted(sweep, took, live_processes, earlier=0)
    assert sweep.process.returncode == -SIGNALS[how][0]


@pytest.fixture(scope="module")
def bed2(tmp_path_factory):
    yield from module_testbed(tmp_path_factory, hosts=2)


@pytest.mark.parametrize("how", ["ctrl_c", "sigterm", "sigkill"])
def test_interrupt_on_the_testbed_stops_every_host(how, bed2, tmp_path, live_processes):
    # The worker on node01, the PS alone on node02: node02's call returned once the PS
    # listened, so no call waits there while the worker trains.
    roots = [bed2.local_ssd(n["name"]) / "dtfbench" / "runs" for n in bed2.nodes]
    sweep = Sweep(
        strict_inventory_env(),
        tmp_path,
        roots,
        "-i",
        bed2.inventory,
        "-e",
        "system=testbed",
        "-e",
        "gpus=1",
        "-e",
        "num_ps=1",
        "-e",
        "benchmark_ps_on_worker_nodes=false",
        "-e",
        "repetitions=1",
        "-e",
        "steps=1000000",
        "-e",
        "step_timeout=60",
        # No link probe (test_network_testbed's): the signal comes once the worker trains.
        "-e",
        "network_probe=false",
    )
    sweep.wait_until_training(1)
    assert [r.name for r in roots[1].glob(f"{sweep.sweep_id}-1-*/*-ps-0.log")], "the PS is not on node02"
    took = sweep.interrupt(how, live_processes)
    line = assert_interrupted(sweep, took, live_processes, earlier=0)
    assert "stopped its tasks on node01, node02" in line, line


def test_interrupt_on_the_testbed_stops_the_background_reader(bed2, tmp_path, live_processes):
    """background_io's reader (node02, beside a run on node01) ends with the run's tasks: without the
    watchdog's stop it would read on until the run's timeout (docs/storage.md)."""
    digits = make_digits(tmp_path / "digits")
    roots = [bed2.local_ssd(n["name"]) / "dtfbench" / "runs" for n in bed2.nodes]
    sweep = Sweep(
        strict_inventory_env(),
        tmp_path,
        roots,
        "-i", bed2.inventory,
        *extra_vars(system="testbed", gpus=1, num_ps=1, repetitions=1, steps=1000000, step_timeout=60,
                    network_probe="false", data="real", data_dir=digits, image_size=32, background_io="node02"),
    )  # fmt: skip
    sweep.wait_until_training(1)
    readers = [p for p in live_processes(sweep.sweep_id) if "background_read" in p]
    assert len(readers) == 1, readers
    took = sweep.interrupt("ctrl_c", live_processes)
    line = assert_interrupted(sweep, took, live_processes, earlier=0)
    assert "stopped its tasks on node01 and its background reader on node02" in line, line
    assert [p for p in live_processes(sweep.sweep_id) if "background_read" in p] == []
