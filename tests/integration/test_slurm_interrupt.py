"""An interrupted sweep on the Slurm launcher leaves no job training.

run-benchmark.yml (-e system=slurm-test) in the background, in a session of its own like a
command in a terminal; once the run's job trains, Ctrl-C (SIGINT to its process group) or a
SIGKILL of its process group. Then, within BOUND seconds, the scheduler has no job of the
sweep queued or running and no task of it is left on the nodes; the run is recorded as failed
(interrupted) and the job as cancelled in its run directory. Two mechanisms do it: slurm_job,
while it waits, cancels its job once its controller is gone (a signal, or its stdout hung
up), and the interrupt watchdog's stop playbook cancels the job from the login node
(playbooks/stop-interrupted.yml); the last test runs that playbook alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from playbook_harness import extra_vars, run_adhoc, run_playbook, small_run, start_playbook
from slurm_testcluster import missing_prerequisites, slurm_env  # noqa: F401

from dtfbench.results import store

ROOT = Path(__file__).resolve().parents[2]
BOUND = 30.0  # seconds from the signal to no job and no task of the sweep

pytestmark = [
    pytest.mark.tf,
    pytest.mark.ansible,
    pytest.mark.skipif(bool(missing_prerequisites()), reason=missing_prerequisites() or "ok"),
]


def active_jobs(env, name_part: str) -> list[str]:
    """`id state` of the jobs whose name holds `name_part` and that are not over."""
    out = subprocess.run(
        ["squeue", "--noheader", "--states=PENDING,RUNNING,COMPLETING,CONFIGURING,SUSPENDED", "--format=%i %T %j"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return [" ".join(line.split()[:2]) for line in out.splitlines() if name_part in line]


def wait_until_training(run_root: Path, sweep_id: str, process, log, timeout: float = 300) -> Path:
    """Until a worker of the sweep's job reports measured steps; returns the run directory."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for worker_log in run_root.glob(f"{sweep_id}-*/job-*/worker-*.log"):
            if "images/sec" in worker_log.read_text(errors="replace"):
                return worker_log.parent.parent
        assert process.poll() is None, log.read_text()[-4000:]
        time.sleep(0.3)
    raise AssertionError("the job never trained:\n" + log.read_text()[-4000:])


@pytest.mark.parametrize("how", ["ctrl_c", "sigkill", "ctrl_c_without_watchdog"])
def test_an_interrupted_slurm_run_cancels_its_job(slurm_env, slurm_test_cluster, tmp_path, live_processes, how):
    """ctrl_c_without_watchdog: the callback plugin off (DTFBENCH_INTERRUPT_OFF), so slurm_job's
    own watch of its controller alone cancels the job (nothing records the run then)."""
    env = dict(slurm_env, DTFBENCH_INTERRUPT_OFF="1") if how == "ctrl_c_without_watchdog" else slurm_env
    sweep_id = f"intr-slurm-{uuid.uuid4().hex[:6]}"
    db = tmp_path / "results.sqlite"
    log_path = tmp_path / "playbook.log"
    command = [
        "run-benchmark.yml",
        *extra_vars(system="slurm-test", gpus=2, num_ps=1),
        *small_run(steps=1000000),  # trains until stopped
        *extra_vars(sweep_id=sweep_id, results_db=db),
    ]
    with log_path.open("w+") as log:
        process = start_playbook(*command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            run_dir = wait_until_training(
                Path(slurm_test_cluster["dir"]) / "work" / "runs", sweep_id, process, log_path
            )
            assert active_jobs(slurm_env, sweep_id), "the job should be running"
            sent = time.monotonic()
            os.killpg(process.pid, signal.SIGKILL if how == "sigkill" else signal.SIGINT)
            while (active_jobs(slurm_env, sweep_id) or live_processes(run_dir.name)) and time.monotonic() - sent < 120:
                time.sleep(0.2)
            took = time.monotonic() - sent
            print(f"{how}: no job and no task of the sweep {took:.1f} s after the signal")
            assert active_jobs(slurm_env, sweep_id) == [], log_path.read_text()[-4000:]
            assert live_processes(run_dir.name) == []
            assert took <= BOUND, f"{took:.1f} s"
            process.wait(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    record = json.loads((run_dir / "job.json").read_text())
    assert record["state"] == "CANCELLED", record
    if how == "ctrl_c_without_watchdog":
        assert record["interrupted"], record  # the module's own watch cancelled it
        assert "dtfbench: interrupted by" not in log_path.read_text()
        return

    # The watchdog's line: after SIGKILL it comes once ansible-playbook is gone.
    deadline = time.monotonic() + 120
    while "dtfbench: interrupted by" not in log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    text = log_path.read_text()
    line = next(line for line in text.splitlines() if line.startswith("dtfbench: interrupted by"))
    assert "cancelled its Slurm job from localhost" in line, line
    assert ("Ctrl-C (SIGINT)" if how == "ctrl_c" else "ended in the middle of the run") in line, line
    assert f"sweep_id={sweep_id}" in line
    (run,) = store.runs(store.connect(db))
    assert run["status"] == "failed" and run["reason"].startswith("interrupted"), run["reason"]


def test_the_stop_playbook_cancels_a_job_and_a_second_time_changes_nothing(slurm_env, slurm_test_cluster, tmp_path):
    """The watchdog's half alone: a job submitted (slurm_job, wait=false) and still running is
    cancelled by playbooks/stop-interrupted.yml from the login node; then nothing is left to do."""
    run_dir = Path(slurm_test_cluster["dir"]) / "work" / "runs" / f"stop-{uuid.uuid4().hex[:6]}"
    run_dir.mkdir(parents=True)
    (run_dir / "job.sbatch").write_text(
        f"#!/bin/bash\n#SBATCH --job-name=dtfbench-{run_dir.name}\n#SBATCH --nodes=1\n"
        f"#SBATCH --output={run_dir}/job-%j.out\nsleep 600\n"
    )
    library = ROOT / "roles" / "slurm_cluster" / "library"
    submit = run_adhoc(
        "localhost", "-m", "slurm_job", "-a", f"run_dir={run_dir} wait=false", "-M", library, env=slurm_env
    )
    assert submit.returncode == 0, submit.stdout + submit.stderr
    deadline = time.monotonic() + 60
    while "RUNNING" not in " ".join(active_jobs(slurm_env, run_dir.name)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "RUNNING" in " ".join(active_jobs(slurm_env, run_dir.name))

    # The watchdog runs it without the Slurm environment of the play: job.json brings it.
    env = {k: v for k, v in slurm_env.items() if not k.startswith("SLURM_")}
    env["DTFBENCH_INTERRUPT_OFF"] = "1"
    extra = tmp_path / "stop-vars.json"
    extra.write_text(
        json.dumps(
            {"dtfbench_interrupted_hosts": {}, "dtfbench_interrupted_slurm": {"localhost": {"run_dir": str(run_dir)}}}
        )
    )

    def stop():
        return run_playbook("playbooks/stop-interrupted.yml", "-e", f"@{extra}", env=env, timeout=180)

    first = stop()
    assert first.returncode == 0, first.stdout[-3000:]
    assert "cancelled Slurm job" in first.stdout, first.stdout[-3000:]
    assert active_jobs(slurm_env, run_dir.name) == []
    assert json.loads((run_dir / "job.json").read_text())["state"] == "CANCELLED"
    again = stop()
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-3000:]
    assert "nothing to cancel" in again.stdout, again.stdout[-3000:]
