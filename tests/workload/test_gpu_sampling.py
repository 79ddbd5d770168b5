"""GPU utilisation sampled during the measured steps ends up in the worker's result and the store.

Real workers (1 PS + 2 workers, parameter_server) on this CPU-only machine, each with an
executable nvidia-smi first on its PATH that replays recorded output of a p3.8xlarge
(tests/nodes/nvidia_smi_outputs/v100_p3_8xlarge.util: one block of utilisation rows per
call, in turn): the recorded-output approach, so the sampler thread, its nvidia-smi calls
(--id from CUDA_VISIBLE_DEVICES) and the whole result path are the real ones. Each worker
counts its calls in its own file, so the expected mean follows from the count.
Then `python -m dtfbench record` stores the run and the row must carry the values.
"""

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from store_harness import old_store, run_row

from dtfbench.results import store

pytestmark = pytest.mark.tf

NODES = Path(__file__).resolve().parents[1] / "nodes"
CASE = NODES / "nvidia_smi_outputs" / "v100_p3_8xlarge"
BLOCKS = [
    {int(i): float(u) for i, u in (row.split(", ") for row in block.strip().splitlines())}
    for block in CASE.with_suffix(".util").read_text().split("\n\n")
    if block.strip()
]


def expected_per_gpu(gpus, calls):
    values = {g: [BLOCKS[n % len(BLOCKS)][g] for n in range(calls)] for g in gpus}
    return {str(g): {"mean": sum(v) / len(v), "max": max(v), "samples": len(v)} for g, v in values.items()}


def record(payload, db):
    payload = dict(payload, results_db=str(db))
    proc = subprocess.run(
        [sys.executable, "-m", "dtfbench", "record"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return store.runs(store.connect(db))[-1]


def payload_for(results, num_workers, run_id):
    return {
        "run": {
            "run_id": run_id,
            "gpus": num_workers,
            "num_ps": 1,
            "variable_update": "parameter_server",
            "data": "synthetic",
            "repetition": 1,
        },
        "sweep_id": "pytest-gpu",
        "system": "local",
        "layout": {"num_workers": num_workers, "hosts_used": ["localhost"], "cluster_spec": {}},
        "hosts": {"localhost": {"failure": "", "workers": [{"result": r} for r in results]}},
    }


def test_sampled_utilisation_reaches_the_store(tasks, tmp_path):
    fake_path = f"{NODES / 'fake_nvidia_smi'}{os.pathsep}{os.environ['PATH']}"
    visible = {0: "0,2", 1: "1,3"}
    worker_env = {
        i: {
            "PATH": fake_path,
            "DTFBENCH_FAKE_NVIDIA_SMI": str(CASE),
            "CUDA_VISIBLE_DEVICES": visible[i],
            "DTFBENCH_FAKE_NVIDIA_SMI_COUNTER": str(tmp_path / f"calls-{i}"),
        }
        for i in (0, 1)
    }
    ps, workers = tasks.cluster("parameter_server", 1, 2, extra=["--gpu_sample_interval", "0.05"])
    # cluster() started them with the suite's environment; restart the workers with the GPU one.
    for worker in workers:
        worker.kill_group()
    for path in tmp_path.glob("calls-*"):
        path.unlink()
    args = {i: workers[i].args for i in (0, 1)}
    workers = [tasks.start(f"gpu-worker{i}", args[i], env=worker_env[i]) for i in (0, 1)]
    for task in workers + ps:
        assert task.wait(240) == 0, task.stderr[-3000:]

    results = []
    for i, worker in enumerate(workers):
        result = worker.result()
        calls = int((tmp_path / f"calls-{i}").read_text())
        assert calls >= 1
        gpus = [int(g) for g in visible[i].split(",")]
        util = result["gpu_utilization"]
        assert util["status"] == "ok" and util["samples"] == 2 * calls and util["unit"] == "%"
        expected = expected_per_gpu(gpus, calls)
        assert set(util["per_gpu"]) == set(expected)
        for gpu, stats in expected.items():
            assert util["per_gpu"][gpu] == pytest.approx(stats)
        assert util["mean"] == pytest.approx(sum(v["mean"] for v in util["per_gpu"].values()) / 2)
        assert {s["metric"] for s in result["samples"]} >= {"gpu_util_mean", "gpu_util_max"}
        results.append(result)

    row = record(payload_for(results, 2, "gpu-run-1"), tmp_path / "results.sqlite")
    assert row["status"] == "ok", row["reason"]
    assert row["gpu_util_mean"] == pytest.approx(sum(r["gpu_utilization"]["mean"] for r in results) / 2)
    assert row["gpu_util_max"] == max(r["gpu_utilization"]["max"] for r in results)
    # The node's environment (#20): nvidia-smi's recorded answer, read by dtfbench.nvidia_smi on the
    # controller, fills the GPU fields; clocks and power limit are not in the recording: unknown, why.
    environment = row["environment"]["localhost"]
    assert [(g["index"], g["name"], g["memory_mib"], g["driver_version"]) for g in environment["gpus"]] == [
        (i, "Tesla V100-SXM2-16GB", 16384, "535.104.05") for i in range(4)
    ]
    assert environment["gpu_status"] == "ok" and environment["env"]["CUDA_VISIBLE_DEVICES"] == "0,2"
    assert "clocks.max.sm" in environment["unknown"]["gpu_clocks"]
    assert "gpu_model=Tesla V100-SXM2-16GB; gpu_driver=535.104.05; tf_version=" in row["environment_key"]


def test_cpu_only_workers_store_null(tasks, tmp_path):
    # The suite's environment: CUDA_VISIBLE_DEVICES="" as the launcher sets it on CPU hosts.
    _, workers = tasks.cluster("parameter_server", 1, 1)
    assert workers[0].wait(240) == 0, workers[0].stderr[-3000:]
    result = workers[0].result()
    assert result["gpu_utilization"] is None
    assert not {"gpu_util_mean", "gpu_util_max"} & {s["metric"] for s in result["samples"]}
    row = record(payload_for([result], 1, "cpu-run-1"), tmp_path / "results.sqlite")
    assert row["status"] == "ok" and row["gpu_util_mean"] is None and row["gpu_util_max"] is None
    # The node's environment (#20), as stored: every field, and an honest unknown (with why) for
    # the GPU fields of this GPU-less machine.
    environment = row["environment"]["localhost"]
    assert environment["host"] == socket.gethostname() and environment["memory_mib"] > 0
    assert environment["cpu"]["logical_cores"] == os.cpu_count() and environment["cpu"]["model"] != "unknown"
    assert set(environment["cpu"]["flags"]) == {"avx", "avx2", "avx512f", "fma"}
    assert (environment["os"]["kernel"], environment["python"]["version"]) == (
        platform.release(),
        platform.python_version(),
    )
    assert environment["os"]["name"] != "unknown"
    assert environment["tensorflow"]["version"] == row["tf_version"]
    assert environment["tensorflow"]["build"]["is_cuda_build"] is False
    assert environment["env"]["CUDA_VISIBLE_DEVICES"] == "" and environment["env"]["TF_CPP_MIN_LOG_LEVEL"] == "2"
    assert environment["instance_type"] == "unknown" and "inventory" in environment["unknown"]["instance_type"]
    if shutil.which("nvidia-smi") is None:
        assert environment["gpus"] == "unknown" and environment["gpu_status"] == "absent"
        assert "nvidia-smi was not found" in environment["unknown"]["gpus"]
        assert row["environment_key"] == (
            f"instance_type=unknown; gpu_model=unknown; gpu_driver=unknown; "
            f"tf_version={row['tf_version']}; "
            f"tf_build={environment['tensorflow']['git_version']}; no cuda; "
            + ("onednn" if environment["tensorflow"]["onednn"] else "no onednn")
        )


def test_a_store_of_schema_1_opens_and_takes_the_new_columns(tmp_path):
    """A results store written before the GPU columns existed still opens, keeps its rows."""
    db = tmp_path / "old.sqlite"
    old_store(db, 1, ("gpu_util_mean", "gpu_util_max"), run_row("old-1", images_per_sec=12.5))

    conn = store.connect(db)
    store.add_run(
        conn,
        run_row("new-1", gpu_util_mean=87.5, gpu_util_max=99.0),
    )
    rows = store.runs(conn)
    assert [(r["run_id"], r["images_per_sec"], r["gpu_util_mean"], r["gpu_util_max"]) for r in rows] == [
        ("old-1", 12.5, None, None),
        ("new-1", None, 87.5, 99.0),
    ]
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(
        store.SCHEMA_VERSION
    )
    assert store.completed_run_ids(db, "s") == {"old-1", "new-1"}
    conn.close()
    store.connect(db).close()  # opening again changes nothing
