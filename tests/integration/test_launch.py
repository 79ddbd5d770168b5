"""launch.yml runs a user's own distributed TF program on the cluster layout."""

import subprocess
import uuid

import pytest

pytestmark = [pytest.mark.tf, pytest.mark.ansible]


def launch(project_root, ansible_env, run_id, *args):
    return subprocess.run(
        ["ansible-playbook", "launch.yml", "-e", f"run_id={run_id}", *args],
        cwd=project_root,
        env=ansible_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_user_program_runs_on_the_layout_and_is_stopped(project_root, ansible_env, live_processes):
    run_id = f"pytest-launch-{uuid.uuid4().hex[:8]}"
    done = launch(
        project_root,
        ansible_env,
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
    # The example's PS joins forever, as most programs' do: the role stopped it.
    assert "127.0.0.1:2230" in done.stdout
    assert live_processes(run_id) == []


def test_a_failing_program_fails_the_play_with_its_log(project_root, ansible_env, live_processes):
    run_id = f"pytest-launch-{uuid.uuid4().hex[:8]}"
    failed = launch(project_root, ansible_env, run_id, "-e", "script=examples/no_such_program.py", "-e", "gpus=1")
    assert failed.returncode != 0
    assert f"run {run_id} failed on localhost" in failed.stdout
    assert "no_such_program.py" in failed.stdout  # the log tail names what went wrong
    assert live_processes(run_id) == []


def test_launch_without_a_script_is_refused(project_root, ansible_env):
    refused = launch(project_root, ansible_env, "unused")
    assert refused.returncode != 0
    assert "script is not set" in refused.stdout
