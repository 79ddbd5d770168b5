"""Real dtfbench train processes on 127.0.0.1: every mode, real data, dead peers, exit codes.

Each test starts its own cluster on free ports; the `tasks` fixture kills whatever is
left (process groups) and checks that no process of the test survives.
"""

import json
import math
import re
import signal
import subprocess
import sys
import time

import pytest
from workload_helpers import SMALL, model_variables, task_env, wait_for_line, wait_for_stderr

from dtfbench.workload import ps_task
from dtfbench.workload.collective import VARIABLES_LOG_PREFIX

pytestmark = pytest.mark.tf

RUN_TIMEOUT = 150  # generous: several TF processes share 2 cores
STEP_TIMEOUT = 20  # as in SMALL


def check_worker_result(worker, mode, measured=6, workers=2):
    result = worker.result()
    assert result["status"] == "ok", result.get("reason")
    assert result["images_per_sec"] > 0
    assert result["total_images_per_sec"] == pytest.approx(result["images_per_sec"] * workers)
    assert result["measured_steps"] == measured and result["warmup_steps"] == 2
    assert set(result["step_time"]) >= {"mean", "p50", "p95", "stddev"}
    assert result["step_time"]["mean"] > 0
    assert set(result["wall_time"]) >= {"import", "session_ready", "run"}
    assert result["cpu_time"]["measured"] > 0
    assert result["config"]["variable_update"] == mode
    assert result["config"]["model"] == "small_cnn" and result["config"]["batch_size"] == 8
    assert result["tf_version"].startswith("2.")
    # The same JSON went to --result_file.
    written = json.loads((worker.stdout_path.parent / f"{worker.name}.json").read_text())
    assert written == result
    assert "total images/sec:" in worker.stdout
    return result


def run_cluster(tasks, mode, num_ps, num_workers=2, extra=(), worker_extra=None):
    ps, workers = tasks.cluster(mode, num_ps, num_workers, extra, worker_extra)
    for task in workers + ps:
        code = task.wait(RUN_TIMEOUT)
        assert code == 0, f"{task.name} exited {code}\n{task.stderr[-3000:]}"
    return ps, workers


def test_parameter_server_sync(tasks):
    ps, workers = run_cluster(tasks, "parameter_server", num_ps=1)
    for worker in workers:
        result = check_worker_result(worker, "parameter_server")
        assert result["config"]["cross_replica_sync"] is True
        assert len(result["ps_bytes"]) == 1 and result["ps_bytes"][0] > 0
    assert "all 2 worker(s) done" in ps[0].stderr


def test_parameter_server_async(tasks):
    _, workers = run_cluster(tasks, "parameter_server", num_ps=1, extra=["--cross_replica_sync=false"])
    for worker in workers:
        assert check_worker_result(worker, "parameter_server")["config"]["cross_replica_sync"] is False


def test_distributed_replicated_two_cpu_towers(tasks):
    # --device cpu --num_gpus 2: two CPU towers per worker, aggregated locally before the PS.
    _, workers = run_cluster(
        tasks,
        "distributed_replicated",
        num_ps=1,
        extra=["--device", "cpu", "--num_gpus", "2", "--optimizer", "momentum"],
    )
    for worker in workers:
        result = check_worker_result(worker, "distributed_replicated")
        assert len(result["devices"]) == 2 and result["images_per_step"] == 16
        assert result["devices"][1].endswith("/device:CPU:1")


def test_collective_all_reduce(tasks):
    """Two workers train the PS modes' network: its variables, named and shaped as theirs."""
    ps, workers = run_cluster(tasks, "collective_all_reduce", num_ps=0)
    assert ps == []
    (size, ps_network) = model_variables("ours", "small_cnn")["small_cnn"]
    assert size == 32  # SMALL's --image_size
    for worker in workers:
        result = check_worker_result(worker, "collective_all_reduce")
        assert result["ps_bytes"] == []
        assert result["config"]["weight_decay"] == pytest.approx(4e-5)
        logged = [x for x in worker.stderr.splitlines() if VARIABLES_LOG_PREFIX in x]
        assert len(logged) == 1, worker.stderr[-2000:]
        trained = json.loads(logged[0].split(VARIABLES_LOG_PREFIX, 1)[1])
        assert [name for name, _, _ in trained][0].startswith("v/cg/")
        assert [[name[len("v/cg/") :], shape, trainable] for name, shape, trainable in trained] == ps_network
        # What the ring reduces a step, for the planner: the trainable variables, float32.
        assert result["variable_bytes"] == sum(4 * math.prod(shape) for _, shape, trainable in trained if trainable)
    # No autograph: it would leave each converted function's source in the temporary folder.
    assert list(tasks.tmpdir.iterdir()) == []


def test_greedy_placement_over_two_ps(tasks):
    """The greedy strategy spreads small_cnn's variables as the pure function predicts."""
    from dtfbench.workload.placement import bytes_per_ps, greedy_assign

    _, workers = run_cluster(
        tasks,
        "parameter_server",
        num_ps=2,
        num_workers=1,
        extra=["--ps_placement", "greedy", "--cross_replica_sync=false"],
    )
    result = check_worker_result(workers[0], "parameter_server", workers=1)
    # small_cnn at 32 px, 1001 classes, float32, in creation order (kernel, bias per layer).
    sizes = [3 * 3 * 3 * 16 * 4, 16 * 4, 3 * 3 * 16 * 32 * 4, 32 * 4, 32 * 1001 * 4, 1001 * 4]
    expected = bytes_per_ps(sizes, greedy_assign(sizes, 2), 2)
    expected[0] += 8 + 4 + 4  # global_step (int64) and the ready/done counters, pinned to PS 0
    assert result["ps_bytes"] == expected


def test_real_data_from_generated_tfrecords(tasks, tmp_path):
    data_dir = tmp_path / "imagenet"
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "dtfbench",
            "tfrecords",
            "--output_dir",
            str(data_dir),
            "--shards",
            "4",
            "--images_per_shard",
            "12",
            "--image_size",
            "40",
            "--validation_shards",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=task_env(tasks.marker),
    )
    assert made.returncode == 0, made.stderr
    names = sorted(p.name for p in data_dir.iterdir())
    assert names == [
        "SHA256SUMS",
        "train-00000-of-00004",
        "train-00001-of-00004",
        "train-00002-of-00004",
        "train-00003-of-00004",
        "validation-00000-of-00001",
    ]
    _, workers = run_cluster(
        tasks, "distributed_replicated", num_ps=1, extra=["--data_dir", str(data_dir), "--cross_replica_sync=false"]
    )
    for worker in workers:
        result = check_worker_result(worker, "distributed_replicated")
        assert result["config"]["data_dir"] == str(data_dir)
        assert f"Data:        real ({data_dir})" in worker.stdout
    assert list(tasks.tmpdir.iterdir()) == []  # the input pipeline's map is not autograph-converted


def test_killed_worker_ends_the_others_with_an_error(tasks):
    ps, workers = tasks.cluster("parameter_server", 1, 2, extra=["--num_batches", "100000"])
    wait_for_line(workers[1], "1\timages/sec", RUN_TIMEOUT)
    # The PS names a dead worker only once its probe saw it up: a worker killed before the PS
    # watches (it starts after its done queue's session, seconds on a busy machine) leaves it
    # waiting for startup_timeout, and the other worker, with the sync tokens to itself,
    # trains on (seen once in CI). Kill it once the PS has probed it.
    wait_for_stderr(ps[0], "waiting for 2 worker(s) to finish", RUN_TIMEOUT)
    time.sleep(ps_task.PROBE_EVERY_SECS + 1)
    workers[1].proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    bound = STEP_TIMEOUT + 30
    for task in (workers[0], ps[0]):
        code = task.wait(bound)
        assert code == 1, f"{task.name} exited {code}\n{task.stderr[-3000:]}"
        assert task.ended_at - killed_at < bound
        errors = [line for line in task.stderr.splitlines() if line.startswith("dtfbench train: error:")]
        assert len(errors) == 1, task.stderr[-3000:]
    assert "worker 1" in ps[0].stderr and "went away" in ps[0].stderr
    result = workers[0].result()
    assert result["status"] == "failed" and result["reason"]
    assert json.loads((workers[0].stdout_path.parent / "worker0.json").read_text())["status"] == "failed"


def test_independent_single_process_and_sigterm(tasks):
    # -X importtime (its environment variable) lists every module the task imports, on stderr.
    done = tasks.start(
        "solo",
        ["--variable_update", "independent", *SMALL, "--result_file", str(tasks.folder / "solo.json")],
        env={"PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert done.wait(RUN_TIMEOUT) == 0, done.stderr[-3000:]
    result = done.result()
    assert result["status"] == "ok" and result["ps_bytes"] == [] and result["num_workers"] == 1
    assert result["total_images_per_sec"] == pytest.approx(result["images_per_sec"])
    # A task trains without Keras and matplotlib, which `import tensorflow` would load (train.py).
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "tensorflow" in imported and "dtfbench.workload.graph_worker" in imported, sorted(imported)[:50]
    assert {m for m in imported if m.split(".")[0] in ("keras", "matplotlib")} == set()
    # SIGTERM (what the launcher sends first) ends a running task promptly.
    long = tasks.start("long", ["--variable_update", "independent", *SMALL, "--num_batches", "100000"])
    wait_for_line(long, "1\timages/sec", RUN_TIMEOUT)
    long.proc.send_signal(signal.SIGTERM)
    assert long.wait(10) == -signal.SIGTERM


def test_ps_gives_up_when_a_worker_never_comes(tasks):
    ps, workers = tasks.cluster("parameter_server", 1, 1, extra=["--startup_timeout", "5"])
    workers[0].kill_group()  # the only worker never gets to start its server
    code = ps[0].wait(60)
    assert code == 1
    assert "did not come up within 5 s" in ps[0].stderr


@pytest.mark.parametrize("mode, num_ps", [("parameter_server", 1), ("collective_all_reduce", 0)])
def test_a_loss_that_stops_being_finite_fails_the_run_as_diverged(tasks, mode, num_ps):
    """A learning rate of 1e30 sends the loss to inf/nan within the warm-up: the worker stops
    with reason 'diverged' (not an ok run with a nan loss), and its peers end too."""
    ps, workers = tasks.cluster(mode, num_ps, 1, extra=["--learning_rate", "1e30"])
    assert workers[0].wait(RUN_TIMEOUT) == 1, workers[0].stderr[-3000:]
    result = workers[0].result()
    assert result["status"] == "failed"
    assert result["reason"].startswith("diverged: the loss became "), result["reason"]
    assert re.search(r"became (nan|inf|-inf) at (warm-up )?step \d+;", result["reason"]), result["reason"]
    assert "dtfbench train: error: worker 0: diverged" in workers[0].stderr
    # Its MLPerf log ends the run aborted, with the reason.
    stop = json.loads(result["mlperf_log"][-1].split(" ", 1)[1])
    assert (stop["key"], stop["metadata"]["status"]) == ("run_stop", "aborted")
    assert stop["metadata"]["reason"] == result["reason"]
    for task in ps:  # the PS does not wait for a worker that is gone
        assert task.wait(RUN_TIMEOUT) is not None
