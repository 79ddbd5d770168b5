"""Faults during a sweep on the 2-host SSH test bed, each injected for real (issue #8).

Each test runs run-benchmark.yml in the background on a 2-host test bed (one CPU worker per
host, the PS on node01), injects one fault into the sweep's first run, and then proves:
the first run is recorded as failed with its reason and the tail of the task's log, the
sweep went on (the next run is recorded too), and no TF process of the sweep is left on
any host. The faults: a worker killed during its measured steps, a PS killed during them,
a run past its timeout, a task that never starts listening, and a host that goes away
(its sshd and SSH sessions killed and its public link down) in the middle of a run: its
tasks, out of every controller's reach, must end by their supervisors' own deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import testbed as tb
from testbed_fixtures import module_testbed

from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

# Short bounds everywhere: a dead peer must be noticed in seconds, not the defaults' minutes.
FAST = [
    "-e",
    "model=trivial",
    "-e",
    "batch_size=8",
    "-e",
    "image_size=32",
    "-e",
    "warmup_steps=2",
    "-e",
    "step_timeout=15",
    "-e",
    "startup_timeout=30",
    "-e",
    "ready_timeout=60",
]


@pytest.fixture(scope="module")
def bed2(tmp_path_factory):
    yield from module_testbed(tmp_path_factory, hosts=2)


class Sweep:
    """run-benchmark.yml running in the background on the test bed."""

    def __init__(self, bed, project_root, ansible_env, tmp_path, *args):
        self.bed = bed
        self.sweep_id = f"fault-{uuid.uuid4().hex[:8]}"
        self.db = tmp_path / "results.sqlite"
        self.log = open(tmp_path / "playbook.log", "w+")
        env = dict(ansible_env, ANSIBLE_INVENTORY_UNPARSED_FAILED="true")
        self.process = subprocess.Popen(
            [
                "ansible-playbook",
                "run-benchmark.yml",
                "-i",
                bed.inventory,
                "-e",
                "system=testbed",
                "-e",
                f"sweep_id={self.sweep_id}",
                "-e",
                f"results_db={self.db}",
                *FAST,
                *args,
            ],
            cwd=project_root,
            env=env,
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


def task_pids(sweep_id: str, job: str, index: int) -> list[int]:
    """Pids of the TF program (not its supervisor) of one task of the sweep.

    tf_task marks every process of a task with DTFBENCH_TF_TASK=<run_dir>/<run_id>-<job>-<index>.
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
            sweep_id in marker
            and marker.endswith(f"-{job}-{index}")
            and b"dtfbench.train" in argv
            and b"tf_task-supervisor" not in argv
        ):
            pids.append(int(entry.name))
    return pids


def tf_processes(sweep_id: str, live_processes) -> list[str]:
    return [p for p in live_processes(sweep_id) if "dtfbench.train" in p or "tf_task_supervisor" in p]


def kill_during_measured_steps(bed, project_root, ansible_env, tmp_path, job: str, index: int) -> Sweep:
    """A 2-run sweep (1 PS, a worker per host) whose task `job index` is SIGKILLed in run 1,
    once worker 1 reports its first measured steps."""
    sweep = Sweep(
        bed,
        project_root,
        ansible_env,
        tmp_path,
        "-e",
        "gpus=2",
        "-e",
        "num_ps=1",
        "-e",
        "repetitions=2",
        "-e",
        "steps=400",
    )
    sweep.wait_for_log("node02", 1, "worker-1", "\timages/sec: ")
    victims = task_pids(sweep.sweep_id, job, index)
    assert len(victims) == 1, victims
    os.kill(victims[0], signal.SIGKILL)
    return sweep


def assert_first_failed_then_sweep_went_on(sweep: Sweep, *reasons: str):
    rc = sweep.wait()
    runs = sweep.runs()
    out = sweep.output()
    assert len(runs) == 2, out[-4000:]
    first, second = runs
    assert first["status"] == "failed", first
    assert any(r in first["reason"] for r in reasons), first["reason"]
    assert "last " in first["reason"] and " lines of " in first["reason"], first["reason"]  # the log tail
    return rc, first, second, out


def test_killed_worker_fails_its_run_and_the_sweep_goes_on(bed2, project_root, ansible_env, tmp_path, live_processes):
    sweep = kill_during_measured_steps(bed2, project_root, ansible_env, tmp_path, "worker", 1)

    rc, first, second, out = assert_first_failed_then_sweep_went_on(sweep, "killed by SIGKILL")
    # The cause first (the killed worker), then its consequences on the other host.
    cause = first["reason"].splitlines()[0]
    assert cause.startswith("node02: task ") and "-worker-1 was killed by SIGKILL" in cause, first["reason"]
    assert second["status"] == "ok", second["reason"]
    # A failed run is recorded and the sweep goes on; at its end the play fails, with the count
    # (fail_on_failed_runs, the default), so that scripts and CI notice.
    assert rc == 2, out[-3000:]
    assert f"sweep {sweep.sweep_id}: 1 of 2 runs failed ({first['run_id']})" in " ".join(out.split()), out[-3000:]
    assert tf_processes(sweep.sweep_id, live_processes) == []


def test_killed_ps_fails_its_run_and_the_sweep_goes_on(bed2, project_root, ansible_env, tmp_path, live_processes):
    sweep = kill_during_measured_steps(bed2, project_root, ansible_env, tmp_path, "ps", 0)

    rc, first, second, out = assert_first_failed_then_sweep_went_on(sweep, "killed by SIGKILL")
    # The cause first: the PS itself (its host's tf_host_run watches it while the workers run),
    # then the workers that lost it.
    cause = first["reason"].splitlines()[0]
    assert cause.startswith("node01: task ") and "-ps-0 was killed by SIGKILL" in cause, first["reason"]
    assert "then: " in first["reason"], first["reason"]
    assert second["status"] == "ok", second["reason"]
    assert rc == 2, out[-3000:]
    assert f"sweep {sweep.sweep_id}: 1 of 2 runs failed ({first['run_id']})" in " ".join(out.split()), out[-3000:]
    assert tf_processes(sweep.sweep_id, live_processes) == []


def test_run_past_its_timeout_is_stopped_and_recorded(bed2, project_root, ansible_env, tmp_path, live_processes):
    # 2 configurations (1 and 2 workers), each far longer than run_timeout allows.
    sweep = Sweep(
        bed2,
        project_root,
        ansible_env,
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


def test_task_that_never_listens_fails_after_ready_timeout(bed2, project_root, ansible_env, tmp_path, live_processes):
    # A program that never opens its port: launch.yml with a user script that only sleeps.
    script = tmp_path / "never_listens.py"
    script.write_text("import time\nprint('pretending to start', flush=True)\ntime.sleep(600)\n")
    run_id = f"fault-{uuid.uuid4().hex[:8]}"
    env = dict(ansible_env, ANSIBLE_INVENTORY_UNPARSED_FAILED="true")
    started = time.monotonic()
    done = subprocess.run(
        [
            "ansible-playbook",
            "launch.yml",
            "-i",
            bed2.inventory,
            "-e",
            f"script={script}",
            "-e",
            "gpus=2",
            "-e",
            "num_ps=1",
            "-e",
            f"run_id={run_id}",
            "-e",
            "ready_timeout=8",
        ],
        cwd=project_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "did not accept connections" in done.stdout and "ready_timeout=8" in done.stdout, done.stdout[-3000:]
    assert "pretending to start" in done.stdout  # the log tail
    assert time.monotonic() - started < 120
    assert [p for p in live_processes(run_id) if "never_listens" in p or "tf_task_supervisor" in p] == []


# Last in this module on purpose: node02 has no sshd afterwards (the test bed goes down next).
def test_host_that_goes_away_fails_its_runs_and_leaves_no_task(
    bed2, project_root, ansible_env, tmp_path, live_processes
):
    # node02 disappears in the middle of the first run: its sshd and every SSH session into
    # it are killed and both of its links go down. Nothing can reach its tasks any more;
    # they must end by themselves (the workload's own timeouts, else the supervisors'
    # max_runtime), and the controller must record the runs as failed and go on.
    sweep = Sweep(
        bed2,
        project_root,
        ansible_env,
        tmp_path,
        "-e",
        "gpus=2",
        "-e",
        "num_ps=1",
        "-e",
        "repetitions=2",
        "-e",
        "steps=400",
    )
    sweep.wait_for_log("node02", 1, "worker-1", "\timages/sec: ")
    node02 = next(n for n in bed2.nodes if n["name"] == "node02")
    inode = tb.netns_inode(node02["netns"])
    for pid in tb.pids_in_netns(inode):
        if tb.cmdline(pid)[:1] and "sshd" in tb.cmdline(pid)[0]:
            os.kill(pid, signal.SIGKILL)
    for link in ("pub0", "prv0"):
        tb.ip("-n", node02["netns"], "link", "set", link, "down")
    try:
        rc = sweep.wait()
        out = sweep.output()
        runs = sweep.runs()
        assert len(runs) == 2, out[-4000:]
        assert all(r["status"] == "failed" for r in runs), [r["reason"] for r in runs]
        assert "node02" in runs[0]["reason"], runs[0]["reason"]
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
