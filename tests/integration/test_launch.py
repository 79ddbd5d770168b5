"""launch.yml runs a user's own distributed TF program on the cluster layout."""

import os
import re
import signal
import subprocess
import sys
import uuid

import pytest
from playbook_harness import run_playbook
from ports import free_ports

pytestmark = [pytest.mark.tf, pytest.mark.ansible]


def launch(run_id, *args):
    return run_playbook("launch.yml", "-e", f"run_id={run_id}", *args, timeout=300)


def test_user_program_runs_on_the_layout_and_is_stopped(live_processes):
    run_id = f"pytest-launch-{uuid.uuid4().hex[:8]}"
    done = launch(
        run_id,
        "-e",
        "script=examples/mnist_distributed.py",
        "-e",
        'script_args="--steps 12 --batch_size 16"',
        "-e",
        "gpus=2",
        "-e",
        "num_ps=1",
    )
    assert done.returncode == 0, done.stdout[-3000:]
    run_dir = f"/tmp/dtfbench/runs/{run_id}"
    for index in (0, 1):
        log = open(f"{run_dir}/{run_id}-worker-{index}.log").read()
        assert f"worker {index} step 11 loss" in log and f"worker {index} done" in log
        # The real digits: every worker its train accuracy, worker 0 the test accuracy (the study's §4.4).
        assert re.search(rf"worker {index} step 11 loss [\d.]+ train accuracy [01]\.\d{{4}}", log), log
        tested = re.search(r"worker 0 test accuracy [01]\.\d{4} on 364 held-out digits", log)
        assert bool(tested) == (index == 0), log
    # The example's PS joins forever, as most programs' do: the role stopped it.
    assert "127.0.0.1:2230" in done.stdout
    assert live_processes(run_id) == []


def test_a_failing_program_fails_the_play_with_its_log(live_processes, tmp_path):
    run_id = f"pytest-launch-{uuid.uuid4().hex[:8]}"
    program = tmp_path / "failing_program.py"
    program.write_text("raise SystemExit('failing_program: cannot find its data')\n")
    failed = launch(run_id, "-e", f"script={program}", "-e", "gpus=1")
    assert failed.returncode != 0
    assert f"run {run_id} failed on localhost" in failed.stdout
    assert "failing_program: cannot find its data" in failed.stdout  # the log tail names what went wrong
    assert live_processes(run_id) == []


def test_a_missing_program_is_refused_before_any_task_starts(project_root, live_processes):
    run_id = f"pytest-launch-{uuid.uuid4().hex[:8]}"
    refused = launch(run_id, "-e", "script=examples/no_such_program.py", "-e", "gpus=1")
    assert refused.returncode != 0
    message = " ".join(refused.stdout.split())
    assert (
        f"script=examples/no_such_program.py: {project_root}/examples/no_such_program.py is not a file on localhost"
        in message
    ), refused.stdout[-3000:]
    assert not os.path.exists(f"/tmp/dtfbench/runs/{run_id}")  # nothing started
    assert live_processes(run_id) == []


def test_launch_without_a_script_is_refused():
    refused = launch("unused")
    assert refused.returncode != 0
    assert "script is not set" in refused.stdout


def test_the_example_runs_a_worker_that_starts_after_the_chief_has_finished(project_root):
    """On a busy machine a worker's TF import can outlast the chief's whole run. Its session must
    reach the PS and itself only: one that waits for every task of the cluster waits forever for
    the chief, which has exited."""
    ps, chief, late = free_ports(3)
    flags = ["--ps_hosts", f"127.0.0.1:{ps}", "--worker_hosts", f"127.0.0.1:{chief},127.0.0.1:{late}", "--steps", "3"]
    program = [sys.executable, str(project_root / "examples" / "mnist_distributed.py")]
    server = subprocess.Popen([*program, "--job_name", "ps", "--task_index", "0", *flags], start_new_session=True)
    try:
        first = subprocess.run(
            [*program, "--job_name", "worker", "--task_index", "0", *flags], capture_output=True, text=True, timeout=120
        )
        assert first.returncode == 0 and "worker 0 done" in first.stdout, first.stdout + first.stderr[-2000:]
        second = subprocess.run(
            [*program, "--job_name", "worker", "--task_index", "1", *flags], capture_output=True, text=True, timeout=120
        )
        assert second.returncode == 0 and "worker 1 done" in second.stdout, second.stdout + second.stderr[-2000:]
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
