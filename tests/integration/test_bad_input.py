"""Bad input through the user's own command: one clear error before anything starts (#8).

Each case runs run-benchmark.yml on the local inventory as a user would and checks that
the message names the input, what is wrong and how to fix it, and that nothing was started
or stored: no results database, no run directory, no TF process. The planner's messages
are unit-tested in tests/unit/test_plan.py; here they must reach the user intact.
"""

from __future__ import annotations

import socket

import pytest
from playbook_harness import run_sweep, small_run

from dtfbench.results import store

pytestmark = [pytest.mark.ansible]

BASE = small_run(batch_size=None, warmup_steps=1, steps=2)


def run_benchmark(tmp_path, *args):
    return run_sweep(tmp_path, *BASE, *args, prefix="bad", timeout=300)


@pytest.mark.parametrize(
    "args, message",
    [
        (["-e", "system=cray9000"], "system=cray9000 is unknown; choose one of"),
        (["-e", "gpus=1", "-e", "model=resnet9000"], "model='resnet9000' is unknown"),
        (["-e", "gpus=1", "-e", "variable_update=telepathy"], "variable_update='telepathy' is unknown"),
        (["-e", "gpus=1,2,64"], "gpus=64"),  # more than the inventory holds
        (["-e", "gpus=2", "-e", "num_ps=9"], "num_ps=9"),  # more PSs than the nodes may run
        (["-e", "gpus=1", "-e", "data=real"], "data=real needs a dataset"),
        (
            ["-e", "gpus=1", "-e", "data=real", "-e", "data_dir=/nonexistent/imagenet"],
            "no train-* TFRecord shards in data_dir=/nonexistent/imagenet",
        ),
        (["-e", "gpus=1", "-e", "sweep_id=x;rm"], "is not a plain name"),
        # #18: num_ps=auto and the stop rules (dtfbench adaptive_sweep).
        (
            ["-e", "gpus=1,2", "-e", "stop_below_efficiency=1.5"],
            "stop_below_efficiency='1.5': give a number above 0 and at most 1, e.g. stop_below_efficiency=0.5",
        ),
        (["-e", "gpus=1,2", "-e", "min_doubling_gain=lots"], "min_doubling_gain='lots': give a number >= 0"),
        (["-e", "gpus=2,1", "-e", "num_ps=auto"], "the sweep must go up in GPU counts"),
        # #30: timeouts of 0 or below, and a timeout that is not a number, by the user's name.
        (["-e", "gpus=1", "-e", "step_timeout=0"], "step_timeout=0: a timeout must be above 0 seconds"),
        (["-e", "gpus=1", "-e", "run_timeout=0"], "run_timeout=0: a timeout must be above 0 seconds"),
        (["-e", "gpus=1", "-e", "ready_timeout=-1"], "ready_timeout=-1: a timeout must be above 0 seconds"),
        (["-e", "gpus=1", "-e", "startup_timeout=0"], "startup_timeout=0: a timeout must be above 0 seconds"),
        (["-e", "gpus=1", "-e", "step_timeout=abc"], "step_timeout='abc' is not a whole number of seconds"),
        (["-e", "gpus=1,2", "-e", "num_ps=auto", "-e", "num_ps_auto_keep=0"], "num_ps_auto_keep=0 is below 1"),
        # Scripts only is Slurm's (the plan refuses it with the ssh launcher of system=local).
        (
            ["-e", "gpus=1", "-e", "submit=false"],
            "submit=false only writes Slurm job scripts, and this sweep's launcher",
        ),
    ],
)
def test_bad_input_is_one_clear_error_before_anything_starts(tmp_path, live_processes, args, message):
    done, db, run_root, sweep_id = run_benchmark(tmp_path, *args)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    assert message in " ".join(output.split()), output[-3000:]
    assert "Traceback" not in output
    assert not run_root.exists()
    assert not db.exists() or store.runs(store.connect(db)) == []
    assert [p for p in live_processes(sweep_id) if "dtfbench train" in p] == []


@pytest.mark.parametrize("fail_on_failed_runs", [None, "false"])
def test_a_port_already_taken_stops_the_run_before_any_task_starts(tmp_path, live_processes, fail_on_failed_runs):
    # Something else listens on the PS port (2230): the run is recorded as failed with the
    # port named, and not one of its tasks was started. A sweep with a failed run ends with a
    # failure (exit 2, the count in the summary), unless fail_on_failed_runs=false.
    extra = ["-e", f"fail_on_failed_runs={fail_on_failed_runs}"] if fail_on_failed_runs else []
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", 2230))
        squatter.listen()
        done, db, run_root, sweep_id = run_benchmark(tmp_path, "-e", "gpus=1", "-e", "num_ps=1", *extra)
    output = " ".join(done.stdout.split())
    (run,) = store.runs(store.connect(db))
    assert run["status"] == "failed"
    assert "port 2230 on localhost (127.0.0.1), wanted by ps 0, is already in use" in run["reason"]
    assert "tf_cluster_ps_port_base" in run["reason"]
    assert f"sweep {sweep_id}: 1 of 1 runs failed ({run['run_id']})" in output, done.stdout[-3000:]
    assert "\\n\\nsweep" not in done.stdout + done.stderr  # a blank line, not the two characters
    if fail_on_failed_runs:
        assert done.returncode == 0, done.stdout[-3000:]
    else:
        assert done.returncode == 2, done.stdout[-3000:]
        assert "Re-run with -e sweep_id=" in output and "-e fail_on_failed_runs=false" in output
    assert not (run_root / run["run_id"]).exists()
    assert [p for p in live_processes(sweep_id) if "dtfbench train" in p] == []
