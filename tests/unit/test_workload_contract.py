"""The workload contract (dtfbench.plan.workloads): each workload is one class that states what
it can run, how the nodes start it, each run's command line and how a recorded run becomes
samples; the roles run what the plan says and branch on no workload's name."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from store_harness import measured_row

from dtfbench.plan import workloads
from dtfbench.plan.sweep import PlanError
from dtfbench.results import store
from dtfbench.results.sweep_resume import plan_sweep

ROOT = Path(__file__).resolve().parents[2]
LOCAL = [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}]
TIMEOUTS = {"step_timeout": 120, "startup_timeout": 300, "ready_timeout": 180, "run_timeout": 1800}
EXTRA = ["--num_intra_threads", "1", "--num_inter_threads", "1"]


def plan(**request):
    request.setdefault("sweep_id", "s")
    request.setdefault("repetitions", 1)
    return plan_sweep(request, LOCAL)


def test_ours_gets_the_command_line_the_role_built_before():
    # What roles/benchmark/tasks/run_start.yml built in Jinja for ours, flag for flag.
    result = plan(
        gpus=2, num_ps=1, model="small_cnn", batch_size=16, image_size=24, warmup_steps=2, steps=5,
        data="real", data_dir="/data/imagenet", extra_args=EXTRA, **TIMEOUTS,
    )  # fmt: skip
    assert result["program"] == {"argv": ["-m", "dtfbench", "train"], "fetch": False, "venv": True}
    assert result["runs"][0]["launch"] == {
        "args": [
            "--variable_update", "parameter_server", "--model", "small_cnn", "--batch_size", "16",
            "--num_gpus", "1", "--num_warmup_batches", "2", "--num_batches", "5",
            "--step_timeout", "120", "--startup_timeout", "300",
            "--image_size", "24", "--data_dir", "/data/imagenet", *EXTRA,
        ],
        "stall_timeout": 120,
        "ps_exit_timeout": 60,
    }  # fmt: skip
    # Without an image size or real data, neither flag; without timeouts, the program's own.
    plain = plan(gpus=1, num_ps=1, model="trivial")["runs"][0]["launch"]
    assert "--image_size" not in plain["args"] and "--data_dir" not in plain["args"]
    assert "--step_timeout" not in plain["args"] and plain["stall_timeout"] == 0


@pytest.mark.parametrize("label", ["tf_cnn_benchmarks@master", "cscs2017"])
def test_a_fetched_program_gets_its_flags_no_heartbeat_and_ps_that_are_stopped(label):
    result = plan(gpus=1, num_ps=1, model="trivial", workload=label, extra_args=EXTRA, **TIMEOUTS)
    run = result["runs"][0]
    assert result["program"] == {"argv": None, "fetch": True, "venv": False}
    # Its own flags (no --step_timeout: it has none), then the system's.
    assert run["launch"] == {"args": run["workload_args"] + EXTRA, "stall_timeout": 0, "ps_exit_timeout": 0}
    assert "--step_timeout" not in run["launch"]["args"]
    assert result["capabilities"]["timeouts"] == [] and not result["capabilities"]["heartbeat"]


def test_capabilities_say_what_each_workload_can_run():
    ours = plan(gpus=1, num_ps=1)["capabilities"]
    assert "collective_all_reduce" in ours["variable_updates"] and "small_cnn" in ours["models"]
    assert ours["image_size"] and ours["heartbeat"] and ours["tf_majors"] == [2]
    # Ours evaluates held-out accuracy during training, tf_cnn_benchmarks (in a cluster) cannot;
    # every workload reads TFRecords, ours LMDB too.
    for label in workloads.WORKLOADS:
        workload = workloads.parse_workload(label if label != "tf_cnn_benchmarks" else f"{label}@master")
        assert workload.capabilities.evaluation is (label == "ours")
        assert workload.capabilities.data_formats == (("tfrecord", "lmdb") if label == "ours" else ("tfrecord",))
        assert set(workload.program()) == {"argv", "fetch", "venv"}


@pytest.mark.parametrize(
    "value, message",
    [
        ("--num_intra_threads 1", "extra_args='--num_intra_threads 1' is a str, not a list of flags; give a list"),
        ({"a": 1}, "extra_args={'a': 1} is a dict, not a list of flags"),
        (["--x", None], "extra_args: None is a NoneType; each flag or value is a string or number"),
        (["--x", ["1"]], "extra_args: ['1'] is a list"),
        (["--num_intra_threads 1"], "extra_args: '--num_intra_threads 1' holds a flag and more, separated by a space"),
    ],
)
def test_bad_extra_args_are_one_clear_error(value, message):
    with pytest.raises(PlanError) as err:
        plan(gpus=1, num_ps=1, extra_args=value)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_numbers_in_extra_args_become_strings():
    args = plan(gpus=1, num_ps=1, extra_args=["--num_intra_threads", 1])["runs"][0]["launch"]["args"]
    assert args[-2:] == ["--num_intra_threads", "1"]


def test_no_role_or_play_branches_on_a_workload_name():
    branches = []
    for path in sorted([*ROOT.glob("roles/**/*.yml"), *ROOT.glob("playbooks/**/*.yml")]):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if re.search(r"workload(\.name|\.label)?\s*(==|!=)|(==|!=)\s*'ours'|is_ours", line):
                branches.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert branches == []


def test_a_recorded_run_becomes_samples(tmp_path):
    db = tmp_path / "r.sqlite"
    worker = {
        "task_index": 0,
        "samples": [
            {"metric": "images_per_sec", "value": 50.0, "unit": "images/sec"},
            {"metric": "gpu_util_mean", "value": None, "unit": "%"},
        ],
    }
    conn = store.connect(db)
    store.add_run(conn, measured_row("s-1", step_time_mean=0.64, worker_results=[worker, dict(worker, task_index=1)]))
    store.add_run(
        conn,
        measured_row("s-2", images_per_sec=None, status="failed", reason="ps 0 died",
                     workload="tf_cnn_benchmarks", workload_ref="master"),
    )  # fmt: skip
    conn.close()
    out = subprocess.run(
        [sys.executable, "-m", "dtfbench", "store", "export", "--db", str(db), "--format", "samples"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    samples = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(s["metric"], s["value"], s["unit"]) for s in samples] == [
        ("images_per_sec", 100.0, "images/sec"),
        ("step_time_mean", 0.64, "s"),
        ("worker_images_per_sec", 50.0, "images/sec"),
        ("worker_images_per_sec", 50.0, "images/sec"),
    ]
    first, _, worker0, worker1 = samples
    assert first["metadata"]["run_id"] == "s-1" and first["metadata"]["workload"] == "ours"
    assert first["metadata"]["model"] == "small_cnn" and first["metadata"]["status"] == "ok"
    assert (worker0["metadata"]["task_index"], worker1["metadata"]["task_index"]) == (0, 1)
    # The failed run measured nothing: no sample, and no error.
    assert all(s["metadata"]["run_id"] == "s-1" for s in samples)
    assert workloads.workload_of({"workload": "tf_cnn_benchmarks", "workload_ref": "master"}).label == (
        "tf_cnn_benchmarks@master"
    )


@pytest.mark.parametrize("fmt", ["csv", "json", "samples"])
def test_an_export_read_by_head_ends_quietly(tmp_path, fmt):
    db = tmp_path / "r.sqlite"
    conn = store.connect(db)
    for index in range(400):  # more than a pipe's buffer holds
        store.add_run(conn, measured_row(f"s-{index}", step_time_mean=0.5))
    conn.close()
    piped = subprocess.run(
        f"{sys.executable} -m dtfbench store export --db {db} --format {fmt} | head -c 100",
        shell=True, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert len(piped.stdout) == 100 and piped.stderr == ""


def test_a_run_to_a_target_gives_its_time_and_what_it_trained_with():
    record = {"run_id": "s-1", "time_to_accuracy": 12.5, "epochs_to_accuracy": 3.25, "eval_top1": 0.81,
              "target_accuracy": 0.8, "tta_status": "converged", "lr_scaling": "linear", "warmup_epochs": 1.0,
              "learning_rate": 0.01, "sync": 1}  # fmt: skip
    samples = {s["metric"]: s for s in workloads.parse_workload("ours").samples(record)}
    assert (samples["time_to_accuracy"]["value"], samples["time_to_accuracy"]["unit"]) == (12.5, "s")
    assert (samples["epochs_to_accuracy"]["value"], samples["epochs_to_accuracy"]["unit"]) == (3.25, "epochs")
    metadata = samples["eval_top1"]["metadata"]
    assert (metadata["target_accuracy"], metadata["tta_status"], metadata["lr_scaling"]) == (0.8, "converged", "linear")
    assert (metadata["warmup_epochs"], metadata["learning_rate"], metadata["sync"]) == (1.0, 0.01, 1)
