"""Faults during a sweep on the 2-host SSH test bed, each injected for real (issue #8).

Each test runs run-benchmark.yml in the background on a 2-host test bed (one CPU worker per
host, the PS on node01), injects a fault into a run, and then proves: the run is recorded as
failed with its reason and the tail of the task's log, the sweep went on (the next run is
recorded too), and no TF process of the sweep is left on any host. The faults: a worker killed
during its measured steps and a PS killed during them (one sweep, a fault in each of two runs),
a worker frozen during them, a run past its timeout, a task that never starts listening, and a
host that goes away (its sshd and SSH sessions killed and its public link down) in the middle
of a run: its tasks, out of every controller's reach, must end by their supervisors' own
deadline, the runs that need it fail without starting, and those that do not need it run. Also:
a host that cannot be reached before the sweep starts (one error naming it, nothing started),
and a second sweep on the same hosts at once (a warning naming the first).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
import testbed as tb
from playbook_harness import extra_vars, own_ports, run_playbook, small_run, start_playbook, strict_inventory_env
from testbed_fixtures import module_testbed

from dtfbench.launch import sweep_marker
from dtfbench.launch.task import SUPERVISOR_COMM
from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

# Short bounds everywhere: a dead peer must be noticed in seconds, not the defaults' minutes.
FAST = [
    *small_run(steps=None, repetitions=None),
    *extra_vars(step_timeout=15, startup_timeout=30, ready_timeout=60),
    # No fault here is about the link: the probe's own tests are test_network_testbed's.
    *extra_vars(network_probe="false"),
]


@pytest.fixture(scope="module")
def bed2(tmp_path_factory):
    yield from module_testbed(tmp_path_factory, hosts=2)


class Sweep:
    """run-benchmark.yml running in the background on the test bed."""

    def __init__(self, bed, tmp_path, *args):
        self.bed = bed
        self.sweep_id = f"fault-{uuid.uuid4().hex[:8]}"
        self.db = tmp_path / "results.sqlite"
        self.log = open(tmp_path / "playbook.log", "w+")
        self.process = start_playbook(
            "run-benchmark.yml",
            "-i",
            bed.inventory,
            *extra_vars(system="testbed", sweep_id=self.sweep_id, results_db=self.db),
            *FAST,
            *args,
            env=strict_inventory_env(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def run_dir(self, node: str, index: int) -> Path | None:
        """The host's run directory of the sweep's run number `index` (ids end in a digest)."""
        found = sorted((self.bed.local_ssd(node) / "dtfbench" / "runs").glob(f"{self.sweep_id}-{index}-*"))
        return found[0] if found else None

    def wait_for_log(self, node: str, index: int, task: str, text: str, timeout: float = 240) -> Path:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run_dir = self.run_dir(node, index)
            log = run_dir / f"{run_dir.name}-{task}.log" if run_dir else None
            if log and log.is_file() and text in log.read_text(errors="replace"):
                return log
            assert self.process.poll() is None, self.output()[-4000:]
            time.sleep(0.5)
        raise AssertionError(f"{task} on {node} never logged {text!r}:\n{self.output()[-4000:]}")

    def wait(self, timeout: float = 600) -> subprocess.CompletedProcess:
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise AssertionError(f"the sweep did not end in {timeout} s:\n{self.output()[-4000:]}") from None
        return self.process.returncode

    def runs(self) -> list[dict]:
        return sorted(store.runs(store.connect(self.db)), key=lambda r: r["started_at"])


def task_pids(sweep_id: str, run: int, job: str, index: int) -> list[int]:
    """Pids of the TF program (not its supervisor) of one task of the sweep's run number `run`.

    tf_task marks every process of a task with DTFBENCH_TF_TASK=<run_dir>/<run_id>-<job>-<index>,
    and a run's id is <sweep_id>-<run>-<digest>.
    """
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        marker = next((e.decode(errors="replace") for e in environ if e.startswith(b"DTFBENCH_TF_TASK=")), "")
        if (
            f"/{sweep_id}-{run}-" in marker
            and marker.endswith(f"-{job}-{index}")
            and b"dtfbench" in argv
            and b"train" in argv
            and b"tf_task-supervisor" not in argv
        ):
            pids.append(int(entry.name))
    return pids


def tf_processes(sweep_id: str, live_processes) -> list[str]:
    return [p for p in live_processes(sweep_id) if "dtfbench train" in p or SUPERVISOR_COMM in p]


def measuring_sweep(bed, tmp_path, repetitions: int = 2, **more) -> Sweep:
    """A sweep of `repetitions` runs of 400 steps (1 PS, a worker per host), once worker 1 (node02)
    reports its first measured steps in run 1. ``more``: more extra variables."""
    sweep = Sweep(bed, tmp_path, *extra_vars(gpus=2, num_ps=1, repetitions=repetitions, steps=400, **more))
    sweep.wait_for_log("node02", 1, "worker-1", "\timages/sec: ")
    return sweep


def kill(sweep: Sweep, run: int, job: str, index: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Send `sig` to task `job index` of the sweep's run number `run`: its one TF program."""
    victims = task_pids(sweep.sweep_id, run, job, index)
    assert len(victims) == 1, victims
    os.kill(victims[0], sig)


def assert_first_failed_then_sweep_went_on(sweep: Sweep, *reasons: str):
    rc = sweep.wait()
    runs = sweep.runs()
    out = sweep.output()
    assert len(runs) == 2, out[-4000:]
    first, second = runs
    assert_failed_with_log_tail(first, *reasons)
    return rc, first, second, out


def assert_failed_with_log_tail(run: dict, *reasons: str) -> None:
    assert run["status"] == "failed", run
    assert any(r in run["reason"] for r in reasons), run["reason"]
    assert "last " in run["reason"] and " lines of " in run["reason"], run["reason"]  # the log tail


def test_a_killed_worker_then_a_killed_ps_fail_their_runs_and_the_sweep_goes_on(bed2, tmp_path, live_processes):
    # One 3-run sweep: worker 1 (node02) is SIGKILLed during run 1's measured steps, the PS
    # (node01) during run 2's; run 3 runs.
    sweep = measuring_sweep(bed2, tmp_path, repetitions=3)
    kill(sweep, 1, "worker", 1)
    sweep.wait_for_log("node02", 2, "worker-1", "\timages/sec: ")
    kill(sweep, 2, "ps", 0)

    rc = sweep.wait()
    runs, out = sweep.runs(), sweep.output()
    assert len(runs) == 3, out[-4000:]
    worker_killed, ps_killed, last = runs
    for run in (worker_killed, ps_killed):
        assert_failed_with_log_tail(run, "killed by SIGKILL")
    # The cause first (the killed worker), then its consequences on the other host.
    cause = worker_killed["reason"].splitlines()[0]
    assert cause.startswith("node02: task ") and "-worker-1 was killed by SIGKILL" in cause, worker_killed["reason"]
    # The cause first: the PS itself (its host's tf_host_run watches it while the workers run),
    # then the workers that lost it.
    cause = ps_killed["reason"].splitlines()[0]
    assert cause.startswith("node01: task ") and "-ps-0 was killed by SIGKILL" in cause, ps_killed["reason"]
    assert "then: " in ps_killed["reason"], ps_killed["reason"]
    assert last["status"] == "ok", last["reason"]
    # A failed run is recorded and the sweep goes on; at its end the play fails, with the count
    # (fail_on_failed_runs, the default), so that scripts and CI notice.
    assert rc == 2, out[-3000:]
    failed = f"{worker_killed['run_id']}, {ps_killed['run_id']}"
    assert f"sweep {sweep.sweep_id}: 2 of 3 runs failed ({failed})" in " ".join(out.split()), out[-3000:]
    # Each run's record is in the output, shown by the record task itself (run_record).
    shown = re.findall(r"run_id: (\S+)\s+status: (\w+)", out)
    assert shown == [(r["run_id"], r["status"]) for r in runs], out[-3000:]
    assert tf_processes(sweep.sweep_id, live_processes) == []


def test_frozen_worker_ends_its_run_at_step_timeout_and_is_named_first(bed2, tmp_path, live_processes):
    # Worker 1 (node02) is frozen (SIGSTOP) during its measured steps: it cannot end by its own
    # timeouts. Its peer on node01 gives up on it after step_timeout (15 s); node02's wait
    # must too, by the worker's heartbeat standing still, not at run_timeout.
    sweep = measuring_sweep(bed2, tmp_path, run_timeout=240)
    frozen_at = time.time()
    kill(sweep, 1, "worker", 1, signal.SIGSTOP)

    rc, first, second, out = assert_first_failed_then_sweep_went_on(sweep, "is frozen")
    # The frozen worker is the cause, first; the peer's DeadlineExceeded is its consequence.
    cause = first["reason"].splitlines()[0]
    assert cause.startswith("node02: task ") and "-worker-1 is frozen: its heartbeat stood still" in cause, first[
        "reason"
    ]
    assert "(stall_timeout=15 s)" in cause and "stopped by a signal (SIGSTOP" in cause, cause
    assert "then: " in first["reason"], first["reason"]
    # Recorded about step_timeout after the freeze (and the stop), far from run_timeout=240.
    recorded_after = datetime.fromisoformat(first["finished_at"]).timestamp() - frozen_at
    assert recorded_after < 15 + 45, (recorded_after, first["reason"])
    assert second["status"] == "ok", second["reason"]
    assert rc == 2, out[-3000:]
    assert tf_processes(sweep.sweep_id, live_processes) == []


def test_run_past_its_timeout_is_stopped_and_recorded(bed2, tmp_path, live_processes):
    # 2 configurations (1 and 2 workers), each far longer than run_timeout allows.
    sweep = Sweep(
        bed2,
        tmp_path,
        "-e",
        "gpus=1,2",
        "-e",
        "num_ps=1",
        "-e",
        "repetitions=1",
        "-e",
        "steps=1000000",
        "-e",
        "run_timeout=20",
    )
    rc, first, second, out = assert_first_failed_then_sweep_went_on(sweep, "timeout=20")
    assert second["status"] == "failed" and "timeout=20" in second["reason"]
    assert rc == 2, out[-3000:]
    assert f"sweep {sweep.sweep_id}: 2 of 2 runs failed" in " ".join(out.split()), out[-3000:]
    assert tf_processes(sweep.sweep_id, live_processes) == []


def test_task_that_never_listens_fails_after_ready_timeout(bed2, tmp_path, live_processes):
    # A program that never opens its port: launch.yml with a user script that only sleeps.
    script = tmp_path / "never_listens.py"
    script.write_text("import time\nprint('pretending to start', flush=True)\ntime.sleep(600)\n")
    run_id = f"fault-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    done = run_playbook(
        "launch.yml",
        "-i",
        bed2.inventory,
        *extra_vars(script=script, gpus=2, num_ps=1, run_id=run_id, ready_timeout=8),
        env=strict_inventory_env(),
        timeout=300,
    )
    assert done.returncode != 0
    assert "did not accept connections" in done.stdout and "ready_timeout=8" in done.stdout, done.stdout[-3000:]
    assert "pretending to start" in done.stdout  # the log tail
    assert time.monotonic() - started < 120
    assert [p for p in live_processes(run_id) if "never_listens" in p or SUPERVISOR_COMM in p] == []


def sweep_to_its_end(bed, sweep_id: str, db: Path, *args: str):
    """run-benchmark.yml on the test bed in the foreground, with the FAST bounds (as Sweep has them)."""
    return run_playbook(
        "run-benchmark.yml",
        "-i",
        bed.inventory,
        *extra_vars(system="testbed", sweep_id=sweep_id, results_db=db),
        *FAST,
        *args,
        env=strict_inventory_env(),
        timeout=300,
    )


def sweep_marks(bed, node: str, sweep_id: str) -> list[Path]:
    """The sweep's marks (dtfbench.launch.sweep_marker) on a host."""
    return sorted((bed.local_ssd(node) / "dtfbench" / "runs" / "_sweeps").glob(f"{sweep_id}--*.json"))


def test_a_second_sweep_on_the_same_hosts_is_warned_of_the_first(bed2, tmp_path, live_processes):
    # Sweep A trains on both hosts (far longer than the test); sweep B starts on the same hosts
    # (its own TF ports) and must name A: its id, its controller and ansible-playbook's pid.
    (tmp_path / "a").mkdir()
    first = Sweep(bed2, tmp_path / "a", *extra_vars(gpus=2, num_ps=1, repetitions=1, steps=100000))
    try:
        deadline = time.monotonic() + 120
        while not all(sweep_marks(bed2, n, first.sweep_id) for n in ("node01", "node02")):
            assert time.monotonic() < deadline and first.process.poll() is None, first.output()[-4000:]
            time.sleep(0.5)
        second_id = f"second-{uuid.uuid4().hex[:8]}"
        second = sweep_to_its_end(
            bed2,
            second_id,
            tmp_path / "b.sqlite",
            *extra_vars(gpus=1, num_ps=1, repetitions=1, steps=5),
            *own_ports(tmp_path),
        )
        out = " ".join(second.output.split())
        assert (
            f"WARNING: sweep {first.sweep_id} runs on node01, node02 now too (controller {socket.gethostname()}, "
            f"ansible-playbook pid {first.process.pid}, since " in out
        ), second.output[-4000:]
        assert f"figures of this sweep ({second_id}) and of that one are lower" in out
        # B's marks went at its end; A's stay while it runs.
        assert [sweep_marks(bed2, n, second_id) for n in ("node01", "node02")] == [[], []], second.output[-3000:]
        assert all(sweep_marks(bed2, n, first.sweep_id) for n in ("node01", "node02"))
    finally:
        os.killpg(first.process.pid, signal.SIGINT)
        first.wait(timeout=120)
    # A was interrupted: its marks stay, and are stale (its ansible-playbook is gone), which the
    # next sweep from this machine sees, and removes, instead of warning.
    mark = json.loads(sweep_marks(bed2, "node01", first.sweep_id)[0].read_text())
    assert mark["controller"]["pid"] == first.process.pid
    assert sweep_marker.stale(mark, sweep_marker.controller_identity(os.getpid()))
    deadline = time.monotonic() + 30
    while tf_processes(first.sweep_id, live_processes) and time.monotonic() < deadline:
        time.sleep(1)
    assert tf_processes(first.sweep_id, live_processes) == []


def kill_sshd(node: dict) -> None:
    """The host's sshd and every SSH session into it (the controller's ssh clients see them end)."""
    for pid in tb.pids_in_netns(tb.netns_inode(node["netns"])):
        if tb.cmdline(pid)[:1] and "sshd" in tb.cmdline(pid)[0]:
            os.kill(pid, signal.SIGKILL)


def test_a_node_the_probe_cannot_reach_privately_stops_the_sweep_before_its_runs(bed2, tmp_path):
    """Issue #56, case 2: node02's private link down. The link probe finds it (it never joins), and the
    sweep stops there with one error, instead of a 2-GPU run waiting out startup_timeout."""
    node02 = next(n for n in bed2.nodes if n["name"] == "node02")
    link = ["ip", "netns", "exec", node02["netns"], "ip", "link", "set", "prv0"]
    subprocess.run([*link, "down"], check=True)
    try:
        sweep_id = f"noprv-{uuid.uuid4().hex[:8]}"
        db = tmp_path / "results.sqlite"
        started = time.monotonic()
        done = sweep_to_its_end(
            bed2, sweep_id, db, *extra_vars(gpus="1,2", num_ps=1, repetitions=1, steps=5, network_probe="true")
        )
        took = time.monotonic() - started
    finally:
        subprocess.run([*link, "up"], check=True)
    out = " ".join(done.output.split())
    assert done.returncode != 0, done.output[-4000:]
    assert "the link probe could not reach node02 (did not join within 20 s) on the private network" in out, out[-3000:]
    assert "--limit '!node02'" in out and "runs to do on" not in out
    assert store.runs(store.connect(db)) == [] and took < 120  # not a run's startup_timeout, nor two


def test_limit_keeps_the_sweep_on_the_hosts_it_leaves(bed2, tmp_path, live_processes):
    """--limit (issue #56, case 6): a sweep that needs a host the limit took out is refused before
    anything starts, naming it; one that fits runs on the hosts the limit keeps."""
    sweep_id = f"limit-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    refused = sweep_to_its_end(bed2, sweep_id, db, "--limit", "node01", *extra_vars(gpus=2, num_ps=1, repetitions=1))
    out = " ".join(refused.output.split())
    assert refused.returncode != 0 and "--limit left out node02: the sweep may use only the hosts it keeps" in out
    assert "runs to do on" not in out and not db.exists()
    kept = sweep_to_its_end(
        bed2, sweep_id, db, "--limit", "node02", *extra_vars(gpus=1, num_ps=1, repetitions=1, steps=5)
    )
    assert kept.returncode == 0, kept.output[-4000:]
    (run,) = store.runs(store.connect(db))
    assert run["status"] == "ok" and run["hosts"] == ["node02"], (run["hosts"], run["reason"])
    assert live_processes(sweep_id) == []


# Last but one in this module on purpose: node02 has no sshd afterwards (only the last test,
# which needs none there, comes after it).
def test_host_that_goes_away_fails_the_runs_that_need_it_and_leaves_no_task(bed2, tmp_path, live_processes):
    # node02 disappears in the middle of the first run: its sshd and every SSH session into
    # it are killed and both of its links go down. Nothing can reach its tasks any more;
    # they must end by themselves (the workload's own timeouts, else the supervisors'
    # max_runtime), and the controller must record the runs as failed and go on: the other
    # run that needs node02 fails at once, without starting anything; the two that run on
    # node01 alone (gpus=1) run and succeed; the summary and the line to resume follow.
    sweep = Sweep(
        bed2,
        tmp_path,
        *extra_vars(gpus="2,1", batch_size="8,4", num_ps=1, repetitions=1, steps=400),
    )
    sweep.wait_for_log("node02", 1, "worker-1", "\timages/sec: ")
    node02 = next(n for n in bed2.nodes if n["name"] == "node02")
    kill_sshd(node02)
    for link in ("pub0", "prv0"):
        tb.ip("-n", node02["netns"], "link", "set", link, "down")
    try:
        rc = sweep.wait()
        out = sweep.output()
        runs = sweep.runs()
        assert len(runs) == 4, out[-4000:]
        assert [(r["gpus"], r["status"]) for r in runs] == [(2, "failed"), (2, "failed"), (1, "ok"), (1, "ok")], [
            r["reason"] for r in runs
        ]
        assert "node02" in runs[0]["reason"], runs[0]["reason"]
        lost = runs[1]["reason"]
        assert lost.startswith("node02: host left the play") and "node01: not started: node02" in lost, lost
        assert "HostVarsVars" not in out
        flat = " ".join(out.split())
        failed = f"{runs[0]['run_id']}, {runs[1]['run_id']}"
        assert f"sweep {sweep.sweep_id}: 2 of 4 runs failed ({failed})" in flat, out[-3000:]
        assert f"-e sweep_id={sweep.sweep_id} to run them again" in flat, out[-3000:]
        assert rc == 4, out[-3000:]  # ansible-playbook's code for an unreachable host
        assert "UNREACHABLE" in out
        # Out of reach, node02's tasks still end on their own.
        deadline = time.monotonic() + 180
        while tf_processes(sweep.sweep_id, live_processes) and time.monotonic() < deadline:
            time.sleep(2)
        assert tf_processes(sweep.sweep_id, live_processes) == []
    finally:
        for link in ("pub0", "prv0"):
            tb.ip("-n", node02["netns"], "link", "set", link, "up", check=False)


# Last in this module: it leaves node02 without sshd (as the test before it does).
def test_a_host_unreachable_before_the_sweep_is_one_error_and_nothing_starts(bed2, tmp_path):
    node02 = next(n for n in bed2.nodes if n["name"] == "node02")
    kill_sshd(node02)
    sweep_id = f"fault-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    done = sweep_to_its_end(bed2, sweep_id, db, *extra_vars(gpus="1,2", num_ps=1, repetitions=1, steps=5))
    out = " ".join(done.output.split())
    assert done.returncode == 2, done.output[-4000:]
    assert (
        "node02 cannot be reached (node02: Failed to connect to the host via ssh: ssh: connect to host "
        f"{next(n for n in bed2.nodes if n['name'] == 'node02')['public_ip']} port 22: Connection refused): "
        "nothing of the sweep started" in out
    ), done.output[-4000:]
    assert "--limit '!node02'" in out
    assert out.count("FAILED!") == 1, done.output[-4000:]  # one error (beside Ansible's UNREACHABLE line)
    assert "runs to do on" not in out and "run 1 of" not in out
    assert not db.exists() or store.runs(store.connect(db)) == []
    for node in ("node01", "node02"):
        assert not list((bed2.local_ssd(node) / "dtfbench" / "runs").glob(f"{sweep_id}*")), node
        assert sweep_marks(bed2, node, sweep_id) == []
